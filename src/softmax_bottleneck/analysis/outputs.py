"""The outputs of the analysis commands (``analyze``, ``analyze-lm``): whole or absent, never half-written.

Each output is written to a locked temporary beside it (``.<name>.<random>.tmp``, ``flock``-ed while written) and
renamed into place; a ``.npy`` log-P matrix (``--save-logp``, gigabytes) has its disk space reserved before the first
row (:func:`reserve`), so a full disk fails there in one line instead of as SIGBUS inside the memory map. Any write
error is an :class:`OutputError` naming the output; the temporary is removed, and one left by a killed run is removed
by the next run (:func:`remove_stale_temporaries`). A command's outputs are all written or none
(:func:`all_or_none`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from softmax_bottleneck.atomic import WriteError, check_target, os_error_reason, temporary_beside, write_error

log = logging.getLogger(__name__)


class OutputError(OSError):
    """An output could not be written (full disk, file-size limit, ...): the one-line message names the file."""


def output_error(path, err: OSError) -> OutputError:
    """``<path>: cannot write (<reason>); nothing was written`` (:func:`softmax_bottleneck.atomic.write_error`)."""
    if isinstance(err, WriteError):  # said already: a folder, a device, a file where a folder should be
        return OutputError(str(err))
    return OutputError(f"{write_error(path, err)}; nothing was written")


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # a hard link
    except OSError:
        return False


def check_writable(*paths, inputs=()) -> None:
    """Before any work, each output of ``paths`` (None: not asked for) can be written: it is not a folder, a device,
    FIFO or socket, not one of the command's ``inputs`` (files; a text, a checkpoint, a model folder's files) nor
    another output's path, and the nearest folder of its path that exists takes a new file (probed, then removed; no
    folder is made); else :class:`OutputError` naming it and why. An analysis of hours must not end in an output it
    could have refused at its start, nor replace what it reads."""
    outputs = [Path(p) for p in paths if p is not None]
    for number, path in enumerate(outputs):
        try:
            check_target(path)
            source = next((Path(i) for i in inputs if i is not None and _same_file(path, Path(i))), None)
            if source is not None:
                raise WriteError(path, f"it is an input of this command, {source}: choose another path", errno.EEXIST)
            if any(_same_file(path, other) for other in outputs[:number]):
                raise WriteError(path, "given for two outputs: choose one path for each", errno.EEXIST)
            folder = next(p for p in (path.parent, *path.parent.parents) if os.path.lexists(p))
            if not folder.is_dir():
                raise WriteError(path, f"a file is where a folder is expected at {folder}", errno.ENOTDIR)
            try:
                fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
            except OSError as err:
                raise WriteError(
                    path, f"its folder {folder} takes no new file: {err.strerror or err}", err.errno
                ) from None
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):  # another run's clean-up may have taken it first
                os.unlink(probe)
        except WriteError as err:
            raise OutputError(str(err)) from None
        except OSError as err:
            raise OutputError(f"{path}: cannot write ({os_error_reason(err)}); nothing was written") from None


def _temporaries(path: Path) -> list[Path]:
    """The temporaries an atomic write of ``path`` creates beside it: ``.<name>.<random>.tmp``."""
    prefix = f".{path.name}."
    return [p for p in path.parent.glob(f".{glob_escape(path.name)}.*.tmp") if p.name.startswith(prefix)]


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in name)


def remove_stale_temporaries(*paths) -> list[Path]:
    """Remove the temporaries that a killed earlier run left for these outputs; return what was removed.

    Only ``.<name>.<random>.tmp`` beside each output ``<name>`` (the names :func:`softmax_bottleneck.atomic.atomic_path`
    and :func:`locked_temporary` give), and only those that no live process holds: a writer holds an exclusive
    ``flock`` on its temporary for as long as it writes (the kernel drops it when the process dies, SIGKILL included),
    so a temporary whose lock can be taken belongs to a dead run. Nothing else is touched.
    """
    removed = []
    for path in paths:
        if path is None:
            continue
        for tmp in _temporaries(Path(path)):
            try:
                fd = os.open(tmp, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held by a live writer
                os.close(fd)
                continue
            try:
                tmp.unlink()
                removed.append(tmp)
                log.info("removed %s, left by an earlier run that was killed", tmp)
            except OSError:
                pass
            finally:
                os.close(fd)
    return removed


@contextmanager
def locked_temporary(path: Path):
    """Like :func:`softmax_bottleneck.atomic.atomic_path`, but the temporary is ``flock``-ed while it is written (so
    that :func:`remove_stale_temporaries` of a later run can tell it from one a killed run left). Yields
    ``(temporary path, its open binary file)``; on success the file is fsynced and renamed onto ``path``."""
    fd, tmp = temporary_beside(path)  # never a device (renamed over, /dev/null would become a file) nor a folder
    handle = os.fdopen(fd, "r+b")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield Path(tmp), handle
        handle.flush()
        os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        handle.close()


def reserve(handle, size: int) -> None:
    """Allocate ``size`` bytes of disk for the open file now, so that a full disk fails here with ``ENOSPC`` rather
    than as SIGBUS while the memory map is written (a sparse file has no blocks behind its pages)."""
    try:
        os.posix_fallocate(handle.fileno(), 0, size)
        return
    except OSError as err:
        if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    handle.seek(0, os.SEEK_END)  # no fallocate on this file system: write the zeros
    zeros = bytes(1 << 24)
    while handle.tell() < size:
        handle.write(zeros[: size - handle.tell()])
    handle.flush()


@contextmanager
def npy_writer(path, shape):
    """Yield a memory-mapped float32 ``.npy`` of ``shape`` that appears at ``path`` only once complete.

    The rows go to a locked temporary file beside ``path`` (:func:`locked_temporary`) whose disk space is allocated
    up front (:func:`reserve`), removed on any error or interruption (SIGTERM/SIGINT inside
    :func:`softmax_bottleneck.cluster.signals.stop_on_signals`); a SIGKILL-ed run's temporary is removed by the next
    run (:func:`remove_stale_temporaries`). A write error raises :class:`OutputError` naming ``path``.
    """
    if path is None:
        yield None
        return
    path = Path(path)
    dtype = np.dtype(np.float32)
    try:
        with locked_temporary(path) as (tmp, handle):
            header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
            np.lib.format.write_array_header_2_0(handle, header)
            offset = handle.tell()
            handle.flush()
            reserve(handle, offset + int(np.prod(shape)) * dtype.itemsize)
            array = np.memmap(tmp, dtype=dtype, mode="r+", offset=offset, shape=tuple(shape))
            try:
                yield array
                array.flush()
            finally:
                del array
    except OutputError:
        raise
    except OSError as err:
        raise output_error(path, err) from None


def _identity(path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


@contextmanager
def all_or_none(*paths):
    """The outputs ``paths`` (None: not asked for) stay only if the whole block succeeds: on any exception, an
    interruption included (:class:`~softmax_bottleneck.cluster.signals.Interrupted`), each one the block wrote (a
    new file at its path: every write renames a new file into place) is removed again, so a ``.npy`` finished before
    a failed SVD or summary is not left without them. Files the block did not write are left alone."""
    before = {Path(p): _identity(p) for p in paths if p is not None}
    try:
        yield
    except BaseException:
        for path, identity in before.items():
            now = _identity(path)
            if now is not None and now != identity:
                path.unlink(missing_ok=True)
                log.info("removed %s: the command did not finish", path)
        raise


def write_text(text: str, path) -> None:
    """Write ``text`` to ``path`` atomically through a locked temporary; :class:`OutputError` names ``path``."""
    path = Path(path)
    try:
        with locked_temporary(path) as (_, handle):
            handle.write(text.encode("utf-8"))
    except OSError as err:
        raise output_error(path, err) from None
