"""Conformance checks of an output layer: what a layer must satisfy to take part in the study.

``python -m softmax_bottleneck check-layer NAME`` runs them on a registered layer (built with its registered
default hyper-parameters, at a small vocabulary); the test suite runs the same checks on every registered
layer. Each check passes, fails (naming the check, the layer and what is wrong) or is skipped (saying why):

* ``build``: the layer builds and ``forward`` gives ``[L, B, V]`` float32 log-probabilities for float32 input;
* ``parameters``: the built module's parameter count equals the registration's ``extra_parameter_count``
  (the #Param of paper Table 2), at two sizes; each parameter ``own_lr_parameters`` names is a trainable parameter
  of the layer, named once, with a learning-rate key the registration declares among the layer's own
  hyper-parameters (the optimiser reads it from the run's);
* ``normalise``: every row sums to 1 within 1e-5, in float32, at logits of ±5, ±50 and ±500, with finite
  log-probabilities, in training and evaluation mode;
* ``not-softmax``: the output is not the plain ``log_softmax`` of the layer's logits ``W h + b`` unless the
  registration declares ``softmax_equivalent`` (then it must be); a layer that starts as the softmax (e.g. a
  scale initialised to 1) passes when it differs once its own parameters move; skipped for layers that project
  the context;
* ``loss-path``: ``nll`` equals ``−forward[targets]`` in float64 to 1e-12 and so do its gradients (to 1e-10);
* ``gradients``: the training loss (mean ``nll``) sends finite, non-zero gradients to the tied weight, the bias
  and every trainable parameter of the layer;
* ``eval-deterministic``: in evaluation mode two calls give identical outputs whatever the random state;
* ``reload``: a tiny AWD-LSTM with the layer, trained for a few steps, saved with the checkpoint code and
  loaded again, gives identical log-probabilities;
* ``shapes``: a tiny AWD-LSTM with the layer goes through every shape and mode a run of each preset meets
  (:mod:`.preflight`: training chunks of 2 rows and of ``bptt + max_seq_len_delta`` rows at ``small_batch_size``,
  the validation set at ``eval_batch_size`` and the test set at ``test_batch_size`` = 1, each at ``bptt`` rows and
  at a 1-row last chunk, training and evaluation mode), with the presets' batch sizes and BPTT lengths.

A check whose subject is not a number (the layer returns NaN or inf) fails saying so, not with the comparison it
could not make. ``--point KEY=VALUE,...`` (repeatable) runs every check at those values of the layer's own
hyper-parameters instead of its registered defaults: the workflow checks every point its configuration trains.

``check-layer NAME --stamp FILE`` writes a small JSON stamp (the layer's name, distribution, version and the
SHA-256 of its module file, :func:`~softmax_bottleneck.models.output_layers.registry.layer_source`, and the points
checked) only when every check passes at every point (:mod:`.conformance_stamp`: the trainer asks it whether a
stamp still vouches for the layer now registered, at the run's point, so a workflow checks each plug-in once, on
CPU, before training it).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from softmax_bottleneck.models.output_layers.base import OutputLayer
from softmax_bottleneck.models.output_layers.hyperparameters import format_value
from softmax_bottleneck.models.output_layers.registry import OutputLayerSpec, output_layer

__all__ = [
    "CHECKS",
    "CheckFailed",
    "CheckResult",
    "check_layer",
    "parse_point",
    "point_argument",
    "point_text",
]
#: vocabulary and sizes of the checks: nemb = V lets the weight be X·I, so the logits are X·context exactly
V = 32
NEMB = V
PROJECTED = 48  # nhidlast of layers that project the context (MoS/MoC)
SCALES = (5.0, 50.0, 500.0)
NORM_TOL = 1e-5


class CheckFailed(Exception):
    """A check failed; the message says what is wrong."""


class CheckSkipped(Exception):
    """A check does not apply to this layer; the message says why."""


@dataclass(frozen=True)
class CheckResult:
    layer: str
    check: str
    status: str  # "pass", "fail" or "skip"
    detail: str = ""
    point: str = ""  # the layer's own hyper-parameters checked ("" = its registered defaults)

    @property
    def where(self) -> str:
        """``taylor`` or ``taylor [taylor_scale=0.5]``: the layer and the point, in failure lines."""
        return f"{self.layer} [{self.point}]" if self.point else self.layer


def point_text(point: dict) -> str:
    """``taylor_scale=0.5, taylor_order=2``: a point of a layer's own hyper-parameters ("" for none)."""
    return ", ".join(f"{key}={format_value(value)}" for key, value in point.items())


