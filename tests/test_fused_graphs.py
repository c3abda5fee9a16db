"""The fused update through graphs (:mod:`softmax_bottleneck.training.fused_graphs`), with the CPU's stand-in for
CUDA graphs (:class:`Rerun`: a replay runs the captured update again, with what a graph binds): its static buffers
and bookkeeping give every run the numbers of the eager fused update, bit for bit. The CUDA graphs themselves are
measured on a card (``benchmarks/fused_graphs_check.py``)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from test_fused import STUDY_LAYERS, Run, assert_same, fused

from softmax_bottleneck.training import step
from softmax_bottleneck.training.fused_graphs import GraphedFusedUpdates, Rerun
from softmax_bottleneck.training.fused_step import fused_update

#: one seed (lock-step lengths), four output layers, each switching to ASGD at its own update
SPECS = [("softmax", 141, 4), ("ss", 141, 9), ("gss", 141, 30), ("mos", 141, 30)]


def group() -> list[Run]:
    """The runs of :data:`SPECS`, their lengths drawn at most one row over ``bptt`` (more repeats, more replays)."""
    runs = [Run(*spec) for spec in SPECS]
    for run in runs:
        run.hp = {**run.hp, "max_seq_len_delta": 1}
    return runs


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-run"])
def test_graphed_fused_updates_give_every_run_the_eager_fused_numbers(batched):
    """30 updates of 4 runs in lock-step, with ASGD switches at updates 4 and 9 (each drops the graphs): weights,
    ASGD averages, loss sums and hidden states equal the eager fused update's; many updates were replays."""
    updates = 30
    with torch.backends.mkldnn.flags(enabled=False):
        eager = group()
        fused(eager, updates, lambda batches: fused_update(eager, batches, batched=batched))
        graphed = group()
        updater = GraphedFusedUpdates(graphed, Rerun(), batched=batched)
        ways = []

        def graphed_update(batches):
            updater.update(batches)
            ways.append(updater.last)

        fused(graphed, updates, graphed_update)
    for k, (a, b) in enumerate(zip(eager, graphed, strict=True)):
        assert_same(a.outcome(), b.outcome(), f"run {k} ({a.variant})")
    assert sum(updater.counts.values()) == updates
    assert updater.counts["replay"] >= 8 and updater.counts["capture"] >= 3, updater.counts
    # the switches before updates 4 and 9 drop every graph: those two updates run eagerly
    assert ways[4] == "eager" and ways[9] == "eager"


def test_runs_out_of_lock_step_are_refused():
    with torch.backends.mkldnn.flags(enabled=False):
        runs = [Run("softmax", 1, 9), Run("softmax", 2, 9)]
        updater = GraphedFusedUpdates(runs, Rerun())
        x = runs[0].data
        with pytest.raises(ValueError, match=r"lock-step.*\(5, 5\), \(6, 6\)"):
            updater.update([(x[:5], x[1:6], 5), (x[:6], x[1:7], 6)])
    assert updater.counts == {}


def host_streams() -> tuple:
    python, (kind, keys, pos, gauss, cached) = random.getstate(), np.random.get_state()
    return python, kind, keys.tolist(), pos, gauss, cached


def every_host_stream(runs: list[Run]) -> list[tuple]:
    """The process's python and numpy streams, then each run's."""
    streams = [host_streams()]
    for run in runs:
        with run.rng:
            streams.append(host_streams())
    return streams


def test_an_update_leaves_the_host_streams_as_they_were():
    """A graph replays device work only, so nothing inside the update may draw from a python or numpy stream, the
    process's or a run's (a run's batch length is drawn before, outside the graph): for every output layer of the
    study, an update leaves them all where they were."""
    with torch.backends.mkldnn.flags(enabled=False):
        runs = [Run(layer, 3, 9) for layer in STUDY_LAYERS]
        batches = []
        for run in runs:
            with run.rng:
                batches.append(step.next_batch(run.hp, run.data, 0))
        before = every_host_stream(runs)
        fused_update(runs, batches)
    assert every_host_stream(runs) == before
