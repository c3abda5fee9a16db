"""Preflight: before the first training step of each attempt (a resumed one too), a run sends every shape and mode
it will meet once through its model.

A layer that fails only at some shape (the test set is evaluated at batch size 1, a training chunk can be as short
as 2 rows, the last evaluation chunk is shorter than ``bptt``) would otherwise fail after the whole training, its
GPU-hours lost. :func:`run_shapes` lists the shapes a run meets, from its hyper-parameters and its data:

* **training mode**, the ``small_batch_size`` columns of a gradient-accumulation chunk (it divides ``batch_size``),
  at the shortest chunk (2 rows: the end of an epoch; :func:`~.step.train_batch`) and the longest the
  variable-BPTT sampler draws (``bptt + max_seq_len_delta``);
* **evaluation mode**, the validation set at ``eval_batch_size`` and the test set at ``test_batch_size`` (1 in every
  preset), each at ``bptt`` rows and at its last, shorter chunk (:func:`~.evaluation.evaluate`).

:func:`check_shapes` runs the model on each: in training mode the loss path ``nll`` and its backward pass (finite
values of shape ``[L, B]``, finite gradients) and ``forward`` (finite rows that normalise); in evaluation mode
``forward`` and ``nll`` (the same, and ``nll = −forward[targets]``). It works on a copy of the model, on its
device, and restores every random generator afterwards, so the run's numbers do not change: Python's, NumPy's and
torch's global ones (CPU and CUDA), and every ``torch.Generator`` at the top level of a loaded module (a plug-in
layer's own, :func:`module_generators`); a generator the layer holds itself is copied with the model. The first failure
raises :class:`PreflightError`: one line naming the output layer, the shape and what is wrong.
"""

from __future__ import annotations

import copy
import logging
import sys
import time
from dataclasses import dataclass

import torch

from softmax_bottleneck.readback import error_line
from softmax_bottleneck.training.schedule import longest_seq_len
from softmax_bottleneck.training.state import rng_state, set_rng_state

__all__ = ["PreflightError", "Shape", "check_shapes", "eval_lengths", "preflight", "run_shapes"]

log = logging.getLogger("softmax_bottleneck.train")

#: the shortest training chunk: the last one of an epoch leaves at least 2 rows (train_batch runs while
#: position < rows − 2)
SHORTEST_TRAINING_CHUNK = 2
#: |logsumexp(row)| a row of log-probabilities may have (float32 over up to ~33k words)
NORM_TOL = 1e-3
#: |nll + forward[targets]| allowed in evaluation mode (float32; MoS's fused nll differs by ~1e-6)
NLL_TOL = 1e-3


class PreflightError(ValueError):
    """A shape or mode of the run fails with its output layer (the message names both); ``layer`` is False when the
    cause is not the layer (the model's parameters are not finite before the first step)."""

    def __init__(self, message: str, layer: bool = True):
        super().__init__(message)
        self.layer = layer


@dataclass(frozen=True)
class Shape:
    """One input shape of a run: ``length`` rows (BPTT) × ``batch`` columns, in ``mode``, and where it occurs."""

    what: str
    mode: str  # "training" or "evaluation"
    length: int
    batch: int

    def __str__(self) -> str:
        return f"{self.what} ({self.mode} mode, {self.length} × {self.batch} tokens)"


