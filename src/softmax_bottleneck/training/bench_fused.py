"""``bench --fused K``: the tokens/s of K runs trained fused in one process (:mod:`.fused_step`) beside one run trained
alone, in the same process, on the same device and data (:mod:`.bench`'s model, corpus and steps).

The K runs are the preset's model with seeds ``seed``, ``seed + 1``, …: their batch lengths differ (ragged BPTT), as
in a group of the study's seeds. Both sides warm up, then time ``batches`` updates of every run; the speed-up is the
fused group's tokens/s over the solo run's.
"""

from __future__ import annotations

import time

import torch

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import batchify
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.training.environment import configure_precision, resolve_device
from softmax_bottleneck.training.fused_step import fused_update
from softmax_bottleneck.training.run_rng import RunRNG
from softmax_bottleneck.training.schedule import make_optimizer
from softmax_bottleneck.training.state import seed_everything
from softmax_bottleneck.training.step import LossSums, next_batch, update

#: how the fused recurrences run: ``auto`` batched on CUDA and run by run on the CPU (:mod:`.fused_lstm`)
RECURRENCES = {"auto": None, "batched": True, "per-run": False}


class _Run:
    """One benchmarked run: model, optimizer, hidden states, loss sums, random streams, data position."""

    def __init__(self, hp: dict, corpus, device, phase: str):
        self.hp = hp
        seed_everything(hp["seed"])
        self.model = AWDLSTM(corpus.vocab_size, hp).to(device).train()
        self.optimizer = make_optimizer(self.model, hp, phase)
        self.data = batchify(corpus.train, hp["batch_size"]).to(device)
        chunks = hp["batch_size"] // hp["small_batch_size"]
        self.hidden = [self.model.init_hidden(hp["small_batch_size"]) for _ in range(chunks)]
        self.sums = LossSums(device)
        self.rng = RunRNG(device).capture()
        self.position = 0

    def batch(self):
        if self.position >= self.data.size(0) - 2:
            self.position = 0
        with self.rng:
            inputs, targets, seq_len = next_batch(self.hp, self.data, self.position)
        tokens = (min(self.position + seq_len, self.data.size(0) - 1) - self.position) * self.hp["batch_size"]
        self.position += seq_len
        return (inputs, targets, seq_len), tokens


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device, steps, warmup: int, batches: int) -> tuple[float, int, int | None]:
    """(seconds, tokens, peak bytes on CUDA) of ``batches`` calls of ``steps`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        steps()
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.monotonic()
    tokens = sum(steps() for _ in range(batches))
    _sync(device)
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    return time.monotonic() - started, tokens, peak


def _time_solo(solo: _Run, device, opts: dict) -> tuple[float, int, int | None]:
    """:func:`_timed` of one run updated alone (:func:`.step.update`, the trainer's step)."""

    def solo_step() -> int:
        (inputs, targets, seq_len), tokens = solo.batch()
        with solo.rng:
            update(solo.model, solo.optimizer, solo.hp, inputs, targets, seq_len, solo.hidden, solo.sums, "nll")
        return tokens

    return _timed(device, solo_step, opts["warmup"], opts["batches"])


def measure_fused(opts: dict, corpus, source: str, groups: list[int] | None = None) -> list[dict]:
    """One run alone, then K fused for each K of ``groups`` (default ``[opts["fused"]]``), on ``corpus``
    (:func:`.bench.bench_corpus`); a row of ``bench --fused`` per K."""
    if opts.get("threads"):
        torch.set_num_threads(opts["threads"])
    base = presets.resolve(opts["dataset"], opts["variant"], "et", opts["overrides"])
    corpus = corpus.limited(base["train_tokens"], base["valid_tokens"], base["test_tokens"])
    device = resolve_device(opts["device"])
    configure_precision(base["tf32"])
    batched = RECURRENCES[opts.get("recurrence", "auto")]
    solo_seconds, solo_tokens, solo_peak = _time_solo(_Run(base, corpus, device, opts["phase"]), device, opts)
    solo_rate = solo_tokens / solo_seconds
    rows = []
    for k in groups or [opts["fused"]]:
        runs = [_Run({**base, "seed": base["seed"] + i}, corpus, device, opts["phase"]) for i in range(k)]

        def fused_step(runs=runs) -> int:
            batches, tokens = zip(*(run.batch() for run in runs), strict=True)
            fused_update(runs, list(batches), batched=batched)
            return sum(tokens)

        fused_seconds, fused_tokens, fused_peak = _timed(device, fused_step, opts["warmup"], opts["batches"])
        del runs, fused_step
        fused_rate = fused_tokens / fused_seconds
        rows.append(
            {
                "dataset": opts["dataset"],
                "variant": opts["variant"],
                "phase": opts["phase"],
                "overrides": dict(opts["overrides"]),
                "data": source,
                "device": str(device),
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                "fused_runs": k,
                "recurrence": "batched" if (device.type == "cuda" if batched is None else batched) else "per-run",
                "batches": opts["batches"],
                "warmup": opts["warmup"],
                "solo_tokens_per_second": solo_rate,
                "fused_tokens_per_second": fused_rate,
                "speedup": fused_rate / solo_rate,
                "solo_seconds_per_batch": solo_seconds / opts["batches"],
                "fused_seconds_per_batch": fused_seconds / opts["batches"],
                "solo_peak_memory_bytes": solo_peak,
                "fused_peak_memory_bytes": fused_peak,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    return rows
