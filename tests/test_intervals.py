"""Table 2's "train ppl": the authors' interval bookkeeping, on scripted batch losses and lengths."""

from __future__ import annotations

import csv
import itertools
import logging
import math

import pytest
from conftest import TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.training import intervals
from softmax_bottleneck.training.trainer import Trainer

ROWS = 600  # tiny_corpus(tokens=3000): 2,400 training tokens in 4 columns
LOG_INTERVAL = 5
# scripted seq_len per batch, one list per epoch; the epoch's loop runs while position < ROWS - 2
EPOCHS = [
    [10] * 58 + [20],  # 59 batches, ends at 600 >= ROWS: 11 full intervals + the last 4 batches logged
    [10] * 58 + [19],  # 59 batches, ends at 599 < ROWS: 11 full intervals, the last 4 batches dropped
    [10] * 55 + [43, 10],  # 57 batches: 593 < 598 goes on, 603 >= ROWS: the last 2 batches logged
    [150, 150, 150, 149],  # 4 batches ending at 599: no interval at all (the KIT would divide by zero)
]


def kit_train_loss(lengths: list[int], losses: list[float]) -> float:
    """The KIT's ``train()`` loop, transcribed: its epoch_raw_loss / logged_counter."""
    total, epoch_sum, logged, batch, i, k = 0.0, 0.0, 0, 0, 0, 0
    while i < ROWS - 1 - 1:
        total += losses[k]
        batch += 1
        i += lengths[k]
        k += 1
        if batch % LOG_INTERVAL == 0:
            epoch_sum, logged, total = epoch_sum + total / LOG_INTERVAL, logged + 1, 0.0
        elif i >= ROWS:
            epoch_sum, logged, total = epoch_sum + total / (batch % LOG_INTERVAL), logged + 1, 0.0
    if logged == 0:  # ZeroDivisionError in the KIT; documented fallback: the mean over the epoch's batches
        return sum(losses[:batch]) / batch
    return epoch_sum / logged


def test_interval_rules():
    assert intervals.interval_batches(200, 10, 1000, 200) == 200
    assert intervals.interval_batches(201, 10, 1000, 200) == 0
    assert intervals.interval_batches(203, 1000, 1000, 200) == 3  # passed the end: last partial interval
    assert intervals.interval_batches(203, 999, 1000, 200) == 0  # 1 row short: dropped, as in the KIT
    assert intervals.interval_batches(400, 1005, 1000, 200) == 200  # a full interval wins
    assert intervals.epoch_train_loss([1.0, 2.0, 4.5], 99.0, 3) == 2.5
    assert intervals.epoch_train_loss([], 6.0, 3) == 2.0
    assert math.isnan(intervals.epoch_train_loss([], 0.0, 0))


@pytest.fixture
def scripted(monkeypatch):
    """Script every batch's length and every chunk's raw NLL (the graph stays the model's)."""
    from softmax_bottleneck.training import step

    lengths = iter(itertools.chain.from_iterable(EPOCHS + [[10] * 60]))
    values = iter(1.0 + 0.01 * (k % 97) for k in itertools.count())
    chunks = TINY["batch_size"] // TINY["small_batch_size"]
    state = {"n": 0, "value": 0.0}

    def nll(log_prob, targets):
        if state["n"] % chunks == 0:
            state["value"] = next(values)
        state["n"] += 1
        real = step.chunk_nll.__wrapped__(log_prob, targets)
        return real * 0.0 + state["value"]

    nll.__wrapped__ = step.chunk_nll
    monkeypatch.setattr(step, "chunk_nll", nll)
    monkeypatch.setattr(step, "sample_seq_len", lambda hp: next(lengths))
    return values


def test_train_ppl_follows_the_kit_on_scripted_losses(tmp_path, scripted, caplog):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": len(EPOCHS), "switch_epoch": 9, "lr": 0.1,
                                                  "log_interval": LOG_INTERVAL})  # fmt: skip
    corpus = tiny_corpus(tokens=3000)
    with caplog.at_level(logging.INFO, logger="softmax_bottleneck.train"):
        Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=corpus, out_dir=tmp_path).fit()
    with open(tmp_path / "curve.csv", newline="") as handle:
        got = [float(row["train_ppl"]) for row in csv.DictReader(handle)]
    losses = [1.0 + 0.01 * (k % 97) for k in range(1000)]
    expected, start = [], 0
    for lengths in EPOCHS:
        n = 0
        position = 0
        while position < ROWS - 2:
            position += lengths[n]
            n += 1
        expected.append(math.exp(kit_train_loss(lengths, losses[start : start + n])))
        start += n
    assert got == pytest.approx(expected, rel=1e-6)
    ends = [r.getMessage() for r in caplog.records if "end of epoch" in r.getMessage()]
    assert [int(m.split("|")[1].split()[0]) for m in ends] == [59, 59, 57, 4]  # true batch counts
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch   1 |")]
    assert [int(m.split("|")[1].split()[0]) for m in lines][-2:] == [55, 59]