def eval_lengths(rows: int, bptt: int) -> list[int]:
    """The chunk lengths :func:`~.evaluation.evaluate` meets on ``rows`` rows: ``bptt`` (or all) and the last one."""
    if rows < 2:
        return []
    last_start = ((rows - 2) // bptt) * bptt
    return sorted({min(bptt, rows - 1), min(bptt, rows - 1 - last_start)}, reverse=True)


def run_shapes(hp: dict, train_rows: int, valid_rows: int, test_rows: int) -> list[Shape]:
    """Every shape a run with hyper-parameters ``hp`` meets on batchified data of these row counts (module doc)."""
    longest = min(longest_seq_len(hp), train_rows - 1)
    lengths = [(longest, "the longest BPTT")]
    if SHORTEST_TRAINING_CHUNK < longest:
        lengths.append((SHORTEST_TRAINING_CHUNK, "the shortest (end of an epoch)"))
    shapes = [Shape(f"a training chunk, {where}", "training", n, hp["small_batch_size"]) for n, where in lengths]
    for split, rows, size in (("validation", valid_rows, "eval_batch_size"), ("test", test_rows, "test_batch_size")):
        for i, length in enumerate(eval_lengths(rows, hp["bptt"])):
            where = "bptt rows" if i == 0 else "its last chunk"
            shapes.append(Shape(f"the {split} set at {size} {hp[size]}, {where}", "evaluation", length, hp[size]))
    return shapes


def _bad(tensor: torch.Tensor) -> int:
    return int((~torch.isfinite(tensor)).sum())


def _check_output(name: str, out: torch.Tensor, shape: tuple, normalised: bool) -> None:
    if tuple(out.shape) != shape:
        raise PreflightError(f"{name} gave shape {list(out.shape)}, expected {list(shape)}")
    bad = _bad(out)
    if bad:
        raise PreflightError(
            f"{name} gave {bad} non-finite values (NaN or inf) of {out.numel()}: the layer's output, not the learning "
            "rate or the data"
        )
    if normalised:
        deviation = float(torch.logsumexp(out.double(), dim=-1).abs().max())
        if deviation > NORM_TOL:
            raise PreflightError(f"rows of forward's log-probabilities have logsumexp up to {deviation:.3g}, not 0")


def _run_shape(model, shape: Shape) -> None:
    """One shape through ``model`` (a throwaway copy): PreflightError naming what is wrong. The backward pass is the
    mean ``nll``'s (the layer's share of the training loss; AR and TAR involve the LSTM only)."""
    device = model.encoder.weight.device
    vocab = model.vocab_size
    gen = torch.Generator().manual_seed(shape.length * 7919 + shape.batch)
    tokens = torch.randint(vocab, (shape.length + 1, shape.batch), generator=gen).to(device)
    inputs, targets = tokens[:-1], tokens[1:]
    size = (shape.length, shape.batch)
    if shape.mode == "training":
        model.train()
        model.zero_grad(set_to_none=True)
        nll, *_ = model.nll(inputs, model.init_hidden(shape.batch), targets)
        _check_output("nll", nll, size, normalised=False)
        nll.mean().backward()
        for pname, param in model.named_parameters():
            if param.grad is not None and _bad(param.grad):
                raise PreflightError(f"the training loss sends non-finite gradients (NaN or inf) to {pname}")
        with torch.no_grad():
            log_prob, *_ = model(inputs, model.init_hidden(shape.batch))
        _check_output("forward", log_prob, (*size, vocab), normalised=True)
        model.zero_grad(set_to_none=True)
        return
    model.eval()
    with torch.no_grad():
        log_prob, *_ = model(inputs, model.init_hidden(shape.batch))
        _check_output("forward", log_prob, (*size, vocab), normalised=True)
        nll, *_ = model.nll(inputs, model.init_hidden(shape.batch), targets)
        _check_output("nll", nll, size, normalised=False)
        gathered = -log_prob.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        diff = float((nll.double() - gathered.double()).abs().max())
        if diff > NLL_TOL:
            raise PreflightError(f"nll differs from −forward[targets] by {diff:.3g}")


def module_generators() -> list[torch.Generator]:
    """Every ``torch.Generator`` held at the top level of a loaded module (``sys.modules``): a plug-in layer may draw
    from one of its own, which the preflight would otherwise advance."""
    found: dict[int, torch.Generator] = {}
    for module in list(sys.modules.values()):
        try:
            values = list(vars(module).values())
        except TypeError:  # no __dict__
            continue
        found.update((id(value), value) for value in values if type(value) is torch.Generator)
    return list(found.values())


def check_shapes(model, hp: dict, shapes: list[Shape]) -> None:
    """Run every shape of ``shapes`` through a copy of ``model`` (module docstring); the model, its gradients and
    every random generator are as before. :class:`PreflightError` naming the output layer and the first failing
    shape, or the first parameter that is not finite before any of it."""
    layer = model.output_layer
    who = f"output layer {hp.get('output_layer')!r} ({type(layer).__module__}.{type(layer).__qualname__})"
    broken = [name for name, param in model.named_parameters() if _bad(param.detach())]
    if broken:
        raise PreflightError(
            f"the model's parameter {broken[0]} holds non-finite values (NaN or inf) before the first training step"
            + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""),
            layer=False,
        )
    state = rng_state()
    generators = [(generator, generator.get_state()) for generator in module_generators()]
    probe = copy.deepcopy(model)
    try:
        for shape in shapes:
            try:
                _run_shape(probe, shape)
            except PreflightError as err:
                raise PreflightError(f"{who} fails on {shape}: {err}") from None
            except Exception as err:  # the layer's own error, in one line
                raise PreflightError(f"{who} fails on {shape}: {type(err).__name__}: {error_line(err)}") from None
    finally:
        del probe
        set_rng_state(state)
        for generator, generator_state in generators:
            generator.set_state(generator_state)


def preflight(
    model, hp: dict, train_data: torch.Tensor, val_data: torch.Tensor, test_data: torch.Tensor, logger=None
) -> None:
    """Before an attempt's first training step: every shape it will meet (:func:`run_shapes` of its batchified data)
    through its model, on its device (:func:`check_shapes`); :class:`PreflightError` ends the attempt before its
    first epoch, naming the layer and the shape (a resume state written earlier stays as it was). Its line goes to
    ``logger`` (the run's: in a fused group, prefixed with the run's label), else this module's."""
    started = time.monotonic()
    shapes = run_shapes(hp, train_data.size(0), val_data.size(0), test_data.size(0))
    try:
        check_shapes(model, hp, shapes)
    except PreflightError as err:
        advice = (
            f": fix the layer (check-layer {hp.get('output_layer')} checks the presets' shapes)" if err.layer else ""
        )
        raise PreflightError(f"preflight: {err}; no epoch ran in this attempt{advice}", err.layer) from None
    (logger or log).info("preflight: %d shapes and modes of this run pass with output layer %s (%.1fs)", len(shapes),
                         hp.get("output_layer"), time.monotonic() - started)  # fmt: skip
