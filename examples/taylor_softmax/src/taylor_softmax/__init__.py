"""Taylor softmax (de Brébisson & Vincent 2016, "An Exploration of Softmax Alternatives Belonging to the Spherical
Loss Family", ICLR 2016) as a softmax-bottleneck output layer.

Exp is replaced by its second-order Taylor expansion, applied element-wise to the logits ``l = W h + b``::

    p_i ∝ 1 + l_i + l_i²/2 = ((l_i + 1)² + 1) / 2

which is ≥ 1/2 for every real l_i, so the rows normalise without any exp. Its one hyper-parameter, ``taylor_scale``
(s, default 1), scales the logits first (``l = s·(W h + b)``): a fixed temperature, set per run (``--set
taylor_scale=2``, ``model_overrides``) or swept from a workflow config (``sweeps:``). The layer is of the form
``log p = log_softmax(s)`` with scores ``s_i = log(1 + l_i + l_i²/2)``, so it subclasses ``SoftmaxOfScores``
and implements only ``scores``: ``forward`` (the full log-probabilities) and the fused loss path ``nll`` come
from there. The log is computed as ``2·log(hypot(l + 1, 1)) − log 2``, which never overflows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from softmax_bottleneck.models.output_layers import Hyperparameter, SoftmaxOfScores, register_output_layer

__all__ = ["TaylorSoftmax"]


@register_output_layer(
    "taylor",  # the variant name: configs, run folders, summaries, `--variant taylor`
    display="Taylor",  # its name in tables and figures
    family="softmax",  # trained with the AWD-LSTM (Softmax) sizes, hyper-parameters and authors' seed
    hyperparameters={  # the layer's own: default, type, help, range (checked before any work)
        "taylor_scale": Hyperparameter(1.0, float, "scale s of the logits before the expansion", exclusive_minimum=0.0),
    },
    color="#17a589",  # its colour in figures (optional)
    cost_proxy="softmax",  # the paper time whose V100 cost stands in for its own (optional)
)
class TaylorSoftmax(SoftmaxOfScores):
    """``log p = log_softmax(log(1 + l + l²/2))`` with ``l = s·(W h + b)``; no parameters besides the bias."""

    def __init__(self, vocab_size: int, nemb: int, nhidlast: int, taylor_scale: float = 1.0):
        super().__init__(vocab_size, nemb, nhidlast)
        self.scale = float(taylor_scale)  # a fixed number, not a parameter: the state dict stays the bias alone

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        logits = self.scale * self.logits(context, weight)  # s·(W h + b), in at least float32
        return 2.0 * torch.log(torch.hypot(logits + 1.0, torch.ones_like(logits))) - math.log(2.0)
