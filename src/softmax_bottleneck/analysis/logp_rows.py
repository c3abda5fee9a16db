"""One pass over a log-P matrix, chunk of rows by chunk of rows, as ``analyze`` (the study's models) and
``analyze-lm`` (a Hugging Face model) both make it: each chunk checked finite, fed to the rank's stream, written to the
saved matrix, and summed into the test loss, −Σ log P(target), and the worst |log-normaliser|, max |logsumexp(row)|
(0 up to rounding for a normalised row).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class NonFiniteLogP(ValueError):
    """The model gave a NaN or infinite log-probability (the message names the row)."""


@dataclass
class RowTotals:
    """What a pass over the rows adds up: rows, −Σ log P(target), max |logsumexp(row)|, seconds in the stream's
    updates."""

    rows: int = 0
    nll_sum: float = 0.0
    worst_norm: float = 0.0
    seconds_update: float = 0.0


def feed_rows(chunks: Iterable, stream, out=None, progress: Callable[[int], None] | None = None) -> RowTotals:
    """Feed ``chunks`` of ``(log P [k, V], targets [k])`` (torch) into ``stream`` (a :class:`.rank.RankStream`) and
    ``out`` (the saved matrix's rows, or None); ``progress(rows done)`` after each chunk. A non-finite entry stops the
    pass with :class:`NonFiniteLogP` naming its row."""
    import torch

    totals = RowTotals()
    for log_prob, targets in chunks:
        if not torch.isfinite(log_prob).all():
            bad = totals.rows + int((~torch.isfinite(log_prob)).any(1).nonzero()[0])
            raise NonFiniteLogP(f"log-P row {bad} has non-finite entries; the SVD needs a finite matrix")
        totals.nll_sum -= float(log_prob.gather(1, targets[:, None]).double().sum())
        totals.worst_norm = max(totals.worst_norm, float(torch.logsumexp(log_prob.double(), 1).abs().max()))
        started = time.monotonic()
        stream.update(log_prob)
        totals.seconds_update += time.monotonic() - started
        if out is not None:
            out[totals.rows : totals.rows + len(log_prob)] = log_prob.cpu().numpy()
        totals.rows += len(log_prob)
        if progress is not None:
            progress(totals.rows)
    return totals
