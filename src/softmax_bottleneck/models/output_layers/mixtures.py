"""Mixture output layers: MoS (Yang et al. 2018, "Breaking the Softmax Bottleneck: A High-Rank RNN
Language Model", KIT ``top_model=mos``) and MoC (the paper's mixture of contexts, KIT ``top_model=moc``).

Shared parameters, from the context g = h³_t ∈ R^{d'} (d' = ``nhidlast``, d = ``nemb``, K = ``n_experts``):

* K latent contexts ``z_k = tanh(W_z g + b_z)`` with ``W_z ∈ R^{(K·d)×d'}`` (``self.latent``, with bias), reshaped
  to K vectors of dim d; locked dropout ``dropoutl`` on the concatenated latents ``[L, B, K·d]`` in training;
* mixture weights ``π = softmax(W_π g)``, ``W_π ∈ R^{K×d'}``, no bias (``self.prior``);
* the tied decoder ``U = weight ∈ R^{V×d}`` and the layer's own bias ``b ∈ R^V``.

Both linear layers keep PyTorch's default initialisation, as in the reference code, drawn in its order (decoder,
prior, latent, then the tied matrix; see :meth:`.OutputLayer.draw_tied_init`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..regularization import locked_dropout
from .base import OutputLayer, SoftmaxOfScores
from .registry import Hyperparameter, register_output_layer

__all__ = ["MixtureOfContexts", "MixtureOfSoftmaxes"]


MIXTURE_HYPERPARAMETERS = {
    "n_experts": Hyperparameter(15, int, "number of mixture components K", minimum=1),
    "dropoutl": Hyperparameter(
        0.29, float, "locked dropout on the K latent contexts", minimum=0.0, exclusive_maximum=1.0
    ),
}


class _Mixture(OutputLayer):
    projects_context = True
    authors_draw_order = True

    def __init__(
        self,
        vocab_size: int,
        nemb: int,
        nhidlast: int,
        n_experts: int = MIXTURE_HYPERPARAMETERS["n_experts"].default,
        dropoutl: float = MIXTURE_HYPERPARAMETERS["dropoutl"].default,
        **hp,
    ):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        if int(n_experts) < 1:
            raise ValueError(f"n_experts must be >= 1, got {n_experts}")
        if not 0.0 <= float(dropoutl) < 1.0:
            raise ValueError(f"dropoutl must be in [0, 1), got {dropoutl}")
        self.n_experts = int(n_experts)
        self.dropoutl = float(dropoutl)
        # the authors' draw order (KIT top_models/mos/mos.py:11-14, 26; moc.py the same): decoder (its throwaway
        # draws, in OutputLayer.__init__), prior, latent, then the decoder's U(-0.1, 0.1) that the embedding keeps
        self.prior = nn.Linear(self.nhidlast, self.n_experts, bias=False)
        self.latent = nn.Linear(self.nhidlast, self.n_experts * self.nemb)
        if self.authors_draw_order:
            self.draw_tied_init()

    @classmethod
    def extra_parameter_count(cls, vocab_size: int, nemb: int, nhidlast: int, **hp) -> int:
        """Output bias ``V`` + prior ``d'·K`` + latent weights ``d'·K·d`` and bias ``K·d`` (paper §3)."""
        k, d, dl = int(hp["n_experts"]), int(nemb), int(nhidlast)
        return int(vocab_size) + dl * k + dl * k * d + k * d

    def _latents_and_log_prior(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``z`` ``[L, B, K, d]`` (dropped in training) and ``log π`` ``[L, B, K]`` for 3-D ``context``."""
        latent = torch.tanh(self.latent(context))  # [L, B, K*d]
        latent = locked_dropout(latent, self.dropoutl, self.training)
        z = latent.view(*latent.shape[:-1], self.n_experts, self.nemb)
        log_prior = F.log_softmax(self._at_least_float32(self.prior(context)), dim=-1)
        return z, log_prior

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, n_experts={self.n_experts}, dropoutl={self.dropoutl}"


