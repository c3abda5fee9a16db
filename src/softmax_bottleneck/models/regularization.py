"""Regularisers of the AWD-LSTM base network (Merity et al. 2018): the first steps of the training-mode forward
pass.

* :func:`embedded_dropout` — embedding dropout ``dropoute``: whole vocabulary rows of the embedding
  matrix are dropped with one Bernoulli(1−p) mask per row, the kept rows rescaled by 1/(1−p), then the
  lookup is done (KIT ``embed_regularize.py:L18-37``; AWD ``embed_regularize.py``).
* :func:`embedding_noise` — i.i.d. N(0, σ²) noise on every element of the looked-up embeddings, training
  only (KIT ``embed_regularize.py:L39-63``; used only by experiment E10).
* :class:`LockedDropout` — variational dropout: one mask of shape ``[1, B, dim]`` shared over all time steps,
  scaled by 1/(1−p) (KIT ``utils/models/locked_dropout.py:L9-16``; Gal & Ghahramani 2016).

All of them are the identity in evaluation mode (``training=False``) or with p = 0 / σ = 0 (``None`` counts as 0,
so unset preset values are safe).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["LockedDropout", "embedded_dropout", "embedding_noise", "locked_dropout"]


def _check_p(p: float | None) -> float:
    p = 0.0 if p is None else float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return p


def locked_dropout(x: Tensor, p: float | None, training: bool = True) -> Tensor:
    """Functional locked dropout.

    ``x`` is ``[L, B, ...]`` (time first): one Bernoulli(1−p) mask of shape ``[1, B, ...]`` is drawn and
    shared by all L time steps, kept entries scaled by 1/(1−p). A 2-D input ``[N, dim]`` gets a mask of shape
    ``[1, dim]`` shared by all N rows (the first dimension is treated as time). Identity when not training
    or when p = 0.
    """
    p = _check_p(p)
    if not training or p == 0.0:
        return x
    if x.dim() < 2:
        raise ValueError(f"locked dropout expects at least 2 dimensions [L, B, ...], got shape {tuple(x.shape)}")
    mask = x.new_empty((1, *x.shape[1:])).bernoulli_(1.0 - p).div_(1.0 - p)
    return x * mask


class LockedDropout(nn.Module):
    """Locked (variational) dropout as a module (Gal & Ghahramani 2016).

    ``LockedDropout(p)(x)`` applies :func:`locked_dropout` with the module's ``p``; ``forward(x, p)``
    overrides it for one call (AWD-LSTM style: a single instance serves dropouti, dropouth and dropout).
    Follows ``self.training``: identity in eval mode.
    """

    def __init__(self, p: float | None = 0.0):
        super().__init__()
        self.p = _check_p(p)

    def forward(self, x: Tensor, p: float | None = None) -> Tensor:
        return locked_dropout(x, self.p if p is None else p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def embedded_dropout(
    embed: nn.Embedding, words: Tensor, p: float | None = 0.1, training: bool = True, last_word_grad: bool = False
) -> Tensor:
    """Embedding lookup with word-level dropout (AWD-LSTM's embedding dropout ``dropoute``).

    In training with p > 0, a mask ``m ∈ {0, 1/(1−p)}^{V×1}`` (one Bernoulli(1−p) draw per vocabulary row) is
    multiplied into the embedding matrix, so every occurrence of a dropped word in the batch gets the zero
    vector, and kept rows are rescaled. Gradients flow to ``embed.weight``. Otherwise a plain lookup.
    The embedding's ``padding_idx``/``max_norm``/... options are honoured as in AWD-LSTM.

    The authors pass ``padding_idx=-1`` when the embedding has none (KIT ``embed_regularize.py:30-37``), which
    torch (0.4 as today) reads as the last row: the last vocabulary word gets no gradient through the lookup (its
    row still learns as an output word, through the tied decoder). That is the default here;
    ``last_word_grad=True`` (preset key ``embed_last_word_grad``) gives it its gradient.
    """
    p = _check_p(p)
    weight = embed.weight
    if training and p > 0.0:
        mask = weight.new_empty((weight.size(0), 1)).bernoulli_(1.0 - p).div_(1.0 - p)
        weight = weight * mask
    padding_idx = embed.padding_idx
    if padding_idx is None and not last_word_grad:
        padding_idx = -1
    return F.embedding(
        words, weight, padding_idx, embed.max_norm, embed.norm_type, embed.scale_grad_by_freq, embed.sparse
    )


def embedding_noise(
    x: Tensor, std: float | None, training: bool = True, dropoute: float | None = None, vocab_size: int = 0
) -> Tensor:
    """Add i.i.d. N(0, std²) noise to every element of the looked-up embeddings (fair comparison, SM Table 9).

    Applied after embedding dropout and before the ``dropouti`` locked dropout; identity when not training
    or when std = 0. The authors' draw order: their noise path repeats the embedding dropout on a matrix of
    ones, used only for its shape (KIT ``embed_regularize.py:52-56``), i.e. one more V×1 Bernoulli(1−p) mask is
    drawn, and discarded, before the noise; given the embedding dropout ``dropoute`` > 0 and the ``vocab_size``
    V, that draw is replayed.
    """
    std = 0.0 if std is None else float(std)
    if std < 0:
        raise ValueError(f"noise std must be >= 0, got {std}")
    if not training or std == 0.0:
        return x
    p = _check_p(dropoute)
    if p > 0.0 and vocab_size > 0:
        x.new_empty((vocab_size, 1)).bernoulli_(1.0 - p)  # the authors' draw order: a discarded V×1 mask
    return x + torch.randn_like(x) * std
