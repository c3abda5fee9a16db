"""A training that is already running when Snakemake starts is waited for, never started a second time.

A Snakemake that dies (a reboot of the login node, a lost session, ``kill -9``) leaves its cluster jobs running.
Started again, it would submit each of those trainings once more: the second job finds the run folder locked
and fails, again on every retry, while holding a GPU each time. Instead, the workflow asks ``status`` at its start
which of its runs are running (written to within its checkpoint interval, or its process alive on this host) and
gives those to its local rule ``await_training`` (no GPU, no cluster job), which runs ``wait-for-run``: it reads the
run folder as ``status`` does (never its lock, model or resume state) until the training is no longer running, then

* exits 0 when it finished (``model.pt``, ``metrics.json`` and ``curve.csv`` written by the job that trained it) as
  the run the rule asks for: its ``metrics.json`` names the rule's dataset, output layer, schedule and seed, all the
  rule's epochs, and the identity hash of the folder's name (:mod:`softmax_bottleneck.training.identity`);
* exits 1 with one line when it stopped unfinished (its job cancelled, its node lost): the next ``snakemake``
  finds it stalled and resumes it from its last saved state in a ``train`` job;
* exits 1 with one line naming what differs when the finished files are another run's (a copied folder), so that
  Snakemake never takes another run's model for this one;
* exits 1 with one line after ``--max-wait`` seconds (the rule sets it from the scheduler's time limit): a run
  that another host trains and that stopped writing is not waited for for ever.

It imports neither PyTorch nor the study's definition: a wait costs no start-up of either (tens of seconds each from a
cluster's shared file system) and holds little memory.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.study.run_folder import read_run_status
from softmax_bottleneck.study.run_status import RunStatus
from softmax_bottleneck.training.identity import folder_hash

log = logging.getLogger(__name__)
#: the outputs of a finished training, as rule ``train`` declares them (training.state.PUBLISH_ORDER, written out:
#: training.state imports torch, which a wait never does)
OUTPUTS = ("model.pt", "metrics.json", "curve.csv")


def run_state(folder: Path, log_path: Path, run: dict) -> RunStatus:
    """One run folder's state as ``status`` reads it, its files checked against ``run``'s identity and epochs
    (``dataset``, ``variant``, ``schedule``, ``seed``, ``epochs``)."""
    base = RunStatus(run=str(folder), tag=folder.name, experiments=[], state="not started", projected_hours=0.0,
                     **run)  # fmt: skip
    return read_run_status(folder, log_path, "rank.json", base, time.time())  # its rank is not looked at here


def not_as_asked(folder: Path, run: dict) -> str:
    """What of the finished run in ``folder`` differs from the run the rule asks for (``run``: its dataset, variant,
    schedule, seed and epochs), in words; ``""`` when it is that run. Its ``metrics.json`` is read by the package's
    bounded reader; its fingerprint must carry the identity hash of the folder's name."""
    path = folder / "metrics.json"
    if not path.is_file():  # kept in .resume/final: the next train job restores it; the identity is checked then
        path = folder / ".resume" / "final" / "metrics.json"
    try:
        metrics = readback.check_metrics(readback.load_json(path), path)
    except FileNotFoundError:
        return f"{path} is missing"
    except readback.ReadbackError as err:
        return str(err)
    wrong = [f"{key} {metrics.get(key)!r}, not {run[key]!r}" for key in ("dataset", "variant", "schedule", "seed")
             if metrics.get(key) != run[key]]  # fmt: skip
    planned = (metrics.get("hyperparameters") or {}).get("epochs")
    if planned != run["epochs"]:
        wrong.append(f"{planned!r} planned epochs, not {run['epochs']}")
    if metrics.get("epochs_run") != run["epochs"]:
        wrong.append(f"{metrics.get('epochs_run')!r} epochs run of {run['epochs']}")
    expected = folder_hash(folder.name)
    fingerprint = metrics.get("run_fingerprint")
    if expected is not None and not (isinstance(fingerprint, str) and fingerprint.startswith(expected)):
        wrong.append(f"the identity {str(fingerprint)[:16]!r}…, not the folder's {expected!r}")
    return f"{path} names {'; '.join(wrong)}" if wrong else ""


def wait_for_run(folder: Path, log_path: Path, run: dict, poll: float, max_wait: float | None = None) -> int:
    """Wait while the training of ``folder`` (the run ``run``: its identity and epochs) runs, at most ``max_wait``
    seconds; 0 once it finished with its outputs as the run asked for, else 1 (said in one line)."""
    start = time.monotonic()
    status = run_state(folder, log_path, run)
    if status.state == "running":
        log.info("%s: running; waiting for the process that trains it (%s)", folder, log_path)
    while status.state == "running":
        waited = time.monotonic() - start
        if max_wait is not None and waited >= max_wait:
            log.error("%s: still running after %.0f s, the most this wait may take (--max-wait); not waited for any "
                      "longer: python -m softmax_bottleneck status says where it runs", folder, waited)  # fmt: skip
            return 1
        time.sleep(poll if max_wait is None else min(poll, max(0.0, max_wait - waited)))
        status = run_state(folder, log_path, run)
    missing = [name for name in OUTPUTS if not (folder / name).is_file()]
    if status.state == "finished":
        differs = not_as_asked(folder, run)
        if differs:
            log.error("%s: finished, but not as this rule's run: %s; it is not taken for this run (move the folder "
                      "away and run the same snakemake command again)", folder, differs)  # fmt: skip
            return 1
    if status.state == "finished" and not missing:
        log.info("%s: finished by the process that trained it", folder)
        return 0
    if status.state == "unreadable":
        log.error("%s: the training it waited for left a file that cannot be read (%s); move that file away, then run "
                  "the same snakemake command again", folder, status.note)  # fmt: skip
        return 1
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
    parser.add_argument("--max-wait", type=positive_float, default=None, metavar="S",
                        help="give up, in one line, after S seconds (the rule: its time limit)")  # fmt: skip


def run_cli(args) -> int:
    run = {key: getattr(args, key) for key in ("dataset", "variant", "schedule", "seed", "epochs")}
    return wait_for_run(args.run, args.log, run, args.poll, args.max_wait)
