"""What was measured on real runs and real cards, read from ``data/measured/*.csv`` (``data/measured/README.md``).

* ``disk.csv``: the files of one training run of the smallest and the largest model of each dataset of the paper's
  study (``model.pt``, the largest resume state, the run folder's peak, ``metrics.json``, the curve and log per epoch)
  and E12's log-P slice, measured by ``benchmarks/disk_per_run.py``: ``plan``'s disk budget.
* ``speeds.csv``: training speed that ``bench`` measured on the GPUs tried so far (``BENCHMARKS.md``), one run and
  several sharing the card: the cost on those cards (``costs``) and the gain of packing runs (``plan``).
* ``analyses.csv``: the wall time of the analyses measured so far (``costs``).

One reader below the study and the report, as :mod:`softmax_bottleneck.paper_numbers` is for the paper's numbers.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import io

NAMES: tuple[str, ...] = ("disk", "speeds", "analyses")


@functools.cache
def _text(name: str) -> str:
    if name not in NAMES:
        raise KeyError(f"unknown measurement file {name!r}; valid names: {', '.join(NAMES)}")
    resource = importlib.resources.files("softmax_bottleneck").joinpath("data", "measured", f"{name}.csv")
    return resource.read_text(encoding="utf-8")


def records(name: str) -> list[dict[str, str]]:
    """The rows of ``data/measured/<name>.csv`` as text (``""`` where empty)."""
    return list(csv.DictReader(io.StringIO(_text(name))))


def packing_gain(device: str, dataset: str, variant: str, runs: int) -> float | None:
    """Tokens per second of ``runs`` runs sharing one ``device`` (without MPS) over one run's, measured the same day;
    None where not measured."""
    rows = [r for r in records("speeds") if r["device"] == device and r["dataset"] == dataset
            and r["variant"] == variant and r["mps"] == "false" and r["tokens_per_second"]]  # fmt: skip
    for row in rows:
        if int(row["runs"]) == runs:
            alone = [r for r in rows if r["date"] == row["date"] and int(r["runs"]) == 1]
            if alone:
                return float(row["tokens_per_second"]) / float(alone[0]["tokens_per_second"])
    return None
