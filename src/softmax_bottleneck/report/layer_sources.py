"""Results made by an older source of their output layer, marked wherever they are shown.

Every summary has a ``layer_source`` column (:mod:`.summaries`): ``<layer>@<first 16 hex digits of the SHA-256 of its
module file>`` (:mod:`~softmax_bottleneck.models.output_layers.provenance`), the code that trained the row's model, from
its ``metrics.json``. A table or figure built from summaries in which a row names another source of its layer than the
one installed now carries the line ``note: some results here were trained with an older source of <layer> ...`` beside
its banner (Markdown, HTML, LaTeX, the figure's top line). Nothing is retrained or deleted: the note says which numbers
predate the code.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from softmax_bottleneck import readback
from softmax_bottleneck.models.output_layers.provenance import older_tag_layer

COLUMN = "layer_source"


def stale_notes(frame: pd.DataFrame) -> list[str]:
    """One line per output layer some of whose rows in ``frame`` an older source of it made (first-seen order)."""
    if frame is None or COLUMN not in frame.columns:
        return []
    layers = [older_tag_layer(tag) for tag in frame[COLUMN].dropna().unique()]
    layers = list(dict.fromkeys(layer for layer in layers if layer))
    return [
        f"note: some results here were trained with an older source of {layer} than the one installed (kept, not "
        "retrained; see docs/adding-an-output-layer.md, 'When the layer's code changes')"
        for layer in layers
    ]


def summary_notes(summary_dir, files: Iterable[str]) -> list[str]:
    """:func:`stale_notes` of the summary ``files`` in ``summary_dir`` (only their ``layer_source`` column is read;
    a file that is absent or has none adds nothing)."""
    notes: list[str] = []
    for name in files:
        path = Path(summary_dir) / name
        if not path.is_file():
            continue
        frame = readback.read_csv(path, usecols=lambda column: column == COLUMN, dtype=str)
        notes += [note for note in stale_notes(frame) if note not in notes]
    return notes


def with_notes(banner: str | None, notes: list[str]) -> str | None:
    """``banner`` followed by ``notes`` (``; ``-separated), None when both are empty."""
    return "; ".join([part for part in (banner, *notes) if part]) or None
