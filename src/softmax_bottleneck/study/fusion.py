"""Which runs of the study train together as one fused job (``fusion: runs_per_job: K``; docs/fused-training.md).

Runs share a job (``train-fused``, :mod:`softmax_bottleneck.training.fused_trainer`) when they share

* a dataset and a shape (:func:`softmax_bottleneck.training.fused_step.fusion_key`: the LSTMs' sizes, the columns of a
  batch and of a chunk, TF32), which fusing needs, and
* the summaries that read them (:func:`.summary_records.summary_records`): every table and figure reads whole
  summaries, so one of them built alone (``snakemake table2``) never trains a run it does not need.

Within such a cell the runs are ordered by seed (runs of one seed draw the same batch lengths and step in lock-step),
then by folder, and cut into groups of K; the last group of a cell may be smaller, and a group of one run is an
ordinary ``train`` job. The groups follow from the configuration alone, never from what is trained already: a
controller started again finds the same groups, and with them a group's SLURM job that another one submitted.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from softmax_bottleneck.study.runs import Run, Study
from softmax_bottleneck.study.summary_records import summary_records
from softmax_bottleneck.training.fused_step import fusion_key

#: hex digits of a group's name that come from its runs' folders
NAME_HASH_LENGTH = 10


@dataclass(frozen=True)
class FusedGroup:
    """K runs of one dataset and shape that one ``train_fused`` job trains."""

    name: str
    dataset: str
    runs: tuple[Run, ...]


def group_name(dataset: str, runs: list[Run]) -> str:
    """``<dataset>-<K>runs-<hash of the runs' folders>``: the same runs give the same name in every configuration."""
    digest = hashlib.sha256("\n".join(run.dir for run in runs).encode()).hexdigest()[:NAME_HASH_LENGTH]
    return f"{dataset}-{len(runs)}runs-{digest}"


def runs_per_job(config: dict) -> int:
    """The configuration's K (``fusion: runs_per_job``); 1, every run its own job, where absent."""
    return int((config.get("fusion") or {}).get("runs_per_job") or 1)


@functools.lru_cache(maxsize=4)
def fused_groups(study: Study) -> dict[str, FusedGroup]:
    """Name → group of every group of two or more runs (module docstring); empty where K is 1. Computed once per
    study: do not change what it returns."""
    k = runs_per_job(study.config)
    if k < 2:
        return {}
    readers: dict[str, set[str]] = {path: set() for path in study.jobs}
    for summary, (_, records) in summary_records(study).items():
        for run, _ in records:
            if run.dir in readers:
                readers[run.dir].add(summary)
    cells: dict[tuple, list[Run]] = {}
    for path, run in study.jobs.items():
        key = (run.dataset, repr(fusion_key(run.hyperparameters)), tuple(sorted(readers[path])))
        cells.setdefault(key, []).append(run)
    groups: dict[str, FusedGroup] = {}
    for (dataset, _, _), runs in cells.items():
        runs = sorted(runs, key=lambda run: (run.seed, run.dir))
        for start in range(0, len(runs), k):
            chunk = runs[start : start + k]
            if len(chunk) > 1:
                name = group_name(dataset, chunk)
                groups[name] = FusedGroup(name, dataset, tuple(chunk))
    return groups


def group_of_runs(groups: dict[str, FusedGroup]) -> dict[str, str]:
    """Run folder → the name of its group."""
    return {run.dir: group.name for group in groups.values() for run in group.runs}


def fusion_notes(study: Study) -> list[str]:
    """The plan's line on fusion (none where it is off): how many runs train in how many fused jobs, and how they
    are priced."""
    groups = fused_groups(study)
    if not groups:
        return []
    runs = sum(len(group.runs) for group in groups.values())
    return [
        f"fusion: {runs} of the {len(study.jobs)} runs train in {len(groups)} fused "
        f"job{'s' if len(groups) != 1 else ''} of up to "
        f"{runs_per_job(study.config)} runs (docs/fused-training.md), the others one job each; the hours above price "
        "a fused run as trained alone: fusion's gain on a card is not measured yet"
    ]
