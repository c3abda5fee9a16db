"""``bench`` runs the trainer's own step for every variant on CPU and prints its JSON (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

from softmax_bottleneck import presets
from softmax_bottleneck.training import bench, step

KEYS = {"device", "seconds_per_batch", "tokens_per_second", "projected_seconds_per_epoch", "peak_memory_bytes",
        "torch", "cudnn", "tf32", "runs", "data", "parameters"}  # fmt: skip
TINY = {"nemb": 8, "nhid": 16, "nhidlast": 8, "batch_size": 4, "small_batch_size": 2, "plif_knots": 1000,
        "train_tokens": 3000, "valid_tokens": 800, "test_tokens": 100}  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}


def _opts(dataset, variant, **kw):
    opts = {"dataset": dataset, "variant": variant, "overrides": dict(TINY), "data": None, "corpus_cache": None,
            "batches": 2, "warmup": 1, "valid_chunks": 2, "device": "cpu", "runs": 1, "phase": "sgd",
            "threads": 1}  # fmt: skip
    return {**opts, **kw}


def test_bench_prints_its_json_on_cpu(tmp_path):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", "--dataset", "ptb", "--variant", "softmax",
           "--batches", "2", "--warmup", "1", "--valid-chunks", "2", "--device", "cpu", "--threads", "1"]  # fmt: skip
    cmd += [arg for k, v in TINY.items() for arg in ("--set", f"{k}={v}")]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "--set plif_knots: variant 'softmax' has no such hyper-parameter" in result.stderr  # TINY's: said, ignored
    out = json.loads(result.stdout)
    assert KEYS <= set(out) and out["device"] == "cpu" and out["data"] == "synthetic"
    assert out["runs"] == 1 and out["tf32"] is False and out["batch_size"] == 4
    assert out["tokens_per_second"] > 0 and out["peak_memory_bytes"] > 0
    assert out["projected_seconds_per_epoch"] == pytest.approx(
        out["projected_train_seconds_per_epoch"] + out["projected_valid_seconds_per_epoch"]
    )
    assert out["projected_train_seconds_per_epoch"] == pytest.approx(3000 // 4 * 4 / out["tokens_per_second"])


@pytest.mark.parametrize("variant", presets.variants())
def test_every_variant_benches_through_the_trainers_step(variant, monkeypatch):
    calls = []
    real = step.train_batch
    monkeypatch.setattr(bench, "train_batch", lambda *a: calls.append(1) or real(*a))
    dataset = "wt2" if variant == "ss" else "ptb"  # WT2 once: its 33,278-word layers are slow on CPU
    result = bench.run_bench(_opts(dataset, variant, phase="asgd" if variant == "mos" else "sgd"))
    assert KEYS <= set(result) and result["variant"] == variant and result["dataset"] == dataset
    assert len(calls) == 3 and result["tokens_per_second"] > 0  # warm-up + 2 timed steps


def test_concurrent_runs_report_their_aggregate():
    result = bench.run_bench(_opts("ptb", "softmax", runs=2))
    per_run = result["per_run_tokens_per_second"]
    assert result["runs"] == 2 and len(per_run) == 2
    # total tokens over the union of the runs' wall times cannot beat the sum of their own rates
    assert 0 < result["tokens_per_second"] <= sum(per_run) * (1 + 1e-9)


def test_bench_rejects_a_bad_variant_in_one_line(tmp_path):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", "--dataset", "ptb", "--variant", "nope"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=ENV)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("bench: unknown variant 'nope'")


@pytest.mark.parametrize("loss_path", ["nll", "full"])
def test_the_loss_path_option_decides_which_path_is_timed(loss_path, monkeypatch):
    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    calls = {"forward": 0, "nll": 0}
    for name in calls:
        real = getattr(AWDLSTM, name)

        def spy(self, *args, _name=name, _real=real):
            calls[_name] += 1
            return _real(self, *args)

        monkeypatch.setattr(AWDLSTM, name, spy)
    result = bench.run_bench(_opts("ptb", "mos", loss_path=loss_path))
    assert result["loss_path"] == loss_path
    used, unused = ("nll", "forward") if loss_path == "nll" else ("forward", "nll")
    assert calls[used] > 0 and calls[unused] == 0  # in training and in the validation estimate


def test_a_run_in_lock_step_takes_the_given_length_and_leaves_its_own_stream_alone():
    """``BenchRun.batch(seq_len)``: the given length's rows, and the run's next drawn length unchanged."""
    hp = presets.resolve("ptb", "softmax", "et", TINY)
    corpus = bench.synthetic_corpus("ptb").limited(3000, 800, 100)
    drawn, given = bench.BenchRun(hp, corpus, "cpu", "sgd"), bench.BenchRun(hp, corpus, "cpu", "sgd")
    (x, y, seq_len), tokens = given.batch(7)
    assert seq_len == 7 and x.shape == (7, hp["batch_size"]) and tokens == 7 * hp["batch_size"]
    assert (y[:-1] == x[1:]).all() and given.position == 7
    (_, _, first), _ = drawn.batch()
    (_, _, after), _ = given.batch()
    assert after == first  # the given length drew nothing from the run's streams


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--fused", "2", "--runs", "3"], "bench: --runs (runs as separate processes) and --fused K"),
        (["--recurrence", "batched"], "bench: --recurrence batched applies to --fused K only"),
    ],
)
def test_options_that_time_nothing_together_are_refused_before_any_work(flags, why, tmp_path):
    """Before, `bench --fused 2 --runs 3` timed 2 fused runs and said "runs": 2; `--recurrence` without `--fused` was
    dropped: each in silence."""
    from softmax_bottleneck.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "--dataset", "ptb", "--variant", "softmax", "--data", str(tmp_path / "none"), *flags])
    assert str(stop.value.code).startswith(why)