def point_argument(point: dict) -> str:
    """``KEY=VALUE,KEY=VALUE`` of a point of a layer's own hyper-parameters, as :func:`parse_point` reads it
    (``check-layer --point``)."""
    return ",".join(f"{key}={format_value(value)}" for key, value in point.items())


def _require_finite(tensor: torch.Tensor, what: str) -> None:
    """CheckFailed when ``tensor`` holds NaN or inf: the real cause, before any comparison that NaN would fool."""
    bad = int((~torch.isfinite(tensor)).sum())
    if bad:
        raise CheckFailed(
            f"{what} has {bad} non-finite values (NaN or inf) of {tensor.numel()}: the layer's output is not a "
            "number there, so nothing can be compared (see normalise)"
        )


class Subject:
    """The layer under test: its registration, its own hyper-parameters (``point``, else the defaults) and sizes."""

    def __init__(self, spec: OutputLayerSpec, device: torch.device, point: dict | None = None):
        self.spec, self.device = spec, device
        self.point = dict(point or {})
        self.hp = spec.layer_hp(self.point)
        self.nhidlast = PROJECTED if spec.cls.projects_context else NEMB

    def build(self, dtype=torch.float32, seed: int = 0, vocab: int = V, nemb: int = NEMB, nhidlast: int | None = None):
        torch.manual_seed(seed)
        layer = self.spec.build(vocab, nemb, nhidlast or self.nhidlast, self.hp)
        return layer.to(device=self.device, dtype=dtype)

    def inputs(self, scale: float, dtype=torch.float32, shape=(6, 4), seed: int = 1):
        """(context, weight) whose logits ``W h + b`` span about ±scale (exactly, for non-projecting layers)."""
        gen = torch.Generator().manual_seed(seed)
        weight = torch.eye(V, dtype=torch.float64) * scale
        if self.spec.cls.projects_context:  # latents tanh(·) ∈ (−1, 1), saturated by a large context
            context = torch.randn(*shape, self.nhidlast, generator=gen, dtype=torch.float64) * 3
        else:  # logits = scale · context, with every row reaching ±scale
            context = torch.rand(*shape, self.nhidlast, generator=gen, dtype=torch.float64) * 2 - 1
            context[..., 0], context[..., 1] = 1.0, -1.0
        return context.to(self.device, dtype), weight.to(self.device, dtype)


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


# ------------------------------------------------------------------------------------------------ checks
def _check_build(s: Subject) -> str:
    layer = s.build()
    context, weight = s.inputs(5.0)
    out = layer.eval()(context, weight)
    if tuple(out.shape) != (*context.shape[:-1], V):
        raise CheckFailed(f"forward gave shape {list(out.shape)}, expected {[*context.shape[:-1], V]}")
    if out.dtype != torch.float32:
        raise CheckFailed(f"forward gave {out.dtype} for float32 input, expected torch.float32")
    if tuple(layer.bias.shape) != (V,):
        raise CheckFailed(f"the layer's bias has shape {list(layer.bias.shape)}, expected [{V}]")
    return f"V={V}, nemb={NEMB}, nhidlast={s.nhidlast}, hyper-parameters {s.hp or 'none'}"


def _check_parameters(s: Subject) -> str:
    sizes = [(V, NEMB, s.nhidlast), (50, 8, 12 if s.spec.cls.projects_context else 8)]
    layers = [s.build(vocab=vocab, nemb=nemb, nhidlast=nhidlast) for vocab, nemb, nhidlast in sizes]
    for (vocab, nemb, nhidlast), layer in zip(sizes, layers, strict=True):
        built = sum(p.numel() for p in layer.parameters())
        declared = s.spec.extra_parameter_count(vocab, nemb, nhidlast, s.hp)
        if built != declared:
            raise CheckFailed(
                f"at V={vocab}, nemb={nemb}, nhidlast={nhidlast} the built layer has {built} parameters but "
                f"{s.spec.cls.__qualname__}.extra_parameter_count says {declared}: override extra_parameter_count "
                "to count every parameter the layer owns (it is the layer's #Param in Table 2)"
            )
    own = _check_own_lr(s, layers[0])
    return f"{declared} at V={vocab}, nemb={nemb}, nhidlast={nhidlast}" + (f"; own lr: {own}" if own else "")


