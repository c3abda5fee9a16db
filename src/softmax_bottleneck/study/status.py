"""Where every run of the study stands (``status``; ``snakemake status``), read from the run folders alone.

It works under any executor (local, SLURM) and while Snakemake runs: it only reads files (never a model or a resume
state, never the run's lock), and never starts, locks or changes a run. A run of the plan (:mod:`.plan`) is

* **finished**: ``model.pt`` and ``metrics.json`` are there (or the kept set ``.resume/final/``, which the next job
  restores); its test perplexity from ``metrics.json``, its Press' rank from ``rank-<rows>.json`` once analysed;
* **failed**: the newest of its progress file, its log (``logs/train/<run>.log``: its last line) and its ``.lock``
  says its last attempt ended on an error, that one line shown with the command that retries it;
* **stalled**: interrupted and resumable: that newest record says the attempt stopped on a signal (pre-empted,
  Ctrl-C), or its process is gone (same host), or nothing of it (progress file, resume state, log, lock) was
  written for longer than its checkpoint interval allows (:func:`allowed_silence`: killed, or lost with its node);
* **running**: written to within that interval; epoch e of E, the best validation perplexity so far, the time left
  (the epochs to go × the mean wall time of its epochs) and its last write, from ``.resume/progress.json``
  (:mod:`softmax_bottleneck.training.run_files`);
* **not started**: no progress file, resume state or lock (a log alone that ends in an error: failed);
* **unreadable**: a file that says where it stands cannot be read or holds an impossible value (the progress file, the
  ``.lock``, the log, the folder itself): the run is listed with the file and why, never with the file's numbers.

Every file is read as every file read back is (:mod:`softmax_bottleneck.readback`: a regular file only, never through a
link, never waited on, its size bounded before reading, no key twice, the progress file's numbers within their bounds
and the run's epochs); a text from a file (an error, a log's last line, a host) is shown without control characters
and cut at :data:`NOTE_CHARS` characters, saying so.

The time spent is the runs' own: the wall time of each epoch in the progress file (training + validation), or
``seconds_per_epoch × epochs_run`` of a finished run's ``metrics.json``; CPU- or GPU-hours where every finished run
trained on that kind of device (its ``metrics.json``). The plan's projection is in V100 GPU-hours
(:func:`.plan.gpu_hours`); work done counts a finished run's projection whole and e/E of an unfinished one's. The
current rate is that work over the hours since the first run started, and the projected finish is the work left at
that rate (shown while a run is running). Runs that read only the first tokens of their data (the small scale) are
not projected with the paper's V100 times, which say nothing of their cost. Where the workflow runs the study, its
terminal's last time left (every job still to run: :mod:`softmax_bottleneck.cluster.time_left`) is shown too.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from softmax_bottleneck import readback, workflow_run
from softmax_bottleneck.durations import duration_text
from softmax_bottleneck.study.config_file import DEFAULT_CONFIG
from softmax_bottleneck.study.plan import EXPERIMENT_LABELS, gpu_hours
from softmax_bottleneck.study.runs import SWEEP_PREFIX, TRAIN_LOG, Study, analysis_names, output_roots
from softmax_bottleneck.training.run_files import PROGRESS_NAME, time_left_seconds

STATES = ("finished", "running", "stalled", "failed", "unreadable", "not started")
#: states the one-screen view lists run by run
LISTED_STATES = ("running", "stalled", "failed", "unreadable")
#: added to a run's allowed silence: clocks of a shared file system differ, a first batch may be slow
GRACE_SECONDS = 120.0
#: bytes read from the end of a log for its last line
LOG_TAIL_BYTES = 4096
#: a line of the package's logs (``cli.main``): time, level, logger, message
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: (.*)$")
#: runs listed per state on the default one-screen view
LISTED = 8
#: the most bytes of a run's ``.lock`` read (it holds a PID and a host name)
LOCK_BYTES = 4096
#: characters of a text from a run's files (an error, a log's last line) shown at most; the rest is cut, saying so
NOTE_CHARS = 300
#: a terminal's escape sequences (CSI ``ESC [ ... letter``, OSC ``ESC ] ... BEL``, and two-character ones)
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
#: control characters (C0, DEL, C1), and all of them but the carriage return
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROLS_BUT_RETURNS = re.compile(r"[\x00-\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass
class RunStatus:
    """One run's state and what its folder says about it (times are Unix seconds)."""

    run: str
    dataset: str
    variant: str
    schedule: str
    seed: int
    tag: str
    experiments: list[str]
    state: str
    epochs: int
    projected_hours: float  # V100 GPU-hours, the plan's
    epoch: int | None = None
    best_valid_ppl: float | None = None
    test_ppl: float | None = None
    press_rank: float | None = None
    seconds_left: float | None = None
    last_write: float | None = None
    started: float | None = None
    finished: float | None = None
    device_seconds: float = 0.0
    device: str | None = None  # where a finished run trained (its metrics.json: cpu, cuda, cuda:1, ...)
    note: str = ""
    retry: str | None = None

    @property
    def done_fraction(self) -> float:
        if self.state == "finished":
            return 1.0
        return min(1.0, (self.epoch or 0) / self.epochs) if self.epochs else 0.0


