"""One writer per run folder: an exclusive ``flock`` on ``<run>/.lock`` for the whole run.

A second training process started on the same folder (a duplicated command, a Snakemake job that
is still running elsewhere) fails at once, naming the holder's PID, instead of resuming from the
first one's live state. The lock is the kernel's: it vanishes with its process, so a killed run
leaves nothing stale behind. Re-entering the lock within the process that holds it is allowed.

A job's wrapper (``job-start --run``, :mod:`softmax_bottleneck.training.job_start`) takes the lock as the job's first
act, before ``import torch``, and hands it to the training it starts: the locked descriptor is inherited and named in
:data:`INHERITED_ENV` (``<fd>:<path>``, a line per run); :func:`run_lock` adopts it for that folder instead of locking
it again.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import platform
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("softmax_bottleneck.train")

LOCK_NAME = ".lock"
#: ``<fd>:<lock path>`` of a run lock taken by the process that started this one (inherited descriptor)
INHERITED_ENV = "SOFTMAX_BOTTLENECK_RUN_LOCK"
_held: dict[Path, int] = {}  # lock files this process holds -> nesting depth


class RunFolderBusy(RuntimeError):
    """Another process holds the run folder's lock."""


@contextmanager
def run_lock(folder: str | os.PathLike):
    """Hold the exclusive lock of ``folder`` (created if needed) while the block runs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / LOCK_NAME).resolve()
    if path in _held:
        _held[path] += 1
        try:
            yield path
        finally:
            _held[path] -= 1
        return
    inherited = inherited_lock(path)
    if inherited is not None:  # taken for us by the job's wrapper, which lives as long as we do
        _write_holder(inherited)
        _held[path] = 1
        try:
            yield path
        finally:
            del _held[path]
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        locked = _acquire(fd, folder, path)
        if locked:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {platform.node()}\n".encode())
        _held[path] = 1
        try:
            yield path
        finally:
            del _held[path]
    finally:
        os.close(fd)  # releases the lock


def _write_holder(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {platform.node()}\n".encode(), 0)


def inherited_lock(path: Path, environ: dict[str, str] | None = None) -> int | None:
    """The descriptor named by :data:`INHERITED_ENV` (one ``<fd>:<path>`` a line: a fused group's job locks each of
    its runs) when it is open on ``path`` (the same file), else None."""
    value = (os.environ if environ is None else environ).get(INHERITED_ENV, "")
    for line in value.splitlines():
        fd_text, _, named = line.partition(":")
        if not fd_text.isdigit() or Path(named) != path:
            continue
        try:
            held, there = os.fstat(int(fd_text)), os.stat(path)
        except OSError:
            return None
        return int(fd_text) if (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino) else None
    return None


def take_run_lock(folder: str | os.PathLike) -> tuple[int, Path]:
    """Take ``folder``'s lock for a process that runs the training as its child: ``(fd, path)``, the descriptor
    inheritable and the holder written; :class:`RunFolderBusy` in one line when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / LOCK_NAME).resolve()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if _acquire(fd, folder, path):
            _write_holder(fd)
    except BaseException:
        os.close(fd)
        raise
    os.set_inheritable(fd, True)
    return fd, path


def _acquire(fd: int, folder: Path, path: Path) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").split()
        pid = f"PID {holder[0]} on {holder[1]}" if len(holder) >= 2 else "a process that is starting"
        raise RunFolderBusy(
            f"{folder}: another training process ({pid}) is writing this run folder (lock {path}); "
            "wait for it to finish or stop it, or use another --out"
        ) from None
    except OSError as err:
        if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        log.warning("%s: this file system does not support locks (%s); make sure one process writes it", folder, err)
        return False
