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
from softmax_bottleneck.training.bench import BenchRun, _sync
from softmax_bottleneck.training.environment import configure_precision, resolve_device
from softmax_bottleneck.training.fused_step import fused_update

#: how the fused recurrences run: ``auto`` batched on CUDA and run by run on the CPU (:mod:`.fused_lstm`)
RECURRENCES = {"auto": None, "batched": True, "per-run": False}


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


def _time_solo(solo: BenchRun, device, opts: dict) -> tuple[float, int, int | None]:
    """:func:`_timed` of one run updated alone (:func:`.step.update`, the trainer's step)."""

    return _timed(device, lambda: solo.solo_step("nll"), opts["warmup"], opts["batches"])


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
    solo_seconds, solo_tokens, solo_peak = _time_solo(BenchRun(base, corpus, device, opts["phase"]), device, opts)
    solo_rate = solo_tokens / solo_seconds
    rows = []
    for k in groups or [opts["fused"]]:
        runs = [BenchRun({**base, "seed": base["seed"] + i}, corpus, device, opts["phase"]) for i in range(k)]

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
