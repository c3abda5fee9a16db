"""The optimisation schedule: SGD → averaged SGD with the ET or NT switch (paper §4; SM §2, Table 6).

* Variable-length BPTT: base ``bptt`` w.p. 0.95 else ``bptt/2``; length ``max(5, int(N(base, 5)))``
  capped at ``bptt + max_seq_len_delta``, drawn from numpy's global RNG (as AWD-LSTM).
* Every group's lr is scaled by ``seq_len/bptt`` for one update and restored after it.
* Parameter groups: every trainable parameter at the common lr, PLIF slopes at their own lr.
* SGD without momentum, then ``torch.optim.ASGD(t0=0, lambd=0)``: SGD plus the running mean ``ax``
  of the iterates, which is swapped into the model for validation (:class:`AveragedWeights`).
* ET switches after epoch ``switch_epoch``; NT (``switch_epoch = −1``) when the validation loss exceeds
  the minimum of all but the last ``nonmono`` earlier SGD-phase losses (AWD-LSTM's rule).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from softmax_bottleneck.models.awd_lstm import AWDLSTM


def param_groups(model: AWDLSTM, hp: dict) -> list[dict]:
    """One group for every trainable parameter at the common lr, one per parameter with its own lr (PLIF); ValueError
    naming the layer and the key when its learning rate is no hyper-parameter of the run."""
    own = {}
    for p, key in model.output_layer.own_lr_parameters():
        if key not in hp:
            layer = hp.get("output_layer")
            raise ValueError(f"output layer {layer!r}: own_lr_parameters() asks the learning rate {key!r}, which is no "
                             f"hyper-parameter of the run: declare it in the layer's registration (check-layer {layer} "
                             "checks it)")  # fmt: skip
        own[id(p)] = hp[key]
    common = [p for p in model.parameters() if p.requires_grad and id(p) not in own]
    groups = [{"params": common, "lr": hp["lr"]}]
    groups += [{"params": [p], "lr": lr} for p in model.parameters() if id(p) in own for lr in [own[id(p)]]]
    return groups


def make_optimizer(model: AWDLSTM, hp: dict, phase: str) -> torch.optim.Optimizer:
    """SGD (phase ``sgd``) or ASGD with ``t0=0, lambd=0`` (phase ``asgd``) over :func:`param_groups`.

    On CUDA the ASGD is ``capturable``: its step counter, η and μ stay on the GPU (the default reads
    the counter back once per parameter and step). With ``lambd=0`` both compute the same float32
    η = lr and μ = 1/max(1, t) (a float64 quotient rounded to float32 is the float32 quotient).
    """
    groups = param_groups(model, hp)
    if phase == "sgd":
        return torch.optim.SGD(groups, lr=hp["lr"], weight_decay=hp["wdecay"])
    capturable = next(model.parameters()).is_cuda
    return torch.optim.ASGD(groups, lr=hp["lr"], t0=0, lambd=0.0, weight_decay=hp["wdecay"], capturable=capturable)


class AveragedWeights:
    """Swap the ASGD running averages ``ax`` into the model (and back), as the reference does for evaluation."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, active: bool):
        self.model, self.optimizer, self.active = model, optimizer, active
        self.saved: dict = {}

    def __enter__(self):
        if self.active:
            for p in self.model.parameters():
                state = self.optimizer.state.get(p, {})
                if "ax" in state:
                    self.saved[p] = p.data.clone()
                    p.data.copy_(state["ax"])
        return self

    def __exit__(self, *exc):
        for p, data in self.saved.items():
            p.data.copy_(data)
        self.saved = {}


def asgd_trigger(epoch: int, val_loss: float, history: list[float], switch_epoch: int, nonmono: int) -> bool:
    """Whether to switch SGD → ASGD at the end of ``epoch``.

    ET (``switch_epoch`` ≠ −1): exactly after epoch ``switch_epoch``. NT (``switch_epoch`` = −1):
    ``history`` holds the earlier SGD-phase validation losses; switch when it has more than ``nonmono``
    entries and ``val_loss`` exceeds the minimum of all but its last ``nonmono`` (AWD's rule).
    """
    if switch_epoch != -1:
        return epoch == switch_epoch
    return len(history) > nonmono and val_loss > min(history[:-nonmono])


def sample_seq_len(hp: dict) -> int:
    """Variable-length BPTT, from numpy's global RNG (see the module docstring)."""
    base = hp["bptt"] if np.random.random() < 0.95 else hp["bptt"] / 2.0
    seq_len = max(5, int(np.random.normal(base, 5)))
    return min(seq_len, longest_seq_len(hp))


def longest_seq_len(hp: dict) -> int:
    """The most rows :func:`sample_seq_len` draws: ``bptt + max_seq_len_delta``."""
    return hp["bptt"] + hp["max_seq_len_delta"]


def scale_lr(optimizer: torch.optim.Optimizer, seq_len: int, bptt: int) -> list[float]:
    """Set every group's lr to ``lr * seq_len / bptt`` (in that order, as the KIT); returns the lrs to restore."""
    base = [g["lr"] for g in optimizer.param_groups]
    for g in optimizer.param_groups:
        g["lr"] = g["lr"] * seq_len / bptt
    return base


def restore_lr(optimizer: torch.optim.Optimizer, base: list[float]) -> None:
    for g, lr in zip(optimizer.param_groups, base, strict=True):
        g["lr"] = lr
