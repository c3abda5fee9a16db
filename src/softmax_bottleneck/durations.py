"""Durations for log and terminal lines (``42s``, ``7m 05s``, ``3h 20m``, ``2d 04h``); no heavy imports, so a
command that only reports progress starts in a fraction of a second."""

from __future__ import annotations


def duration_text(seconds: float) -> str:
    """``seconds`` for a log line: ``42s``, ``7m 05s``, ``3h 20m``, ``2d 04h``."""
    seconds = max(0, round(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
