"""LMS-PLIF output layer (Ganea et al. 2019, "Breaking the Softmax Bottleneck via Learnable
Monotonic Pointwise Non-linearities", KIT ``top_model=plif_smax``) and its frozen variant LMS-PLIF†.

A learnable, strictly increasing, piecewise-linear function f with K knots evenly spaced on [−T, T]
(Δ = 2T/K) is applied element-wise to the logits ``l = W h + b``, then ``log p = log_softmax(f(l))``:

    s = softplus(w)                       (w = ``slope_raw`` ∈ R^K, w_j ~ N(log(e − 1), std²) at construction)
    i = clamp(trunc((x + T)/Δ), 0, K − 1) (integer bin, no gradient)
    knot_i = −T + iΔ,   C_i = Σ_{j<i} s_j (exclusive cumulative sum)
    f(x) = (x − knot_i) · s_i + Δ · C_i

so f(−T) = 0, f is continuous with slope s_i on bin i, and extends linearly with slope s_0 (left) / s_{K−1}
(right) outside [−T, T]. Only two K-vectors are gathered with the bin index, so memory is O(tokens × V)
(int64 index plus a few float tensors of that size), never O(tokens × V × K). The backward of the gathers is
an atomic scatter-add: not bit-reproducible on GPU (as in the reference). The prefix sum is accumulated in
float64 (K = 10⁵ terms) and cast back, which only reduces rounding error.

Defaults follow the paper: K = 100,000 knots, T = 20, init std 1.0, own learning rate ``plif_lr`` = 0.02.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import SoftmaxOfScores
from .registry import Hyperparameter, register_output_layer

__all__ = ["PLIF", "FrozenPLIF", "UNIT_SLOPE_RAW"]

#: raw slope whose softplus is 1 (identity slope): log(e − 1)
UNIT_SLOPE_RAW = math.log(math.e - 1.0)


PLIF_HYPERPARAMETERS = {
    "plif_knots": Hyperparameter(100_000, int, "number of PLIF knots K on [-T, T]", minimum=1),
    "plif_t": Hyperparameter(20.0, float, "PLIF range T: knots on [-T, T]", exclusive_minimum=0.0),
    "plif_init_std": Hyperparameter(1.0, float, "std of the raw slopes' normal initialisation", minimum=0.0),
    "plif_lr": Hyperparameter(0.02, float, "learning rate of the PLIF slopes", exclusive_minimum=0.0),
}


@register_output_layer(
    "lms_plif", display="LMS-PLIF", family="softmax", color="#d62728", hyperparameters=PLIF_HYPERPARAMETERS
)
class PLIF(SoftmaxOfScores):
    """LMS-PLIF: ``log p = log_softmax(f(W h + b))`` with the learnable monotone piecewise-linear f.

    The raw slopes are the parameter ``slope_raw`` (shape ``[plif_knots]``), drawn from torch's global RNG at
    construction; they train with their own learning rate ``plif_lr`` (see :meth:`own_lr_parameters`).
    """

    frozen = False

    def __init__(
        self,
        vocab_size: int,
        nemb: int,
        nhidlast: int,
        plif_knots: int = PLIF_HYPERPARAMETERS["plif_knots"].default,
        plif_t: float = PLIF_HYPERPARAMETERS["plif_t"].default,
        plif_init_std: float = PLIF_HYPERPARAMETERS["plif_init_std"].default,
        plif_lr: float = PLIF_HYPERPARAMETERS["plif_lr"].default,
        **hp,
    ):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        if int(plif_knots) < 1 or float(plif_t) <= 0:
            raise ValueError(f"need plif_knots >= 1 and plif_t > 0, got {plif_knots}, {plif_t}")
        self.knots = int(plif_knots)
        self.t = float(plif_t)
        self.delta = 2.0 * self.t / self.knots
        self.init_std = float(plif_init_std)
        self.plif_lr = float(plif_lr)
        # drawn after the decoder and its U(-0.1, 0.1) (in OutputLayer.__init__), as in the KIT (plif_smax.py:23-28)
        init = torch.randn(self.knots) * self.init_std + UNIT_SLOPE_RAW
        self.slope_raw = nn.Parameter(init, requires_grad=not self.frozen)
        # the authors' parameter order: their plif_w is the module's own parameter, listed before its decoder's bias
        # (KIT plif_smax.py:26); clip_grad_norm_ sums the per-tensor norms in parameter order
        bias = self.bias
        del self.bias
        self.bias = bias

    @classmethod
    def extra_parameter_count(cls, vocab_size: int, nemb: int, nhidlast: int, **hp) -> int:
        """Output bias ``V`` plus one raw slope per knot (frozen slopes are counted too, paper Table 3)."""
        return int(vocab_size) + int(hp["plif_knots"])

    def slopes(self) -> Tensor:
        """Positive slopes ``s = softplus(slope_raw)``."""
        return F.softplus(self.slope_raw)

    def transform(self, x: Tensor) -> Tensor:
        """The piecewise-linear map f applied element-wise to ``x`` (any shape)."""
        s = self.slopes().to(x.dtype)
        # exclusive prefix sum C_i = sum_{j<i} s_j, accumulated in float64
        s64 = s.double()
        prefix = (torch.cumsum(s64, 0) - s64).to(x.dtype)
        with torch.no_grad():
            idx = torch.div(x + self.t, self.delta).trunc_().clamp_(0, self.knots - 1).long()
        flat = idx.reshape(-1)
        s_i = s.gather(0, flat).view_as(idx)
        c_i = prefix.gather(0, flat).view_as(idx)
        knot = idx.to(x.dtype).mul_(self.delta).sub_(self.t)
        return (x - knot) * s_i + self.delta * c_i

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        return self.transform(self.logits(context, weight))

    def own_lr_parameters(self) -> list[tuple[nn.Parameter, str]]:
        return [(self.slope_raw, "plif_lr")] if self.slope_raw.requires_grad else []

    def param_groups_hint(self) -> dict[str, float]:
        return {"slope_raw": self.plif_lr} if self.slope_raw.requires_grad else {}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, knots={self.knots}, t={self.t}, frozen={not self.slope_raw.requires_grad}"


@register_output_layer(
    "lms_plif_frozen",
    display="LMS-PLIF†",
    family="softmax",
    color="#e377c2",
    cost_proxy="lms_plif",  # same layer, slopes not updated
    hyperparameters=PLIF_HYPERPARAMETERS,
)
class FrozenPLIF(PLIF):
    """LMS-PLIF† (the paper's frozen PLIF): random initial slopes kept fixed (``slope_raw.requires_grad=False``).

    The parameter stays in the state dict and in the parameter count, but is not trainable and is left out of
    the optimiser groups (:meth:`own_lr_parameters` is empty).
    """

    frozen = True
