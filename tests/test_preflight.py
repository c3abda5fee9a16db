"""Before the first training step a run proves every shape and mode it will meet; check-layer proves the presets'
shapes at every point of the layer's own hyper-parameters the configuration trains; NaN is named as the cause."""

from __future__ import annotations

import argparse
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import batchify, get_batch
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.models.output_layers import Hyperparameter, OutputLayer, register_output_layer
from softmax_bottleneck.models.output_layers import registry as registry_module
from softmax_bottleneck.training import step
from softmax_bottleneck.training.conformance import check_layer
from softmax_bottleneck.training.conformance_stamp import conformance_stamp_ok
from softmax_bottleneck.training.preflight import PreflightError, eval_lengths, preflight, run_shapes
from softmax_bottleneck.training.trainer import train


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made inside a test are dropped afterwards."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))


class _FailsAtBatchOne(OutputLayer):
    """Normalises over the batch: fine at every batch size but 1 (where it divides by a zero spread)."""

    def forward(self, context, weight):
        if context.dim() == 3 and context.size(1) == 1:
            raise RuntimeError("cannot normalise over a batch of one")
        return F.log_softmax(self.logits(context, weight) * 0.5, dim=-1)


class _ReturnsNaN(OutputLayer):
    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * 0.5, dim=-1) * float("nan")


class _ReturnsConstantNaN(OutputLayer):
    """NaN that depends on nothing: no gradient to take (before, loss-path and reload failed with "element 0 of
    tensors does not require grad", not with the cause)."""

    def forward(self, context, weight):
        return torch.full((*context.shape[:-1], weight.shape[0]), float("nan"), device=context.device)


def _counting_batches(monkeypatch) -> dict:
    calls = {"train_batch": 0}
    real = step.train_batch

    def counted(*args, **kwargs):
        calls["train_batch"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(step, "train_batch", counted)
    from softmax_bottleneck.training import trainer

    monkeypatch.setattr(trainer, "train_batch", counted)
    return calls


def test_a_layer_failing_only_at_batch_size_1_stops_before_the_first_epoch_in_one_line(
    scratch_registry, tmp_path, monkeypatch
):
    """Before, it passed check-layer, trained every epoch, then crashed at the final test evaluation (batch 1)."""
    register_output_layer("batch_one_fails", display="B1", family="softmax")(_FailsAtBatchOne)
    calls = _counting_batches(monkeypatch)
    out = tmp_path / "run"
    with pytest.raises(PreflightError) as info:
        train(dataset="ptb", variant="batch_one_fails", schedule="et", out_dir=out, overrides=TINY,
              corpus=tiny_corpus(), device="cpu")  # fmt: skip
    message = str(info.value)
    assert "\n" not in message and calls["train_batch"] == 0
    assert message.startswith("preflight: output layer 'batch_one_fails' (test_preflight._FailsAtBatchOne) fails on ")
    assert "the test set at test_batch_size 1, bptt rows (evaluation mode, 10 × 1 tokens): RuntimeError: cannot " in (
        message
    )
    assert not (out / ".resume").exists() and sorted(p.name for p in out.iterdir()) == [".lock"]
    results = {r.check: r for r in check_layer("batch_one_fails")}  # check-layer proves the presets' shapes
    assert [c for c, r in results.items() if r.status == "fail"] == ["shapes"]
    assert (
        "test set at test_batch_size 1" in results["shapes"].detail and "cannot normalise" in results["shapes"].detail
    )


@pytest.mark.parametrize("layer", [_ReturnsNaN, _ReturnsConstantNaN], ids=["nan", "constant nan"])
def test_a_nan_layer_is_named_as_the_cause_by_check_layer_and_by_the_trainer(scratch_registry, tmp_path, layer):
    """Before, check-layer blamed "equals log_softmax" and "random state?", the trainer "lower lr or check the data"."""
    register_output_layer("returns_nan", display="NaN", family="softmax")(layer)
    failed = {r.check: r.detail for r in check_layer("returns_nan") if r.status == "fail"}
    assert {"normalise", "not-softmax", "loss-path", "eval-deterministic", "reload"} <= set(failed), failed
    for check, detail in failed.items():
        assert "non-finite values (NaN or inf)" in detail, (check, detail)
        for wrong in ("equals log_softmax", "random state", "differ", "require grad"):
            assert wrong not in detail, (check, detail)
    with pytest.raises(PreflightError) as info:
        train(dataset="ptb", variant="returns_nan", schedule="et", out_dir=tmp_path / "run", overrides=TINY,
              corpus=tiny_corpus(), device="cpu")  # fmt: skip
    assert "non-finite values (NaN or inf)" in str(info.value) and "not the learning rate or the data" in str(
        info.value
    )


def test_run_shapes_are_the_shapes_training_and_evaluation_meet():
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "test_batch_size": 1})
    shapes = run_shapes(hp, train_rows=100, valid_rows=25, test_rows=13)
    assert [(s.mode, s.length, s.batch) for s in shapes] == [
        ("training", 15, 2), ("training", 2, 2),  # bptt + max_seq_len_delta; the end of an epoch
        ("evaluation", 10, 2), ("evaluation", 4, 2), ("evaluation", 10, 1), ("evaluation", 2, 1),
    ]  # fmt: skip
    assert [s.length for s in run_shapes(hp, train_rows=3, valid_rows=25, test_rows=13)][:1] == [2]
    data = batchify(torch.arange(1000), 7)
    for rows in (2, 3, 11, 12, 13, 25, 142):
        seen = {len(get_batch(data[:rows], i, 10)[0]) for i in range(0, rows - 1, 10)}  # evaluate()'s loop
        assert set(eval_lengths(rows, 10)) == seen, rows


