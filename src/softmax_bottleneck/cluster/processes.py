"""The processes of this machine, as the status page, the lock messages and the analysis's progress lines see them:
whether a PID exists, when it started (Linux's ``/proc``: ``/proc/<pid>/stat``'s 22nd field, clock ticks since boot,
plus ``/proc/stat``'s ``btime``), this process's resident memory now (``/proc/self/statm``) and at its peak
(:func:`peak_resident_bytes`). Where :data:`PROC` is missing (macOS) a start or a size now is unknown, never a sign
that the process is gone."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

#: Linux's process file system
PROC = Path("/proc")


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts); never true of a PID no process
    can have (0 and below name process groups to ``kill``)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (Unix seconds); None where unknown: no ``/proc``, the process gone meanwhile, or
    a file that does not read as expected."""
    try:
        ticks = int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in (PROC / "stat").read_text().splitlines()
                    if line.startswith("btime "))  # fmt: skip
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def resident_bytes() -> int | None:
    """This process's resident memory now (``/proc/self/statm``'s second field, in pages); None where unknown."""
    try:
        return int((PROC / "self" / "statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def peak_resident_bytes() -> int:
    """This program's peak resident memory: ``/proc/self/status``'s ``VmHWM`` (kB), the high-water mark of its own
    memory since it started. Not ``getrusage``'s ``ru_maxrss`` where ``/proc`` tells: on Linux that is also carried
    over from the parent, whose peak (a program started through ``vfork``, as Python's ``subprocess`` does) or whose
    memory at the ``fork`` it inherits, so a program started by a large one (a test runner, Snakemake) would report
    the parent's size. Without ``/proc`` (macOS): ``ru_maxrss``, in bytes there (KiB on Linux)."""
    try:
        for line in (PROC / "self" / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)
