"""What each number in a file read back can be (:data:`BOUNDS`), one table for every reader.

A perplexity is at least 1, a loss at least 0, a rank a whole number ≥ 1 (and at most min(rows, columns) of its
matrix: :mod:`softmax_bottleneck.readback` checks the relations between numbers), an epoch within [1,
:data:`MAX_EPOCHS`], a duration within a year, a correlation within [-1, 1]. :func:`violation` says why a value is
impossible for its key or column; :mod:`softmax_bottleneck.readback` turns that into an error naming the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the slack of a bound on a computed (floating-point) number: ``exp(log_softmax)`` of a sure prediction can be
#: 1 + 1e-7 in float32, a mean loss of one −1e-8; a real violation is far larger
ROUNDING = 1e-6


@dataclass(frozen=True)
class Bound:
    """What a number can be: ``low ≤ x ≤ high`` (up to :data:`ROUNDING` for a non-integer), an integer if
    ``integer``; ``what`` says why in words."""

    low: float
    high: float = math.inf
    integer: bool = False
    what: str = ""

    def violation(self, value) -> str | None:
        """Why ``value`` is impossible, or None."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if isinstance(value, int) and abs(value) >= 2**63:  # math.isfinite of a 400-digit int raises OverflowError
            return "is too large to be a number of this package"
        if not math.isfinite(value):
            return "is not finite"
        if self.integer and value != int(value):
            return "is not a whole number"
        slack = 0.0 if self.integer else ROUNDING
        if not self.low - slack <= value <= self.high + slack:
            return f"is impossible ({self.what})"
        return None


PERPLEXITY = Bound(1.0, what="a perplexity is at least 1")
LOSS = Bound(0.0, what="a loss is at least 0")
COUNT = Bound(0, integer=True, what="a count is a whole number ≥ 0")
POSITIVE_COUNT = Bound(1, integer=True, what="a whole number ≥ 1")
#: the most epochs a run may have (the paper trains 1,000; presets.yaml's ``epochs`` declares the same maximum)
MAX_EPOCHS = 100_000
EPOCH = Bound(1, MAX_EPOCHS, integer=True, what=f"epochs count from 1, at most {MAX_EPOCHS:,}")
#: the longest duration a file may hold (an epoch, an analysis): a year, far beyond any run of the study
MAX_SECONDS = 366 * 24 * 3600.0
SECONDS = Bound(0.0, MAX_SECONDS, what="a duration is within [0 s, 1 year]")
#: a process ID (Linux: at most 2**22)
PID = Bound(1, 2**31 - 1, integer=True, what="a process ID is within [1, 2**31 - 1]")
#: a Unix time (seconds since 1970), before 2106
TIMESTAMP = Bound(0.0, 2.0**32, what="a Unix time is within [1970, 2106]")
RANK = Bound(1, integer=True, what="a rank is at least 1 (and at most min(rows, columns) of its matrix)")
SIGMA = Bound(0.0, what="a singular value is at least 0")
FRACTION = Bound(0.0, 1.0, what="within [0, 1]")
CORRELATION = Bound(-1.0, 1.0, what="a correlation is within [-1, 1]")

#: key or column -> its bound, wherever it appears in a file read back (JSON keys and CSV columns alike)
BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(["train_ppl", "valid_ppl", "test_ppl", "perplexity"], PERPLEXITY),
    **dict.fromkeys(["train_loss", "valid_loss", "test_loss", "logp_test_loss"], LOSS),
    **dict.fromkeys(["parameters", "rows", "columns", "softmax_bound", "fused_runs"], POSITIVE_COUNT),
    **dict.fromkeys(["trainable_parameters", "pairs", "found", "not_found", "index", "seed"], COUNT),
    **dict.fromkeys(["epochs", "epochs_run", "best_epoch", "epoch"], EPOCH),
    **dict.fromkeys(["seconds_per_epoch", "seconds", "seconds_rows"], SECONDS),
    **dict.fromkeys(["press_rank", "erank_1e-3", "erank_1e-4", "erank_1e-5"], RANK),
    **dict.fromkeys(["sigma", "sigma_max", "tolerance"], SIGMA),
    **dict.fromkeys(["sigma_normalised", *(f"prob_{k}" for k in range(1, 6))], FRACTION),
    "spearman": CORRELATION,
}


def violation(key: str, value) -> str | None:
    """Why ``value`` cannot be ``key`` (:data:`BOUNDS`), or None (also for a key without a bound, or None)."""
    bound = BOUNDS.get(key)
    return None if bound is None or value is None else bound.violation(value)