class _ExpertTargetLogSoftmax(torch.autograd.Function):
    """``log softmax(z Uᵀ + b)[y]`` per row: ``s_y − logsumexp_V s`` for rows ``z`` ``[N, d]`` and targets ``[N]``.

    Only the target's entry is returned: the scores ``s = z Uᵀ + b`` ``[N, V]`` are computed here, turned in
    place into ``e = exp(s − max s)`` (after ``s_y`` is gathered), and kept for the backward, which turns them in
    place into ``∂/∂s = g · (onehot(y) − e / Σe)`` before the two matrix products. So one ``[N, V]`` tensor is
    the whole memory of the layer; nothing else of that size is allocated. Matrix products run in the dtype
    the forward's ``F.linear`` ran in (autocast), the rest in at least float32.
    """

    @staticmethod
    def forward(ctx, z: Tensor, weight: Tensor, bias: Tensor, targets: Tensor) -> Tensor:
        raw = F.linear(z, weight, bias)
        scores = raw.float() if raw.dtype in (torch.float16, torch.bfloat16) else raw
        picked = scores.gather(1, targets.unsqueeze(1)).squeeze(1)
        top = scores.amax(1, keepdim=True)
        expd = scores.sub_(top).exp_()  # in place: e = exp(s − max s)
        total = expd.sum(1)
        ctx.save_for_backward(z, weight, expd, total, targets)
        ctx.matmul_dtype = raw.dtype
        return picked - top.squeeze(1) - total.log()

    @staticmethod
    def backward(ctx, grad: Tensor):
        z, weight, expd, total, targets = ctx.saved_tensors
        g = grad.unsqueeze(1)
        dscores = expd.mul_(-g / total.unsqueeze(1))  # in place: −g · softmax(s)
        rows = targets.unsqueeze(1)
        dscores.scatter_(1, rows, dscores.gather(1, rows) + g)  # one target per row: no accumulation needed
        grad_z = grad_w = grad_b = None
        dmm = dscores.to(ctx.matmul_dtype)
        if ctx.needs_input_grad[0]:
            grad_z = (dmm @ weight.to(ctx.matmul_dtype)).to(z.dtype)
        if ctx.needs_input_grad[1]:
            grad_w = (dmm.t() @ z.to(ctx.matmul_dtype)).to(weight.dtype)
        if ctx.needs_input_grad[2]:
            grad_b = dscores.sum(0).to(weight.dtype)
        return grad_z, grad_w, grad_b, None


@register_output_layer("mos", display="MoS", family="mixture", color="#9467bd", hyperparameters=MIXTURE_HYPERPARAMETERS)
class MixtureOfSoftmaxes(_Mixture):
    """MoS: ``p = Σ_k π_k softmax(U z_k + b)``, returned as ``log p`` (paper §3).

    The reference (KIT ``mos.py:L44-46``) takes the log of the summed probabilities **without** the 1e-8
    epsilon of the original MoS code. Here the same quantity is computed stably as
    ``log p = logsumexp_k(log π_k + log_softmax(U z_k + b))`` (no epsilon, no underflow to −inf).
    Memory: K × tokens × V floats, as in the reference.

    The loss path :meth:`nll` needs only the target ``y``:
    ``log p(y) = logsumexp_k(log π_k + s_k[y] − logsumexp_V s_k)`` with ``s_k = U z_k + b``, keeping only the
    exponentiated scores ``[L, B, K, V]`` for the backward (no ``[L, B, K, V]`` log-softmax, no ``[L, B, V]``
    output; see :class:`_ExpertTargetLogSoftmax`).
    """

    def forward(self, context: Tensor, weight: Tensor) -> Tensor:
        self._check(context, weight)
        if context.dim() == 2:  # [N, d'] is treated as one time step of N sequences
            return self._forward3(context.unsqueeze(0), weight).squeeze(0)
        return self._forward3(context, weight)

    def _forward3(self, context: Tensor, weight: Tensor) -> Tensor:
        z, log_prior = self._latents_and_log_prior(context)
        log_comp = F.log_softmax(self.logits(z, weight), dim=-1)  # [L, B, K, V]
        return torch.logsumexp(log_comp + log_prior.unsqueeze(-1), dim=-2)

    def nll(self, context: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
        self._check(context, weight)
        self._check_targets(context, targets)
        if context.dim() == 2:
            return self._nll3(context.unsqueeze(0), weight, targets.unsqueeze(0)).squeeze(0)
        return self._nll3(context, weight, targets)

    def _nll3(self, context: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
        z, log_prior = self._latents_and_log_prior(context)  # [L, B, K, d], [L, B, K]
        expert_targets = targets.unsqueeze(-1).expand(*targets.shape, self.n_experts).reshape(-1)
        log_comp = _ExpertTargetLogSoftmax.apply(z.reshape(-1, self.nemb), weight, self.bias, expert_targets)
        return -torch.logsumexp(log_comp.view_as(log_prior) + log_prior, dim=-1)


@register_output_layer(
    "moc",
    display="MoC",
    family="mixture",
    color="#8c564b",
    cost_proxy="mos",  # the MoS network with one softmax instead of K: an upper bound
    hyperparameters=MIXTURE_HYPERPARAMETERS,
)
class MixtureOfContexts(_Mixture, SoftmaxOfScores):
    """MoC: ``c = Σ_k π_k z_k``, ``log p = log_softmax(U c + b)`` (paper §3); rank of log P ≤ d + 2."""

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:
        if context.dim() == 2:  # [N, d'] is treated as one time step of N sequences
            return self.scores(context.unsqueeze(0), weight).squeeze(0)
        z, log_prior = self._latents_and_log_prior(context)
        prior = log_prior.exp().to(z.dtype)
        mixed = torch.einsum("lbk,lbkd->lbd", prior, z)
        return self.logits(mixed, weight)
