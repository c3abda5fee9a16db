"""The output-layer contract (paper §3): every output layer of the study is an :class:`OutputLayer`.

* ``__init__(vocab_size, nemb, nhidlast, **hp)`` receives the layer's own registered hyper-parameters;
* ``forward(context, weight) -> log_probs`` with ``context`` ``[L, B, nhidlast]`` (or ``[N, nhidlast]``),
  ``weight`` the tied embedding matrix ``[V, nemb]`` (owned by the model's encoder, passed at every call, never
  stored), and the result the log-probabilities ``[..., V]`` (float32 for float32/half/bfloat16 inputs;
  float64 inputs stay float64); every row's logsumexp is 0. This full matrix feeds the log-P extraction,
  word similarity and the qualitative top-5;
* ``nll(context, weight, targets) -> [L, B]`` (or ``[N]``): the per-token negative log-likelihood
  ``−log p(targets)``, the *loss path* of training and evaluation. The default gathers from ``forward``, so
  a layer that only implements ``forward`` works unchanged; layers override it where a target-only formula
  is cheaper (``F.cross_entropy`` for the softmax family, the fused MoS formula);
* the output bias ``self.bias`` (V zeros at init) belongs to the layer;
* initialisation: the model draws the tied matrix U(−0.1, 0.1) (paper §3). A layer with
  ``authors_draw_order = True`` (the built-in ones, and every :class:`SoftmaxOfScores`) replays the authors' random
  draws at construction instead, so that the same seed gives the authors' initial weights (:meth:`take_tied_init`);
* ``extra_parameter_count(vocab_size, nemb, nhidlast, **hp)`` (classmethod) counts the parameters the layer
  adds to the base network;
* ``own_lr_parameters()`` lists ``(parameter, lr_hyper_parameter_key)`` pairs that need their own optimiser
  group (only LMS-PLIF: ``[(slope_raw, "plif_lr")]``), ``param_groups_hint()`` the same as ``{name: lr}``.

A layer of the form ``log p = log_softmax(g(context, weight))`` subclasses :class:`SoftmaxOfScores` and
implements only ``scores`` (= g); it gets ``forward`` and the fused ``nll`` from there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["OutputLayer", "SoftmaxOfScores"]


class OutputLayer(nn.Module):
    """Base class: owns the output bias ``b ∈ R^V`` and computes the logits ``l = W h + b``.

    Sub-classes implement :meth:`forward`. Softmax-family layers act directly on the context vector, so they
    require ``nhidlast == nemb`` (the reference forces d' = d for non-mixture models, paper §3).
    """

    #: whether the layer maps the nhidlast-dim context to nemb-dim latents itself (MoS/MoC)
    projects_context = False
    #: the name under which the class is registered (set by ``register_output_layer``)
    registered_name: str | None = None
    #: replay the authors' initialisation draws (see :meth:`_authors_decoder_draws`); False: the model draws the
    #: tied matrix U(−0.1, 0.1) itself and the layer's own parameters keep whatever their constructors drew
    authors_draw_order = False

    def __init__(self, vocab_size: int, nemb: int, nhidlast: int, **hp):
        super().__init__()
        if vocab_size < 1 or nemb < 1 or nhidlast < 1:
            raise ValueError(f"sizes must be positive: vocab_size={vocab_size}, nemb={nemb}, nhidlast={nhidlast}")
        if not self.projects_context and nhidlast != nemb:
            raise ValueError(
                f"{type(self).__name__} applies the tied weight to the context directly, so nhidlast must equal "
                f"nemb (paper §3); got nhidlast={nhidlast}, nemb={nemb}"
            )
        self.vocab_size = int(vocab_size)
        self.nemb = int(nemb)
        self.nhidlast = int(nhidlast)
        self.bias = nn.Parameter(torch.zeros(self.vocab_size))
        self._tied_init: Tensor | None = None
        if self.authors_draw_order:
            self._authors_decoder_draws()
            if not self.projects_context:  # the authors' Smax draws the tied matrix right away (smax.py:12-17)
                self.draw_tied_init()

    # -- initialisation in the authors' draw order ----------------------------------------------------------------
    def _authors_decoder_draws(self) -> None:
        """The authors' draw order: their decoder is an ``nn.Linear(d, V)`` (KIT ``top_models/smax/smax.py:10``,
        ``top_models/s_smax/s_smax.py:9``, ``top_models/mos/mos.py:11``, ``moc.py:11``) whose default
        initialisation draws a V×d weight and a V bias, both overwritten afterwards (the bias by zeros, the weight
        by the U(−0.1, 0.1) draw of :meth:`draw_tied_init`). Replayed here as throwaway draws: same random stream.
        """
        nn.Linear(self.nemb, self.vocab_size, device=self.bias.device)

    def draw_tied_init(self) -> None:
        """Draw the tied matrix ``U(−0.1, 0.1)`` ``[V, d]`` now, in the authors' order: it is their decoder's
        ``init_weights`` (KIT ``smax.py:17``, ``s_smax.py:16``, ``mos.py:26``, ``moc.py:26``), to which the tied
        embedding is set (KIT ``models/model.py:21``). The model takes it with :meth:`take_tied_init`.
        """
        self._tied_init = torch.empty(self.vocab_size, self.nemb, device=self.bias.device).uniform_(-0.1, 0.1)

    def take_tied_init(self) -> Tensor | None:
        """The U(−0.1, 0.1) draw of :meth:`draw_tied_init` for the tied embedding, handed over once (then
        forgotten); None when the layer drew none (the model keeps its own U(−0.1, 0.1) draw)."""
        tied, self._tied_init = self._tied_init, None
        return tied

    # -- helpers -------------------------------------------------------------------------------------------
    def _check(self, context: Tensor, weight: Tensor) -> None:
        if context.dim() not in (2, 3) or context.size(-1) != self.nhidlast:
            raise ValueError(
                f"context must be [L, B, {self.nhidlast}] or [N, {self.nhidlast}], got {tuple(context.shape)}"
            )
        if tuple(weight.shape) != (self.vocab_size, self.nemb):
            raise ValueError(f"weight must be [{self.vocab_size}, {self.nemb}], got {tuple(weight.shape)}")

    def _check_targets(self, context: Tensor, targets: Tensor) -> None:
        if tuple(targets.shape) != tuple(context.shape[:-1]):
            raise ValueError(f"targets must be {list(context.shape[:-1])} (context without its last dimension), "
                             f"got {list(targets.shape)}")  # fmt: skip

    @staticmethod
    def _at_least_float32(x: Tensor) -> Tensor:
        return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x

    def logits(self, hidden: Tensor, weight: Tensor) -> Tensor:
        """``l = hidden · Wᵀ + b`` for ``hidden`` ``[..., nemb]``, returned in at least float32."""
        return self._at_least_float32(F.linear(hidden, weight, self.bias))

    # -- the contract ----------------------------------------------------------------------------------------
    def forward(self, context: Tensor, weight: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Log-probabilities ``[..., V]`` of the next word (see the module docstring)."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward(context, weight)")

    def nll(self, context: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
        """Per-token ``−log p(targets)``, shape ``context.shape[:-1]``; by default gathered from :meth:`forward`."""
        self._check_targets(context, targets)
        log_prob = self(context, weight)
        return -log_prob.gather(-1, targets.unsqueeze(-1)).squeeze(-1)

    @classmethod
    def extra_parameter_count(cls, vocab_size: int, nemb: int, nhidlast: int, **hp) -> int:
        """Parameters the layer adds to the base network, trainable or not; the output bias ``V`` by default.

        This is the only source of the layer's share of #Param (paper Table 2): override it when the layer
        owns more parameters (the conformance check compares it with the built module).
        """
        return int(vocab_size)

    # -- optimiser hints ---------------------------------------------------------------------------------------
    def own_lr_parameters(self) -> list[tuple[nn.Parameter, str]]:
        """Trainable parameters that need their own learning rate, as ``(parameter, lr_hp_key)`` pairs."""
        return []

    def param_groups_hint(self) -> dict[str, float]:
        """``{parameter_name: lr}`` for parameters that need their own learning rate (none by default)."""
        return {}

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, nemb={self.nemb}, nhidlast={self.nhidlast}"


class SoftmaxOfScores(OutputLayer):
    """A layer with ``log p = log_softmax(s)`` for scores ``s = scores(context, weight)`` ``[..., V]``.

    Sub-classes implement :meth:`scores` (e.g. ``l + log σ(l)`` for SS). ``forward`` is ``log_softmax(s)``;
    ``nll`` is ``F.cross_entropy(s, targets, reduction="none")``, which equals ``−log_softmax(s)[targets]``
    bit for bit (values and gradients).

    Initialised in the authors' draw order of their ``Smax`` (``authors_draw_order``): the authors' layers of this
    form (SS, GSS, LMS-PLIF) all draw their decoder as ``Smax`` does; a sub-class may set it to False.
    """

    authors_draw_order = True

    def scores(self, context: Tensor, weight: Tensor) -> Tensor:  # pragma: no cover - abstract
        """The pre-softmax scores ``[..., V]`` (at least float32)."""
        raise NotImplementedError(f"{type(self).__name__} must implement scores(context, weight)")

    def forward(self, context: Tensor, weight: Tensor) -> Tensor:
        self._check(context, weight)
        return F.log_softmax(self.scores(context, weight), dim=-1)

    def nll(self, context: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
        self._check(context, weight)
        self._check_targets(context, targets)
        scores = self.scores(context, weight)
        flat = F.cross_entropy(scores.reshape(-1, scores.size(-1)), targets.reshape(-1), reduction="none")
        return flat.view(targets.shape)