def _check_own_lr(s: Subject, layer: OutputLayer) -> str:
    """CheckFailed unless each ``own_lr_parameters`` pair of ``layer`` (built at the subject's sizes) is a trainable
    parameter of it, named once, and a learning-rate key among the layer's declared hyper-parameters; the pairs' keys
    and values, for the detail."""
    mine = {id(p): name for name, p in layer.named_parameters()}
    seen: set[int] = set()
    keys = []
    for entry in layer.own_lr_parameters():
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], torch.nn.Parameter)):
            raise CheckFailed(f"own_lr_parameters() gave {type(entry).__name__} {entry!r:.80}, expected (parameter, "
                              "learning-rate key) pairs")  # fmt: skip
        parameter, key = entry
        if id(parameter) not in mine:
            raise CheckFailed("own_lr_parameters() names a parameter that is not one of the layer's")
        if not parameter.requires_grad or id(parameter) in seen:
            why = "is named twice" if parameter.requires_grad else "does not require grad (no optimiser steps it)"
            raise CheckFailed(f"own_lr_parameters() names {mine[id(parameter)]}, which {why}")
        if key not in s.spec.hyperparameters:
            raise CheckFailed(
                f"own_lr_parameters() gives {mine[id(parameter)]} the learning-rate key {key!r}, which the "
                f"registration does not declare among the layer's own hyper-parameters "
                f"({', '.join(s.spec.hyperparameters) or 'none'}): declare it (hyperparameters={{{key!r}: "
                "Hyperparameter(...)}), or a training stops at its first step"
            )
        seen.add(id(parameter))
        keys.append(f"{mine[id(parameter)]} at {key}={s.hp[key]}")
    return ", ".join(keys)


def _check_normalise(s: Subject) -> str:
    layer = s.build()
    worst = 0.0
    for scale in SCALES:
        context, weight = s.inputs(scale)
        for training in (False, True):
            torch.manual_seed(2)
            with torch.no_grad():
                out = layer.train(training)(context, weight)
            mode = "training" if training else "evaluation"
            if not torch.isfinite(out).all():
                bad = (~torch.isfinite(out)).sum().item()
                raise CheckFailed(f"at logits of ±{scale:g} ({mode} mode) the output has {bad} non-finite values "
                                  f"(NaN or inf) of {out.numel()}")  # fmt: skip
            deviation = float((out.double().exp().sum(-1) - 1).abs().max())
            worst = max(worst, deviation)
            if deviation > NORM_TOL:
                raise CheckFailed(
                    f"at logits of ±{scale:g} ({mode} mode) rows sum to 1 ± {deviation:.3g} (tolerance {NORM_TOL:g})"
                )
    return f"max |row sum − 1| = {worst:.2g} at logits of ±5, ±50, ±500"


def _check_not_softmax(s: Subject) -> str:
    if s.spec.cls.projects_context:
        raise CheckSkipped("the layer projects the context: there is no single logit vector W h + b to compare with")
    layer = s.build(torch.float64).eval()
    context, weight = s.inputs(5.0, torch.float64)

    def difference(what: str = "forward at logits of ±5") -> float:
        with torch.no_grad():
            out = layer(context, weight)
            _require_finite(out, what)
            return _close(out, F.log_softmax(layer.logits(context, weight), dim=-1))

    diff = difference()
    if s.spec.softmax_equivalent:
        if diff > 1e-9:
            raise CheckFailed(f"declared softmax_equivalent but differs from log_softmax(W h + b) by {diff:.3g}")
        return "declared softmax_equivalent, and equal to log_softmax(W h + b)"
    if diff >= 1e-6:
        return f"differs from log_softmax(W h + b) by up to {diff:.3g} at logits of ±5"
    # equal at initialisation: a layer may start as the softmax (a scale of 1, a gate of 0) and move away in
    # training; move its own parameters (not the bias, which the softmax has too) and compare again
    own = [p for n, p in layer.named_parameters() if n != "bias" and p.requires_grad]
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for param in own:
            param.add_((torch.rand(param.shape, generator=gen, dtype=param.dtype) * 0.4 + 0.1).to(param.device))
    moved = difference("forward once its own parameters move") if own else 0.0
    if moved >= 1e-6:
        return (f"equals log_softmax(W h + b) at initialisation, differs by up to {moved:.3g} once its own "
                "parameters move")  # fmt: skip
    if own:
        raise CheckFailed(
            f"the output equals log_softmax(W h + b) (max difference {diff:.2g}) even after its own parameters "
            "move: the layer is the Softmax baseline whatever it learns; if that is intended, register it with "
            "softmax_equivalent=True"
        )
    raise CheckFailed(
        f"the output equals log_softmax(W h + b) (max difference {diff:.2g}) and the layer has no parameters of its "
        "own to move away from it; if that is intended, register it with softmax_equivalent=True"
    )


