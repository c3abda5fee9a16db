"""The workflow's reading targets (``snakemake status``, ``progress``, ``preview``) run without Snakemake's lock.

Snakemake (checked with 9.27) locks the working directory for every run that executes jobs and, when that run ends,
removes the whole ``.snakemake/locks`` folder (``FilePersistence._delete_locks``): the locks of another Snakemake
still running in the same folder go with it. A ``snakemake status`` beside a running study would thus unlock the
study, and a second ``snakemake`` of the same targets would start the same jobs instead of being refused. A workflow
cannot exempt a rule from that lock, nor does it know its targets before the lock is taken; Snakemake's one switch
is its own ``--nolock``. So a Snakemake command line whose targets are all reading targets is run again at once with
``--nolock`` (:func:`rerun_without_lock`, which the workflow calls while Snakemake reads it: before any lock, DAG or
job). The reading targets read run folders and write only files of their own, atomically: they need no lock.
A command line with any other target, or none, is left to Snakemake as typed.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path


def reading_only(argv: Sequence[str], reading: Collection[str]) -> bool:
    """Whether Snakemake's command line ``argv`` (its arguments, without the program) names targets, every one of them
    in ``reading``, and would lock the directory (neither ``--nolock`` nor ``--unlock``). It is parsed by Snakemake's
    own parser, so that ``--configfile A B status`` and ``status --configfile A B`` read alike."""
    if not set(argv) & set(reading):  # most command lines: no parsing needed
        return False
    from snakemake.cli import get_argument_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            args = get_argument_parser().parse_args(list(argv))
    except (Exception, SystemExit):  # a command line Snakemake itself will refuse
        return False
    targets = list(args.targets or [])
    return bool(targets) and set(targets) <= set(reading) and not args.nolock and not args.unlock


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