@dataclass
class StudyStatus:
    """Every run's :class:`RunStatus` and the sums over them."""

    config: str
    now: float
    runs: list[RunStatus]
    groups: dict[str, list[str]] = field(default_factory=dict)  # experiment -> run folders
    scaled_down: bool = False  # the runs read only the first tokens of their splits (the small scale)
    workflow: dict | None = None  # the workflow's time left, as its terminal last wrote it (workflow_run.TIME_LEFT)

    @property
    def device_label(self) -> str:
        """``CPU`` or ``GPU`` where every finished run trained on one kind of device, else ``device``."""
        kinds = {r.device.split(":")[0] for r in self.runs if r.device}
        return {frozenset({"cpu"}): "CPU", frozenset({"cuda"}): "GPU"}.get(frozenset(kinds), "device")

    def counts(self, runs: list[RunStatus] | None = None) -> dict[str, int]:
        runs = self.runs if runs is None else runs
        return {state: sum(r.state == state for r in runs) for state in STATES}

    @property
    def device_hours(self) -> float:
        return sum(r.device_seconds for r in self.runs) / 3600.0

    @property
    def projected_hours(self) -> float:
        return sum(r.projected_hours for r in self.runs)

    @property
    def done_hours(self) -> float:
        """Projected V100 GPU-hours done: finished runs whole, e/E of the others."""
        return sum(r.projected_hours * r.done_fraction for r in self.runs)

    @property
    def rate(self) -> float | None:
        """Projected V100 GPU-hours done per wall-clock hour since the first run started (None before)."""
        starts = [r.started for r in self.runs if r.started is not None]
        if not starts or self.now <= min(starts):
            return None
        return self.done_hours / ((self.now - min(starts)) / 3600.0)

    @property
    def seconds_to_finish(self) -> float | None:
        """Wall seconds left at the current rate, while a run is running (None otherwise)."""
        rate = self.rate
        if not rate or not any(r.state == "running" for r in self.runs):
            return None
        return (self.projected_hours - self.done_hours) / rate * 3600.0

    def as_dict(self) -> dict:
        finish = self.seconds_to_finish
        return {
            "config": self.config,
            "time": iso_time(self.now),
            "jobs": len(self.runs),
            "counts": self.counts(),
            "experiments": [
                {
                    "experiment": name,
                    "label": experiment_label(name),
                    "jobs": len(paths),
                    **self.counts(self.runs_of(paths)),
                }
                for name, paths in self.groups.items()
            ],
            "device_hours_spent": self.device_hours,
            "device": self.device_label,
            "scaled_down": self.scaled_down,
            "workflow_time_left": self.workflow,
            "projected_v100_hours": self.projected_hours,
            "projected_v100_hours_done": self.done_hours,
            "projected_v100_hours_left": self.projected_hours - self.done_hours,
            "rate_v100_hours_per_hour": self.rate,
            "seconds_to_finish": finish,
            "projected_finish": iso_time(self.now + finish) if finish is not None else None,
            "runs": [asdict(r) for r in self.runs],
        }

    def runs_of(self, paths: list[str]) -> list[RunStatus]:
        by_path = {r.run: r for r in self.runs}
        return [by_path[p] for p in paths]


# --------------------------------------------------------------------------------------------- one run
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