def _paths(layer, context, weight, targets, upstream):
    results = []
    for path in ("forward", "nll"):
        ctx, w = context.clone().requires_grad_(), weight.clone().requires_grad_()
        layer.zero_grad(set_to_none=True)
        torch.manual_seed(3)
        if path == "forward":
            nll = -layer(ctx, w).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        else:
            nll = layer.nll(ctx, w, targets)
        _require_finite(nll, "−forward[targets] (training mode)" if path == "forward" else "nll (training mode)")
        (nll * upstream).sum().backward()
        grads = {"context": ctx.grad, "weight": w.grad}
        grads.update({f"parameter {n}": p.grad for n, p in layer.named_parameters() if p.requires_grad})
        results.append((nll.detach(), grads))
    return results


def _unseeded_difference(layer, context, weight) -> float:
    """How far two training-mode ``forward`` calls after the same ``torch.manual_seed`` differ (0: reproducible)."""
    outputs = []
    for _ in range(2):
        torch.manual_seed(3)
        with torch.no_grad():
            outputs.append(layer(context, weight))
    return _close(*outputs)


#: why a training-mode output that one torch seed does not reproduce fails (the symptom names no bug in nll)
OUTSIDE_TORCH_RNG = (
    "two training-mode forward calls after the same torch.manual_seed differ by up to {diff:.3g}: the layer draws "
    "random numbers outside torch's global generator (numpy, Python's random, a torch.Generator of its own, ...), or "
    "keeps state that changes between calls, so a fused run would not train as it does alone and nll cannot be "
    "compared with forward (the fault is not in nll); draw training-mode randomness with torch's own functions "
    "(torch.rand_like, torch.bernoulli, F.dropout) and none in evaluation mode, and keep no state that calls change"
)


def _check_loss_path(s: Subject) -> str:
    layer = s.build(torch.float64).train()
    gen = torch.Generator().manual_seed(4)
    context = torch.randn(5, 3, s.nhidlast, generator=gen, dtype=torch.float64).to(s.device)
    weight = (torch.randn(V, NEMB, generator=gen, dtype=torch.float64) * 2).to(s.device)
    targets = torch.randint(V, (5, 3), generator=gen).to(s.device)
    upstream = torch.rand(5, 3, generator=gen, dtype=torch.float64).to(s.device)
    unseeded = _unseeded_difference(layer, context, weight)
    if unseeded > 1e-12:  # (NaN is not: non-finite outputs are said below)
        raise CheckFailed(OUTSIDE_TORCH_RNG.format(diff=unseeded))
    (ref, ref_grads), (nll, grads) = _paths(layer, context, weight, targets, upstream)
    if ref.dtype != torch.float64 or nll.dtype != torch.float64:  # else the comparison below is float32's
        raise CheckFailed(f"float64 in, forward gave {ref.dtype} and nll {nll.dtype}: keep the input's float64")
    if tuple(nll.shape) != tuple(targets.shape):
        raise CheckFailed(f"nll gave shape {list(nll.shape)}, expected {list(targets.shape)}")
    _require_finite(ref, "−forward[targets] (float64, training mode)")
    _require_finite(nll, "nll (float64, training mode)")
    diff = _close(nll, ref)
    if not diff <= 1e-12:
        raise CheckFailed(f"nll differs from −forward[targets] by {diff:.3g} in float64 (tolerance 1e-12)")
    for key, grad in grads.items():
        ref_grad = ref_grads[key]
        if (grad is None) != (ref_grad is None):
            raise CheckFailed(f"the gradient of {key} exists on one path only")
        if grad is not None:
            _require_finite(ref_grad, f"the gradient of {key} through forward")
            _require_finite(grad, f"the gradient of {key} through nll")
        if grad is not None and not _close(grad, ref_grad) <= 1e-10:
            raise CheckFailed(f"the gradient of {key} differs between nll and forward by {_close(grad, ref_grad):.3g}")
    overridden = type(layer).nll is not OutputLayer.nll
    return ("own nll" if overridden else "default nll (gathered from forward)") + ", equal to 1e-12 / 1e-10"


