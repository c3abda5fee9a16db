"""Generalized SigSoftmax output layer (the paper's GSS, KIT ``top_model=gs_smax``).

Smooth two-piece linear map applied element-wise to the logits ``l = W h + b``:

    P̃L(x; c, k) = k (x − c) + c − (k − 1) · softplus(x − c),   GSS(l) = softmax(P̃L(l; c, k)).

It tends to x for x → +∞ and to k(x − c) + c for x → −∞; k = 1 gives Softmax and (c, k) = (0, 2) gives SS.
c and k are fixed hyper-parameters (``gss_c``, ``gss_k``), not learned. The reference writes softplus as
``log(exp(x − c) + 1)``, which overflows for x − c ≳ 88; ``F.softplus`` is the same function computed safely
(a numerical pitfall of the reference code).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .base import SoftmaxOfScores
from .registry import Hyperparameter, register_output_layer

__all__ = ["GeneralizedSigSoftmax", "smooth_piecewise_linear"]


def smooth_piecewise_linear(x: Tensor, c: float, k: float) -> Tensor:
    """``P̃L(x; c, k) = k(x − c) + c − (k − 1)·softplus(x − c)`` (PAPER L92-95)."""
    y = x - c
    return k * y + c - (k - 1.0) * F.softplus(y)


GSS_HYPERPARAMETERS = {
    "gss_c": Hyperparameter(0.0, float, "GSS knee c of the smooth two-piece linear map"),
    "gss_k": Hyperparameter(2.0, float, "GSS slope k of the map below the knee", exclusive_minimum=0.0),
}


@register_output_layer(
    "gss",
    display="GSS",
    family="softmax",
    color="#2ca02c",
    hyperparameters=GSS_HYPERPARAMETERS,
)
class GeneralizedSigSoftmax(SoftmaxOfScores):
    """GSS: ``log p = log_softmax(P̃L(W h + b; c, k))``; defaults c = 0, k = 2 as in the KIT."""

    def __init__(
        self,
        vocab_size: int,
        nemb: int,
        nhidlast: int,
        gss_c: float = GSS_HYPERPARAMETERS["gss_c"].default,
        gss_k: float = GSS_HYPERPARAMETERS["gss_k"].default,
        **hp,
    ):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.c = float(gss_c)
        self.k = float(gss_k)

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        return smooth_piecewise_linear(self.logits(context, weight), self.c, self.k)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, c={self.c}, k={self.k}"
