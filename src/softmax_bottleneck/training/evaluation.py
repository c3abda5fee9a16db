"""Evaluation exactly as the reference (spec §7).

Eval mode (no dropout), hidden state zero at the start and carried (detached) across chunks of
exactly ``bptt`` rows; each chunk's mean NLL is weighted by its length L and the sum is divided by
T = ``len(data)`` — the number of rows, not the T − 1 rows actually predicted. Perplexity is the
exponential of that loss.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from softmax_bottleneck.corpora.corpus import get_batch


def chunk_nll(log_prob: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of ``targets`` [L, B] under ``log_prob`` [L, B, V]."""
    return F.nll_loss(log_prob.reshape(-1, log_prob.size(-1)), targets.reshape(-1))


@torch.no_grad()
def evaluate(model, data: torch.Tensor, bptt: int) -> float:
    """The reference's loss of batchified ``data`` [T, B] (see module docstring)."""
    model.eval()
    device = model.encoder.weight.device
    hidden = model.init_hidden(data.size(1))
    total = 0.0
    for i in range(0, data.size(0) - 1, bptt):
        inputs, targets = get_batch(data, i, bptt)
        log_prob, hidden, _, _ = model(inputs.to(device), hidden)
        total += len(inputs) * chunk_nll(log_prob, targets.to(device)).item()
    return total / len(data)


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf
