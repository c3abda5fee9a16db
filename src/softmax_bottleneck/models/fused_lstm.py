"""One LSTM layer of K runs at once: the K recurrences step together, one batched GEMM per time step for all of them
(horizontal fusion, as HFTA: Wang et al., MLSys 2021).

Run k's layer is ``nn.LSTM``'s single-layer recurrence with its own weights (``W_ih``, ``W_hh``, ``b_ih``, ``b_hh``;
``W_hh`` already DropConnect-ed for this call) on its own input [L_k, B, in]:

    gates_t = x_t W_ihᵀ + b_ih + h_{t−1} W_hhᵀ + b_hh,   (i, f, g, o) = σ, σ, tanh, σ of its four quarters,
    c_t = f ⊙ c_{t−1} + i ⊙ g,   h_t = o ⊙ tanh(c_t),

in the order of operations of PyTorch's CPU LSTM cell (``aten/src/ATen/native/RNN.cpp``): the input projection of
all steps first, one GEMM per run on its own rows (``F.linear``), then per step ``b_hh + h W_hhᵀ`` plus the step's
projection.

``batched=True`` (the GPU's mode) does each step's K recurrent GEMMs as one ``baddbmm`` over the stacked [K, 4h, h]
matrices and the gates' elementwise work on [K, B, 4h] at once: one run's launches for K runs' work. Runs of
different lengths (ragged BPTT) step together to the longest; a run past its own length keeps its state
(``torch.where``). ``batched=False`` (the CPU's mode) steps each run with its own GEMM and elementwise operations of
its own shapes: on the CPU every run's outputs and gradients then equal, bit for bit, those of ``nn.LSTM`` with
oneDNN's LSTM off, whatever the group (MKL's batched GEMM and the vectorised sigmoid's tail give other last bits for
some shapes, e.g. 5 or 10 columns). ``tests/test_fused.py`` checks both against ``nn.LSTM``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LayerWeights = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # W_ih, W_hh, b_ih, b_hh
State = tuple[torch.Tensor, torch.Tensor]  # h, c: [1, B, h] each, as nn.LSTM's


def _cell(gates: torch.Tensor, c: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(h_t, c_t) from the summed gates, split on ``dim`` (PyTorch's ``LSTMCell`` of ``RNN.cpp``)."""
    ingate, forgetgate, cellgate, outgate = gates.unsafe_chunk(4, dim)
    ingate, forgetgate, cellgate, outgate = ingate.sigmoid(), forgetgate.sigmoid(), cellgate.tanh(), outgate.sigmoid()
    c_next = forgetgate.mul(c).add_(ingate.mul(cellgate))
    return outgate.mul(c_next.tanh()), c_next


def fused_lstm_layer(
    inputs: list[torch.Tensor], weights: list[LayerWeights], states: list[State], batched: bool = True
) -> tuple[list[torch.Tensor], list[State]]:
    """K runs' ``inputs`` [L_k, B, in], ``weights`` and ``states`` → (outputs [L_k, B, h], final states), per run."""
    if not (len(inputs) == len(weights) == len(states)) or not inputs:
        raise ValueError(f"one input, weight set and state per run: got {len(inputs)}, {len(weights)}, {len(states)}")
    projected = [F.linear(x, w_ih, b_ih) for x, (w_ih, _, b_ih, _) in zip(inputs, weights, strict=True)]
    if batched:
        return _batched(projected, weights, states)
    outputs, finals = [], []
    for steps, (_, w_hh, _, b_hh), (h, c) in zip(projected, weights, states, strict=True):
        h, c = h[0], c[0]
        run_outputs = []
        for step in steps:
            h, c = _cell(torch.addmm(b_hh, h, w_hh.t()).add_(step), c, 1)
            run_outputs.append(h)
        outputs.append(torch.stack(run_outputs))
        finals.append((h.unsqueeze(0), c.unsqueeze(0)))
    return outputs, finals


def _batched(projected: list[torch.Tensor], weights: list[LayerWeights], states: list[State]):
    lengths = [p.size(0) for p in projected]
    steps = max(lengths)
    ragged = min(lengths) != steps
    if ragged:
        projected = [F.pad(p, (0, 0, 0, 0, 0, steps - p.size(0))) for p in projected]
    stacked_input = torch.stack(projected, 1)  # [L, K, B, 4h]
    w_hh_t = torch.stack([w_hh for _, w_hh, _, _ in weights]).transpose(1, 2)  # [K, h, 4h]
    b_hh = torch.stack([b_hh for _, _, _, b_hh in weights]).unsqueeze(1)  # [K, 1, 4h]
    h = torch.cat([h0 for h0, _ in states])  # [K, B, h]
    c = torch.cat([c0 for _, c0 in states])
    if ragged:  # [K, 1, 1, L]: run k is still in its sequence at step t (compared on the device: a tensor of the
        # lengths made on the host would be a copy that waits for the device's queue, once per layer and chunk)
        step_index = torch.arange(steps, device=h.device)
        running = torch.stack([step_index < length for length in lengths]).view(len(lengths), 1, 1, steps)
    outputs = []
    for t in range(steps):
        h_next, c_next = _cell(torch.baddbmm(b_hh, h, w_hh_t).add_(stacked_input[t]), c, 2)
        if ragged:
            h, c = torch.where(running[..., t], h_next, h), torch.where(running[..., t], c_next, c)
        else:
            h, c = h_next, c_next
        outputs.append(h_next)
    stacked = torch.stack(outputs)  # [L, K, B, h]
    per_run = [stacked[:length, k] for k, length in enumerate(lengths)]
    return per_run, [(h[k : k + 1], c[k : k + 1]) for k in range(len(lengths))]
