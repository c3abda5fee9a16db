"""Atomic file writes: every output the package writes appears whole or not at all.

A temporary file is written beside the target, flushed to disk and renamed onto it (``os.replace``),
so a crash or a killed job never leaves a half-written file that Snakemake could take for finished.
:func:`atomic_link` gives an existing file a second name the same way (a hard link, or a copy where
the file system has none). torch is imported only by :func:`atomic_torch_save`: table and figure
code uses this module too.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, _file_mode())  # mkstemp creates 0600; give the output the usual permissions
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


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

    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(obj, handle)


#: ``os.link`` errors that mean "no hard link here" (another file system, none supported, too many links)
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def atomic_link(src: str | os.PathLike, dst: str | os.PathLike) -> str:
    """Make ``dst`` the content of ``src`` atomically; returns ``"link"`` or ``"copy"``.

    A hard link to ``src`` under a temporary name is renamed onto ``dst`` (no data is written, both names
    then share one file); where the file system cannot link, an atomic copy (:func:`atomic_path`).
    """
    src, dst = Path(src), Path(dst)
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
