"""One training update of K runs at once: the update of :func:`.step.update` for every run, with the LSTM recurrences
of all K runs fused (:func:`.fused_lstm.fused_lstm_layer`).

Everything but the recurrence stays each run's own and runs in its order: its random streams (its torch generators,
:meth:`.run_rng.RunRNG.torch_streams`: embedding, locked and DropConnect dropout masks, the output layer's own draws;
a layer that draws from python's or numpy's stream is refused), its batch length and lr scaling, its column chunks
and their carried hidden states, its output layer and loss, its clipping, optimizer and loss sums. The runs' losses
are summed before one backward pass; no gradient crosses runs, so each run's gradients are its own loss's. On the CPU
every run's parameters, losses and optimizer state after each update equal, bit for bit, those of the same run
updated alone by :func:`.step.update` with the same LSTM kernels (oneDNN's LSTM off:
``torch.backends.mkldnn.flags(enabled=False)``); ``tests/test_fused.py`` checks it for every output layer of the
study and a plug-in layer.

A run of the group is any object with ``model`` (:class:`.AWDLSTM`), ``optimizer``, ``hp``, ``hidden`` (one hidden
state per column chunk), ``sums`` (:class:`.step.LossSums`) and ``rng`` (:class:`.RunRNG`): the trainer's own
:class:`.Trainer` is one.
"""

from __future__ import annotations

import torch

from softmax_bottleneck.models.awd_lstm import detach_hidden
from softmax_bottleneck.models.fused_lstm import fused_lstm_layer
from softmax_bottleneck.training.run_rng import HostStreams
from softmax_bottleneck.training.schedule import restore_lr, scale_lr
from softmax_bottleneck.training.step import regularised_loss

#: the hyper-parameters that must be equal for runs to share one fused recurrence: the LSTMs' sizes and the columns
#: of a batch and of a chunk (everything else, the output layer included, may differ from run to run)
FUSION_KEYS = ("nemb", "nhid", "nhidlast", "nlayers", "batch_size", "small_batch_size", "tf32")


def fusion_key(hp: dict) -> tuple:
    """What runs of one fused group share (:data:`FUSION_KEYS`)."""
    return tuple(hp.get(key) for key in FUSION_KEYS)


def check_fusable(hps: list[dict], names: list[str]) -> None:
    """ValueError naming the first run whose shape differs from the first run's."""
    first = fusion_key(hps[0])
    for hp, name in zip(hps[1:], names[1:], strict=True):
        if fusion_key(hp) != first:
            differ = [k for k, a, b in zip(FUSION_KEYS, first, fusion_key(hp), strict=True) if a != b]
            raise ValueError(
                f"{name} cannot train fused with {names[0]}: they differ in {', '.join(differ)} "
                f"({', '.join(f'{k}={hps[0].get(k)} vs {hp.get(k)}' for k in differ)})"
            )


def fused_forward(runs, inputs: list, hidden: list, targets: list | None, batched: bool | None = None) -> list[tuple]:
    """Every run's :meth:`.AWDLSTM.nll` (``targets`` given) or :meth:`.AWDLSTM.forward` of its ``inputs`` [L_k, B]
    from its ``hidden``, with the K runs' LSTM recurrences fused: per run ``(scores, new hidden, raw h³, dropped h³)``.

    Each run's embedding, dropouts, DropConnect draw and output layer run under its own torch generators
    (:meth:`.RunRNG.torch_streams`), in the order of its solo call; a pass that draws from python's or numpy's stream
    is refused (:class:`.HostStreams`). ``batched``: the recurrences' mode (:func:`.fused_lstm_layer`); by default
    batched on CUDA, run by run on the CPU.
    """
    with HostStreams(run.hp["output_layer"] for run in runs):
        return _fused_forward(runs, inputs, hidden, targets, batched)


def _fused_forward(runs, inputs: list, hidden: list, targets: list | None, batched: bool | None) -> list[tuple]:
    layers = len(runs[0].model.rnns)
    if batched is None:
        batched = runs[0].model.encoder.weight.is_cuda
    xs, weights = [], []
    for run, tokens in zip(runs, inputs, strict=True):
        with run.rng.torch_streams():
            xs.append(run.model.embed(tokens))
            weights.append(run.model.rnns[0].call_weights())
    new_hidden: list[list] = [[] for _ in runs]
    for layer in range(layers):
        outputs, states = fused_lstm_layer(xs, weights, [h[layer] for h in hidden], batched)
        xs, weights = [], []
        for k, run in enumerate(runs):
            new_hidden[k].append(states[k])
            with run.rng.torch_streams():
                xs.append(run.model.between_layers(outputs[k], layer))
                if layer + 1 < layers:
                    weights.append(run.model.rnns[layer + 1].call_weights())
    results = []
    for k, run in enumerate(runs):
        with run.rng.torch_streams():
            scores, dropped_last = run.model.head(xs[k], None if targets is None else targets[k])
        results.append((scores, new_hidden[k], xs[k], dropped_last))
    return results


def fused_chunk_losses(
    runs, inputs: list, targets: list, hidden: list, loss_path: str = "nll", batched: bool | None = None
) -> list[tuple]:
    """Every run's ``(loss, raw NLL, new hidden)`` of one column chunk (:func:`.step.chunk_loss` for each run)."""
    outputs = fused_forward(runs, inputs, hidden, targets if loss_path == "nll" else None, batched)
    results = []
    for run, target, (scores, new_hidden, raw_last, dropped_last) in zip(runs, targets, outputs, strict=True):
        loss, raw_loss = regularised_loss(scores, target, raw_last, dropped_last, run.hp)  # draws nothing
        results.append((loss, raw_loss, new_hidden))
    return results


def fused_update(runs, batches: list[tuple], loss_path: str = "nll", batched: bool | None = None) -> None:
    """One update of every run on its ``(inputs, targets, seq_len)`` of ``batches``: lr × ``seq_len/bptt``, the
    chunks' gradients, clip, step (:func:`.step.update`, run by run, with the recurrences fused)."""
    hp = runs[0].hp
    chunk, batch_size = hp["small_batch_size"], hp["batch_size"]
    base_lrs = []
    for run, (_, _, seq_len) in zip(runs, batches, strict=True):
        base_lrs.append(scale_lr(run.optimizer, seq_len, run.hp["bptt"]))
        run.optimizer.zero_grad()
    for s_id, start in enumerate(range(0, batch_size, chunk)):
        inputs = [x[:, start : start + chunk] for x, _, _ in batches]
        targets = [y[:, start : start + chunk] for _, y, _ in batches]
        hidden = [detach_hidden(run.hidden[s_id]) for run in runs]
        results = fused_chunk_losses(runs, inputs, targets, hidden, loss_path, batched)
        total = torch.stack([loss * chunk / batch_size for loss, _, _ in results]).sum()
        total.backward()
        for run, (loss, raw_loss, new_hidden) in zip(runs, results, strict=True):
            run.hidden[s_id] = new_hidden
            run.sums.add_chunk(loss, raw_loss, chunk / batch_size)
    for run, base in zip(runs, base_lrs, strict=True):
        torch.nn.utils.clip_grad_norm_([p for p in run.model.parameters() if p.requires_grad], run.hp["clip"])
        run.optimizer.step()
        restore_lr(run.optimizer, base)
        run.sums.end_batch()
