"""SIGTERM and SIGINT stop a command (the analyses, `fetch`) through an exception, so that no partial output is left
behind.

By default SIGTERM (SLURM's pre-emption, ``kill``, Snakemake cancelling a job) ends Python at once and skips every
``finally``; the temporary of an atomic write (``softmax_bottleneck.atomic.atomic_path``, e.g. the multi-GB
memory-mapped ``.npy`` of ``analyze --save-logp``) would stay on disk. Inside :func:`stop_on_signals` both signals
raise :class:`Interrupted` (a ``BaseException``, so no ``except Exception`` swallows it) in the main thread; the
writers' ``finally`` blocks remove their temporaries, and the command exits with ``128 + signal`` after one line.
A second signal while cleaning up is ignored. Python runs the handler between bytecodes: a long call into LAPACK
or CUDA finishes first (no temporary is open during the final SVD of ``analyze``).
"""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals(prog: str):
    """Turn SIGTERM/SIGINT into :class:`Interrupted` inside the block; on it, print one line and exit ``128 + sig``."""
    fired: list[int] = []

    def handle(signum, _frame):
        if fired:  # already unwinding: let the cleanup finish
            return
        fired.append(signum)
        raise Interrupted(signum)

    previous = {}
    for sig in SIGNALS:
        try:
            previous[sig] = signal.signal(sig, handle)
        except ValueError:  # not the main thread: keep the default behaviour
            pass
    try:
        yield
    except Interrupted as stop:
        print(f"{prog}: stopped by {stop}; partial outputs removed", file=sys.stderr)
        raise SystemExit(128 + stop.signum) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
