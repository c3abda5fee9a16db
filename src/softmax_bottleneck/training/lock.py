"""One writer per run folder: an exclusive ``flock`` on ``<run>/.lock`` for the whole run.

A second training process started on the same folder (a duplicated command, a Snakemake job that
is still running elsewhere) fails at once, naming the holder's PID, instead of resuming from the
first one's live state. The lock is the kernel's: it vanishes with its process, so a killed run
leaves nothing stale behind. Re-entering the lock within the process that holds it is allowed.
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
