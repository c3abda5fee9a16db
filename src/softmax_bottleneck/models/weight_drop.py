"""DropConnect on the hidden-to-hidden weights of an LSTM (AWD-LSTM, Merity et al. 2018).

The reference ``WeightDrop`` deletes ``weight_hh_l0`` from ``nn.LSTM`` and re-assigns a dropped
tensor before every call; that breaks on current PyTorch. Here ``weight_hh_l0`` stays the LSTM's
own parameter (the "raw" weight) and, in training mode, the stock ``nn.LSTM`` is run through
``torch.func.functional_call`` with a freshly dropped copy of it: the fused kernel (cuDNN on CUDA)
still runs the whole sequence, gradients reach the raw weight, and eval mode uses it unscaled.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn


class WeightDropLSTM(nn.Module):
    """A single-layer ``nn.LSTM`` whose ``weight_hh_l0`` gets a new dropout mask on every training call."""

    def __init__(self, input_size: int, hidden_size: int, dropout: float):
        super().__init__()
        if not 0 <= dropout < 1:
            raise ValueError(f"wdrop must lie in [0, 1), got {dropout}")
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=1)
        # the authors' parameter order: their WeightDrop re-registers the raw weight last (KIT
        # utils/base_models/dai/weight_drop.py:29-30); clip_grad_norm_ sums the per-tensor norms in parameter order
        raw = self.lstm.weight_hh_l0
        del self.lstm.weight_hh_l0
        self.lstm.register_parameter("weight_hh_l0", raw)
        self.dropout = float(dropout)

    @property
    def hidden_size(self) -> int:
        return self.lstm.hidden_size

    def hidden_weight(self) -> torch.Tensor:
        """The hidden-to-hidden matrix of this call: in training a freshly dropped copy (one Bernoulli draw of the
        matrix's shape from the global generator), else the raw weight."""
        if not (self.training and self.dropout > 0):
            return self.lstm.weight_hh_l0
        return F.dropout(self.lstm.weight_hh_l0, p=self.dropout, training=True)

    def call_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W_ih, W_hh, b_ih, b_hh)`` of this call, ``W_hh`` from :meth:`hidden_weight` (the same draw as
        :meth:`forward`): what a fused recurrence (:mod:`.fused_lstm`) needs of this layer."""
        lstm = self.lstm
        return lstm.weight_ih_l0, self.hidden_weight(), lstm.bias_ih_l0, lstm.bias_hh_l0

    def forward(self, x: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor]):
        if not (self.training and self.dropout > 0):
            return self.lstm(x, hx)
        dropped = self.hidden_weight()
        with warnings.catch_warnings():
            # cuDNN notes once that the substituted weight is not in its flattened buffer; harmless.
            warnings.filterwarnings("ignore", message=".*not part of single contiguous chunk.*")
            return torch.func.functional_call(self.lstm, {"weight_hh_l0": dropped}, (x, hx))
