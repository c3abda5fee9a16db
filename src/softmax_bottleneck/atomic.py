"""Atomic file writes: every output the package writes appears whole or not at all.

A temporary file is written beside the target, flushed to disk and renamed onto it (``os.replace``),
so a crash or a killed job never leaves a half-written file that Snakemake could take for finished.
:func:`atomic_link` gives an existing file a second name the same way (a hard link, or a copy where
the file system has none). torch is imported only by :func:`atomic_torch_save`: table and figure
code uses this module too.

A write that fails (full disk, file-size limit, read-only or foreign folder, a file where a folder is expected, a
device, FIFO or socket where the file is to be) raises :class:`WriteError`, an ``OSError`` whose message is one line
naming the output, why, and that nothing was written; the temporary is removed. ``torch.save`` reports a full disk
only as ``RuntimeError: ... unexpected pos``: :func:`atomic_torch_save` turns that into a :class:`WriteError` too.
The command line prints a :class:`WriteError` that reaches it as that one line.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path


class WriteError(OSError):
    """An output that could not be written; the one-line message names it and why. Nothing of it is left."""

    def __init__(self, path, reason: str, code: int | None = None):
        super().__init__(f"{path}: cannot write ({reason}); nothing was written")
        self.reason = reason
        self.errno = code
        self.filename = str(path)

    def __str__(self) -> str:
        return self.args[0]


def os_error_reason(err: OSError) -> str:
    """A short reason for an ``OSError`` of a write, naming the file when it is not the output itself."""
    if isinstance(err, WriteError):
        return str(err)
    where = f" at {err.filename}" if getattr(err, "filename", None) else ""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device (disk or quota full)"
    if err.errno == errno.EFBIG:
        return "file too large for this file system or the process's file-size limit"
    if err.errno == errno.EROFS:
        return f"read-only file system{where}"
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}"
    if err.errno in (errno.EEXIST, errno.ENOTDIR):
        return f"a file is where a folder is expected{where}"
    if err.errno == errno.EISDIR:
        return f"a folder is where a file is expected{where}"
    return f"{err.strerror or type(err).__name__}{where}"


def write_error(path, err: OSError) -> str:
    """One line for an output ``path`` that could not be written (a full disk, a read-only folder, ...)."""
    return str(err) if isinstance(err, WriteError) else f"{path}: cannot write ({os_error_reason(err)})"


def _refuse_special(path: Path) -> None:
    """A :class:`WriteError` where ``path`` is a device, FIFO or socket, or a link to one: renamed over, a device
    such as /dev/null would become a plain file, and so would a link such as /dev/stdout (as root). A link to a file
    is itself replaced, never what it points to."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISLNK(mode):
        try:
            target = os.stat(path).st_mode
        except OSError:  # a dangling link: replaced
            return
        if not (stat.S_ISREG(target) or stat.S_ISDIR(target)):
            raise WriteError(path, "it links to a device, FIFO or socket, not a regular file: give a file's path",
                             errno.EEXIST)  # fmt: skip
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise WriteError(path, "it is a device, FIFO or socket, not a regular file: give a file's path", errno.EEXIST)


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_target(path: Path) -> None:
    """A :class:`WriteError` naming ``path`` where it cannot become an output file: a folder, a device, FIFO or
    socket."""
    if path.is_dir():
        raise WriteError(path, "a folder is where a file is expected", errno.EISDIR)
    _refuse_special(path)


def temporary_beside(path: Path) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary ``.<name>.<random>.tmp`` beside ``path``, its folder made first; a
    :class:`WriteError` naming ``path`` where ``path`` cannot be an output (:func:`check_target`) or its folder cannot
    take a new file (a file where a folder should be, no permission, a full disk)."""
    check_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise WriteError(path, os_error_reason(err), err.errno) from None


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``."""
    path = Path(path)
    fd, tmp = temporary_beside(path)
    os.close(fd)
    try:
        yield Path(tmp)
        try:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.chmod(tmp, _file_mode())  # mkstemp creates 0600; give the output the usual permissions
            os.replace(tmp, path)
        except OSError as err:
            raise WriteError(path, os_error_reason(err), err.errno) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        try:
            tmp.write_text(text, encoding="utf-8")
        except OSError as err:
            raise WriteError(path, os_error_reason(err), err.errno) from None


def atomic_write_json(obj, path: str | os.PathLike) -> None:
    """Write standard JSON: a NaN or ±Infinity anywhere in ``obj`` raises ``ValueError`` naming its key path."""
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, allow_nan=False)
    except ValueError:
        where = _non_finite_key(obj) or "?"
        raise ValueError(f"{path}: refusing to write {where} (NaN/Infinity is not JSON); nothing was written") from None
    atomic_write_text(text + "\n", path)


def _non_finite_key(obj, prefix: str = "") -> str | None:
    """``"key.sub[2] = inf"`` for the first non-finite float in nested dicts/lists, else None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return f"{prefix or 'the value'} = {obj}"
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite_key(value, f"{prefix}[{key}]" if isinstance(key, int) else f"{prefix}.{key}".lstrip("."))
        if found:
            return found
    return None


def atomic_write_csv(frame, path: str | os.PathLike) -> None:
    """Write a ``pandas.DataFrame`` as CSV (no index, ``\\n`` line ends)."""
    atomic_write_text(frame.to_csv(index=False, lineterminator="\n"), path)


def atomic_torch_save(obj, path: str | os.PathLike) -> None:
    """``torch.save`` ``obj`` to ``path`` atomically (checkpoints, resume states, corpus caches).

    Saved through an open file, so the archive inside is named ``archive`` rather than after the random
    temporary name: equal objects give byte-identical files.
    """
    import torch

    with atomic_path(path) as tmp:
        try:
            with open(tmp, "wb") as handle:
                torch.save(obj, handle)
        except OSError as err:
            raise WriteError(path, os_error_reason(err), err.errno) from None
        except RuntimeError as err:  # torch's writer reports a failed write as "unexpected pos" (errno lost)
            if "unexpected pos" not in str(err) and "write" not in str(err).lower():
                raise
            raise WriteError(path, "the disk is full or the file exceeds a size limit (torch.save stopped)") from None


#: ``os.link`` errors that mean "no hard link here" (another file system, none supported, too many links)
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def atomic_link(src: str | os.PathLike, dst: str | os.PathLike) -> str:
    """Make ``dst`` the content of ``src`` atomically; returns ``"link"`` or ``"copy"``.

    A hard link to ``src`` under a temporary name is renamed onto ``dst`` (no data is written, both names
    then share one file); where the file system cannot link, an atomic copy (:func:`atomic_path`).
    """
    src, dst = Path(src), Path(dst)
    _refuse_special(dst)
    tmp = dst.parent / f".{dst.name}.{secrets.token_hex(6)}.tmp"
    try:
        os.link(src, tmp)
    except OSError as err:
        if err.errno not in _NO_LINK:
            raise
        with atomic_path(dst) as copy:
            shutil.copyfile(src, copy)
        return "copy"
    try:
        os.replace(tmp, dst)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return "link"


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries (new names, renames) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
