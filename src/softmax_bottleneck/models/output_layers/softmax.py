"""Plain softmax output layer (paper §3; AWD-LSTM, Merity et al. 2018): ``log p = log_softmax(W h + b)``."""

from __future__ import annotations

from torch import Tensor

from .base import OutputLayer, SoftmaxOfScores
from .registry import register_output_layer

__all__ = ["OutputLayer", "Softmax"]


@register_output_layer("softmax", display="Softmax", family="softmax", color="#1f77b4", softmax_equivalent=True)
class Softmax(SoftmaxOfScores):
    """Softmax output layer (paper §3, KIT ``top_model=smax``): ``log p = log_softmax(W h + b)``."""

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        return self.logits(context, weight)