def _check_gradients(s: Subject) -> str:
    layer = s.build().train()
    gen = torch.Generator().manual_seed(5)
    context = torch.randn(8, 4, s.nhidlast, generator=gen).to(s.device)
    weight = (torch.randn(V, NEMB, generator=gen) * 0.5).to(s.device).requires_grad_()
    targets = torch.randint(V, (8, 4), generator=gen).to(s.device)
    loss = layer.nll(context, weight, targets).mean()
    _require_finite(loss, "the training loss (mean nll)")
    loss.backward()
    named = {"the tied weight": weight, "the bias": layer.bias}
    named.update({f"parameter {n}": p for n, p in layer.named_parameters() if p.requires_grad and n != "bias"})
    if not layer.bias.requires_grad:
        raise CheckFailed("the bias does not require a gradient")
    for what, tensor in named.items():
        if tensor.grad is None:
            raise CheckFailed(f"no gradient reaches {what}")
        if not torch.isfinite(tensor.grad).all():
            raise CheckFailed(f"the gradient of {what} is not finite")
        if not tensor.grad.abs().sum() > 0:
            raise CheckFailed(f"the gradient of {what} is zero")
    return f"finite, non-zero gradients for {', '.join(named)}"


def _check_eval_deterministic(s: Subject) -> str:
    layer = s.build().eval()
    context, weight = s.inputs(5.0)
    targets = torch.randint(V, context.shape[:-1], generator=torch.Generator().manual_seed(6)).to(s.device)
    outputs = []
    for seed in (7, 8):
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs.append((layer(context, weight), layer.nll(context, weight, targets)))
    (out_a, nll_a), (out_b, nll_b) = outputs
    _require_finite(out_a, "forward in evaluation mode")
    _require_finite(nll_a, "nll in evaluation mode")
    if not torch.equal(out_a, out_b):
        raise CheckFailed(f"two evaluation-mode calls differ by up to {_close(out_a, out_b):.3g} (random state?)")
    if not torch.equal(nll_a, nll_b):
        raise CheckFailed("two evaluation-mode nll calls differ")
    return "forward and nll identical across calls and random states"


def _check_reload(s: Subject) -> str:
    from softmax_bottleneck import presets
    from softmax_bottleneck.models.awd_lstm import AWDLSTM
    from softmax_bottleneck.training.checkpoint import load_model, save_model

    sizes = {**_tiny_sizes(s), "bptt": 8, "small_batch_size": 4, "batch_size": 4}
    hp = presets.resolve("ptb", s.spec.name, "et", {**sizes, **s.point})
    torch.manual_seed(9)
    model = AWDLSTM(V, hp).to(s.device)
    gen = torch.Generator().manual_seed(10)
    tokens = torch.randint(V, (9, 4), generator=gen).to(s.device)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    model.train()
    for _ in range(3):
        optimizer.zero_grad()
        nll, *_ = model.nll(tokens[:-1], model.init_hidden(4), tokens[1:])
        _require_finite(nll, "nll of the tiny model in training")
        nll.mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
    model.eval()
    with torch.no_grad():
        before = model(tokens[:-1], model.init_hidden(4))[0]
    _require_finite(before, "forward of the tiny model after 3 training steps")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        save_model(model, path, dataset="ptb", variant=s.spec.name, hyperparameters=hp,
                   vocab=[f"w{i}" for i in range(V)])  # fmt: skip
        loaded, _ = load_model(path, s.device)
    with torch.no_grad():
        after = loaded(tokens[:-1], loaded.init_hidden(4))[0]
    if not torch.equal(before, after):
        raise CheckFailed(
            f"log-probabilities after save → load differ by up to {_close(before, after):.3g}: keep every tensor the "
            "layer needs in its state_dict (parameters or persistent buffers), and draw nothing at load time"
        )
    return "3 training steps, save_model → load_model: identical log-probabilities"


