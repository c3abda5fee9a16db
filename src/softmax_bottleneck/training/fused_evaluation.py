"""The authors' evaluation (:func:`.evaluation.evaluate`) of K runs at once, their LSTM recurrences fused
(:func:`.fused_step.fused_forward`): a fused group's validation after an epoch and its test at the end.

Runs whose data have one shape and whose ``bptt`` is one go through their chunks together: per chunk one fused
forward of every run (eval mode, each from its own carried hidden state, under its own random streams), then each
run's mean NLL of it. Each run's loss is its :func:`.evaluate`'s formula, ``Σ L·NLL_chunk / T`` summed in the same
order; on the CPU (the recurrences run by run) it is :func:`.evaluate`'s number bit for bit, with PyTorch's own LSTM
kernels (oneDNN's LSTM off), which ``tests/test_fused.py`` checks for every output layer of the study. Runs of other
shapes are evaluated in groups of their own.
"""

from __future__ import annotations

import torch

from softmax_bottleneck.corpora.corpus import get_batch
from softmax_bottleneck.training.evaluation import chunk_nll
from softmax_bottleneck.training.fused_step import fused_forward


def evaluate_group(runs, datas: list[torch.Tensor], batched: bool | None = None) -> list[float]:
    """Each run's :func:`.evaluate` loss of its batchified ``datas[k]`` [T, B] at its ``hp["bptt"]``, in ``runs``'
    order. A run is any object with ``model``, ``hp`` and ``rng`` (:mod:`.fused_step`); ``batched`` as there."""
    if len(runs) != len(datas):
        raise ValueError(f"one data tensor per run: got {len(datas)} for {len(runs)} runs")
    together: dict[tuple, list[int]] = {}
    for k, (run, data) in enumerate(zip(runs, datas, strict=True)):
        together.setdefault((tuple(data.shape), run.hp["bptt"]), []).append(k)
    losses: list[float] = [0.0] * len(runs)
    for (_, bptt), members in together.items():
        found = _evaluate_together([runs[k] for k in members], [datas[k] for k in members], bptt, batched)
        for k, loss in zip(members, found, strict=True):
            losses[k] = loss
    return losses


@torch.no_grad()
def _evaluate_together(runs, datas: list[torch.Tensor], bptt: int, batched: bool | None) -> list[float]:
    for run in runs:
        run.model.eval()
    device = runs[0].model.encoder.weight.device
    rows, columns = datas[0].shape
    hidden = [run.model.init_hidden(columns) for run in runs]
    lengths, means = [], [[] for _ in runs]
    for i in range(0, rows - 1, bptt):
        chunks = [get_batch(data, i, bptt) for data in datas]
        inputs = [x.to(device) for x, _ in chunks]
        targets = [y.to(device) for _, y in chunks]
        for k, (scores, new_hidden, _, _) in enumerate(fused_forward(runs, inputs, hidden, targets, batched)):
            means[k].append(chunk_nll(scores, targets[k]))
            hidden[k] = new_hidden
        lengths.append(len(inputs[0]))
    losses = []
    for run_means in means:  # one transfer per run; the sum in evaluate()'s order, from its float32 chunk means
        total = 0.0
        for length, mean in zip(lengths, torch.stack(run_means).tolist(), strict=True):
            total += length * mean
        losses.append(total / rows)
    return losses