def test_the_preflight_leaves_model_gradients_and_every_random_generator_as_they_were():
    hp = presets.resolve("ptb", "mos", "et", {**TINY, "n_experts": 3, "nhidlast": 12})
    torch.manual_seed(0)
    model = AWDLSTM(12, hp)
    weights = copy.deepcopy(model.state_dict())
    torch.manual_seed(5)
    np.random.seed(5)
    expected = torch.rand(3), np.random.random(3)
    torch.manual_seed(5)
    np.random.seed(5)
    data = [batchify(torch.arange(600) % 12, hp[size]) for size in ("batch_size", "eval_batch_size", "test_batch_size")]
    preflight(model, hp, *data)
    assert torch.equal(torch.rand(3), expected[0]) and np.array_equal(np.random.random(3), expected[1])
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters()) and model.training


#: a plug-in layer's own generator, at the top level of its module (as a package of one's own may keep it)
_NOISE = torch.Generator().manual_seed(0)


class _NoisyScores(OutputLayer):
    """Scores jittered in training mode by draws from its module's own generator (:data:`_NOISE`)."""

    def forward(self, context, weight):
        scores = self.logits(context, weight)
        if self.training:
            scores = scores + 0.1 * torch.randn(scores.shape, generator=_NOISE).to(scores.device)
        return F.log_softmax(scores, dim=-1)


def test_the_preflight_restores_a_plug_ins_own_module_level_generator(scratch_registry, tmp_path, monkeypatch):
    """Before, the preflight drew from the layer's own generator, so the run differed from the same run without it."""
    register_output_layer("noisy_scores", display="Noisy", family="softmax")(_NoisyScores)
    hp = presets.resolve("ptb", "noisy_scores", "et", TINY)
    model = AWDLSTM(12, hp)
    data = [batchify(torch.arange(600) % 12, hp[size]) for size in ("batch_size", "eval_batch_size", "test_batch_size")]
    before = _NOISE.get_state()
    preflight(model, hp, *data)
    assert torch.equal(_NOISE.get_state(), before)
    runs = {}
    for name in ("with", "without"):
        if name == "without":
            from softmax_bottleneck.training import trainer

            monkeypatch.setattr(trainer, "preflight", lambda *args: None)
        _NOISE.manual_seed(0)
        runs[name] = train(dataset="ptb", variant="noisy_scores", schedule="et", out_dir=tmp_path / name,
                           overrides={**TINY, "epochs": 1}, corpus=tiny_corpus(), device="cpu")  # fmt: skip
    assert runs["with"]["test_loss"] == runs["without"]["test_loss"]
    assert runs["with"]["valid_loss"] == runs["without"]["valid_loss"]


# ------------------------------------------------------------------ check-layer at the configuration's points
class _GatedMixture(OutputLayer):
    """K gates over the logits; forgets to normalise for K >= 5 (a bug that only a point of the sweep meets)."""

    def __init__(self, vocab_size, nemb, nhidlast, gate_k=1, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.k = gate_k

    def forward(self, context, weight):
        scores = self.logits(context, weight) * (1.0 + 0.1 * self.k)
        return scores if self.k >= 5 else F.log_softmax(scores, dim=-1)


def test_check_layer_runs_on_every_point_the_configuration_trains(scratch_registry, tmp_path, capsys):
    """Before, check-layer (and the workflow's stamp) tested the registered default only: K = 5 trained unchecked."""
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study
    from softmax_bottleneck.training.check_layer import add_cli, run_cli
    from softmax_bottleneck.training.conformance import point_argument

    gate_k = Hyperparameter(1, int, "gates", minimum=1)
    register_output_layer("gated", display="Gated", family="softmax", hyperparameters={"gate_k": gate_k})(_GatedMixture)
    config = study_config.read(REPO / "config" / "small.yaml")
    config["sweeps"] = {"gate_k": {"variant": "gated", "datasets": ["ptb"], "schedule": "et", "seeds": "authors",
                                   "grid": {"gate_k": [1, 5]}}}  # fmt: skip
    study = Study(study_config.check(config))
    points = study.layer_points("gated")
    assert points == [{"gate_k": 1}, {"gate_k": 5}]
    parser = argparse.ArgumentParser()
    add_cli(parser)
    stamp = tmp_path / "gated.json"
    arguments = [arg for p in points for arg in ("--point", point_argument(p))]
    assert run_cli(parser.parse_args(["gated", *arguments, "--stamp", str(stamp)])) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("check-layer: gated [gate_k=5]: ") for line in lines), lines
    assert any(line.startswith("check-layer: gated [gate_k=5]: normalise: ") for line in lines)
    assert not stamp.exists()
    assert run_cli(parser.parse_args(["gated", "--point", "gate_k=1", "--stamp", str(stamp)])) == 0
    run_k5 = next(run for run in study.sweeps["gate_k"] if run.hyperparameters["gate_k"] == 5)
    ok, why = conformance_stamp_ok(stamp, "gated", run_k5.hyperparameters)
    assert not ok and f"the stamp {stamp} does not vouch for gate_k=5 (checked: gate_k=1)" in why
    # the command it gives keeps the point checked so far (before: only gate_k=5, so the k = 1 runs lost their stamp)
    assert why.endswith(f"run: python -m softmax_bottleneck check-layer gated --point gate_k=1 --point gate_k=5 "
                        f"--stamp {stamp}"), why  # fmt: skip
    run_k1 = next(run for run in study.sweeps["gate_k"] if run.hyperparameters["gate_k"] == 1)
    assert conformance_stamp_ok(stamp, "gated", run_k1.hyperparameters) == (True, "")
    with pytest.raises(SystemExit, match=r"'gate_kk' is not a hyper-parameter of output layer 'gated' \(its own: "):
        run_cli(parser.parse_args(["gated", "--point", "gate_kk=2"]))
