"""The workflow's reading targets (``snakemake status``, ``progress``, ``preview``) run without Snakemake's lock.

Snakemake (checked with 9.27) locks the working directory for every run that executes jobs and, when that run ends,
removes the whole ``.snakemake/locks`` folder (``FilePersistence._delete_locks``): the locks of another Snakemake
still running in the same folder go with it. A ``snakemake status`` beside a running study would thus unlock the
study, and a second ``snakemake`` of the same targets would start the same jobs instead of being refused. A workflow
cannot exempt a rule from that lock, nor does it know its targets before the lock is taken; Snakemake's one switch
is its own ``--nolock``. So a Snakemake command line whose targets are all reading targets is run again at once with
``--nolock`` (:func:`rerun_without_lock`, which the workflow calls while Snakemake reads it: before any lock, DAG or
job). The reading targets read run folders and write only files of their own, atomically: they need no lock.
A command line with any other target, or none, is left to Snakemake as typed, unless it would run jobs while another
Snakemake runs in the folder: then it stops at once, changing nothing (:func:`refuse_beside_another`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from softmax_bottleneck.cluster import processes


def _parsed(argv: Sequence[str]):
    """Snakemake's command line ``argv`` read by Snakemake's own parser (so that ``--configfile A B status`` and
    ``status --configfile A B`` read alike); None for one Snakemake itself will refuse."""
    from snakemake.cli import get_argument_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return get_argument_parser().parse_args(list(argv))
    except (Exception, SystemExit):
        return None


def reading_targets(argv: Sequence[str], reading: Collection[str]) -> list[str]:
    """The targets of Snakemake's command line ``argv`` (its arguments, without the program) where it names some and
    every one is in ``reading``, else none."""
    if not set(argv) & set(reading):  # most command lines: no parsing needed
        return []
    return _reading_targets(_parsed(argv), reading)


def _reading_targets(args, reading: Collection[str]) -> list[str]:
    """:func:`reading_targets` of Snakemake's parsed command line ``args`` (None: none)."""
    targets = list(args.targets or []) if args is not None else []
    return targets if set(targets) <= set(reading) else []


def reading_only(argv: Sequence[str], reading: Collection[str]) -> bool:
    """Whether Snakemake's command line ``argv`` names targets, every one of them in ``reading``
    (:func:`reading_targets`), and would lock the directory (neither ``--nolock`` nor ``--unlock``)."""
    if not set(argv) & set(reading):
        return False
    args = _parsed(argv)
    return bool(_reading_targets(args, reading)) and not args.nolock and not args.unlock


def snakemake_program(argv0: str) -> bool:
    """Whether ``argv0`` (``sys.argv[0]``) is Snakemake's command line (``snakemake``, ``python -m snakemake``), not
    another program calling Snakemake's API."""
    path = Path(argv0)
    return path.name == "snakemake" or (path.name == "__main__.py" and path.parent.name == "snakemake")


def rerun_without_lock(reading: Collection[str]) -> None:
    """Where this process is Snakemake's command line naming reading targets only (:func:`reading_only`), replace it
    by the same command line with ``--nolock`` (same interpreter, environment, terminal and exit status); else
    return."""
    if snakemake_program(sys.argv[0]) and reading_only(sys.argv[1:], reading):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "snakemake", "--nolock", *sys.argv[1:]])


# --------------------------------------------------------------------------------------------- another run's lock
#: Snakemake's message where a run cannot take the lock (``LockException``): it invites ``--unlock``
LOCKED = "Directory cannot be locked. Please make sure"
#: Snakemake's message where a dry run (which takes no lock) finds another run's lock, logged before it goes on
LOCKED_DRY = "Error: Directory cannot be locked. Another Snakemake instance is running."


def snakemakes_here(directory=".") -> list[tuple[int, float | None]] | None:
    """``(pid, start)`` of the other Snakemake processes on this machine whose working directory is ``directory``
    (Linux's ``/proc``), the oldest first; None where this cannot be told (no ``/proc``: macOS). The Snakemake of a
    job (``--target-jobs``: a cluster job running on this node, a job step) is not one: it holds no lock of the
    folder."""
    every = processes.listed()
    if every is None:
        return None
    here, found, wrappers = os.path.realpath(directory), [], processes.ancestors()
    for pid, argv, cwd in every:
        if b"--target-jobs" in argv:  # a job a controller spawned (a cluster job, a local job step): not a controller
            continue
        if pid in wrappers:  # `timeout 60 snakemake ...`: this Snakemake's own wrapper
            continue
        words = [Path(os.fsdecode(word)) for word in argv[:3]]
        if cwd == here and any(snakemake_program(str(w)) or w.name == "snakemake" for w in words):
            found.append((pid, processes.start_time(pid)))
    return sorted(found, key=lambda item: item[1] or 0.0)


#: Snakemake's options (as its parser names them) with which a command line takes no lock of the folder and, but
#: ``--nolock``, runs no job (Snakemake 9.27: each plans, prints, lists or checks); ``--report`` only without
#: ``--report-after-run``
UNLOCKED_OPTIONS = (
    "dryrun", "nolock", "unlock", "lint", "dag", "rulegraph", "filegraph", "d3dag", "summary", "detailed_summary",
    "list_changes", "list_input_changes", "list_params_changes", "list_untracked", "archive", "delete_all_output",
    "delete_temp_output", "generate_unit_tests", "cleanup_metadata", "conda_cleanup_envs", "conda_create_envs_only",
    "list_conda_envs", "container_cleanup_images", "export_cwl", "list_rules", "list_target_rules",
    "print_compilation",
)  # fmt: skip