def without_controls(text: str, keep_returns: bool = False) -> str:
    """``text`` without what could move a terminal's cursor or change its colours: escape sequences removed, other
    control characters as spaces (carriage returns kept where ``keep_returns``)."""
    return (_CONTROLS_BUT_RETURNS if keep_returns else _CONTROLS).sub(" ", _ESCAPES.sub("", text))


def shown(text, limit: int = NOTE_CHARS) -> str:
    """A text from a run's files (an error, a log line, a host name) on one line, without control characters
    (:func:`without_controls`), cut at ``limit`` characters, saying so."""
    text = " ".join(without_controls(str(text)).split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut: {len(text):,} characters in all]"


def last_line(path: Path) -> str | None:
    """The last non-empty line of a text file (its last :data:`LOG_TAIL_BYTES` read, lines split at newlines only)
    without control characters but its carriage returns (:func:`without_controls`), None if there is none or the file
    is absent; a file that is not a regular one (a FIFO, a link) is a
    :class:`~softmax_bottleneck.readback.ReadbackError` naming it."""
    try:
        tail = readback.read_tail(path, LOG_TAIL_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    for line in reversed(tail.split("\n")):
        line = without_controls(line, keep_returns=True)
        if line.strip(" \r"):
            return line
    return None


def log_event(line: str | None) -> tuple[str | None, str | None]:
    """``(error, stop)`` read from a log's last line: the trainer's one-line failure (``train: ...`` on a bare line,
    as ``SystemExit`` ends the command), a traceback's last line or a logged ERROR; or its pre-emption warning / a
    signal that ended the command. A logged line below ERROR (the heartbeat's ``train: still working, 4m 21s in``)
    says the command was still at work: neither. A line that carriage
    returns cut into parts (a progress bar, a CRLF line) says what its last part saying anything says."""
    for part in reversed((line or "").split("\r")):
        event = _line_event(part.strip())
        if event != (None, None):
            return event
    return None, None


def _line_event(line: str) -> tuple[str | None, str | None]:
    if not line:
        return None, None
    logged = LOG_LINE.match(line)  # the package's log format: the message, without the time and logger
    if logged:
        # a logged line below ERROR is the command still at work (its heartbeat "train: still working, ..." too),
        # unless it says the command was stopped; its failures are logged as errors or end it on a bare line
        level, message = logged.groups()
        if level in ("ERROR", "CRITICAL"):
            return message, None
        return (None, message) if "pre-empted (" in message or "died of signal" in message else (None, None)
    if line.startswith("train: "):
        return line, None
    if line.startswith("KeyboardInterrupt"):  # Ctrl-C before the trainer could save a state: resumable
        return None, line
    first = line.split(":", 1)[0]
    if ":" in line and " " not in first and first.endswith(("Error", "Exception", "Interrupt", "Exit")):
        return line, None
    if "pre-empted (" in line or "died of signal" in line:
        return None, line
    return None, None


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_alive(pid, host, since: float | None = None) -> bool | None:
    """Whether the training process ``pid`` still runs: None when it ran on another host (or is unknown). On Linux a
    process started after ``since`` (the attempt's start) is another one that was given the same PID."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or host != platform.node():
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))  # fmt: skip
    except FileNotFoundError:
        return False
    except (OSError, StopIteration, ValueError, IndexError):
        return pid_exists(pid)
    started = boot + int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return since is None or started <= since + 2.0


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


# --------------------------------------------------------------------------------------------- the study
def groups(study: Study) -> dict[str, list[str]]:
    """Experiment (then each sweep, then the analyses' reference models) → its run folders, in the plan's order."""
    members = study.members()
    names = [*study.experiments, *(SWEEP_PREFIX + name for name in study.sweeps), "analysis"]
    out = {name: [path for path in study.jobs if name in members[path]] for name in names}
    return {name: paths for name, paths in out.items() if paths}


def study_status(study: Study, *, directory=".", config: str = DEFAULT_CONFIG, retry_options: str = "",
                 now: float | None = None) -> StudyStatus:  # fmt: skip
    """Every training job of ``study`` read from its run folder under ``directory``."""
    root, now = Path(directory), time.time() if now is None else now
    rank_name = analysis_names(study.config)[0]
    members = study.members()
    runs = []
    for path, run in study.jobs.items():
        base = RunStatus(
            run=path, dataset=run.dataset, variant=run.variant, schedule=run.schedule, seed=run.seed, tag=run.tag,
            experiments=members[path], state="not started", epochs=int(run.hyperparameters["epochs"]),
            projected_hours=gpu_hours(run),
        )  # fmt: skip
        status = read_run_status(root / path, root / TRAIN_LOG.format(**run.wildcards), rank_name, base, now)
        if status.state in ("failed", "stalled"):
            status.retry = f"snakemake {path}/model.pt {retry_options}".strip()
        runs.append(status)
    scaled = any(run.hyperparameters.get("train_tokens") is not None for run in study.jobs.values())
    return StudyStatus(config=config, now=now, runs=runs, groups=groups(study), scaled_down=scaled,
                       workflow=workflow_time_left(study, root))  # fmt: skip


def workflow_time_left(study: Study, root: Path) -> dict | None:
    """What the terminal of the workflow running ``study`` in ``root`` last wrote of the time left (every job still
    to run: :mod:`softmax_bottleneck.cluster.time_left`), None where no workflow run of it wrote any; ``{"error":
    <one line>}`` for a file that is not one."""
    logs = root / output_roots(study.config)[2]
    try:
        written = workflow_run.read_time_left(logs / workflow_run.TIME_LEFT)
        record = workflow_run.read(logs / workflow_run.RECORD) if written else None
    except (OSError, readback.ReadbackError) as err:
        return {"error": str(err)}
    return written if written and record and written["written"] >= record["started"] else None


def state_digest(status: StudyStatus) -> str:
    """A short digest of every run's state and epoch: it changes when the study moves on (the workflow's progress
    page re-renders then, and only then)."""
    import hashlib

    text = "\n".join(f"{r.run} {r.state} {r.epoch}" for r in status.runs)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- text
def experiment_label(name: str) -> str:
    return EXPERIMENT_LABELS.get(name, name)


def iso_time(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _ago(now: float, t: float | None) -> str:
    return "never" if t is None else f"{duration_text(now - t)} ago"


def _ppl(value) -> str:
    return "—" if value is None else f"{value:,.2f}"


def counts_rows(status: StudyStatus) -> list[dict]:
    """Per experiment its jobs and how many are in each state (``unreadable`` only where a run is); then the distinct
    jobs."""
    rows = [
        {"experiment": experiment_label(name), "jobs": len(paths), **status.counts(status.runs_of(paths))}
        for name, paths in status.groups.items()
    ]
    rows.append({"experiment": "total (distinct jobs)", "jobs": len(status.runs), **status.counts()})
    if not rows[-1]["unreadable"]:
        for row in rows:
            del row["unreadable"]
    return rows


def counts_frame(status: StudyStatus):
    """:func:`counts_rows` as a ``pandas.DataFrame``."""
    import pandas as pd

    return pd.DataFrame(counts_rows(status))


def counts_table(status: StudyStatus) -> str:
    """:func:`counts_rows` as Markdown (tabulate, as ``DataFrame.to_markdown`` writes it, without importing pandas)."""
    from tabulate import tabulate

    rows = counts_rows(status)
    colalign = ("left", *["right"] * (len(rows[0]) - 1))
    return tabulate(rows, headers="keys", tablefmt="pipe", colalign=colalign)


def run_line(r: RunStatus, now: float) -> str:
    """One run on one line: its folder, then what its state says."""
    if r.state == "finished":
        rank = "" if r.press_rank is None else f", Press' rank {r.press_rank:.0f}"
        detail = f"test ppl {_ppl(r.test_ppl)}{rank}" + (f" ({r.note})" if r.note else "")
    elif r.state == "running":
        left = "" if r.seconds_left is None else f", about {duration_text(r.seconds_left)} left"
        detail = (f"epoch {r.epoch or 0}/{r.epochs}, best valid ppl {_ppl(r.best_valid_ppl)}{left}, "
                  f"last write {_ago(now, r.last_write)}")  # fmt: skip
    elif r.state == "not started":
        detail = f"{r.epochs} epochs, {r.projected_hours:,.1f} V100 GPU-hours projected"
    elif r.state == "unreadable":
        detail = r.note
    else:
        epoch = f"epoch {r.epoch}/{r.epochs}, " if r.epoch is not None else ""
        detail = f"{epoch}{r.note}; last write {_ago(now, r.last_write)}; retry: {r.retry}"
    return f"  {r.run}  {detail}"


def gpu_lines(status: StudyStatus) -> list[str]:
    """The time spent (on CPU or GPU, as the finished runs say), the plan's V100 GPU-hours (not for scaled-down runs,
    whose cost the paper's times do not tell), the projected finish of the trainings, and the workflow's own time left
    of every job still to run where its terminal wrote one."""
    label = status.device_label
    hours = f"{status.device_hours:,.2f} {label}-hours"
    spent = f"{label[0].upper()}{label[1:]} time spent: {hours} (the runs' own epoch times)."
    if status.scaled_down:
        return [f"{spent} These runs read the first tokens of their data only (the small scale): the plan's V100 "
                "GPU-hours do not apply to them.", *workflow_lines(status)]  # fmt: skip
    finish = status.seconds_to_finish
    lines = [
        f"{spent} The plan projects {status.projected_hours:,.0f} V100 GPU-hours: {status.done_hours:,.1f} done "
        f"(finished runs, and e/E of the others), {status.projected_hours - status.done_hours:,.1f} left."
    ]
    if finish is not None:
        lines.append(
            f"Projected finish at the current rate ({status.rate:,.2f} projected V100 GPU-hours per hour since the "
            f"first run started): in about {duration_text(finish)}, {iso_time(status.now + finish)}."
        )
    elif any(r.state == "running" for r in status.runs):
        lines.append("Projected finish: known once a running run has finished an epoch.")
    else:
        lines.append("Projected finish: none while no run is running.")
    return [*lines, *workflow_lines(status)]


def workflow_lines(status: StudyStatus) -> list[str]:
    """The workflow's time left of every job still to run (analyses, tables and figures too), as its terminal last
    wrote it; nothing where no workflow run of this study wrote one."""
    if not status.workflow:
        return []
    if "error" in status.workflow:
        return [f"Time left of the workflow: {status.workflow['error']}"]
    when = status.workflow["written"]
    return [f"The workflow running this study, at {time.strftime('%H:%M', time.localtime(when))} "
            f"({_ago(status.now, when)}): {status.workflow['line']}."]  # fmt: skip


def status_text(status: StudyStatus, *, every_run: bool = False) -> str:
    """The one-screen view (``every_run``: every run of the plan, grouped by state)."""
    counts = status.counts()
    summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [f"Status of {status.config} at {iso_time(status.now)}: {len(status.runs)} training jobs: {summary}.", ""]
    lines += [counts_table(status), "", *gpu_lines(status)]
    for state in STATES if every_run else LISTED_STATES:
        runs = [r for r in status.runs if r.state == state]
        if not runs:
            continue
        lines += ["", f"{state} ({len(runs)}):"]
        limit = len(runs) if every_run else LISTED
        lines += [run_line(r, status.now) for r in runs[:limit]]
        if len(runs) > limit:
            lines.append(f"  … and {len(runs) - limit} more (--runs lists every run)")
    if not every_run:
        lines += ["", "Every run, finished and not started too: --runs; for scripts: --json."]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.description = (
        "Where every training run of a configuration stands, read from its run folder alone (never starting, "
        "locking or changing a run): finished, running, stalled, failed, unreadable, not started; per experiment; "
        "GPU time spent against the plan's projection and the projected finish."
    )
    from softmax_bottleneck.study.config_file import add_config_option

    add_config_option(parser, "whose runs to follow", follows=True)
    parser.add_argument("--directory", default=".", metavar="DIR",
                        help="the workflow's working directory, holding results/ and logs/ (default: .)")  # fmt: skip
    parser.add_argument("--runs", action="store_true", help="list every run, not only the running, stalled and failed")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")


def run_cli(args) -> int:
    from softmax_bottleneck.study import config as study_config

    study, source = study_config.load_study(args, "status", follow=True)
    if study is None:
        return 1
    retry = study_config.snakemake_options(args)
    status = study_status(study, directory=args.directory, config=source, retry_options=retry)
    if args.json:
        print(json.dumps(status.as_dict(), indent=1))
    else:
        print(status_text(status, every_run=args.runs))
    return 0
