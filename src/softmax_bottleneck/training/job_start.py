"""``job-start``: the first act of a ``train`` or ``analyze`` job, before the command it wraps imports anything.

``python -m softmax_bottleneck job-start [--run DIR ...] [--leave-busy] -- CMD ...``

* ``--run DIR`` (one per run of a fused group): take the run folder's lock at once
  (:func:`softmax_bottleneck.training.lock.take_run_lock`), its holder (PID, host) written, so that ``status`` and a
  controller started meanwhile see the run running from the job's first second, not only once the training has
  imported PyTorch and read its corpus; a run another process holds fails here, in one line (``--leave-busy``: it is
  left to its holder and the others go on). The training that CMD starts adopts the locks (the descriptors are
  inherited).
* A job given a GPU (by SLURM: ``SLURM_JOB_GPUS``, or ``CUDA_VISIBLE_DEVICES`` naming a device inside a SLURM job; by
  the local lease, ``gpu-lease``) that sees no usable CUDA device fails at once, in one line with ``cuda-check``'s
  diagnosis, instead of training on the CPU (a CPU build of PyTorch on a GPU machine, a broken driver).
  ``SOFTMAX_BOTTLENECK_ALLOW_CPU=1`` allows it (a test cluster's stand-in GPUs, GPUs simulated with
  ``SOFTMAX_BOTTLENECK_GPUS``).

Then CMD runs as a supervised child (signals forwarded, its exit status returned): the wrapper, and with it the lock,
lives as long as the command does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from softmax_bottleneck.cluster.gpu_lease import ENV_LEASED
from softmax_bottleneck.cluster.supervise import run_supervised
from softmax_bottleneck.training.identity import twin_folders, twin_refusal
from softmax_bottleneck.training.lock import INHERITED_ENV, RunFolderBusy, take_run_lock

log = logging.getLogger("softmax_bottleneck.job_start")

#: set to 1 to let a job that was given a GPU run without CUDA (a test cluster's stand-in GPUs)
ALLOW_CPU_ENV = "SOFTMAX_BOTTLENECK_ALLOW_CPU"
#: values of CUDA_VISIBLE_DEVICES that name no device
NO_DEVICE = {"", "-1", "NoDevFiles", "none"}


def given_gpus(environ: Mapping[str, str] | None = None) -> str | None:
    """The GPUs this job was given, by SLURM (``SLURM_JOB_GPUS``; ``CUDA_VISIBLE_DEVICES`` inside a SLURM job) or by
    the local lease (``gpu-lease``), or None where it was given none (a ``CUDA_VISIBLE_DEVICES`` set by hand is the
    user's own choice)."""
    env = os.environ if environ is None else environ
    gpus = env.get("SLURM_JOB_GPUS", "").strip()
    if gpus and gpus not in NO_DEVICE:
        return f"SLURM_JOB_GPUS={gpus}"
    visible = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    if env.get("SLURM_JOB_ID") and visible not in NO_DEVICE:
        return f"CUDA_VISIBLE_DEVICES={visible}"
    leased = env.get(ENV_LEASED, "").strip()
    if leased:
        return f"GPU {leased}, leased by gpu-lease"
    return None


def cuda_refusal(environ: Mapping[str, str] | None = None, check=None) -> str | None:
    """One line saying why this job must not run, where the scheduler gave it a GPU and no CUDA device is usable;
    None otherwise. ``check`` is :func:`softmax_bottleneck.training.cuda_check.check` (torch imported only here)."""
    env = os.environ if environ is None else environ
    given = given_gpus(env)
    if given is None or env.get(ALLOW_CPU_ENV) == "1":
        return None
    if check is None:
        from softmax_bottleneck.training.cuda_check import check
    usable, lines = check()
    if usable:
        return None
    why = lines[-1].removeprefix("cuda-check: ")
    return (f"this job was given a GPU ({given}) but cannot use it: {why}; not running on the CPU "
            f"({ALLOW_CPU_ENV}=1 allows it)")  # fmt: skip


def add_cli(parser) -> None:
    parser.description = (
        "The first act of a train or analyze job: take the run folder's lock (--run), refuse a job that was given a "
        "GPU and sees no usable CUDA device (cuda-check's diagnosis, one line), then run CMD."
    )
    parser.add_argument("--run", metavar="DIR", action="append", default=[],
                        help="a run folder whose lock to take first (train; one per run of a fused group)")  # fmt: skip
    parser.add_argument("--leave-busy", action="store_true",
                        help="a --run that another process holds is left to it (one line) instead of failing: a fused "
                        "group's job, whose command names every run of the group")  # fmt: skip
    parser.add_argument("cmd", nargs="+", metavar="CMD", help="the command to run (after --)")


def run_cli(args) -> int:
    # the command's own log lines (and heartbeat) go to the same log: the wrapper stays silent while it runs
    logging.getLogger("softmax_bottleneck.heartbeat").disabled = True
    env = dict(os.environ)
    held = []
    for run in args.run:
        twins = twin_folders(Path(run))
        if twins and not os.path.lexists(run):  # the folder is not made: a stray one would hold the run's name
            log.error("%s: %s", run, twin_refusal(Path(run), twins[0]))
            return 1
        try:
            held.append(take_run_lock(run))
        except RunFolderBusy as err:
            if args.leave_busy:
                log.info("%s; left to it", err)
                continue
            log.error("%s", err)
            return 1
    if held:
        env[INHERITED_ENV] = "\n".join(f"{fd}:{path}" for fd, path in held)
    refusal = cuda_refusal(env)
    if refusal:
        log.error("%s", refusal)
        return 1
    fds = [fd for fd, _ in held] or [os.open(os.devnull, os.O_RDONLY)]  # one descriptor stays open in the child
    return run_supervised(args.cmd, env, fds)
