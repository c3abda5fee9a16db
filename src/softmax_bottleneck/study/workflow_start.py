"""What the workflow does once, at its start (``onstart``), before any job: the checks that need the whole run, and
its record.

* :func:`other_study`: ``snakemake progress`` or ``preview`` without ``--configfile`` where only another study
  runs stops in one line naming it and the command;
* :func:`cpu_refusal`: paper-scale training (over :data:`PAPER_SCALE_HOURS` projected V100 GPU-hours a run)
  that would run on this machine's CPU stops the workflow in one line, unless ``allow_cpu_training`` is set;
* :func:`~.changed_runs.check`: trainings that would start new models in the places of finished runs
  that this configuration named at its last start (an edited hyper-parameter) stop the workflow in one line, unless
  ``train_changed_runs`` is set;
* :func:`record`: the run's record (:mod:`softmax_bottleneck.cluster.workflow_run`): its configuration and every
  job with its planned seconds (:mod:`.job_seconds`), for the terminal's time left and for ``status`` and
  ``preview`` without ``--config``. A run of rules that run nothing of the study (``status``, ``progress``,
  ``preview``, ``plan``: :data:`UNRECORDED_RULES`) records nothing: it must not hide the study that runs beside it.

A job is given as ``(jobid, rule, wildcards, threads)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.corpora.datasets import DATASETS
from softmax_bottleneck.study import changed_runs
from softmax_bottleneck.study.config_file import DEFAULT_CONFIG, describe_files, later_values
from softmax_bottleneck.study.job_seconds import job_runs, planned_jobs
from softmax_bottleneck.study.plan import gpu_hours
from softmax_bottleneck.study.runs import Study

#: projected V100 GPU-hours above which a training is paper-scale (the small scale's are under 0.3)
PAPER_SCALE_HOURS = 2.0
#: the rules that follow a study without being part of it (workflow/rules/progress.smk)
FOLLOWING_RULES = frozenset({"status", "progress", "preview"})
#: a run of these alone writes no record: they run nothing of the study (the plan's rules besides)
UNRECORDED_RULES = FOLLOWING_RULES | {"plan", "training_plan"}


def read_hours(run) -> float:
    """Projected V100 GPU-hours of ``run`` for the text it reads: the plan's (:func:`~.plan.gpu_hours`), times the
    share of its training split that ``train_tokens`` keeps (an epoch's time is its tokens')."""
    tokens = run.hyperparameters.get("train_tokens")
    split = DATASETS[run.dataset].split_tokens[0]
    return gpu_hours(run) * (min(1.0, tokens / split) if isinstance(tokens, int) and tokens > 0 else 1.0)


def paper_scale(runs) -> bool:
    """Whether one of ``runs`` is a paper-scale training: over :data:`PAPER_SCALE_HOURS` projected V100 GPU-hours of
    the text it reads (:func:`read_hours`)."""
    return any(read_hours(run) > PAPER_SCALE_HOURS for run in runs)


def cpu_refusal(study: Study, jobs, source: str) -> str | None:
    """The one line that stops the workflow where paper-scale trainings of ``jobs`` would run on this machine's CPU
    (it has no CUDA device), else None; torch is imported only when there are such trainings. A run counts once,
    however many of ``jobs`` name it (its `train` job and its fused group's)."""
    runs = {run.dir: run for _, rule, w, _ in jobs for run in job_runs(study, rule, w)}
    hours = [h for h in map(read_hours, runs.values()) if h > PAPER_SCALE_HOURS]
    if not hours:
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (
        f"{source}: {len(hours)} paper-scale training runs ({sum(hours):,.0f} projected V100 GPU-hours) would run on "
        "this machine's CPU, which has no CUDA device (months of CPU time). Run them where a GPU is (or --profile "
        "profiles/slurm), or allow it deliberately with --config allow_cpu_training=true; a pipeline check on CPU: "
        "--configfile config/small.yaml"
    )


def other_study(study: Study, jobs) -> str | None:
    """The one line that stops a run of ``progress`` or ``preview`` alone for the paper's configuration (no
    ``--configfile``) where none of its runs has started in this folder but the workflow recorded another study here
    (:func:`softmax_bottleneck.study.config.recorded_study`): it names that study and the command; else None."""
    rules = {rule for _, rule, _, _ in jobs}
    if not rules or not rules <= FOLLOWING_RULES or rules == {"status"}:
        return None
    if any(Path(path).exists() for path in study.jobs):
        return None
    from softmax_bottleneck.study.config import recorded_study

    recorded = recorded_study()
    if recorded is None:
        return None
    files, _, _ = recorded
    target = "preview" if "preview" in rules else "progress"
    return (
        f"{target}: no run of {DEFAULT_CONFIG} has started in this folder; the workflow last started "
        f"{describe_files(files)} here: snakemake {target} --configfile {' '.join(files)}"
    )


def record(study: Study, jobs, logs: str, *, files: list[str], values: dict, slots: int,
           runs: list[str] | None = None) -> Path | None:  # fmt: skip
    """Write the run's record under ``logs`` (the configuration's logs folder) and name it in
    :data:`~softmax_bottleneck.cluster.workflow_run.RECORD_VARIABLE` for the terminal; None, and the variable unset,
    for a run of :data:`UNRECORDED_RULES` alone. ``runs``: the run folders it names (default: the study's)."""
    os.environ.pop(workflow_run.RECORD_VARIABLE, None)
    jobs = list(jobs)
    if all(rule in UNRECORDED_RULES for _, rule, _, _ in jobs):
        return None
    path = (Path(logs) / workflow_run.RECORD).absolute()  # a link there is replaced, never written through
    workflow_run.write(path, files=files, values=later_values(values), slots=slots, jobs=planned_jobs(study, jobs),
                       runs=list(study.jobs) if runs is None else runs)  # fmt: skip
    os.environ[workflow_run.RECORD_VARIABLE] = str(path)
    return path


def start(study: Study, jobs, logs: str, *, files: list[str], values: dict, named: bool, cpu_checked: bool,
          slots: int, train_changed: bool = False) -> Path | None:  # fmt: skip
    """The workflow's start (module docstring): :func:`other_study` where no ``--configfile`` was ``named``,
    :func:`cpu_refusal` where ``cpu_checked`` (a local run without ``allow_cpu_training``),
    :func:`~.changed_runs.check` unless ``train_changed`` (``train_changed_runs``), each a ``SystemExit``
    with its line; then :func:`record`."""
    jobs = list(jobs)
    source = describe_files(files)
    changed, runs = changed_runs.check(study, jobs, logs, source, train_changed=train_changed)
    for refusal in (None if named else other_study(study, jobs),
                    cpu_refusal(study, jobs, source) if cpu_checked else None, changed):  # fmt: skip
        if refusal:
            raise SystemExit(refusal)
    return record(study, jobs, logs, files=files, values=values, slots=slots, runs=runs)
