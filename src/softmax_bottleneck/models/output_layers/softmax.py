"""Plain softmax output layer (paper §3; AWD-LSTM, Merity et al. 2018): ``log p = log_softmax(W h + b)``."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .base import OutputLayer
from .registry import register_output_layer

__all__ = ["OutputLayer", "Softmax"]


@register_output_layer("softmax", display="Softmax", family="softmax", color="#1f77b4", softmax_equivalent=True)
class Softmax(OutputLayer):
    """Softmax output layer (spec §4.1, KIT ``top_model=smax``): ``log p = log_softmax(W h + b)``."""

    def forward(self, context: Tensor, weight: Tensor) -> Tensor:
        self._check(context, weight)
        return F.log_softmax(self.logits(context, weight), dim=-1)
