"""What a run folder shows of a training besides the model: ``curve.csv``, the progress file, the time left.

``curve.csv`` (a declared output, written at the end): one row per epoch, columns :data:`CURVE_COLUMNS`; ``seconds``
is the epoch's training time (across attempts, validation excluded), ``is_best`` marks the epochs whose validation
loss was the best so far.

``.resume/progress.json`` (not a declared output; format :data:`PROGRESS_FORMAT`): written atomically by the trainer
when an attempt starts or resumes, after every epoch, and when its epochs stop on a signal or an error
(:meth:`ProgressFile.attempt`); removed with the resume state when the run finishes. It lets ``status``
(:mod:`softmax_bottleneck.study.status`) say where a run stands without loading its resume state or model::

    {"format": 1, "dataset": "ptb", "variant": "mos", "schedule": "et", "seed": 28,
     "epochs": 1000,                  # the run's epoch cap (E)
     "epoch": 3,                      # epochs completed
     "phase": "sgd", "best_valid_ppl": 118.09, "best_epoch": 3,
     "checkpoint_seconds": 600.0,     # the resume state is written at least this often while training
     "started": 1764150000.0,         # Unix time of the run's first attempt; "attempt_started": of this one
     "attempts": 2, "host": "node17", "pid": 4242, "updated": 1764150620.5,
     "stopped": null,                 # "signal 15 at epoch 4, batch 120": the attempt was interrupted, state saved
     "error": null,                   # the one-line error that ended the attempt
     "curve": [{"epoch": 1, "valid_ppl": 160.2, "seconds": 98.7, "wall_seconds": 101.4}, ...]}

``wall_seconds`` is the epoch's wall time with its validation (of the attempt that ran it: an epoch resumed midway
counts from the resume); the time left is the epochs to go × the mean of these (:func:`time_left_seconds`).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import platform
import time
from contextlib import contextmanager
from pathlib import Path

from softmax_bottleneck import bounds, readback
from softmax_bottleneck.atomic import atomic_write_json
from softmax_bottleneck.durations import duration_text

log = logging.getLogger("softmax_bottleneck.train")

CURVE_COLUMNS = ("epoch", "phase", "train_ppl", "valid_loss", "valid_ppl", "seconds", "is_best")
PROGRESS_NAME = "progress.json"
PROGRESS_FORMAT = 1


def curve_csv(rows: list[dict]) -> str:
    """``curve.csv``'s text: a header of :data:`CURVE_COLUMNS`, one line per epoch."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CURVE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def time_left_seconds(epoch: int, epochs: int, walls: list[float]) -> float:
    """The epochs still to run × the mean wall time (training + validation) of ``walls`` (0 without any; the runs
    train every epoch: NT-ASGD and ET-ASGD only switch the optimiser)."""
    return (epochs - epoch) * (sum(walls) / len(walls)) if walls else 0.0


def time_left_text(epoch: int, epochs: int, walls: list[float]) -> str:
    """``epoch 3/40, about 1h 02m left`` (:func:`time_left_seconds` of the epochs this process ran)."""
    left = time_left_seconds(epoch, epochs, walls)
    return f"epoch {epoch}/{epochs}, " + ("done" if epoch >= epochs else f"about {duration_text(left)} left")


def read_progress(path: str | os.PathLike) -> dict | None:
    """A progress file's content, or None where it is absent, unreadable or not of this format (it only informs). It
    is read as every file read back is (:func:`softmax_bottleneck.readback.load_json`: bounded, a regular file only,
    no key twice); its values are the caller's to check (``status``: :func:`softmax_bottleneck.readback.check_progress`;
    the trainer keeps what it can use of an earlier attempt's)."""
    try:
        data = readback.load_json(path)
    except (OSError, ValueError):  # ReadbackError is a ValueError
        return None
    if not isinstance(data, dict) or data.get("format") != PROGRESS_FORMAT or not isinstance(data.get("curve"), list):
        return None
    return data


def _finite(value) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class ProgressFile:
    """The trainer's writer of ``<run>/.resume/progress.json`` (format in the module docstring).

    A resumed attempt keeps the first attempt's start time and the wall times of the epochs it resumes after.
    Writing never stops a training: a failed write is logged and skipped (the file only informs).
    """

    def __init__(self, path: Path, *, run: dict, epochs: int, checkpoint_seconds: float):
        self.path = Path(path)
        previous = read_progress(self.path) or {}
        self.run, self.epochs, self.checkpoint_seconds = dict(run), int(epochs), float(checkpoint_seconds)
        self.attempt_started = time.time()
        # what a previous attempt wrote is carried over only where possible (a start not in the future, a duration
        # within readback's bounds): a file edited to impossible values would otherwise make `status` call this
        # running run unreadable
        started = previous.get("started")
        possible = bounds.TIMESTAMP.violation(started) is None and started <= self.attempt_started
        self.started = float(started) if possible else self.attempt_started
        attempts = previous.get("attempts")
        self.attempts = (attempts if isinstance(attempts, int) and 0 <= attempts < 10**6 else 0) + 1
        self.walls: dict[int, float] = {}
        for row in previous.get("curve", []):
            if isinstance(row, dict) and bounds.EPOCH.violation(row.get("epoch")) is None:
                if bounds.SECONDS.violation(row.get("wall_seconds")) is None:
                    self.walls[row["epoch"]] = float(row["wall_seconds"])

    def epoch_done(self, epoch: int, wall_seconds: float) -> None:
        self.walls[epoch] = float(wall_seconds)

    def write(self, progress, *, stopped: str | None = None, error: str | None = None) -> None:
        """Write the file for ``progress`` (a :class:`~softmax_bottleneck.training.state.Progress`)."""
        curve = [
            {
                "epoch": row["epoch"],
                "valid_ppl": _finite(row["valid_ppl"]),
                "seconds": _finite(row["seconds"]),
                "wall_seconds": self.walls.get(row["epoch"], _finite(row["seconds"])),
            }
            for row in progress.curve
        ]
        best = next((row["valid_ppl"] for row in progress.curve if row["epoch"] == progress.best_epoch), None)
        content = {
            "format": PROGRESS_FORMAT,
            **self.run,
            "epochs": self.epochs,
            "epoch": progress.epoch,
            "phase": progress.phase,
            "best_valid_ppl": _finite(best),
            "best_epoch": progress.best_epoch,
            "checkpoint_seconds": self.checkpoint_seconds,
            "started": self.started,
            "attempt_started": self.attempt_started,
            "attempts": self.attempts,
            "host": platform.node(),
            "pid": os.getpid(),
            "updated": time.time(),
            "stopped": stopped,
            "error": error,
            "curve": curve,
        }
        try:
            atomic_write_json(content, self.path)
        except (OSError, ValueError) as err:
            log.warning("%s: progress file not written (%s); training goes on", self.path, err)

    @contextmanager
    def attempt(self, progress, *, stops: tuple[type[BaseException], ...] = ()):
        """Write the file now; if the block ends in an exception, again with why: ``stopped`` for one of ``stops``
        (a signal: the state was saved), else ``error`` (its first line)."""
        self.write(progress)
        try:
            yield
        except stops as stop:
            self.write(progress, stopped=str(stop))
            raise
        except Exception as err:
            self.write(progress, error=readback.error_line(err))
            raise

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