def _tiny_sizes(s: Subject) -> dict:
    """The sizes of the tiny AWD-LSTM of ``reload`` and ``shapes``."""
    return {"nemb": 16, "nhid": 16, "nhidlast": 24 if s.spec.cls.projects_context else 16}


def _check_shapes(s: Subject) -> str:
    from softmax_bottleneck import presets
    from softmax_bottleneck.models.awd_lstm import AWDLSTM
    from softmax_bottleneck.training.preflight import PreflightError, check_shapes, run_shapes
    from softmax_bottleneck.training.schedule import longest_seq_len

    done = []
    for dataset in presets.variant_datasets(s.spec.name):
        hp = presets.resolve(dataset, s.spec.name, "et", {**_tiny_sizes(s), **s.point})
        torch.manual_seed(12)
        model = AWDLSTM(V, hp).to(s.device)
        eval_rows = 3 * hp["bptt"] + 2  # a last evaluation chunk of 1 row
        shapes = run_shapes(hp, longest_seq_len(hp) + 1, eval_rows, eval_rows)
        try:
            check_shapes(model, hp, shapes)
        except PreflightError as err:
            raise CheckFailed(f"with the {dataset} preset's shapes: {err}") from None
        sizes = sorted({(shape.length, shape.batch) for shape in shapes}, key=lambda ls: (-ls[1], -ls[0]))
        done.append(f"{dataset} " + ", ".join(f"{length}×{batch}" for length, batch in sizes))
    return "training and evaluation mode at every shape a run meets (L×B): " + "; ".join(done)


CHECKS: dict[str, Callable[[Subject], str]] = {
    "build": _check_build,
    "parameters": _check_parameters,
    "normalise": _check_normalise,
    "not-softmax": _check_not_softmax,
    "loss-path": _check_loss_path,
    "gradients": _check_gradients,
    "eval-deterministic": _check_eval_deterministic,
    "reload": _check_reload,
    "shapes": _check_shapes,
}


def check_layer(
    name: str, device: str | torch.device = "cpu", checks: list[str] | None = None, point: dict | None = None
) -> list[CheckResult]:
    """Run the conformance ``checks`` (default: all) on the registered layer ``name`` at ``point`` (values of its own
    hyper-parameters; default: the registered defaults); one result per check.

    A check that raises anything other than :class:`CheckSkipped` fails with that error's message; when the layer
    does not build, the other checks are skipped. The global torch random state is restored afterwards.
    """
    spec = output_layer(name)
    subject = Subject(spec, torch.device(device), point)
    text = point_text(subject.point)
    results: list[CheckResult] = []
    rng = torch.get_rng_state()
    try:
        for check in checks or list(CHECKS):
            if results and results[0].check == "build" and results[0].status == "fail":
                results.append(CheckResult(name, check, "skip", "the layer does not build", text))
                continue
            try:
                results.append(CheckResult(name, check, "pass", CHECKS[check](subject), text))
            except CheckSkipped as skip:
                results.append(CheckResult(name, check, "skip", str(skip), text))
            except CheckFailed as failure:
                results.append(CheckResult(name, check, "fail", str(failure), text))
            except Exception as err:  # a crash in the layer is a failed check, not a traceback
                results.append(CheckResult(name, check, "fail", f"{type(err).__name__}: {err}", text))
    finally:
        torch.set_rng_state(rng)
    return results


def parse_point(name: str, text: str) -> dict:
    """``KEY=VALUE,KEY=VALUE`` -> a point of the layer ``name``'s own hyper-parameters, each value parsed and checked
    as declared; ValueError naming the bad item."""
    spec = output_layer(name)
    point = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise ValueError(f"--point {text!r}: {item.strip()!r} is not KEY=VALUE")
        if key not in spec.hyperparameters:
            own = ", ".join(spec.hyperparameters) or "none"
            raise ValueError(f"--point {text!r}: {key!r} is not a hyper-parameter of output layer {name!r} (its own: "
                             f"{own})")  # fmt: skip
        parsed = spec.hyperparameters[key].parse(value, key)
        if parsed is None:
            raise ValueError(f"--point {text!r}: {key} needs a value (omit it to check the registered default)")
        point[key] = parsed
    return point
