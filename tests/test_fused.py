"""Fused training (:mod:`softmax_bottleneck.training.fused_step`): K runs updated at once, each bit for bit the run
updated alone, on the CPU with the same LSTM kernels (oneDNN's LSTM off); K runs evaluated at once
(:mod:`softmax_bottleneck.training.fused_evaluation`), each run's loss its solo evaluation's."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from conftest import TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import batchify
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.models.fused_lstm import fused_lstm_layer
from softmax_bottleneck.models.output_layers import OutputLayer, SoftmaxOfScores, register_output_layer
from softmax_bottleneck.models.output_layers import registry as registry_module
from softmax_bottleneck.training import step
from softmax_bottleneck.training.evaluation import evaluate
from softmax_bottleneck.training.fused_evaluation import evaluate_group
from softmax_bottleneck.training.fused_step import check_fusable, fused_update
from softmax_bottleneck.training.run_rng import RunRNG
from softmax_bottleneck.training.schedule import make_optimizer
from softmax_bottleneck.training.state import seed_everything

#: every output layer of the paper's study, and the installed example plug-in
STUDY_LAYERS = ("softmax", "ss", "gss", "lms_plif", "lms_plif_frozen", "mos", "moc", "taylor")


@pytest.fixture
def drawing_plugin(monkeypatch):
    """A plug-in layer that draws from the global generator in its forward pass (its own dropout on the context)."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer("noisy_softmax", display="Noisy", family="softmax")
    class Noisy(SoftmaxOfScores):
        def scores(self, context, weight):
            if self.training:
                context = torch.nn.functional.dropout(context, 0.3)
            return self.logits(context, weight)

    assert issubclass(Noisy, OutputLayer)
    return "noisy_softmax"


@dataclass
class Run:
    """What :func:`fused_update` and :func:`step.update` need of a run."""

    variant: str
    seed: int
    switch_at: int  # updates in SGD before ASGD
    hp: dict = field(init=False)
    model: AWDLSTM = field(init=False)
    data: torch.Tensor = field(init=False)
    position: int = 0
    updates: int = 0

    def __post_init__(self):
        extra = {"n_experts": 2} if self.variant in ("mos", "moc") else {}
        self.hp = presets.resolve("ptb", self.variant, "et", {**TINY, **extra, "seed": self.seed})
        corpus = tiny_corpus()
        seed_everything(self.seed)
        self.model = AWDLSTM(corpus.vocab_size, self.hp).train()
        self.data = batchify(corpus.train, self.hp["batch_size"])
        chunks = self.hp["batch_size"] // self.hp["small_batch_size"]
        self.hidden = [self.model.init_hidden(self.hp["small_batch_size"]) for _ in range(chunks)]
        self.sums = step.LossSums(torch.device("cpu"))
        self.optimizer = make_optimizer(self.model, self.hp, "sgd")
        self.rng = RunRNG().capture()

    def before_update(self) -> None:
        if self.updates == self.switch_at:
            self.optimizer = make_optimizer(self.model, self.hp, "asgd")
        if self.position >= self.data.size(0) - 2:
            self.position = 0

    def solo(self, updates: int) -> None:
        for _ in range(updates):
            self.before_update()
            self.position += step.train_batch(self.model, self.optimizer, self.hp, self.data, self.position,
                                              self.hidden, self.sums)  # fmt: skip
            self.updates += 1

    def outcome(self) -> dict:
        opt_state = {
            f"{i}:{k}": v.clone()
            for i, p in enumerate(self.model.parameters())
            for k, v in self.optimizer.state.get(p, {}).items()
        }
        hidden = [t.clone() for chunk in self.hidden for state in chunk for t in state]
        return {"weights": {k: v.clone() for k, v in self.model.state_dict().items()}, "optimizer": opt_state,
                "hidden": hidden, "sums": self.sums.read(), "position": self.position}  # fmt: skip


def fused(runs: list[Run], updates: int, update=None) -> None:
    """``updates`` updates of ``runs``, each run's batch drawn from its own streams, through ``update(batches)``
    (default: :func:`fused_update` of the runs)."""
    for _ in range(updates):
        batches = []
        for run in runs:
            run.before_update()
            with run.rng:
                batches.append(step.next_batch(run.hp, run.data, run.position))
        (update or (lambda b: fused_update(runs, b)))(batches)
        for run, (_, _, seq_len) in zip(runs, batches, strict=True):
            run.position += seq_len
            run.updates += 1


