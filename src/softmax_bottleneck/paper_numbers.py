"""The numbers the paper and its supplementary material (SM) report, read from ``data/reported/*.csv``.

One reader below every stage that needs them: the study's plan and status (the paper's V100 seconds per epoch of
Table 2) and the report (every table and figure, :mod:`softmax_bottleneck.report.reported`, which adds the
naming conventions the tables and figures share). ``data/reported/README.md`` gives each file's source and columns.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import io
from typing import TYPE_CHECKING

from softmax_bottleneck import readback

if TYPE_CHECKING:
    import pandas as pd

#: every file under ``data/reported`` (name without ``.csv``)
NAMES: tuple[str, ...] = (
    "table1",
    "main",
    "table3",
    "table4",
    "table5",
    "table6",
    "figure2_points",
    "figure2_pearson",
    "figure3_hits",
    "figure4",
    "sm_table1",
    "sm_table2",
    "wordsim",
    "mos_k",
    "ntet",
    "mos_dropoutl",
    "wordsim_coverage",
    "robustness",
)


@functools.cache
def _load_text(name: str) -> str:
    resource = importlib.resources.files("softmax_bottleneck").joinpath("data", "reported", f"{name}.csv")
    return resource.read_text(encoding="utf-8")


def records(name: str) -> list[dict[str, str]]:
    """The rows of one file of ``data/reported`` as text (``""`` where empty), read without pandas: for the plan and
    ``status``, which need a few numbers and answer faster without importing it."""
    _check_name(name)
    return list(csv.DictReader(io.StringIO(_load_text(name))))


def _check_name(name: str) -> None:
    if name not in NAMES:
        raise KeyError(f"unknown reported table {name!r}; valid names: {', '.join(NAMES)}")


def load(name: str) -> pd.DataFrame:
    """The reported numbers of one file of ``data/reported`` (``name`` without ``.csv``), as a fresh DataFrame."""
    import pandas as pd

    _check_name(name)
    return pd.read_csv(io.StringIO(_load_text(name)), **readback.CSV_OPTIONS)  # the package's own file, as read back
