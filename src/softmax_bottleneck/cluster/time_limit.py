"""A partition's time limit as the profile gives it (``set-resources: train: max_runtime:``): whole minutes, or one
of SLURM's own time formats as ``sinfo -o "%P %l"`` prints them, converted to whole minutes (seconds dropped: a job
never asks more than the limit).

SLURM's formats (``sbatch --time``): ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.
"""

from __future__ import annotations

import re

_FORMAT = re.compile(
    r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$"
)


def time_limit_minutes(value) -> int:
    """``value`` (an int of minutes, or a SLURM time string) in whole minutes ≥ 1; a :class:`ValueError` saying what
    is expected otherwise (``infinite``, ``24h``, ``1440.5``, 0)."""
    if isinstance(value, bool):
        raise ValueError("expected the partition's time limit in whole minutes, or as sinfo prints it (1-00:00:00)")
    if isinstance(value, int):
        minutes = value
    else:
        match = _FORMAT.match(str(value).strip())
        if match is None:
            why = (
                "; where sinfo says infinite, give the longest time one job may hold a GPU, e.g. 1440"
                if str(value).strip().lower() in ("infinite", "unlimited")
                else ""
            )
            raise ValueError(f"expected the partition's time limit in whole minutes, or as sinfo prints it "
                             f"(1-00:00:00){why}")  # fmt: skip
        parts = {key: int(text) for key, text in match.groupdict().items() if text is not None}
        if "days" in parts:
            minutes = parts["days"] * 1440 + parts["dh"] * 60 + parts.get("dm", 0)
        elif "c" in parts:  # H:M:S
            minutes = parts["a"] * 60 + parts["b"]
        else:  # M or M:S
            minutes = parts["a"]
    if minutes < 1:
        raise ValueError("expected a time limit of at least one minute")
    return minutes
