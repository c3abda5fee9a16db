"""A command's heartbeat in its log: after a minute without a log line, one line saying that it still works and for
how long, so that a job's log never looks dead while a long step runs (an SVD, a validation, a figure).

``python -m softmax_bottleneck`` starts it (:func:`start`) once its logging is set up; a daemon thread, it ends with
the command. It writes only where the command has been silent for :data:`SECONDS`: a training, which logs every few
hundred batches, rarely needs it.
"""

from __future__ import annotations

import logging
import threading
import time

from softmax_bottleneck.durations import duration_text

#: seconds of silence in a command's log before a heartbeat
SECONDS = 60.0


class _LastLine(logging.Filter):
    """Notes when the last record passed (a filter of the command's log handlers that lets every record through)."""

    def __init__(self) -> None:
        super().__init__()
        self.last = time.monotonic()

    def filter(self, record: logging.LogRecord) -> bool:
        self.last = time.monotonic()
        return True


def start(command: str, seconds: float = SECONDS, logger: logging.Logger | None = None) -> threading.Thread:
    """Log ``<command>: still working, 3m 00s in`` after every ``seconds`` without a record on ``logger``'s handlers
    (default: the root logger's); returns the daemon thread."""
    logger = logger or logging.getLogger()
    last = _LastLine()
    for handler in logger.handlers:
        handler.addFilter(last)
    started = time.monotonic()
    out = logging.getLogger("softmax_bottleneck.heartbeat") if logger is logging.getLogger() else logger

    def beat() -> None:
        while True:
            time.sleep(min(5.0, seconds / 4))
            if time.monotonic() - last.last >= seconds:
                out.info("%s: still working, %s in", command, duration_text(time.monotonic() - started))

    thread = threading.Thread(target=beat, name=f"{command}-heartbeat", daemon=True)
    thread.start()
    return thread
