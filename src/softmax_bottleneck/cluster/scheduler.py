"""What SLURM holds of this user's jobs: which of a rule's jobs are pending or running, and waiting for one of them.

snakemake-executor-plugin-slurm names each job's rule and wildcards in its comment (``sbatch --comment
rule_<rule>_wildcards_<values joined by _>``). A controller started again after the one that submitted a ``train``
job died finds that job here while it is pending or running (:func:`queued_jobs`), so the workflow waits for it
(rule ``await_scheduled_training``, ``wait-for-job``) instead of submitting the run a second time: the run folder
shows nothing of a job that has not started, and little in the first minute of one that has (the job step, ``import
torch`` from a shared file system, the corpus).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time

log = logging.getLogger("softmax_bottleneck.cluster.scheduler")

#: the states in which a job still holds, or will hold, its run (``squeue -o %T``)
QUEUED_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
     "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}
)  # fmt: skip
#: seconds a squeue call may take
SQUEUE_TIMEOUT = 60
#: seconds between two asks of ``wait-for-job`` (30 unless this variable says otherwise)
POLL_ENV = "SOFTMAX_BOTTLENECK_SCHEDULER_POLL"


class SchedulerError(RuntimeError):
    """squeue could not be asked (not installed, the controller unreachable)."""


def job_comment(rule: str, wildcards: list[str]) -> str:
    """The comment the SLURM plugin gives a job of ``rule`` with these wildcard values (in the rule's order)."""
    return f"rule_{rule}_wildcards_{'_'.join(str(w) for w in wildcards)}".replace("/", "_")


def squeue_jobs(squeue: str = "squeue") -> list[tuple[str, str, str, str]]:
    """``(job id, state, comment, working directory)`` of every job of this user that SLURM lists (the directory
    empty where squeue gives none)."""
    exe = shutil.which(squeue)
    if exe is None:
        raise SchedulerError(f"{squeue} not found")
    try:
        columns = "--Format=JobID:|,State:|,Comment:256|,WorkDir:4096"
        proc = subprocess.run([exe, "--me", "--noheader", "--array", columns], capture_output=True, text=True,
                              timeout=SQUEUE_TIMEOUT)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SchedulerError(f"squeue: {err}") from None
    if proc.returncode != 0:
        raise SchedulerError(f"squeue exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:300]}")
    jobs = []
    for line in proc.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) >= 3 and fields[0]:
            jobs.append((fields[0], fields[1], fields[2], fields[3] if len(fields) > 3 else ""))
    return jobs


def controller_up(scontrol: str = "scontrol") -> bool:
    """Whether a SLURM controller answers here (``scontrol ping``): where none does, there is no queue to ask."""
    exe = shutil.which(scontrol)
    if exe is None:
        return False
    try:
        proc = subprocess.run([exe, "ping"], capture_output=True, text=True, timeout=SQUEUE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "is UP" in proc.stdout


def queued_jobs(
    rule: str, squeue: str = "squeue", scontrol: str = "scontrol", directory: str | os.PathLike = "."
) -> dict[str, tuple[str, str]]:
    """comment -> ``(job id, state)`` of this user's pending or running jobs of ``rule`` (:func:`job_comment`) that
    run in ``directory`` (the study's: the plug-in submits every job with ``-D`` the workflow's directory; a job whose
    directory squeue does not give counts too); empty where no SLURM controller answers (nothing to wait for), or,
    said in one warning, where squeue fails. The same configuration studied in another folder is another study: its
    jobs' comments are the same, their directory is not."""
    if not controller_up(scontrol):
        return {}
    try:
        jobs = squeue_jobs(squeue)
    except SchedulerError as err:
        log.warning("cannot ask SLURM which %s jobs are queued (%s): a run whose job has not started yet may be "
                    "submitted a second time", rule, err)  # fmt: skip
        return {}
    prefix, here = f"rule_{rule}_wildcards_", os.path.realpath(directory)
    return {comment: (jobid, state) for jobid, state, comment, workdir in jobs
            if comment.startswith(prefix) and state in QUEUED_STATES
            and (not workdir or os.path.realpath(workdir) == here)}  # fmt: skip


def job_state(jobid: str, squeue: str = "squeue") -> str | None:
    """The job's state while SLURM lists it (None once it has left the queue)."""
    for listed, state, *_ in squeue_jobs(squeue):
        if listed == jobid:
            return state
    return None


def wait_for_job(jobid: str, poll: float, squeue: str = "squeue", sleep=time.sleep) -> int:
    """Wait while SLURM job ``jobid`` is pending or running; 0 once it has left the queue (or ended)."""
    seen, failures = None, 0
    while True:
        try:
            state = job_state(jobid, squeue)
            failures = 0
        except SchedulerError as err:  # a controller restart: ask again, say so once in a while
            failures += 1
            if failures % 10 == 1:
                log.warning("job %s: %s; asking again in %.0f s", jobid, err, poll)
            sleep(poll)
            continue
        if state not in QUEUED_STATES:
            log.info("job %s: %s", jobid, "left the queue" if state is None else state.lower())
            return 0
        if state != seen:
            log.info("job %s: %s; waiting for it (submitted by an earlier snakemake)", jobid, state.lower())
            seen = state
        sleep(poll)


def add_cli(parser) -> None:
    parser.description = (
        "Wait while a SLURM job of this user is pending or running (squeue); exit 0 once it has left the queue. "
        "The workflow runs it for a training whose job an earlier controller submitted, then wait-for-run."
    )
    from softmax_bottleneck.argtypes import positive_float

    parser.add_argument("job", help="the SLURM job id")
    parser.add_argument("--poll", type=positive_float, default=None, metavar="S",
                        help=f"seconds between asks (${POLL_ENV}, else 30)")  # fmt: skip


def run_cli(args) -> int:
    import argparse

    from softmax_bottleneck.argtypes import positive_float

    try:
        poll = args.poll if args.poll is not None else positive_float(os.environ.get(POLL_ENV, "30"))
    except argparse.ArgumentTypeError as err:
        log.error("$%s: %s", POLL_ENV, err)
        return 2
    return wait_for_job(args.job, poll)
