"""The processes of this machine, as the status page, the lock messages and the analysis's progress lines see them:
whether a PID exists, when it started (Linux's ``/proc``: ``/proc/<pid>/stat``'s 22nd field, clock ticks since boot,
plus ``/proc/stat``'s ``btime``), a process's resident memory now and at its peak (``/proc/<pid>/status``), and the
command line and working directory of each process (:func:`listed`). Every read of ``/proc`` is here. Where
:data:`PROC` is missing (macOS) a start, a size or a listing is unknown, never a sign that a process is gone."""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterator
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


def memory(pid: int | str = "self") -> tuple[int, int] | None:
    """``(now, peak)``: the resident memory of process ``pid`` (this one by default) in bytes, now and at its peak
    since it started (``/proc/<pid>/status``'s ``VmRSS`` and ``VmHWM``); None where unknown (no ``/proc``, the process
    gone)."""
    try:
        kib = {key: int(value.split()[0]) for key, value in (line.split(":", 1) for line in
               (PROC / str(pid) / "status").read_text().splitlines()) if key in ("VmRSS", "VmHWM")}  # fmt: skip
        return kib["VmRSS"] * 1024, kib["VmHWM"] * 1024
    except (OSError, ValueError, IndexError, KeyError):
        return None


def peak_resident_bytes() -> int:
    """This program's peak resident memory: ``VmHWM`` (:func:`memory`), the high-water mark of its own memory since
    it started. Not ``getrusage``'s ``ru_maxrss`` where ``/proc`` tells: on Linux that is also carried over from the
    parent, whose peak (a program started through ``vfork``, as Python's ``subprocess`` does) or whose memory at the
    ``fork`` it inherits, so a program started by a large one (a test runner, Snakemake) would report the parent's
    size. Without ``/proc`` (macOS): ``ru_maxrss``, in bytes there (KiB on Linux)."""
    own = memory()
    if own is not None:
        return own[1]
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)


def memory_text(pid: int | str = "self") -> str:
    """Process ``pid``'s resident memory now and at its peak (:func:`memory`), for progress lines; where that is
    unknown, this process's peak alone (:func:`peak_resident_bytes`), and nothing of another."""
    both = memory(pid)
    if both is not None:
        return f"RSS {both[0] / 2**30:.2f} GiB (peak {both[1] / 2**30:.2f} GiB)"
    return f"peak RSS {peak_resident_bytes() / 2**30:.2f} GiB" if pid == "self" else ""


def ancestors() -> frozenset[int]:
    """The PIDs of this process's parent, its parent's parent, ... (``/proc/<pid>/stat``'s 4th field): a wrapper such
    as ``timeout 60 snakemake ...`` is one, never another program; empty where unknown (no ``/proc``)."""
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return frozenset(found)


def listed() -> Iterator[tuple[int, list[bytes], str]] | None:
    """``(pid, command line, working directory)`` of every process of this machine whose files may be read (another
    user's are left out), this one excepted; None where processes cannot be listed (no ``/proc``)."""
    if not PROC.is_dir():
        return None

    def each():
        for entry in PROC.glob("[0-9]*"):
            if int(entry.name) == os.getpid():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(entry / "cwd")
            except OSError:  # gone meanwhile, or another user's
                continue
            yield int(entry.name), argv, cwd

    return each()
