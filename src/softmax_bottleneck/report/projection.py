"""The study's training projected to paper scale: GPU-hours per (experiment, dataset, variant, schedule), from the
paper's V100 seconds per epoch (Table 2) × epochs × runs, or from the seconds ``bench`` measured on a device
(:mod:`.bench_speeds`); a variant the paper did not time takes its cost proxy's (``time_of``). The runs come from the
workflow's plan or a configuration (:func:`load_runs`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import pandas as pd

from softmax_bottleneck import presets, readback
from softmax_bottleneck.report.bench_speeds import MeasuredSpeeds
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import (
    PROXY_MARK,
    plan_frame,
    priced_by_proxy,
    seconds_per_epoch,
    size_note,
)
from softmax_bottleneck.study.runs import Study

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# projection
# --------------------------------------------------------------------------------------------------

PROJECTION_COLUMNS = [
    "experiment",
    "dataset",
    "variant",
    "schedule",
    "runs",
    "epochs",
    "s_per_epoch",
    "time_of",
    "gpu_hours",
]


def runs_from_study(study: Study) -> list[dict]:
    """Training runs of an expanded configuration, grouped by the first experiment that uses each run."""
    return runs_from_plan(plan_frame(study))


def runs_from_plan(plan: pd.DataFrame) -> list[dict]:
    """Training runs of the workflow's own plan (``snakemake plan``: results/plan/training_jobs.csv)."""
    plan = plan.copy()
    plan["experiment"] = plan["experiments"].astype(str).str.split().str[0]
    grouped = plan.groupby(["experiment", "dataset", "variant", "schedule", "epochs"], sort=False).size()
    return [
        dict(experiment=e, dataset=d, variant=v, schedule=s, epochs=int(float(ep)), runs=int(n))
        for (e, d, v, s, ep), n in grouped.items()
    ]


def project_training(runs: Iterable[dict], speeds: MeasuredSpeeds | None = None) -> pd.DataFrame:
    """GPU-hours per (experiment, dataset, variant, schedule) row, plus a total row.

    Seconds per epoch are the paper's V100 times, or with ``speeds`` those measured by ``bench`` on your device
    (:mod:`.bench_speeds`); measured with K runs sharing a device, a run holds 1/K of it (``gpu_hours``), while
    ``s_per_epoch`` stays the run's own wall time.
    """
    rows = []
    for run in runs:
        epochs = int(run["epochs"])
        if speeds is None:
            sec, time_of = seconds_per_epoch(run["dataset"], run["variant"])
            device_sec = sec
        else:
            sec, time_of = speeds.seconds_per_epoch(run["dataset"], run["variant"], run["schedule"], epochs)
            device_sec = speeds.device_seconds_per_epoch(run["dataset"], run["variant"], run["schedule"], epochs)
            time_of = " ".join(filter(None, [time_of, speeds.packing_of(run["dataset"], run["variant"])]))
        if priced_by_proxy(run["variant"], time_of):
            time_of = f"{time_of} {PROXY_MARK}"  # a plug-in priced at another variant's time (render: footnote)
        rows.append(
            {
                "experiment": run["experiment"],
                "dataset": run["dataset"],
                "variant": run["variant"],
                "schedule": run["schedule"],
                "runs": int(run["runs"]),
                "epochs": epochs,
                "s_per_epoch": sec,
                "time_of": time_of if time_of != run["variant"] else "",
                "gpu_hours": int(run["runs"]) * epochs * device_sec / 3600.0,
            }
        )
    frame = pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
    total = {c: "" for c in PROJECTION_COLUMNS}
    total.update(experiment="total", runs=int(frame["runs"].sum()), gpu_hours=float(frame["gpu_hours"].sum()))
    return pd.concat([frame, pd.DataFrame([total])], ignore_index=True)


#: the columns of the workflow's plan that the projection reads
PLAN_COLUMNS = ("experiments", "dataset", "variant", "schedule", "epochs")


def read_plan(path: str | os.PathLike) -> pd.DataFrame:
    """The workflow's plan ``path`` (``snakemake plan``: results/plan/training_jobs.csv) through the bounded reader:
    at least one job, the columns the projection reads, each cell given, every ``dataset`` and ``schedule`` one the
    study knows, every ``epochs`` a whole number ≥ 1, and no ``run`` listed twice (it would be priced twice);
    :class:`~softmax_bottleneck.readback.ReadbackError` naming the file, column and row otherwise."""
    frame = readback.read_csv(path, dtype=str)
    missing = [column for column in PLAN_COLUMNS if column not in frame.columns]
    if missing:
        raise readback.ReadbackError(path, f"not a training plan of `snakemake plan` (no column {', '.join(missing)})")
    if frame.empty:
        raise readback.ReadbackError(path, "no training job (only the header): nothing to price")
    for column in PLAN_COLUMNS:
        blank = (frame[column].isna() | (frame[column].str.strip() == "")).to_numpy().nonzero()[0]
        if len(blank):
            raise readback.ReadbackError(path, f"column {column}, row {blank[0] + 1} is empty")
    for column, known in (("dataset", presets.DATASETS), ("schedule", presets.SCHEDULES)):
        unknown = (~frame[column].isin(known)).to_numpy().nonzero()[0]
        if len(unknown):
            value = frame[column].iloc[unknown[0]]
            raise readback.ReadbackError(
                path, f"column {column}, row {unknown[0] + 1}: {value!r} is not one of {', '.join(known)}"
            )
    readback.check_columns(frame, path)  # epochs: a whole number ≥ 1 (bounds.BOUNDS)
    if "run" in frame.columns:
        repeated = frame["run"].duplicated().to_numpy().nonzero()[0]
        if len(repeated):
            first = int(frame.index[frame["run"] == frame["run"].iloc[repeated[0]]][0])
            raise readback.ReadbackError(
                path, f"row {repeated[0] + 1} repeats the run of row {first + 1} ({frame['run'].iloc[first]})"
            )
    return frame


def load_runs(
    config_path: str | os.PathLike | list | None, plan_path: str | os.PathLike | None = None
) -> tuple[list[dict], str, list[str]]:
    """The training runs to project, their source and notes on them: the workflow's plan, else a workflow
    configuration's (one file, or several merged in order; checked as the workflow checks it), whose runs not of the
    paper's size are noted (:func:`~softmax_bottleneck.study.plan.size_note`; a plan does not hold their sizes)."""
    if plan_path:
        return runs_from_plan(read_plan(plan_path)), f"runs of {plan_path}", []
    files = config_path if isinstance(config_path, list) else [config_path]
    study = Study(study_config.check(study_config.load(files)))
    return runs_from_study(study), f"runs of {study_config.describe_files(files)}", size_note(study)
