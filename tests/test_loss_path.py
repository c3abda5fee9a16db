"""The loss path: ``nll`` equals the full-matrix path for every registered output layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from softmax_bottleneck import presets
from softmax_bottleneck.models.awd_lstm import AWDLSTM, mean_nll
from softmax_bottleneck.models.output_layers import OutputLayer, SoftmaxOfScores, output_layer, output_layers

V, D, DL = 40, 6, 10
#: small values for the built-in layers' expensive hyper-parameters (a plug-in keeps its registered defaults)
SMALL_HP = {"plif_knots": 500, "n_experts": 3, "dropoutl": 0.3, "gss_c": -1.5, "gss_k": 2.5}
LAYERS = tuple(output_layers())


def _build(name: str, dtype=torch.float64, seed: int = 0):
    spec = output_layer(name)
    nhidlast = DL if spec.cls.projects_context else D
    torch.manual_seed(seed)
    layer = spec.build(V, D, nhidlast, {k: v for k, v in SMALL_HP.items() if k in spec.hyperparameters}).to(dtype)
    with torch.no_grad():
        layer.bias.normal_()
    return layer, nhidlast


def _both_paths(layer, context, weight, targets, upstream, seed=5):
    """(nll, grads) of the loss path and of ``−forward[targets]``, same random draws (dropout) in both."""
    results = []
    for path in ("forward", "nll"):
        ctx, w = context.clone().requires_grad_(), weight.clone().requires_grad_()
        layer.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        if path == "forward":
            nll = -layer(ctx, w).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        else:
            nll = layer.nll(ctx, w, targets)
        (nll * upstream).sum().backward()
        grads = {"context": ctx.grad, "weight": w.grad}
        grads.update({name: p.grad for name, p in layer.named_parameters() if p.requires_grad})
        results.append((nll.detach(), grads))
    return results


@pytest.mark.parametrize("shape", [(7, 3), (11,)], ids=["LxB", "N"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", LAYERS)
def test_loss_path_equals_forward_in_float64(name, training, shape):
    layer, nhidlast = _build(name)
    layer.train(training)
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(V, D, generator=gen, dtype=torch.float64) * 2
    context = torch.randn(*shape, nhidlast, generator=gen, dtype=torch.float64)
    targets = torch.randint(V, shape, generator=gen)
    upstream = torch.rand(shape, generator=gen, dtype=torch.float64)  # not just the mean: any upstream gradient
    (ref, ref_grads), (nll, grads) = _both_paths(layer, context, weight, targets, upstream)
    assert nll.shape == shape and nll.dtype == torch.float64
    torch.testing.assert_close(nll, ref, atol=1e-12, rtol=0)
    assert grads.keys() == ref_grads.keys()
    assert {"context", "weight", "bias"} <= grads.keys()
    for key in grads:
        assert grads[key] is not None, key
        torch.testing.assert_close(grads[key], ref_grads[key], atol=1e-10, rtol=0, msg=f"{name}: gradient of {key}")


@pytest.mark.parametrize("name", [n for n, s in output_layers().items() if issubclass(s.cls, SoftmaxOfScores)])
def test_softmax_of_scores_loss_path_is_bit_identical_in_float32(name):
    layer, nhidlast = _build(name, torch.float32)
    gen = torch.Generator().manual_seed(2)
    weight = torch.randn(V, D, generator=gen) * 2
    context = torch.randn(9, 4, nhidlast, generator=gen)
    targets = torch.randint(V, (9, 4), generator=gen)
    upstream = torch.rand(9, 4, generator=gen)
    (ref, ref_grads), (nll, grads) = _both_paths(layer.train(), context, weight, targets, upstream)
    assert torch.equal(nll, ref)
    for key in grads:
        assert torch.equal(grads[key], ref_grads[key]), key


def test_default_nll_of_a_layer_with_only_forward():
    class Halved(OutputLayer):  # a user's layer: forward only
        def forward(self, context, weight):
            return F.log_softmax(self.logits(context, weight) / 2, dim=-1)

    torch.manual_seed(3)
    layer = Halved(V, D, D).double()
    context, weight = torch.randn(5, 2, D, dtype=torch.float64), torch.randn(V, D, dtype=torch.float64)
    targets = torch.randint(V, (5, 2))
    expected = -F.log_softmax(F.linear(context, weight) / 2, -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(layer.nll(context, weight, targets), expected, atol=1e-14, rtol=0)
    with pytest.raises(ValueError, match=r"targets must be \[5, 2\]"):
        layer.nll(context, weight, targets[:4])


def _saved_big_tensors(fn, rows: int) -> int:
    """How many tensors of at least ``rows × V`` elements the autograd graph of ``fn()`` keeps for the backward."""
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(1 for n in sizes if n >= rows * V)


def test_mos_loss_path_keeps_one_score_sized_tensor_and_no_log_softmax():
    layer, _ = _build("mos", torch.float32)
    context = torch.randn(8, 4, DL, requires_grad=True)
    weight = torch.randn(V, D, requires_grad=True)
    targets = torch.randint(V, (8, 4))
    k = layer.n_experts
    # one [L·B·K, V] tensor (the exponentiated scores) and nothing of the [L, B, V] output's size besides it
    assert _saved_big_tensors(lambda: layer.nll(context, weight, targets), 8 * 4) == 1
    # the full-matrix path keeps several (log-softmax per expert, their sum with log π, the output, ...)
    full = _saved_big_tensors(lambda: layer(context, weight).gather(-1, targets[..., None]), 8 * 4 * k)
    assert full >= 2


def test_mos_loss_path_backward_twice_fails_loudly():
    layer, _ = _build("mos", torch.float32)
    context = torch.randn(3, 2, DL, requires_grad=True)
    loss = layer.nll(context, torch.randn(V, D), torch.randint(V, (3, 2))).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="inplace"):  # its saved scores were reused in place: never silently wrong
        loss.backward()


@pytest.mark.parametrize("name", ["softmax", "mos"])
def test_loss_path_under_autocast_is_float32_and_close(name):
    layer, nhidlast = _build(name, torch.float32)
    layer.eval()
    context, weight = torch.randn(6, 2, nhidlast), torch.randn(V, D)
    targets = torch.randint(V, (6, 2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        nll = layer.nll(context, weight, targets)
        ref = -layer(context, weight).gather(-1, targets[..., None])[..., 0]
    assert nll.dtype == torch.float32
    torch.testing.assert_close(nll, ref, atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------- the model ---
def _model(variant: str, dtype=torch.float64):
    size = {"nemb": D, "nhid": 12, "nhidlast": DL if variant in ("mos", "moc") else D}
    hp = presets.resolve("ptb", variant, overrides={**size, **{k: v for k, v in SMALL_HP.items() if k != "gss_c"}})
    torch.manual_seed(4)
    return AWDLSTM(V, hp).to(dtype)


@pytest.mark.parametrize("variant", ["softmax", "lms_plif", "mos"])
def test_model_nll_shares_forwards_body_and_random_draws(variant):
    model = _model(variant).train()
    tokens, targets = torch.randint(V, (9, 3)), torch.randint(V, (9, 3))
    hidden = model.init_hidden(3)
    torch.manual_seed(7)
    log_prob, hid_f, raw_f, drop_f = model(tokens, hidden)
    torch.manual_seed(7)
    nll, hid_n, raw_n, drop_n = model.nll(tokens, hidden, targets)
    assert nll.shape == (9, 3)
    torch.testing.assert_close(nll, -log_prob.gather(-1, targets[..., None])[..., 0], atol=1e-12, rtol=0)
    assert torch.equal(raw_f, raw_n) and torch.equal(drop_f, drop_n)
    assert all(
        torch.equal(a, b)
        for pair_f, pair_n in zip(hid_f, hid_n, strict=True)
        for a, b in zip(pair_f, pair_n, strict=True)
    )


@pytest.mark.parametrize("variant", ["softmax", "gss", "mos"])
def test_mean_nll_reduces_exactly_like_nll_loss(variant):
    """``mean_nll(model.nll(...))`` is ``F.nll_loss(model(...), targets)`` bit for bit (softmax family) or to
    rounding (MoS), value and gradients: the trainer can switch paths without changing its losses."""
    model = _model(variant, torch.float32).train()
    vocab = model.vocab_size
    exact = variant != "mos"
    for length in (5, 23, 37):
        tokens, targets = torch.randint(V, (length, 4)), torch.randint(V, (length, 4))
        grads = []
        for path in ("forward", "nll"):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(length)
            if path == "forward":
                loss = F.nll_loss(model(tokens, model.init_hidden(4))[0].reshape(-1, vocab), targets.reshape(-1))
            else:
                loss = mean_nll(model.nll(tokens, model.init_hidden(4), targets)[0])
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]))
        (a, ga), (b, gb) = grads
        if exact:
            assert torch.equal(a, b)
            assert all(torch.equal(x, y) for x, y in zip(ga, gb, strict=True))
        else:
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------- CUDA ---
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", LAYERS)
def test_loss_path_on_cuda_equals_forward_and_cpu(name):
    layer, nhidlast = _build(name)
    gen = torch.Generator().manual_seed(8)
    weight = torch.randn(V, D, generator=gen, dtype=torch.float64) * 2
    context = torch.randn(7, 3, nhidlast, generator=gen, dtype=torch.float64)
    targets = torch.randint(V, (7, 3), generator=gen)
    upstream = torch.rand(7, 3, generator=gen, dtype=torch.float64)
    layer.eval()
    cpu_nll, _ = _both_paths(layer, context, weight, targets, upstream)[1]
    layer.cuda()
    (ref, ref_grads), (nll, grads) = _both_paths(layer, context.cuda(), weight.cuda(), targets.cuda(), upstream.cuda())
    torch.testing.assert_close(nll, ref, atol=1e-12, rtol=0)
    for key in grads:
        torch.testing.assert_close(grads[key], ref_grads[key], atol=1e-10, rtol=0, msg=key)
    torch.testing.assert_close(nll.cpu(), cpu_nll, atol=1e-10, rtol=0)
