"""One training update, without a host–device synchronisation (paper §4; SM §2; KIT ``main.py`` ``train()``).

:func:`train_batch` draws the batch length, scales the lr by ``seq_len/bptt``, accumulates the
gradients of the ``small_batch_size`` column chunks (each with its own carried hidden state), clips
the global gradient norm and steps the optimizer. Losses are summed on the device by
:class:`LossSums` and read once per logging interval, so a GPU never waits for the host within an
interval. The trainer and the ``bench`` command both run this code.
"""

from __future__ import annotations

import torch

from softmax_bottleneck.corpora.corpus import get_batch
from softmax_bottleneck.models.awd_lstm import detach_hidden
from softmax_bottleneck.training.evaluation import LOSS_PATHS, chunk_nll
from softmax_bottleneck.training.schedule import restore_lr, sample_seq_len, scale_lr


def chunk_loss(model, inputs, targets, hidden, hp: dict, loss_path: str = "nll"):
    """``(loss, raw NLL, new hidden)``: loss = mean NLL + α·mean(dropped h³²) + β·mean((raw h³_t − raw h³_{t−1})²).

    AR and TAR as the authors' ``main.py`` (paper §3, SM §2.1). Both loss paths draw the same dropout masks and
    give the same losses (bit for bit for the softmax family; MoS to ~1e-6).
    """
    if loss_path == "nll":
        scores, hidden, raw_last, dropped_last = model.nll(inputs, hidden, targets)
    elif loss_path == "full":
        scores, hidden, raw_last, dropped_last = model(inputs, hidden)
    else:
        raise ValueError(f"loss path must be one of {', '.join(LOSS_PATHS)}, got {loss_path!r}")
    loss, raw_loss = regularised_loss(scores, targets, raw_last, dropped_last, hp)
    return loss, raw_loss, hidden


def regularised_loss(scores, targets, raw_last, dropped_last, hp: dict):
    """``(loss, raw NLL)`` of one chunk from its scores (per-token NLLs or log-probabilities) and its h³: the formula
    of :func:`chunk_loss`, shared with the fused step (:mod:`.fused_step`)."""
    raw_loss = chunk_nll(scores, targets)
    loss = raw_loss + hp["alpha"] * dropped_last.pow(2).mean()
    if raw_last.size(0) > 1:
        loss = loss + hp["beta"] * (raw_last[1:] - raw_last[:-1]).pow(2).mean()
    return loss, raw_loss


class LossSums:
    """Device-side sums of one logging interval: raw NLL (float32, as the KIT's ``total_raw_loss``) and finiteness.

    ``finite`` stays true while every chunk loss was finite; ``finite_batches`` counts the batches of
    the interval before the first non-finite one, so the host learns where it happened when it reads.
    """

    def __init__(self, device: torch.device):
        self.raw = torch.zeros((), device=device)
        self.finite = torch.ones((), dtype=torch.bool, device=device)
        self.finite_batches = torch.zeros((), dtype=torch.int64, device=device)

    def add_chunk(self, loss: torch.Tensor, raw_loss: torch.Tensor, factor: float) -> None:
        self.raw += raw_loss.detach() * factor
        self.finite &= torch.isfinite(loss.detach())

    def end_batch(self) -> None:
        self.finite_batches += self.finite

    def read(self) -> tuple[float, bool, int]:
        """``(raw sum, all finite, finite batches)``: the one synchronisation of an interval."""
        values = torch.stack([self.raw.double(), self.finite.double(), self.finite_batches.double()])
        raw, finite, batches = values.tolist()
        return raw, bool(finite), int(batches)

    def reset(self, raw: float = 0.0) -> None:
        self.raw.fill_(raw)
        self.finite.fill_(True)
        self.finite_batches.zero_()


def train_batch(
    model, optimizer, hp: dict, data: torch.Tensor, position: int, hidden: list, sums: LossSums, loss_path: str = "nll"
) -> int:
    """One update on the rows of ``data`` from ``position``; updates ``hidden`` in place, returns ``seq_len``."""
    inputs, targets, seq_len = next_batch(hp, data, position)
    update(model, optimizer, hp, inputs, targets, seq_len, hidden, sums, loss_path)
    return seq_len


def next_batch(hp: dict, data: torch.Tensor, position: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(inputs, targets, seq_len)`` of the batch at ``position``: its length drawn (:func:`.sample_seq_len`), then its
    rows."""
    seq_len = sample_seq_len(hp)
    inputs, targets = get_batch(data, position, seq_len)
    return inputs, targets, seq_len


def update(model, optimizer, hp: dict, inputs, targets, seq_len: int, hidden: list, sums: LossSums, loss_path: str):
    """The update of :func:`train_batch` on one batch: lr × ``seq_len/bptt``, the chunks' gradients, clip, step.

    ``clip_grad_norm_`` sums the per-tensor norms in the model's parameter order, which is the authors' (see
    :class:`.WeightDropLSTM`); the result can differ by an ulp in another order. No host–device synchronisation
    (``benchmarks/cuda_graphs_check.py`` captures it in CUDA graphs).
    """
    base_lrs = scale_lr(optimizer, seq_len, hp["bptt"])
    optimizer.zero_grad()
    chunk, batch_size = hp["small_batch_size"], hp["batch_size"]
    for s_id, start in enumerate(range(0, batch_size, chunk)):
        x, y = inputs[:, start : start + chunk], targets[:, start : start + chunk]
        loss, raw_loss, hidden[s_id] = chunk_loss(model, x, y, detach_hidden(hidden[s_id]), hp, loss_path)
        (loss * chunk / batch_size).backward()
        sums.add_chunk(loss, raw_loss, chunk / batch_size)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], hp["clip"])
    optimizer.step()
    restore_lr(optimizer, base_lrs)
    sums.end_batch()
