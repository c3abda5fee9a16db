"""The workflow's terminal: a Snakemake logger plug-in, ``--logger softmax-bottleneck`` (named by profiles/default).

Snakemake 9 hands every log record to the logger plug-ins that ``--logger`` names (the interface
``snakemake-interface-logger-plugins``); one that writes to the terminal takes the place of Snakemake's own terminal
handler, while Snakemake's log file in ``.snakemake/log/`` keeps every line. Snakemake finds logger plug-ins by their
module name, ``snakemake_logger_plugin_<name>``: this package ships ``snakemake_logger_plugin_softmax_bottleneck``
beside ``softmax_bottleneck`` (``pip install -e .`` installs both), whose ``LogHandler`` is :class:`LogHandler` here.

What it prints, in a run (not a dry run, not ``--verbose``):

* a job's start, one line: ``[15:23:04] job 12: train dataset=ptb, variant=mos (37 of 186 steps done)``, the count
  being Snakemake's "N of M steps done" when the job started;
* at the first job, after each training, after the last job and at most once a minute after any other job: how many
  trainings and jobs are done and the time left of every job still to run (:mod:`.time_left`, from the record the
  workflow writes at its start, :mod:`softmax_bottleneck.cluster.workflow_run`);
* a heartbeat after a minute without a line while a job runs: ``[15:31:04] running: robustness dataset=ptb, ...
  for 8m 10s; trainings: ...; about 3m left``;
* everything else as Snakemake formats it (its formatter and its filter, so ``--quiet`` and ``-p`` act as usual):
  warnings, errors with the failed job's log, the job statistics, the last step count.

Left out: Snakemake's job blocks (input, output, reason: 10 or more lines a job), "Finished jobid", the scheduler's
"Select jobs to execute..." and "Execute N jobs..." of every round, the output bookkeeping (:data:`LEFT_OUT_MESSAGES`)
and the step counts but the last. Snakemake's ``--quiet`` choices cannot do this (checked with Snakemake 9.27):
``rules`` also hides the error blocks and the failed job's log, ``progress`` the step count. A dry run and
``--verbose`` print Snakemake's own blocks, with the progress lines.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time

from snakemake_interface_logger_plugins.base import LogHandlerBase

from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.cluster.time_left import JUMP_SECONDS, TRAINING, Clock
from softmax_bottleneck.durations import duration_text

#: the beginnings of plain messages (no event) left out: the scheduler's of every round and each job's output
#: bookkeeping (write-protected, touched, temporary removed)
LEFT_OUT_MESSAGES = (
    "Select jobs to execute...",
    "Write-protecting output file ",
    "Touching output file ",
    "Removing temporary output ",
)
#: Snakemake's events (``LogEvent`` names) left out; a job's start (JOB_INFO) is one line of :func:`job_line` instead
LEFT_OUT = {"JOB_FINISHED", "JOB_STARTED"}
#: seconds without a terminal line, while a job runs, before a heartbeat; also the least time between two progress
#: lines after jobs other than trainings
HEARTBEAT_SECONDS = 60.0
#: how often the heartbeat looks at the silence (seconds)
POLL_SECONDS = 5.0
#: running jobs a heartbeat names (the longest-running first)
NAMED = 2
_COLOURS = {"ERROR": "\033[31m", "CRITICAL": "\033[35m", "WARNING": "\033[33m"}


def _event(record: logging.LogRecord) -> str | None:
    return getattr(getattr(record, "event", None), "name", None)


#: control characters (C0, DEL, C1): an escape sequence in a wildcard must not reach the terminal
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(text) -> str:
    """``text`` with every control character escaped (``\\x1b[2J`` is printed, not obeyed)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def _what(record: logging.LogRecord) -> str:
    wildcards = getattr(record, "wildcards", None) or {}
    return ", ".join(f"{shown(key)}={shown(value)}" for key, value in wildcards.items())


def job_line(record: logging.LogRecord, steps: tuple[int, int] | None = None) -> str:
    """``[15:23:04] job 12: train dataset=ptb, variant=mos (37 of 186 steps done)`` from a Snakemake JOB_INFO record
    and the last step count (done, total) before it."""
    stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
    what = _what(record)
    count = f" ({steps[0]} of {steps[1]} steps done)" if steps else ""
    return f"[{stamp}] job {getattr(record, 'jobid', '?')}: {shown(getattr(record, 'rule_name', '?'))}" + (
        f" {what}" if what else ""
    ) + count  # fmt: skip


def heartbeat_line(running: dict[int, tuple[float, str]], now: float, progress: str | None) -> str:
    """``[15:31:04] running: robustness ... for 8m 10s, and 1 more; <progress>``; ``running``: jobid → (start,
    label)."""
    oldest = sorted(running.values())
    named = ", ".join(f"{label} for {duration_text(now - start)}" for start, label in oldest[:NAMED])
    more = f", and {len(oldest) - NAMED} more" if len(oldest) > NAMED else ""
    stamp = time.strftime("%H:%M:%S", time.localtime(now))
    return f"[{stamp}] running: {named}{more}" + (f"; {progress}" if progress else "")


class LogHandler(LogHandlerBase):
    """The terminal (module docstring): a Snakemake logger plug-in's handler, writing to stderr (``--stdout``:
    stdout); Snakemake gives it its own filter and formatter."""

    def __post_init__(self) -> None:
        settings = self.common_settings
        self.stream = sys.stdout if getattr(settings, "stdout", False) else sys.stderr
        self.compact = not (getattr(settings, "verbose", False) or getattr(settings, "dryrun", False))
        self.colour = not getattr(settings, "nocolor", False) and bool(getattr(self.stream, "isatty", None)) and \
            self.stream.isatty()  # fmt: skip
        self.steps: tuple[int, int] | None = None
        self.running: dict[int, tuple[float, str]] = {}  # jobid -> (start, label)
        self.clock: Clock | None = None
        self.record = None  # the record's path, once read
        self._record_read = False
        self._lock = threading.RLock()  # the records' thread (Snakemake's queue listener) and the heartbeat's
        self._last_line = self._last_progress = time.time()
        self._skew = time.time() - time.monotonic()  # the wall clock against the monotonic one: a change is a jump
        self._stopped = threading.Event()
        if self.compact:
            threading.Thread(target=self._beat, name="softmax-bottleneck-heartbeat", daemon=True).start()

    # the plug-in interface
    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def close(self) -> None:
        self._stopped.set()
        super().close()

    # writing
    def write(self, text: str, level: str = "INFO") -> None:
        colour = _COLOURS.get(level) if self.colour else None
        with self._lock:
            try:
                self.stream.write((f"{colour}{text}\033[0m" if colour else text) + "\n")
                self.stream.flush()
            except Exception:  # a broken terminal must not stop the workflow
                return
            self._last_line = time.time()

    def _formatted(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        if text and text != "None":
            self.write(text, record.levelname)

    def _progress(self) -> str | None:
        if not self._record_read:  # the workflow names its record at its start (onstart), before any job
            self._record_read = True
            path = workflow_run.path_from_environment()
            if path is not None:
                try:
                    self.clock, self.record = Clock(workflow_run.read(path)), path
                except (OSError, ValueError) as err:  # ReadbackError is a ValueError
                    self.write(f"no time left: {err}", "WARNING")
        return self.clock.line() if self.clock is not None else None

    def _keep(self, line: str) -> None:
        """``line`` beside the record, for ``status`` and the progress page (:func:`workflow_run.write_time_left`)."""
        try:
            workflow_run.write_time_left(self.record, line, self.clock.seconds_left())
        except OSError as err:
            self.write(f"cannot keep the time left beside {self.record}: {err}", "WARNING")

    def _write_progress(self) -> None:
        line = self._progress()
        if line:
            self.write(f"[{time.strftime('%H:%M:%S')}] {line}")  # stamped as every other line
            self._keep(line)
            self._last_progress = time.time()

    # the records
    def emit(self, record: logging.LogRecord) -> None:
        try:
            with self._lock:
                self._emit(record)
        except Exception:  # the terminal must not stop the workflow
            self.handleError(record)

    def _check_clock(self) -> None:
        """Tell the clock of the time left when the wall clock jumped since the last look (:data:`JUMP_SECONDS`)."""
        skew = time.time() - time.monotonic()
        if abs(skew - self._skew) > JUMP_SECONDS:
            self._skew = skew
            if self.clock is not None:
                self.clock.clock_jumped()
            self.running = {jobid: (time.time(), label) for jobid, (_, label) in self.running.items()}

    def _emit(self, record: logging.LogRecord) -> None:
        self._check_clock()
        event = _event(record)
        if event == "JOB_INFO":
            first = self.clock is None and not self._record_read
            jobid = getattr(record, "jobid", None)
            if isinstance(jobid, int):
                self.running[jobid] = (
                    record.created,
                    f"{shown(getattr(record, 'rule_name', '?'))} {_what(record)}".strip(),
                )
            if first:
                self._write_progress()
            if self.clock is not None and isinstance(jobid, int):
                self.clock.start(jobid, record.created)
            self.write(job_line(record, self.steps)) if self.compact else self._formatted(record)
            return
        if event in ("JOB_FINISHED", "JOB_ERROR"):
            jobid = getattr(record, "job_id", getattr(record, "jobid", None))
            self.running.pop(jobid, None)
            if event == "JOB_ERROR" or not self.compact:
                self._formatted(record)
            job = self.clock.finish(jobid, record.created) if self.clock is not None and event == "JOB_FINISHED" \
                else None  # fmt: skip
            if job is not None and (
                job.kind == TRAINING or not self.running and all(j.finished for j in self.clock.jobs.values())
                or time.time() - self._last_progress >= HEARTBEAT_SECONDS
            ):  # fmt: skip
                self._write_progress()
            return
        if event == "PROGRESS":
            self.steps = (getattr(record, "done", 0), getattr(record, "total", 0))
            if not self.compact or self.steps[0] == self.steps[1]:
                self._formatted(record)
            return
        if self.compact and (event in LEFT_OUT or (event is None and str(record.msg).startswith(LEFT_OUT_MESSAGES))):
            return
        self._formatted(record)

    def _beat(self) -> None:
        """Every few seconds: a heartbeat line after :data:`HEARTBEAT_SECONDS` without a line while a job runs."""
        while not self._stopped.wait(POLL_SECONDS):
            with self._lock:
                self._check_clock()
                now = time.time()
                if self.running and now - self._last_line >= HEARTBEAT_SECONDS:
                    progress = self.clock.line(now) if self.clock else None
                    self.write(heartbeat_line(self.running, now, progress))
                    if progress:
                        self._keep(progress)
