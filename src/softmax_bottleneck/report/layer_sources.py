"""Results made by an older source of their output layer, marked wherever they are shown.

Every summary has a ``layer_source`` column (:mod:`.summaries`): ``<layer>@<first 16 hex digits of the SHA-256 of its
module file>`` (:mod:`~softmax_bottleneck.models.output_layers.provenance`), the code that trained the row's model, from
its ``metrics.json``. A table or figure built from summaries in which a row names another source of its layer than the
one installed now carries the line ``note: some results here were trained with an older source of <layer> ...`` beside
its banner (Markdown, HTML, LaTeX, the figure's top line); a table, only for the layers it shows (those of its
``variant`` column, or those its registration declares). Nothing is retrained or deleted: the note says which
numbers predate the code.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from softmax_bottleneck import presets, readback
from softmax_bottleneck.models.output_layers.provenance import older_tag_layer

COLUMN = "layer_source"


def stale_notes(frame: pd.DataFrame, shown: set[str] | None = None) -> list[str]:
    """One line per output layer some of whose rows in ``frame`` an older source of it made (first-seen order);
    ``shown``: only of these layers (those a table shows; all when None)."""
    if frame is None or COLUMN not in frame.columns:
        return []
    layers = [older_tag_layer(tag) for tag in frame[COLUMN].dropna().unique()]
    layers = list(dict.fromkeys(layer for layer in layers if layer and (shown is None or layer in shown)))
    return [
        f"note: some results here were trained with an older source of {layer} than the one installed (kept, not "
        "retrained; see docs/adding-an-output-layer.md, 'When the layer's code changes')"
        for layer in layers
    ]


def summary_notes(summary_dir, files: Iterable[str], shown: set[str] | None = None) -> list[str]:
    """:func:`stale_notes` of the summary ``files`` in ``summary_dir`` (only their ``layer_source`` column is read;
    a file that is absent or has none adds nothing), of the ``shown`` layers only when given."""
    notes: list[str] = []
    for name in files:
        path = Path(summary_dir) / name
        if not path.is_file():
            continue
        frame = readback.read_csv(path, usecols=lambda column: column == COLUMN, dtype=str)
        notes += [note for note in stale_notes(frame, shown) if note not in notes]
    return notes


def shown_layers(table: pd.DataFrame, shows: Iterable[str] | None = None) -> set[str] | None:
    """The output layers of the variants in a tidy table's ``variant`` column, else of the variants ``shows`` names
    (an unregistered name counts as its own layer); None for a table with neither (its notes are then those of every
    summary it reads)."""
    if "variant" in table.columns:
        shows = table["variant"].dropna().astype(str).unique()
    if shows is None:
        return None
    layers = set()
    for variant in shows:
        try:
            layers.add(presets.variant_info(variant).output_layer)
        except ValueError:
            layers.add(variant)
    return layers


def with_notes(banner: str | None, notes: list[str]) -> str | None:
    """``banner`` followed by ``notes`` (``; ``-separated), None when both are empty."""
    return "; ".join([part for part in (banner, *notes) if part]) or None
