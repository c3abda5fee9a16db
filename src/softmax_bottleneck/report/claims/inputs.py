"""What the claims page accepts from a summary, beyond the bounds every reader applies (:mod:`softmax_bottleneck.
readback`): a verdict is never made of an impossible or doubled run.

Each row of a run summary names a known dataset and schedule and a whole seed ≥ 0 and has its test perplexity (its
ranks no larger than its dataset's vocabulary: :func:`softmax_bottleneck.report.common.read_runs`, as for every
table); a run appears once, by its identity (dataset, output layer, schedule, seed and the swept values a summary
records), a word-similarity row once per model and benchmark, and a top-5 row once per model and context (each
summary has the columns its claims read: :func:`softmax_bottleneck.report.common.read_summary`). Anything else is a
:class:`~softmax_bottleneck.readback.ReadbackError` naming the file, the row (1 = the first data row) and the column:
one line, and no page.
"""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck import presets
from softmax_bottleneck.readback import ReadbackError
from softmax_bottleneck.report.common import (  # noqa: F401  (the identities and the check, re-exported for the page)
    RUN_IDENTITY,
    TOP5_IDENTITY,
    WORDSIM_IDENTITY,
    check_once,
    empty_cell,
)


def check_runs(frame: pd.DataFrame, path) -> pd.DataFrame:
    """``frame`` (a run summary read from ``path``) when every row is a possible, single run (module docstring)."""
    for row, record in enumerate(frame.to_dict("records"), start=1):
        dataset = record.get("dataset")
        if dataset not in presets.DATASETS:
            raise ReadbackError(
                path, f"row {row}, column dataset: {dataset!r} is not one of {', '.join(presets.DATASETS)}"
            )
        schedule = record.get("schedule")
        if str(schedule) not in presets.SCHEDULES:
            raise ReadbackError(
                path, f"row {row}, column schedule: {schedule!r} is not one of {', '.join(presets.SCHEDULES)}"
            )
        seed = pd.to_numeric(pd.Series([record.get("seed")]), errors="coerce").iloc[0]
        if pd.isna(seed) or seed < 0 or not float(seed).is_integer():
            raise ReadbackError(path, f"row {row}, column seed: {record.get('seed')!r} is not a whole number >= 0")
        if "test_ppl" in record and empty_cell(record["test_ppl"]):
            why = "empty; a run without its test perplexity is not dropped silently: rebuild the summary, or drop it"
            raise ReadbackError(path, f"row {row}, column test_ppl: {why}")
    return check_once(frame, path, RUN_IDENTITY)
