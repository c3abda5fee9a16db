"""Text from a run's files as ``status`` shows it (:mod:`.status`): without what could move a terminal's cursor or
change its colours, on one line, cut at :data:`NOTE_CHARS` characters saying so; a log's last line, and what it says
of the attempt that wrote it (failed, stopped, or still at work: :func:`log_event`)."""

from __future__ import annotations

import re
from pathlib import Path

from softmax_bottleneck import readback

#: bytes read from the end of a log for its last line
LOG_TAIL_BYTES = 4096
#: a line of the package's logs (``cli.main``): time, level, logger, message
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: (.*)$")
#: characters of a text from a run's files (an error, a log's last line) shown at most; the rest is cut, saying so
NOTE_CHARS = 300
#: a terminal's escape sequences (CSI ``ESC [ ... letter``, OSC ``ESC ] ... BEL``, and two-character ones)
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
#: control characters (C0, DEL, C1), and all of them but the carriage return
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROLS_BUT_RETURNS = re.compile(r"[\x00-\x0c\x0e-\x1f\x7f-\x9f]")


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