def assert_same(solo: dict, group: dict, who: str) -> None:
    assert solo["position"] == group["position"], who
    assert solo["sums"] == group["sums"], who
    for part in ("weights", "optimizer"):
        assert solo[part].keys() == group[part].keys(), who
        for key in solo[part]:
            assert torch.equal(solo[part][key], group[part][key]), f"{who}: {part} {key} differs"
    assert all(torch.equal(a, b) for a, b in zip(solo["hidden"], group["hidden"], strict=True)), who


def solo_outcomes(specs, updates: int) -> list[dict]:
    outcomes = []
    for spec in specs:
        run = Run(*spec)
        run.solo(updates)
        outcomes.append(run.outcome())
    return outcomes


@pytest.mark.parametrize(
    "specs",
    [
        pytest.param([(layer, 7 + i, 2 + i % 3) for i, layer in enumerate(STUDY_LAYERS)], id="ragged"),
        pytest.param([("softmax", 141, 3), ("softmax", 141, 5), ("ss", 141, 9), ("gss", 141, 1)], id="equal-lengths"),
    ],
)
def test_every_run_of_a_fused_group_is_its_solo_run_bit_for_bit(specs):
    """Every output layer of the study and a plug-in, with its own seed (ragged lengths) or one seed (equal
    lengths), SGD then ASGD at different updates: weights, ASGD averages, loss sums and hidden states as alone."""
    updates = 7
    with torch.backends.mkldnn.flags(enabled=False):
        expected = solo_outcomes(specs, updates)
        runs = [Run(*spec) for spec in specs]
        fused(runs, updates)
    lengths_differ = len({run.position for run in runs}) > 1
    assert lengths_differ == (len({seed for _, seed, _ in specs}) > 1)  # the ragged case is ragged
    for spec, solo, run in zip(specs, expected, runs, strict=True):
        assert_same(solo, run.outcome(), f"{spec}")


def test_a_plugin_layers_own_draws_come_from_its_runs_stream(drawing_plugin):
    specs = [(drawing_plugin, 3, 2), ("softmax", 4, 9), (drawing_plugin, 5, 9)]
    with torch.backends.mkldnn.flags(enabled=False):
        expected = solo_outcomes(specs, 4)
        runs = [Run(*spec) for spec in specs]
        fused(runs, 4)
    for spec, solo, run in zip(specs, expected, runs, strict=True):
        assert_same(solo, run.outcome(), f"{spec}")