def runs_jobs(args) -> bool:
    """Whether Snakemake's parsed command line ``args`` runs jobs: none of :data:`UNLOCKED_OPTIONS` but ``--nolock``
    (which runs jobs, unlocked); without ``--nolock`` it takes the folder's lock and, when it ends, removes every lock
    of the folder (module docstring)."""
    report = getattr(args, "report", None) and not getattr(args, "report_after_run", False)
    return not report and not any(getattr(args, name, None) for name in UNLOCKED_OPTIONS if name != "nolock")


def refuse_beside_another(directory=".", reading: Collection[str] = ()) -> None:
    """Where this process is Snakemake's command line and another Snakemake runs in ``directory`` on this machine,
    stop at once, changing nothing (``SystemExit`` with one line), a command line that would run jobs: when it ended,
    Snakemake would remove the running one's lock with its own, whatever files each needs; with ``--nolock`` (but of
    ``reading`` targets only, the workflow's own unlocked reading), both would run the same jobs. And ``--unlock``:
    it would let a second run start the running one's jobs."""
    # the listing first: most starts have no other Snakemake, and then Snakemake's parser is not built at all
    if not snakemake_program(sys.argv[0]) or not snakemakes_here(directory):
        return
    args = _parsed(sys.argv[1:])
    if args is None:
        return
    if args.unlock:
        raise SystemExit(lock_line(dry_run=False, directory=directory, needs=False, unlock=True))
    if runs_jobs(args) and not (args.nolock and _reading_targets(args, reading)):
        raise SystemExit(lock_line(dry_run=False, directory=directory, needs=False, nolock=args.nolock))


def lock_line(dry_run: bool, directory=".", needs: bool = True, *, nolock: bool = False, unlock: bool = False) -> str:
    """The one line that replaces Snakemake's where another run's lock holds files of this one (``needs``; else: a
    run beside a running Snakemake, :func:`refuse_beside_another`): while a Snakemake runs in the folder (this
    machine), wait or work elsewhere, never ``--unlock``; where none does, the lock is a killed run's, and
    ``--unlock`` lifts it (after checking that none runs on another machine); where the processes cannot be listed
    (no ``/proc``), ``--unlock`` only once ``ps`` shows that none runs."""
    import time

    running = snakemakes_here(directory)
    if running is None:
        who = "another Snakemake's lock holds files this command needs, and whether it still runs cannot be told here"
        check = ("if none runs on this folder, here or from another machine (ps -u $USER -o pid,command | grep "
                 "snakemake), it was killed")  # fmt: skip
        if dry_run:
            return f"note: {who}; this dry run changes nothing. Before a run, {check}: snakemake --unlock"
        return (f"snakemake: {who}, so this run stops here, changing nothing. {check[0].upper()}{check[1:]}: lift its "
                "lock with snakemake --unlock, then run this again; never while it runs: both would write the same "
                "files")  # fmt: skip
    if running:
        pid, start = running[0]
        since = f", started {time.strftime('%H:%M', time.localtime(start))}" if start else ""
        who = f"another Snakemake runs in this folder (process {pid}{since})"
        if unlock:
            return (
                f"snakemake: {who}: its lock is live, so nothing was unlocked (unlocked, a second run would start "
                "its running jobs again). Wait for it to end (snakemake status follows it), or stop it first"
            )
        who += (" and holds files this command needs" if needs else
                ": --nolock would run this beside it, both writing the same files" if nolock else
                ": when this run ended, Snakemake would remove its lock with this one's (it removes every lock of the "
                "folder)")  # fmt: skip
        if dry_run:
            return (f"note: {who}; this dry run changes nothing, but a run of it would stop until that one ends "
                    "(snakemake status follows it)")  # fmt: skip
        return (f"snakemake: {who}, so this run stops here, changing nothing. Wait for it to end (snakemake status "
                "follows it; snakemake preview renders what is finished so far; -n plans beside it) or build this in "
                "another folder (--directory); do not --unlock while it runs: both would write the same "
                "files")  # fmt: skip
    who = "this folder holds the lock of a Snakemake that no longer runs on this machine (killed, or lost)"
    check = "if none runs on this folder from another machine (ps -u $USER -o pid,cmd | grep snakemake there)"
    if dry_run:
        return f"note: {who}; this dry run changes nothing. Before a run, {check}: snakemake --unlock"
    return f"snakemake: {who}. {check[0].upper()}{check[1:]}, lift it with snakemake --unlock, then run this again"


class LockNote(logging.Filter):
    """Replaces Snakemake's lock messages (:data:`LOCKED`, :data:`LOCKED_DRY`) by :func:`lock_line`'s."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if LOCKED_DRY in message or LOCKED in message:
            record.msg, record.args = lock_line(dry_run=LOCKED_DRY in message), ()
            if hasattr(record, "exception"):  # Snakemake formats an error with its traceback: one line instead
                record.exception = None
        return True


def explain_locks() -> None:
    """Put :class:`LockNote` on Snakemake's logger (the workflow calls it while Snakemake reads it)."""
    logger = logging.getLogger("snakemake.logging")
    if not any(isinstance(f, LockNote) for f in logger.filters):
        logger.addFilter(LockNote())
