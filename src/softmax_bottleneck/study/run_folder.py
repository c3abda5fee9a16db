"""One run's state read from its folder alone (:mod:`.status` says what each state means): its progress file, its
resume state, its log, its ``.lock`` and, once finished, its ``metrics.json`` and rank file, each read as every file
read back is (:mod:`softmax_bottleneck.readback`); and its learning curve so far. Nothing is written, locked or
loaded (never a model or a resume state)."""

from __future__ import annotations

import platform
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.cluster.processes import pid_exists, start_time
from softmax_bottleneck.durations import duration_text
from softmax_bottleneck.study.run_status import RunStatus
from softmax_bottleneck.study.run_text import last_line, log_event, shown
from softmax_bottleneck.training.run_files import PROGRESS_NAME, time_left_seconds

#: added to a run's allowed silence: clocks of a shared file system differ, a first batch may be slow
GRACE_SECONDS = 120.0
#: the most bytes of a run's ``.lock`` read (it holds a PID and a host name)
LOCK_BYTES = 4096


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _checked(path: Path, check) -> tuple[dict, str]:
    """A run's JSON record read and checked as every reader of the package does (:mod:`softmax_bottleneck.readback`):
    ``(its content, "")``, ``({}, "")`` where it is absent, ``({}, why)`` where it is unreadable or impossible."""
    try:
        return check(readback.load_json(path), path), ""
    except FileNotFoundError:
        return {}, ""
    except readback.ReadbackError as err:
        return {}, str(err)


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def process_alive(pid, host, since: float | None = None) -> bool | None:
    """Whether the training process ``pid`` still runs: None when it ran on another host (or is unknown). On Linux a
    process started after ``since`` (the attempt's start) is another one that was given the same PID."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or host != platform.node():
        return None
    if not pid_exists(pid):
        return False
    started = start_time(pid)  # None without /proc (macOS): the PID is then taken as the run's
    return since is None or started is None or started <= since + 2.0


def _lock_holder(path: Path) -> tuple[int | None, str | None]:
    """PID and host written in a run's ``.lock`` (the file is read, at most :data:`LOCK_BYTES`, the lock never taken);
    a ``.lock`` that is not a regular file is a :class:`~softmax_bottleneck.readback.ReadbackError` naming it."""
    try:
        fields = readback.read_bytes(path, LOCK_BYTES, what="lock file").decode("utf-8", errors="replace").split()
    except FileNotFoundError:
        return None, None
    if len(fields) >= 2 and fields[0].isdigit() and len(fields[0]) < 10:
        return int(fields[0]), fields[1]
    return None, None


def read_progress_file(path: Path, run: RunStatus | None = None) -> dict | None:
    """A run's progress file, read and checked as every file read back is (bounded, strict,
    :func:`~softmax_bottleneck.readback.check_progress`, against ``run``'s epochs and identity where given); None where
    it is absent, a :class:`~softmax_bottleneck.readback.ReadbackError` naming it where it cannot be read or holds an
    impossible value."""
    try:
        progress = readback.load_json(path)
    except FileNotFoundError:
        return None
    if run is None:
        return readback.check_progress(progress, path)
    identity = {key: getattr(run, key) for key in readback.PROGRESS_IDENTITY}
    return readback.check_progress(progress, path, run.epochs, identity)


def identity_note(metrics: dict, run: RunStatus) -> str:
    """Where a finished run's ``metrics.json`` names another dataset, variant, schedule or seed than its folder (a
    copied run): what it names, else ``""``."""
    wrong = [f"{key} {metrics[key]!r}, not {getattr(run, key)!r}" for key in readback.PROGRESS_IDENTITY
             if key in metrics and metrics[key] != getattr(run, key)]  # fmt: skip
    return f"metrics.json names {', '.join(wrong)}: not this run's (copied from another run?)" if wrong else ""


def allowed_silence(progress: dict | None) -> float:
    """Seconds a running training may go without writing: its checkpoint interval (the resume state is written at
    least that often between batches) + its longest epoch so far (a validation, a batch) + :data:`GRACE_SECONDS`."""
    progress = progress or {}
    interval = _number(progress.get("checkpoint_seconds")) or 600.0
    walls = [_number(row.get("wall_seconds")) or 0.0 for row in progress.get("curve", []) if isinstance(row, dict)]
    return interval + max(walls, default=0.0) + GRACE_SECONDS


def _present(path: Path) -> bool:
    """Whether ``path`` exists (as anything: a FIFO or a link too, for the reader to name); an ``OSError`` other than
    its absence (a folder that cannot be entered) is raised."""
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def read_run_status(folder: Path, log: Path, rank_name: str, base: RunStatus, now: float) -> RunStatus:
    """``base`` (the run's identity and plan) completed from its folder, its log and its rank file; ``unreadable``,
    naming the file and why, where one of them cannot be read."""
    try:
        return _read_run_status(folder, log, rank_name, base, now)
    except readback.ReadbackError as err:
        base.state, base.note = "unreadable", shown(err)
    except OSError as err:  # a folder that cannot be entered, ...
        base.state, base.note = "unreadable", shown(f"{err.filename or folder}: unreadable ({err.strerror or err})")
    base.epoch = base.best_valid_ppl = base.test_ppl = base.press_rank = base.seconds_left = None
    base.device_seconds, base.started, base.finished = 0.0, None, None
    return base


def _read_run_status(folder: Path, log: Path, rank_name: str, base: RunStatus, now: float) -> RunStatus:
    s = base
    metrics_path = folder / "metrics.json"
    kept = folder / ".resume" / "final" / "metrics.json"
    if (_present(metrics_path) and _present(folder / "model.pt")) or _present(kept):
        metrics_path = metrics_path if _present(metrics_path) else kept
        metrics, why = _checked(metrics_path, readback.check_metrics)
        if why:  # its model is there, but no table can read its record: said in the counts, not in --runs alone
            s.state, s.note = "unreadable", shown(why)
            return s
        s.state, s.epoch = "finished", s.epochs
        s.device = metrics.get("device") if isinstance(metrics.get("device"), str) else None
        s.test_ppl = _number(metrics.get("test_ppl"))
        s.best_valid_ppl = _number(metrics.get("valid_ppl"))
        epochs_run = _number(metrics.get("epochs_run"))
        s.epoch = int(epochs_run) if epochs_run is not None else s.epochs
        s.device_seconds = (_number(metrics.get("seconds_per_epoch")) or 0.0) * (epochs_run or 0.0)
        s.finished = _mtime(metrics_path)
        s.started = s.finished - s.device_seconds if s.finished is not None else None
        rank, rank_why = _checked(folder / rank_name, readback.check_rank)
        s.press_rank = _number(rank.get("press_rank"))
        notes = [why, identity_note(metrics, s), rank_why]
        if metrics_path == kept:
            notes.append("outputs kept in .resume/final, restored by the next job")
        s.note = shown("; ".join(note for note in notes if note))
        return s
    progress = read_progress_file(folder / ".resume" / PROGRESS_NAME, s)
    writes = {
        "progress": _mtime(folder / ".resume" / PROGRESS_NAME),
        "state": _mtime(folder / ".resume" / "state.pt"),
        "log": _mtime(log),
        "lock": _mtime(folder / ".lock"),
    }
    known = [t for t in writes.values() if t is not None]
    if writes["progress"] is None and writes["state"] is None and writes["lock"] is None:
        error, _ = log_event(last_line(log))  # a job whose training never took its folder: failed, or not started
        s.state, s.note, s.last_write = ("failed", shown(error), writes["log"]) if error else ("not started", "", None)
        return s
    s.last_write = max(known)
    pid, host = _lock_holder(folder / ".lock")
    since = writes["lock"]
    if progress:
        s.epoch, s.best_valid_ppl = progress["epoch"], _number(progress.get("best_valid_ppl"))
        walls = [_number(row.get("wall_seconds")) or 0.0 for row in progress["curve"]]
        s.device_seconds = sum(walls)
        s.seconds_left = time_left_seconds(s.epoch, s.epochs, walls[-10:]) if walls else None
        s.started = _number(progress.get("started"))
        if writes["lock"] is None or (writes["progress"] or 0.0) >= writes["lock"]:  # a newer lock: a newer attempt
            pid, host = progress.get("pid", pid), progress.get("host", host)
            since = _number(progress.get("attempt_started")) or since
    if s.started is None:
        s.started = min(known)
    # what happened last is what the newest of the progress file, the log and the lock says (a newer attempt
    # rewrites the lock first, then logs, then rewrites the progress file)
    newest = max(("progress", "log", "lock"), key=lambda k: writes[k] if writes[k] is not None else -1.0)
    error, stop = None, None
    if newest == "progress" and progress:
        error, stop = progress.get("error") or None, progress.get("stopped") or None
    elif newest == "log":
        error, stop = log_event(last_line(log))
    alive = process_alive(pid, host, since)
    if error:
        s.state, s.note = "failed", shown(error)
    elif stop:
        s.state, s.note = "stalled", f"stopped: {shown(stop)}"
    elif alive is False:
        s.state, s.note = "stalled", f"its process ({pid} on {shown(host, 64)}) is gone"
    elif now - s.last_write <= allowed_silence(progress):
        s.state = "running"
    else:
        s.state, s.note = "stalled", f"nothing written for {duration_text(now - s.last_write)}"
    if s.state == "stalled" and not progress and writes["state"] is None:
        s.note += "; no resume state yet: it restarts from the beginning"
    return s


def learning_curve(folder: Path, run: RunStatus | None = None) -> list[tuple[int, float]]:
    """``(epoch, valid ppl)`` of a run so far: its ``curve.csv`` once finished, else its progress file's curve (checked
    against ``run``'s epochs and identity where given). A file that cannot be read or holds an impossible number
    (:mod:`.readback`: bounded, strict, its bounds) is left out, with a warning naming it."""
    import csv
    import io
    import logging

    path = folder / "curve.csv"
    try:
        if _present(path):
            text = readback.read_bytes(path, readback.MAX_CSV_BYTES, what="CSV").decode("utf-8")
            curve = [(int(row["epoch"]), float(row["valid_ppl"])) for row in csv.DictReader(io.StringIO(text))]
            for epoch, ppl in curve:
                readback.check_value(path, "epoch", epoch)
                readback.check_value(path, "valid_ppl", ppl)
            return curve
        path = folder / ".resume" / PROGRESS_NAME
        progress = read_progress_file(path, run)
    except FileNotFoundError:
        return []
    except (OSError, KeyError, ValueError, TypeError) as err:  # ReadbackError and UnicodeDecodeError are ValueErrors
        why = err.reason if isinstance(err, readback.ReadbackError) else err
        logging.getLogger(__name__).warning("%s: left out of the learning curves: %s", path, shown(why))
        return []
    rows = progress["curve"] if progress else []
    return [(row["epoch"], float(row["valid_ppl"])) for row in rows if _number(row.get("valid_ppl")) is not None]