def test_a_layer_drawing_from_numpy_in_its_forward_pass_is_refused_by_name(monkeypatch):
    """A fused pass keeps only torch's generators per run (numpy's and python's states are the dearest to swap): a
    layer drawing from numpy there would draw from the process's stream, so the update stops, naming the layer."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer("numpy_noise", display="NumpyNoise", family="softmax")
    class NumpyNoise(SoftmaxOfScores):
        def scores(self, context, weight):
            return self.logits(context * float(np.random.uniform(0.9, 1.1)), weight)

    runs = [Run("softmax", 3, 9), Run("numpy_noise", 4, 9)]
    batches = []
    for run in runs:
        with run.rng:
            batches.append(step.next_batch(run.hp, run.data, 0))
    with pytest.raises(RuntimeError, match=r"an output layer of numpy_noise, softmax drew from python's or numpy's"):
        fused_update(runs, batches)
    fused_update(runs[:1], batches[:1])  # a pass that draws from torch only goes on


@pytest.mark.parametrize("batched", [False, True], ids=["run-by-run", "batched"])
def test_a_group_evaluated_at_once_gives_each_run_its_solo_evaluation(batched):
    """Every output layer of the study and a plug-in, a few updates in (each its own weights), evaluated together on
    the validation split at batch 2, one of them at batch 3 (a group of its own), and on the test split at batch 1:
    each run's loss is :func:`evaluate`'s of it alone, bit for bit run by run (the CPU's mode) and to float32
    rounding batched (the GPU's mode; on the CPU MKL's batched GEMM gives other last bits)."""
    specs = [(layer, 20 + i, 1) for i, layer in enumerate(STUDY_LAYERS)]
    corpus = tiny_corpus()
    with torch.backends.mkldnn.flags(enabled=False):
        runs = [Run(*spec) for spec in specs]
        fused(runs, 3)
        for split, columns in (("valid", [2] * (len(runs) - 1) + [3]), ("test", [1] * len(runs))):
            datas = [batchify(getattr(corpus, split), b) for b in columns]
            alone = [evaluate(run.model, data, run.hp["bptt"]) for run, data in zip(runs, datas, strict=True)]
            together = evaluate_group(runs, datas, batched=batched)
            assert len(set(alone)) == len(alone)  # every run its own number: a mix-up of runs would show
            if batched:
                assert together == pytest.approx(alone, rel=1e-6, abs=0), split
            else:
                assert together == alone, split
    assert not any(run.model.training for run in runs)  # evaluated in eval mode, as evaluate() leaves a model


def test_a_run_does_not_depend_on_its_group_or_slot():
    """K-invariance: run (softmax, seed 11) alone (K = 1), first of 3 and last of 3 ends with the same weights."""
    with torch.backends.mkldnn.flags(enabled=False):
        outcomes = []
        for specs in ([("softmax", 11, 2)], [("softmax", 11, 2), ("ss", 12, 2), ("mos", 13, 2)],
                      [("moc", 13, 2), ("gss", 12, 2), ("softmax", 11, 2)]):  # fmt: skip
            runs = [Run(*spec) for spec in specs]
            fused(runs, 4)
            outcomes.append(next(run for run in runs if run.seed == 11).outcome())
    for other in outcomes[1:]:
        assert_same(outcomes[0], other, "softmax seed 11")


@pytest.mark.parametrize(
    ("batched", "sizes"),
    [
        pytest.param(False, (6, 5, 2), id="run-by-run"),
        pytest.param(True, (400, 1150, 20), id="batched-at-PTB's-shape"),  # MKL's batched GEMM: other bits below
    ],
)
def test_the_fused_layer_is_nn_lstm_forward_and_backward(batched, sizes):
    """One layer of 3 runs of different lengths against ``nn.LSTM`` run by run: outputs, states, every gradient."""
    inputs, hidden, columns = sizes
    torch.manual_seed(0)
    lstms = [torch.nn.LSTM(inputs, hidden) for _ in range(3)]
    xs = [torch.randn(length, columns, inputs, requires_grad=True) for length in (3, 5, 1)]
    states = [(torch.randn(1, columns, hidden), torch.randn(1, columns, hidden)) for _ in lstms]
    grads = [torch.randn(x.size(0), columns, hidden) for x in xs]
    with torch.backends.mkldnn.flags(enabled=False):
        expected = []
        for lstm, x, state, grad in zip(lstms, xs, states, grads, strict=True):
            out, (h, c) = lstm(x, state)
            (out * grad).sum().backward()
            expected.append((out.detach(), h.detach(), c.detach(), [p.grad.clone() for p in lstm.parameters()],
                             x.grad.clone()))  # fmt: skip
            lstm.zero_grad()
            x.grad = None
        weights = [(m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0) for m in lstms]
        outs, finals = fused_lstm_layer(xs, weights, states, batched=batched)
        sum((out * grad).sum() for out, grad in zip(outs, grads, strict=True)).backward()
    for k, lstm in enumerate(lstms):
        out, h, c, param_grads, x_grad = expected[k]
        assert torch.equal(outs[k], out) and torch.equal(finals[k][0], h) and torch.equal(finals[k][1], c)
        assert all(torch.equal(p.grad, g) for p, g in zip(lstm.parameters(), param_grads, strict=True))
        assert torch.equal(xs[k].grad, x_grad)


def test_runs_of_different_shapes_are_refused_by_name():
    small = presets.resolve("ptb", "softmax", "et", TINY)
    wide = presets.resolve("ptb", "softmax", "et", {**TINY, "nhid": 32})
    check_fusable([small, small], ["a", "b"])
    with pytest.raises(
        ValueError, match=r"runs/b cannot train fused with runs/a: they differ in nhid \(nhid=16 vs 32\)"
    ):
        check_fusable([small, wide], ["runs/a", "runs/b"])


def test_a_runs_streams_go_on_where_they_stopped_and_leave_the_others_alone():
    import random

    import numpy as np

    def draws():
        return torch.rand(2).tolist() + [float(np.random.random()), random.random()]

    seed_everything(5)
    alone = [draws(), draws()]
    seed_everything(99)
    untouched = [draws(), draws()]

    seed_everything(5)
    rng = RunRNG().capture()
    seed_everything(99)
    with rng:
        first = draws()
    between = draws()  # the outside streams between the run's two blocks
    with rng:
        second = draws()
    after = draws()
    assert [first, second] == alone  # the run's draws: its solo sequence
    assert [between, after] == untouched  # the outside's: as if the run had drawn nothing
    with rng, pytest.raises(RuntimeError, match="already active"):
        rng.__enter__()
