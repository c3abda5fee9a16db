"""The lock files of the GPU lease and of the MPS daemons: a private directory, files never followed through a
symbolic link, ``flock`` on them (held while the process that took it lives, released by the kernel when it dies).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path


class UnsafeLockDir(PermissionError):
    """A lock directory another user could tamper with (its one-line message says why)."""


def check_lock_dir(lock_dir: Path) -> None:
    """Refuse ``lock_dir`` unless it is a directory (not a symbolic link) of this user that no one else can write.

    In a world-writable place such as ``/var/tmp`` another user could create the directory first (or a link in
    its place) and then delete or swap the lock files, so that two jobs lease the same GPU.
    """
    info = os.lstat(lock_dir)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeLockDir("is a symbolic link, not a directory")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeLockDir("is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafeLockDir(f"belongs to uid {info.st_uid}, not to this user (uid {os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeLockDir(f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o}); chmod 700 it")


class UnsafeLockFile(PermissionError):
    """A slot's lock file that is a symbolic link or not a regular file (the one-line message names it)."""


def open_lock_file(path: Path, flags: int) -> int:
    """``os.open`` of a slot's lock file that never follows a symbolic link nor opens a FIFO or device."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeLockFile(f"lock file {path} is a symbolic link, never followed; remove it") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeLockFile(f"lock file {path} is not a regular file; remove it")
    return fd


def prepare_lock_dir(lock_dir: Path) -> None:
    """Make ``lock_dir`` (mode 700) where nothing is in its place, then :func:`check_lock_dir` it: a file or a link
    already there is refused for what it is."""
    if not os.path.lexists(lock_dir):
        lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_lock_dir(lock_dir)
    if not os.access(lock_dir, os.W_OK):
        raise PermissionError(f"GPU lock directory {lock_dir} is not writable")


def is_held(path: Path) -> bool:
    """True if another open file description holds a lock on ``path``."""
    try:
        fd = open_lock_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def slot_files(lock_dir: Path, gpu: int) -> dict[int, Path]:
    """slot -> lock file ``gpu<gpu>.slot<slot>.lock`` of card ``gpu`` present in ``lock_dir`` (leases of any K)."""
    found = {}
    for path in lock_dir.glob(f"gpu{gpu}.slot*.lock"):
        number = path.name[len(f"gpu{gpu}.slot") : -len(".lock")]
        if number.isdigit():
            found[int(number)] = path
    return found
