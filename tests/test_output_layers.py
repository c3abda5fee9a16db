"""Output layers : normalisation, special cases, numerics, rank, parameter counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from softmax_bottleneck.models.output_layers import (
    PLIF,
    MixtureOfContexts,
    MixtureOfSoftmaxes,
    Softmax,
    build_output_layer,
    extra_parameter_count,
    output_layer,
    output_layers,
)
from softmax_bottleneck.models.output_layers.plif import UNIT_SLOPE_RAW

#: every registered output layer (the paper's, then installed plug-ins): the contract tests run on each
OUTPUT_LAYERS = tuple(output_layers())

V, D, DL = 50, 8, 12  # vocabulary, nemb, nhidlast of the mixtures
SMALL_HP = {"plif_knots": 1000, "plif_t": 20.0, "n_experts": 3, "dropoutl": 0.3, "gss_c": -1.5, "gss_k": 2.5}


def _nhidlast(name: str) -> int:
    return DL if output_layer(name).cls.projects_context else D


def _layer(name: str, **hp):
    torch.manual_seed(0)
    layer = build_output_layer(name, V, D, _nhidlast(name), {**SMALL_HP, **hp})
    with torch.no_grad():
        layer.bias.normal_()  # a nonzero bias exercises the bias path
    return layer


def _identity_logits_layer(cls, logits: torch.Tensor, **hp):
    """A layer whose logits are exactly ``logits`` (context = logits, weight = I, bias = 0)."""
    n = logits.size(-1)
    layer = cls(n, n, n, **hp).to(logits.dtype)
    return layer, torch.eye(n, dtype=logits.dtype)


# --------------------------------------------------------------------------------------------- registry ---
def test_unknown_name_lists_the_registered_layers():
    with pytest.raises(ValueError, match="unknown output layer 'sigmoid'; registered: " + ", ".join(OUTPUT_LAYERS)):
        build_output_layer("sigmoid", V, D, D, {})
    with pytest.raises(ValueError, match="registered: softmax"):
        extra_parameter_count("nope", V, D, D, {})


def test_softmax_family_requires_nhidlast_equal_nemb():
    with pytest.raises(ValueError, match="nhidlast"):
        build_output_layer("softmax", V, D, D + 1, {})
    build_output_layer("mos", V, D, D + 1, {"n_experts": 2})  # mixtures project the context


def test_none_hyper_parameters_fall_back_to_defaults():
    layer = build_output_layer("gss", V, D, D, {"gss_c": None, "gss_k": None, "lr": 30})
    assert (layer.c, layer.k) == (0.0, 2.0)
    plif = build_output_layer("lms_plif", V, D, D, {"plif_knots": None})
    assert plif.slope_raw.shape == (100_000,)


@pytest.mark.parametrize("name", OUTPUT_LAYERS)
def test_rows_are_normalised_log_probs(name):
    layer = _layer(name)
    weight = torch.empty(V, D).uniform_(-0.1, 0.1) * 20
    context = torch.randn(7, 3, _nhidlast(name))
    for mode in ("train", "eval"):
        layer.train(mode == "train")
        out = layer(context, weight)
        assert out.shape == (7, 3, V) and out.dtype == torch.float32
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out.exp().sum(-1), torch.ones(7, 3), atol=1e-5, rtol=0)
    flat = layer.eval()(context.reshape(-1, _nhidlast(name)), weight)
    assert flat.shape == (21, V)
    torch.testing.assert_close(flat.exp().sum(-1), torch.ones(21), atol=1e-5, rtol=0)
    # in eval mode, [N, d'] input gives the same rows as [L, B, d']
    torch.testing.assert_close(flat, layer(context, weight).reshape(-1, V), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", OUTPUT_LAYERS)
def test_weight_is_not_stored_and_gradients_flow(name):
    layer = _layer(name).train()
    weight = torch.randn(V, D, requires_grad=True)
    assert all(p.shape != (V, D) for p in layer.parameters())
    assert layer.bias.shape == (V,)
    out = layer(torch.randn(5, 2, _nhidlast(name)), weight)
    F.nll_loss(out.reshape(-1, V), torch.randint(V, (10,))).backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0
    for pname, p in layer.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("name", OUTPUT_LAYERS)
def test_autocast_output_is_float32(name):
    layer = _layer(name).eval()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(torch.randn(4, 2, _nhidlast(name)), torch.randn(V, D))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(4, 2), atol=1e-5, rtol=0)


def test_wrong_shapes_are_rejected():
    layer = _layer("softmax")
    with pytest.raises(ValueError, match="context"):
        layer(torch.randn(2, 3, 4, D), torch.randn(V, D))
    with pytest.raises(ValueError, match="weight"):
        layer(torch.randn(2, 3, D), torch.randn(V + 1, D))


# ---------------------------------------------------------------------------------- special cases (§4.3) ---
def _copy_bias(dst, src):
    with torch.no_grad():
        dst.bias.copy_(src.bias)
    return dst


@pytest.mark.parametrize("c", [-1.5, 0.0, 2.0])
def test_gss_with_k_one_is_softmax(c):
    softmax = _layer("softmax").double()
    gss = _copy_bias(build_output_layer("gss", V, D, D, {"gss_c": c, "gss_k": 1.0}).double(), softmax)
    weight, context = torch.randn(V, D, dtype=torch.float64) * 3, torch.randn(6, 4, D, dtype=torch.float64)
    torch.testing.assert_close(gss(context, weight), softmax(context, weight), atol=1e-6, rtol=0)


def test_gss_zero_two_is_ss():
    ss = _layer("ss").double()
    gss = _copy_bias(build_output_layer("gss", V, D, D, {"gss_c": 0.0, "gss_k": 2.0}).double(), ss)
    weight, context = torch.randn(V, D, dtype=torch.float64) * 3, torch.randn(6, 4, D, dtype=torch.float64)
    torch.testing.assert_close(gss(context, weight), ss(context, weight), atol=1e-6, rtol=0)
    # float32: equal up to rounding of log-probabilities of size ~30
    ss32, gss32 = ss.float(), gss.float()
    torch.testing.assert_close(gss32(context.float(), weight.float()), ss32(context.float(), weight.float()))


def test_gss_transform_limits():
    from softmax_bottleneck.models.output_layers.gss import smooth_piecewise_linear

    x = torch.tensor([-200.0, -60.0, 60.0, 200.0, 1e4], dtype=torch.float64)
    y = smooth_piecewise_linear(x, -1.5, 2.5)
    pl = torch.where(x > -1.5, x, 2.5 * (x + 1.5) - 1.5)  # the two-piece linear PL(x; c, k)
    torch.testing.assert_close(y, pl, atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------------ SS numerics ---
def test_ss_equals_literal_reference_formula():
    from softmax_bottleneck.models.output_layers import SigSoftmax

    torch.manual_seed(1)
    for dtype, atol in ((torch.float64, 1e-10), (torch.float32, 1e-5)):
        logits = (torch.randn(9, 30) * 6).to(dtype)
        layer, eye = _identity_logits_layer(SigSoftmax, logits)
        num = torch.exp(logits.double()) * torch.sigmoid(logits.double())
        literal = torch.log(num / num.sum(-1, keepdim=True)).to(dtype)
        torch.testing.assert_close(layer(logits, eye), literal, atol=atol, rtol=0)


def test_ss_is_finite_for_huge_logits():
    from softmax_bottleneck.models.output_layers import SigSoftmax

    logits = torch.tensor([[1000.0, -1000.0, 0.0, 5.0], [-1000.0, -999.0, -1e4, 1e4], [-1e4] * 4])
    layer, eye = _identity_logits_layer(SigSoftmax, logits)
    logits.requires_grad_(True)
    out = layer(logits, eye)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(3), atol=1e-6, rtol=0)
    assert out[0, 0].item() == pytest.approx(0.0, abs=1e-6)  # the 1000 logit takes all the mass
    # deep negative side: log SS ≈ log_softmax(2 l), so -999 beats -1000 by a factor e^2
    assert (out[1, 1] - out[1, 0]).item() == pytest.approx(2.0, abs=1e-3)
    out.sum().backward()
    assert torch.isfinite(logits.grad).all()


# ------------------------------------------------------------------------------------------------- PLIF ---
def _unit_plif(knots=1000, t=20.0, dtype=torch.float32):
    layer = PLIF(V, D, D, plif_knots=knots, plif_t=t).to(dtype)
    with torch.no_grad():
        layer.slope_raw.fill_(UNIT_SLOPE_RAW)
    return layer


def test_plif_init_and_lr_hint():
    torch.manual_seed(3)
    layer = build_output_layer("lms_plif", V, D, D, {"plif_knots": 100_000, "plif_init_std": 1.0})
    w = layer.slope_raw.detach()
    assert w.mean().item() == pytest.approx(math.log(math.e - 1), abs=0.02)
    assert w.std().item() == pytest.approx(1.0, abs=0.02)
    assert F.softplus(torch.tensor(UNIT_SLOPE_RAW)).item() == pytest.approx(1.0, abs=1e-7)
    assert layer.slope_raw.requires_grad
    assert [(p is layer.slope_raw, key) for p, key in layer.own_lr_parameters()] == [(True, "plif_lr")]
    assert layer.param_groups_hint() == {"slope_raw": 0.02}
    torch.manual_seed(3)
    again = build_output_layer("lms_plif", V, D, D, {})
    assert torch.equal(again.slope_raw, layer.slope_raw)  # drawn from torch's global RNG


def test_plif_with_unit_slopes_is_softmax():
    plif = _unit_plif(knots=100_000)
    with torch.no_grad():
        plif.bias.normal_()
    softmax = _copy_bias(Softmax(V, D, D), plif)
    weight, context = torch.randn(V, D), torch.randn(6, 4, D) * 2
    torch.testing.assert_close(plif(context, weight), softmax(context, weight), atol=1e-5, rtol=0)


def test_plif_transform_is_continuous_piecewise_linear():
    torch.manual_seed(4)
    k, t = 10, 2.0
    layer = PLIF(V, D, D, plif_knots=k, plif_t=t).double()
    s = layer.slopes().detach()
    delta = 2 * t / k
    knots = -t + delta * torch.arange(k, dtype=torch.float64)
    f = layer.transform
    assert f(torch.tensor([-t], dtype=torch.float64)).item() == pytest.approx(0.0, abs=1e-12)
    # continuity at every interior knot boundary
    eps = 1e-9
    boundaries = knots[1:]
    jump = f(boundaries + eps) - f(boundaries - eps)
    assert jump.abs().max().item() < 1e-7
    # slope s_i inside bin i (midpoints +- a small step)
    mid, h = knots + delta / 2, delta / 8
    torch.testing.assert_close((f(mid + h) - f(mid - h)) / (2 * h), s, atol=1e-9, rtol=0)
    # linear extension beyond [-T, T] with the end slopes
    assert ((f(torch.tensor([-t - 3.0], dtype=torch.float64)) - 0.0) / -3.0).item() == pytest.approx(s[0].item())
    right = f(torch.tensor([t, t + 5.0], dtype=torch.float64))
    assert ((right[1] - right[0]) / 5.0).item() == pytest.approx(s[-1].item())
    # f is the integral of the step slope function from -T (dense reference, inside the range)
    x = torch.linspace(-t, t - 1e-9, 101, dtype=torch.float64)
    dense = (s * (x[:, None] - knots).clamp(0, delta)).sum(-1)
    torch.testing.assert_close(f(x), dense, atol=1e-12, rtol=0)
    assert (torch.diff(f(torch.linspace(-30, 30, 1001, dtype=torch.float64))) > 0).all()  # strictly increasing


def test_plif_gradient_reaches_slopes_with_k_1e5_in_small_memory():
    """What backward keeps of LMS-PLIF with 10^5 knots is a few tokens x V tensors and the knots' own: an O(tokens x V x
    K) formulation would keep 20 * 2000 * 1e5 = 4e9 floats (16 GB); only gathers keep it small."""
    torch.manual_seed(5)
    layer = build_output_layer("lms_plif", 2000, D, D, {"plif_knots": 100_000})
    weight = torch.randn(2000, D) * 3
    kept: dict[int, int] = {}  # storage -> bytes, of every tensor saved for backward

    def pack(tensor):
        kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = layer(torch.randn(10, 2, D), weight)
        loss = F.nll_loss(out.reshape(-1, 2000), torch.randint(2000, (20,)))
    loss.backward()
    assert kept and sum(kept.values()) < 32 * 2**20  # 2 MB measured; the O(tokens x V x K) tensor alone is 16 GB
    grad = layer.slope_raw.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    assert (grad != 0).sum() > 1000  # prefix sums spread the gradient over many bins


def test_frozen_plif_has_no_trainable_slope():
    torch.manual_seed(6)
    layer = build_output_layer("lms_plif_frozen", V, D, D, {"plif_knots": 500})
    assert not layer.slope_raw.requires_grad
    assert layer.own_lr_parameters() == [] and layer.param_groups_hint() == {}
    assert "slope_raw" in layer.state_dict()
    before = layer.slope_raw.detach().clone()
    out = layer(torch.randn(3, 2, D), torch.randn(V, D))
    out.sum().backward()
    assert layer.slope_raw.grad is None and torch.equal(layer.slope_raw, before)
    assert [n for n, p in layer.named_parameters() if p.requires_grad] == ["bias"]


@pytest.mark.parametrize("name", OUTPUT_LAYERS)
def test_own_lr_parameters_are_trainable_and_name_a_registered_key(name):
    layer = _layer(name)
    own = layer.own_lr_parameters()
    trainable = {id(p) for p in layer.parameters() if p.requires_grad}
    assert all(id(p) in trainable and key in output_layer(name).hyperparameters for p, key in own)
    if output_layer(name).builtin:  # of the paper's layers only LMS-PLIF has its own lr
        assert (len(own) == 1) == (name == "lms_plif")


# --------------------------------------------------------------------------------------------- mixtures ---
def _latent_softmax_reference(layer, context, weight):
    z = torch.tanh(F.linear(context, layer.latent.weight, layer.latent.bias))
    return F.log_softmax(F.linear(z, weight, layer.bias), dim=-1)


@pytest.mark.parametrize("cls", [MixtureOfSoftmaxes, MixtureOfContexts])
def test_mixture_with_one_expert_is_softmax_over_latent(cls):
    torch.manual_seed(7)
    layer = cls(V, D, DL, n_experts=1, dropoutl=0.4)
    with torch.no_grad():
        layer.bias.normal_()
    weight, context = torch.randn(V, D), torch.randn(5, 3, DL)
    expected = _latent_softmax_reference(layer, context, weight)
    torch.testing.assert_close(layer.eval()(context, weight), expected, atol=1e-6, rtol=0)
    layer.dropoutl = 0.0
    torch.testing.assert_close(layer.train()(context, weight), expected, atol=1e-6, rtol=0)


def test_mos_and_moc_differ_for_several_experts_and_match_their_formulas():
    torch.manual_seed(8)
    mos = MixtureOfSoftmaxes(V, D, DL, n_experts=4, dropoutl=0.0).double()
    moc = MixtureOfContexts(V, D, DL, n_experts=4, dropoutl=0.0).double()
    moc.load_state_dict(mos.state_dict())
    weight, context = torch.randn(V, D, dtype=torch.float64), torch.randn(5, 3, DL, dtype=torch.float64)
    out_mos, out_moc = mos(context, weight), moc(context, weight)
    assert (out_mos - out_moc).abs().max() > 1e-3
    z = torch.tanh(mos.latent(context)).view(5, 3, 4, D)
    pi = torch.softmax(mos.prior(context), -1)
    probs = torch.softmax(F.linear(z, weight, mos.bias), -1)
    torch.testing.assert_close(out_mos, torch.log((pi.unsqueeze(-1) * probs).sum(-2)), atol=1e-10, rtol=0)
    mixed = (pi.unsqueeze(-1) * z).sum(-2)
    torch.testing.assert_close(out_moc, F.log_softmax(F.linear(mixed, weight, mos.bias), -1), atol=1e-10, rtol=0)


def test_mos_latent_dropout_only_in_training():
    torch.manual_seed(9)
    layer = MixtureOfSoftmaxes(V, D, DL, n_experts=3, dropoutl=0.5)
    weight, context = torch.randn(V, D), torch.randn(4, 2, DL)
    evaluated = layer.eval()(context, weight)
    torch.testing.assert_close(layer(context, weight), evaluated)
    assert (layer.train()(context, weight) - evaluated).abs().max() > 1e-4


def test_mos_is_stable_without_epsilon():
    # components with a log-prob far below log(1e-8) stay finite and exact (no epsilon floor)
    torch.manual_seed(10)
    layer = MixtureOfSoftmaxes(V, D, DL, n_experts=2, dropoutl=0.0).eval()
    out = layer(torch.randn(3, 2, DL), torch.randn(V, D) * 60)
    assert torch.isfinite(out).all() and out.min() < math.log(1e-8)


# ------------------------------------------------------------------------------------------ rank (§9.1) ---
def _logp_matrix(name, rows=120, dtype=torch.float64, **hp):
    layer = _layer(name, dropoutl=0.0, **hp).to(dtype).eval()
    torch.manual_seed(11)
    weight = torch.randn(V, D, dtype=dtype)
    with torch.no_grad():
        return layer(torch.randn(rows, _nhidlast(name), dtype=dtype), weight).numpy().astype(np.float64)


def _press_rank(a):
    sv = np.linalg.svd(a, compute_uv=False)
    tol = 0.5 * math.sqrt(sum(a.shape) + 1) * sv[0] * np.finfo(np.float32).eps
    return int((sv > tol).sum())


def test_log_p_rank_of_softmax_and_moc_is_nemb_plus_two_and_mos_is_higher():
    for name in ("softmax", "moc"):
        logp = _logp_matrix(name)
        assert np.linalg.matrix_rank(logp) == D + 2, name
        assert _press_rank(_logp_matrix(name, dtype=torch.float32)) == D + 2, name
    assert np.linalg.matrix_rank(_logp_matrix("mos")) > D + 2
    for name in ("ss", "gss", "lms_plif"):  # the non-linearities also lift the rank
        assert np.linalg.matrix_rank(_logp_matrix(name)) > D + 2, name


# ---------------------------------------------------------------------------------- parameter counts ---
@pytest.mark.parametrize("name", OUTPUT_LAYERS)
def test_extra_parameter_count_matches_module(name):
    layer = _layer(name)
    assert extra_parameter_count(name, V, D, _nhidlast(name), SMALL_HP) == sum(p.numel() for p in layer.parameters())


def _lstm_params(sizes):
    return sum(4 * o * (i + o) + 8 * o for i, o in zip(sizes[:-1], sizes[1:], strict=True))


@pytest.mark.parametrize(
    ("name", "v", "d", "h", "dl", "hp", "total"),
    [
        ("softmax", 10_000, 400, 1150, 400, {}, 24_221_600),
        ("lms_plif", 10_000, 400, 1150, 400, {}, 24_321_600),
        ("softmax", 33_278, 400, 1150, 400, {}, 33_556_078),
        ("mos", 10_000, 280, 960, 620, {"n_experts": 15}, 21_500_620),
        ("mos", 33_278, 300, 1150, 650, {"n_experts": 15}, 34_909_528),
        ("mos", 10_000, 280, 960, 620, {"n_experts": 1}, 19_057_620),
        ("moc", 10_000, 280, 960, 280, {"n_experts": 15}, 17_535_200),
        ("softmax", 10_000, 340, 960, 340, {}, 17_560_880),
    ],
)
def test_extra_parameter_count_reproduces_spec_totals(name, v, d, h, dl, hp, total):
    assert v * d + _lstm_params([d, h, h, dl]) + extra_parameter_count(name, v, d, dl, hp) == total
