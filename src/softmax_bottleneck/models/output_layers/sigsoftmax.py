"""SigSoftmax output layer (Kanai et al. 2018, KIT ``top_model=s_smax``).

``SS(l)_z = exp(l_z) σ(l_z) / Σ_i exp(l_i) σ(l_i)`` with ``l = W h + b``.

The reference computes the quotient literally and then takes the log, which overflows for l ≳ 88 and
gives −inf for l ≲ −52 in float32 (a numerical pitfall of the reference code). Here the same quantity is
computed stably as ``log SS(l) = log_softmax(l + logsigmoid(l))`` (= ``log_softmax(2l − softplus(l))``), finite
for any finite logits.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .base import SoftmaxOfScores
from .registry import register_output_layer

__all__ = ["SigSoftmax"]


def log_sigsoftmax(logits: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable ``log(exp(l) σ(l) / Σ exp(l) σ(l))`` along ``dim``."""
    return F.log_softmax(logits + F.logsigmoid(logits), dim=dim)


@register_output_layer("ss", display="SS", family="softmax", color="#ff7f0e")
class SigSoftmax(SoftmaxOfScores):
    """SS: ``log p = log_softmax(l + log σ(l))``, ``l = W h + b`` (paper §3)."""

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        logits = self.logits(context, weight)
        return logits + F.logsigmoid(logits)
