"""The training step: no host synchronisation within a logging interval; non-finite losses still located exactly."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import batchify
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.training import step
from softmax_bottleneck.training.evaluation import evaluate
from softmax_bottleneck.training.schedule import make_optimizer
from softmax_bottleneck.training.state import seed_everything
from softmax_bottleneck.training.trainer import Diverged, Trainer

#: Tensor methods that copy a value to the host (a GPU→CPU synchronisation on CUDA)
SYNCS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


@pytest.fixture
def host_reads(monkeypatch):
    """Record (method, calling module) for every host read of a tensor."""
    calls: list[tuple[str, str]] = []
    for name in SYNCS:
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append((_name, sys._getframe(1).f_globals.get("__name__", "?")))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    return calls


@pytest.mark.parametrize("variant", ["softmax", "lms_plif", "mos"])
def test_training_steps_read_nothing_back(host_reads, variant):
    hp = presets.resolve("ptb", variant, "et", {**TINY, "n_experts": 2} if variant == "mos" else TINY)
    corpus = tiny_corpus()
    model = AWDLSTM(corpus.vocab_size, hp).train()
    data = batchify(corpus.train, hp["batch_size"])
    hidden = [model.init_hidden(hp["small_batch_size"]) for _ in range(hp["batch_size"] // hp["small_batch_size"])]
    sums = step.LossSums(torch.device("cpu"))
    for phase in ("sgd", "asgd"):
        optimizer = make_optimizer(model, hp, phase)
        position = 0
        del host_reads[:]
        for _ in range(4):
            position += step.train_batch(model, optimizer, hp, data, position, hidden, sums)
        ours = [call for call in host_reads if call[1].startswith("softmax_bottleneck")]
        # SGD: nothing at all; ASGD: torch's own non-capturable ASGD reads its step counter (not our code)
        assert (host_reads if phase == "sgd" else ours) == []
    raw, finite, batches = sums.read()
    assert finite and batches == 8 and raw > 0


def _steps(variant: str, loss_path: str, batches: int = 6):
    """Weights and summed raw loss after ``batches`` SGD then ``batches`` ASGD steps on the given loss path."""
    hp = presets.resolve("ptb", variant, "et", {**TINY, "n_experts": 2} if variant == "mos" else TINY)
    corpus = tiny_corpus()
    seed_everything(hp["seed"])  # the model's draws and the batch lengths
    model = AWDLSTM(corpus.vocab_size, hp).train()
    data = batchify(corpus.train, hp["batch_size"])
    hidden = [model.init_hidden(hp["small_batch_size"]) for _ in range(hp["batch_size"] // hp["small_batch_size"])]
    sums = step.LossSums(torch.device("cpu"))
    position = 0
    for phase in ("sgd", "asgd"):
        optimizer = make_optimizer(model, hp, phase)
        for _ in range(batches):
            position += step.train_batch(model, optimizer, hp, data, position, hidden, sums, loss_path=loss_path)
    return {k: v.clone() for k, v in model.state_dict().items()}, sums.read()[0]


@pytest.mark.parametrize("variant", ["softmax", "gss", "lms_plif", "mos"])
def test_the_loss_path_trains_as_the_full_matrix_path(variant):
    """Same dropout masks, same losses, same updates: bit for bit for the softmax family; MoS to rounding."""
    full_weights, full_loss = _steps(variant, "full")
    weights, loss = _steps(variant, "nll")
    if variant == "mos":
        assert loss == pytest.approx(full_loss, rel=1e-5)
        for key, value in full_weights.items():
            torch.testing.assert_close(weights[key], value, rtol=1e-4, atol=1e-5, msg=key)
    else:
        assert loss == full_loss
        assert all(torch.equal(weights[k], v) for k, v in full_weights.items())


def test_an_unknown_loss_path_is_refused():
    hp = presets.resolve("ptb", "softmax", "et", TINY)
    model = AWDLSTM(12, hp)
    tokens = torch.zeros(3, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="loss path must be one of nll, full, got 'logits'"):
        step.chunk_loss(model, tokens, tokens, model.init_hidden(2), hp, "logits")


def test_first_non_finite_loss_is_located_exactly(tmp_path, monkeypatch):
    calls = {"n": 0}
    chunks = TINY["batch_size"] // TINY["small_batch_size"]
    real = step.chunk_nll

    def nll(log_prob, targets):
        calls["n"] += 1
        value = real(log_prob, targets)
        return value * float("nan") if calls["n"] > 17 * chunks - 1 else value  # 2nd chunk of batch 17

    monkeypatch.setattr(step, "chunk_nll", nll)
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "log_interval": 5, "epochs": 3})
    trainer = Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path)
    with pytest.raises(Diverged) as err:
        trainer.fit()
    assert trainer.progress.epoch == 0 and trainer.progress.batch == 20  # read when the interval 16–20 closed
    assert "epoch 1, batch 17;" in str(err.value)
    assert not (tmp_path / "metrics.json").exists()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_cuda
def test_capturable_asgd_equals_the_default_asgd_on_cuda():
    torch.manual_seed(0)
    start = [torch.randn(300, 7, device="cuda"), torch.randn(11, device="cuda")]
    runs = []
    for capturable in (False, True):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        opt = torch.optim.ASGD(params, lr=30.0, t0=0, lambd=0.0, weight_decay=1.2e-6, capturable=capturable)
        gen = torch.Generator(device="cuda").manual_seed(1)
        for t in range(50):
            opt.param_groups[0]["lr"] = 30.0 * (55 + t % 30) / 70  # the per-batch lr rescaling
            for p in params:
                p.grad = torch.randn(p.shape, device="cuda", generator=gen)
            opt.step()
        runs.append([(p.detach().clone(), opt.state[p]["ax"].clone()) for p in params])
    for (p0, ax0), (p1, ax1) in zip(*runs, strict=True):
        assert torch.equal(p0, p1) and torch.equal(ax0, ax1)


@pytest.mark.parametrize("variant", ["softmax", "lms_plif", "mos"])
def test_evaluation_on_the_loss_path_equals_the_authors_evaluate(variant):
    """The authors' evaluate(): Σ_chunks len(chunk) · NLLLoss(log-probabilities) / len(data), on the full matrix."""
    hp = presets.resolve("ptb", variant, "et", {**TINY, "n_experts": 2} if variant == "mos" else TINY)
    corpus = tiny_corpus()
    model = AWDLSTM(corpus.vocab_size, hp)
    data = batchify(corpus.valid, 3)
    bptt = 7
    total = 0.0
    model.eval()
    with torch.no_grad():
        hidden = model.init_hidden(3)
        for i in range(0, data.size(0) - 1, bptt):
            inputs, targets = data[i : i + min(bptt, data.size(0) - 1 - i)], data[i + 1 : i + 1 + bptt]
            log_prob, hidden, _, _ = model(inputs, hidden)
            total += len(inputs) * F.nll_loss(log_prob.reshape(-1, log_prob.size(-1)), targets.reshape(-1)).item()
    reference = total / len(data)
    loss = evaluate(model, data, bptt)
    if variant == "mos":
        assert loss == pytest.approx(reference, rel=1e-6)
    else:
        assert loss == reference
