"""Run a command as a supervised child: forward signals, die with the parent, propagate the exit status.

Used by :mod:`softmax_bottleneck.cluster.gpu_lease`: the child inherits the locked descriptor of its
GPU slot, so the slot stays held while the wrapper *or* the child lives.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

log = logging.getLogger("softmax_bottleneck.cluster.gpu_lease")

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def _set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """In the child (before exec): receive ``sig`` when the wrapper dies (Linux only, best effort)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)


def _in_terminal_foreground() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_supervised(command: Sequence[str], env: Mapping[str, str], keep_fd: int | Sequence[int]) -> int:
    """Run ``command`` as a child that inherits ``keep_fd`` (one descriptor or several); returns its exit status
    (``128 + n`` for signal n).

    SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 sent to the wrapper are forwarded to the child (a
    terminal's Ctrl-C, which already reached the child's process group, is not sent twice); the
    child gets SIGTERM if the wrapper dies (``PR_SET_PDEATHSIG``).
    """
    parent = os.getpid()

    def preexec() -> None:
        _set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent:  # the wrapper died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    keep = (keep_fd,) if isinstance(keep_fd, int) else tuple(keep_fd)
    for fd in keep:
        os.set_inheritable(fd, True)
    terminal_sigint = _in_terminal_foreground()
    received: list[int] = []
    proc: subprocess.Popen | None = None

    def forward(signum, _frame) -> None:
        received.append(signum)
        # a terminal's Ctrl-C already reached the child (same foreground process group)
        if signum == signal.SIGINT and terminal_sigint:
            return
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        try:
            proc = subprocess.Popen(list(command), env=dict(env), pass_fds=keep, preexec_fn=preexec)
        except (FileNotFoundError, PermissionError) as exc:
            return _cannot_run(command, exc)
        # a signal that arrived between installing the handlers and Popen returning
        for signum in received:
            if not (signum == signal.SIGINT and terminal_sigint):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signum)
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code < 0:
        log.info("command died of signal %d", -code)
        return 128 - code
    return code


def exec_command(command: Sequence[str]) -> int:
    """Replace this process by ``command`` (no wrapper left); 127/126 if it cannot be run."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except (FileNotFoundError, PermissionError) as exc:
        return _cannot_run(command, exc)
    return 0  # pragma: no cover - exec does not return


def _cannot_run(command: Sequence[str], exc: OSError) -> int:
    """Log why ``command`` could not start; the shell's status: 127 not found, 126 not executable."""
    if isinstance(exc, FileNotFoundError):
        log.error("command not found: %s", command[0])
        return 127
    log.error("command not executable: %s", command[0])
    return 126
