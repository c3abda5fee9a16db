"""SIGTERM and SIGINT (a scheduler's pre-emption, a time limit, Ctrl-C) as a flag that a training checks between
batches, so that it saves its state before it stops."""

from __future__ import annotations

import signal


class StopFlag:
    """Turns SIGTERM/SIGINT into a flag checked between batches."""

    def __init__(self):
        self.signum: int | None = None
        self._previous: dict = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, _frame):
        self.signum = signum

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
