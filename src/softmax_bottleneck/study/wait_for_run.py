"""A training that is already running when Snakemake starts is waited for, never started a second time.

A Snakemake that dies (a reboot of the login node, a lost session, ``kill -9``) leaves its cluster jobs running.
Started again, it would submit each of those trainings once more: the second job finds the run folder locked
and fails, again on every retry, while holding a GPU each time. Instead, the workflow asks :func:`running_runids`
at its start which of its runs are running (what ``status`` calls running: written to within its checkpoint
interval, or its process alive on this host) and gives those to its local rule ``await_training`` (no GPU, no
cluster job), which runs ``wait-for-run``: it reads the run folder as ``status`` does (never its lock, model or
resume state) until the training is no longer running, then

* exits 0 when it finished (``model.pt``, ``metrics.json`` and ``curve.csv`` written by the job that trained it);
* exits 1 with one line when it stopped unfinished (its job cancelled, its node lost): the next ``snakemake``
  finds it stalled and resumes it from its last saved state in a ``train`` job.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import RunStatus, read_run_status, study_status

log = logging.getLogger(__name__)
#: the outputs of a finished training, as rule ``train`` declares them
OUTPUTS = ("model.pt", "metrics.json", "curve.csv")


def running_runids(study: Study, directory: str = ".") -> list[str]:
    """The ``{tag}-{hash}`` of every training job of ``study`` that is running now (under ``directory``)."""
    return sorted({study.jobs[r.run].runid for r in study_status(study, directory=directory).runs
                   if r.state == "running"})  # fmt: skip


def run_state(folder: Path, log_path: Path, run: dict) -> RunStatus:
    """One run folder's state as ``status`` reads it, its files checked against ``run``'s identity and epochs
    (``dataset``, ``variant``, ``schedule``, ``seed``, ``epochs``)."""
    base = RunStatus(run=str(folder), tag=folder.name, experiments=[], state="not started", projected_hours=0.0,
                     **run)  # fmt: skip
    return read_run_status(folder, log_path, "rank.json", base, time.time())  # its rank is not looked at here


def wait_for_run(folder: Path, log_path: Path, run: dict, poll: float) -> int:
    """Wait while the training of ``folder`` (the run ``run``: its identity and epochs) runs; 0 once it finished
    with its outputs, else 1 (said in one line)."""
    status = run_state(folder, log_path, run)
    log.info("%s: %s; waiting for the process that trains it (%s)", folder, status.state, log_path)
    while status.state == "running":
        time.sleep(poll)
        status = run_state(folder, log_path, run)
    missing = [name for name in OUTPUTS if not (folder / name).is_file()]
    if status.state == "finished" and not missing:
        log.info("%s: finished by the process that trained it", folder)
        return 0
    why = status.note or status.state
    if status.state == "finished":
        why = f"finished, but {', '.join(missing)} missing (the next train job restores them from .resume/final)"
    log.error("%s: the training it waited for stopped (%s); run the same snakemake command again: it resumes", folder,
              why)  # fmt: skip
    return 1


def add_cli(parser) -> None:
    parser.description = (
        "Wait, without a GPU, for a training that another process runs (found running when Snakemake started): "
        "exit 0 once it finished, 1 with one line if it stopped unfinished. Reads the run folder only."
    )
    from softmax_bottleneck.argtypes import positive_float, positive_int

    parser.add_argument("run", type=Path, help="the run folder (results/runs/...)")
    parser.add_argument("--log", type=Path, required=True, help="the run's training log (logs/train/<run>.log)")
    parser.add_argument("--dataset", required=True, help="the run's dataset (its files are checked against it)")
    parser.add_argument("--variant", required=True, help="the run's output layer")
    parser.add_argument("--schedule", required=True, help="the run's schedule (nt, et)")
    parser.add_argument("--seed", required=True, type=int, help="the run's seed")
    parser.add_argument("--epochs", required=True, type=positive_int, help="the run's epochs")
    parser.add_argument("--poll", type=positive_float, default=10.0, metavar="S", help="seconds between reads (10)")


def run_cli(args) -> int:
    run = {key: getattr(args, key) for key in ("dataset", "variant", "schedule", "seed", "epochs")}
    return wait_for_run(args.run, args.log, run, args.poll)
