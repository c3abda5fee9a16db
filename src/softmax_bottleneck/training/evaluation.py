"""Evaluation exactly as the authors' ``evaluate()`` (KIT ``main.py:99-124``; paper §4, SM §2.1).

Eval mode (no dropout), hidden state zero at the start and carried (detached) across chunks of
exactly ``bptt`` rows; each chunk's mean NLL is weighted by its length L and the sum is divided by
T = ``len(data)`` — the number of rows, not the T − 1 rows actually predicted. Perplexity is the
exponential of that loss. The chunks go through the loss path (:meth:`.AWDLSTM.nll`: the log-probability
of the targets only); the weighted sum is accumulated in float64 (the authors: float32, a difference of at
most ~1e-7 relative).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from softmax_bottleneck.corpora.corpus import get_batch
from softmax_bottleneck.models.awd_lstm import mean_nll

#: how a chunk's NLL is computed: ``nll`` the loss path (:meth:`.AWDLSTM.nll`: the targets' log-probabilities only),
#: ``full`` the [L, B, V] log-probabilities of ``forward`` and a gather (kept for comparison: ``bench --loss-path``)
LOSS_PATHS = ("nll", "full")


def chunk_nll(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of ``targets`` [L, B], reduced as the authors' ``nn.NLLLoss`` (mean).

    ``scores`` are either the per-token NLLs [L, B] of the loss path (:meth:`.AWDLSTM.nll`) or the full
    log-probabilities [L, B, V] (:meth:`.AWDLSTM.forward`); both give the same number (bit for bit for the
    softmax family, see :func:`.mean_nll`).
    """
    if scores.shape == targets.shape:
        return mean_nll(scores)
    return F.nll_loss(scores.reshape(-1, scores.size(-1)), targets.reshape(-1))


@torch.no_grad()
def evaluate(model, data: torch.Tensor, bptt: int, loss_path: str = "nll") -> float:
    """The authors' loss of batchified ``data`` [T, B] (see module docstring).

    ``loss_path="full"`` computes each chunk from the [L, B, V] log-probabilities instead (for comparison).
    """
    if loss_path not in LOSS_PATHS:
        raise ValueError(f"loss path must be one of {', '.join(LOSS_PATHS)}, got {loss_path!r}")
    model.eval()
    device = model.encoder.weight.device
    hidden = model.init_hidden(data.size(1))
    total = 0.0
    for i in range(0, data.size(0) - 1, bptt):
        inputs, targets = get_batch(data, i, bptt)
        inputs, targets = inputs.to(device), targets.to(device)
        if loss_path == "nll":
            scores, hidden, _, _ = model.nll(inputs, hidden, targets)
        else:
            scores, hidden, _, _ = model(inputs, hidden)
        total += len(inputs) * chunk_nll(scores, targets).item()
    return total / len(data)


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf
