"""The "train ppl" of Table 2: the authors' logging-interval bookkeeping (KIT ``main.py``, ``train()``).

After every update the batch counter is incremented and the position advanced by the sampled
``seq_len``; then an interval closes

* when ``batch % log_interval == 0``: its mean is the summed batch losses / ``log_interval``;
* else when the position has passed the end of the data (``position >= rows``): the epoch's last,
  partial interval, averaged over ``batch % log_interval`` batches.

An epoch that ends 1–2 rows short of the end (``rows − 2 <= position < rows``) logs no final
interval: its last partial interval is dropped, as in the KIT. The epoch's train loss is the mean of
the logged interval means (summed in order, divided by their number), and "train ppl" is its exp.
Where the KIT would divide by zero (an epoch that logs no interval at all) the mean of the epoch's
batch losses is used instead.
"""

from __future__ import annotations

import math


def interval_batches(batch: int, position: int, rows: int, log_interval: int) -> int:
    """Batches averaged by the interval that closes after ``batch`` updates at ``position``; 0 if none closes."""
    if batch % log_interval == 0:
        return log_interval
    if position >= rows:
        return batch % log_interval
    return 0


def epoch_train_loss(interval_means: list[float], pending_sum: float, pending_batches: int) -> float:
    """Mean of the logged interval means; without any, ``pending_sum / pending_batches`` (see module docstring)."""
    if interval_means:
        total = 0.0
        for mean in interval_means:
            total += mean
        return total / len(interval_means)
    return pending_sum / pending_batches if pending_batches else math.nan
