"""The AWD-LSTM language model with an exchangeable output layer (Merity et al. 2018; the reference code's
``base_models/dai.py``; output layers: :mod:`.output_layers`).

Embedding E ∈ R^{V×d} → embedding dropout (whole words) → optional embedding noise → locked
dropout ``dropouti`` → LSTM d→h (+ locked ``dropouth``) → LSTM h→h (+ ``dropouth``) → LSTM h→d'
(+ locked ``dropout``) → output layer, whose decoder weight is E itself (tied). DropConnect
``wdrop`` acts on every LSTM's hidden-to-hidden matrix. ``forward`` returns log-probabilities.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from softmax_bottleneck.models.output_layers import build_output_layer
from softmax_bottleneck.models.regularization import LockedDropout, embedded_dropout, embedding_noise
from softmax_bottleneck.models.weight_drop import WeightDropLSTM

Hidden = list[tuple[torch.Tensor, torch.Tensor]]


class AWDLSTM(nn.Module):
    def __init__(self, vocab_size: int, hp: dict):
        super().__init__()
        self.vocab_size = vocab_size
        self.hp = dict(hp)
        d, h, dl, n = hp["nemb"], hp["nhid"], hp["nhidlast"], hp["nlayers"]
        sizes = [d] + [h] * (n - 1) + [dl]
        self.encoder = nn.Embedding(vocab_size, d)
        self.rnns = nn.ModuleList(WeightDropLSTM(i, o, hp["wdrop"]) for i, o in zip(sizes[:-1], sizes[1:], strict=True))
        self.input_drop = LockedDropout(hp["dropouti"])
        self.hidden_drop = LockedDropout(hp["dropouth"])
        self.output_drop = LockedDropout(hp["dropout"])
        # Paper §3: the tied matrix is drawn U(-0.1, 0.1); the LSTMs and mixture layers keep PyTorch's defaults.
        # The authors' draw order: the encoder's own U(-0.1, 0.1) (KIT base_models/dai.py:88) comes before the output
        # layer, whose decoder draws it again (KIT top_models/smax/smax.py:17, mos.py:26); the embedding is tied to
        # that last draw (KIT models/model.py:21). A layer that replays none keeps the first one.
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        self.output_layer = build_output_layer(hp["output_layer"], vocab_size, d, dl, hp)
        tied = self.output_layer.take_tied_init()
        if tied is not None:
            with torch.no_grad():
                self.encoder.weight.copy_(tied)

    def init_hidden(self, batch_size: int) -> Hidden:
        weight = self.encoder.weight
        return [
            (weight.new_zeros(1, batch_size, rnn.hidden_size), weight.new_zeros(1, batch_size, rnn.hidden_size))
            for rnn in self.rnns
        ]

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The first LSTM's input: embedding dropout, (embedding noise), locked ``dropouti``."""
        hp = self.hp
        last_word_grad = hp.get("embed_last_word_grad", False)  # False: as the authors (padding_idx=-1)
        emb = embedded_dropout(self.encoder, tokens, hp["dropoute"], self.training, last_word_grad)
        emb = embedding_noise(emb, hp.get("emb_noise", 0.0), self.training, hp["dropoute"], self.vocab_size)
        return self.input_drop(emb)

    def between_layers(self, output: torch.Tensor, layer: int) -> torch.Tensor:
        """LSTM ``layer``'s output as the next one's input: locked ``dropouth`` (the last layer's output is returned
        as it is: it is the raw h³ of TAR)."""
        return output if layer == len(self.rnns) - 1 else self.hidden_drop(output)

    def _context(self, tokens: torch.Tensor, hidden: Hidden):
        """The body shared by :meth:`forward` and :meth:`nll`: (new hidden, raw h³)."""
        output = self.embed(tokens)
        new_hidden = []
        for layer, rnn in enumerate(self.rnns):
            output, state = rnn(output, hidden[layer])
            new_hidden.append(state)
            output = self.between_layers(output, layer)
        return new_hidden, output

    def forward(self, tokens: torch.Tensor, hidden: Hidden):
        """``tokens`` [L, B] → (log-probabilities [L, B, V], new hidden, raw h³, dropped h³).

        The last two feed AR (on the dropped h³) and TAR (on the raw h³) of paper §3 / SM §2.1.
        """
        new_hidden, raw_last = self._context(tokens, hidden)
        log_prob, dropped_last = self.head(raw_last)
        return log_prob, new_hidden, raw_last, dropped_last

    def nll(self, tokens: torch.Tensor, hidden: Hidden, targets: torch.Tensor):
        """The loss path: ``tokens``, ``targets`` [L, B] → (−log p(targets) [L, B], new hidden, raw h³, dropped h³).

        Same body, dropout masks and random draws as :meth:`forward`; only the output layer's
        :meth:`~.output_layers.OutputLayer.nll` replaces the full log-probability matrix.
        :func:`mean_nll` of it is the training loss ``F.nll_loss(forward(...)[0], targets)``, bit for bit.
        """
        new_hidden, raw_last = self._context(tokens, hidden)
        nll, dropped_last = self.head(raw_last, targets)
        return nll, new_hidden, raw_last, dropped_last

    def head(self, raw_last: torch.Tensor, targets: torch.Tensor | None = None):
        """(scores, dropped h³): locked ``dropout`` on the raw h³, then the output layer with the tied decoder: the
        per-token NLL of ``targets`` [L, B] (:meth:`~.output_layers.OutputLayer.nll`), or without targets the
        log-probabilities [L, B, V]."""
        dropped_last = self.output_drop(raw_last)
        if targets is None:
            return self.output_layer(dropped_last, self.encoder.weight), dropped_last
        return self.output_layer.nll(dropped_last, self.encoder.weight, targets), dropped_last


def mean_nll(nll: torch.Tensor) -> torch.Tensor:
    """Mean of per-token NLLs, reduced exactly as ``F.nll_loss(log_prob, targets)`` (mean) reduces them.

    ``nll.mean()`` is the same number up to summation order; this keeps losses, perplexities and (for the softmax
    family, whose ``nll`` is bit-identical) the whole training trajectory bit-identical to the full-matrix path.
    """
    flat = nll.reshape(-1, 1)
    return F.nll_loss(-flat, torch.zeros(flat.size(0), dtype=torch.long, device=flat.device))


def detach_hidden(hidden: Hidden) -> Hidden:
    """Truncated BPTT: cut the graph between consecutive batches."""
    return [(h.detach(), c.detach()) for h, c in hidden]
