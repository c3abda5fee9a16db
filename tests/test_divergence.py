"""A diverging run stops with one line naming epoch and batches; nothing non-standard reaches a JSON file."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.atomic import atomic_write_json
from softmax_bottleneck.training import step
from softmax_bottleneck.training.trainer import Diverged, Trainer


def test_a_finite_but_absurd_loss_stops_the_run(tmp_path, monkeypatch):
    bound = 2 * math.log(12)
    calls = {"n": 0}
    chunks = TINY["batch_size"] // TINY["small_batch_size"]
    real = step.chunk_nll

    def nll(log_prob, targets):  # batches 6-10 score 1.2 x the bound, all finite
        calls["n"] += 1
        value = real(log_prob, targets)
        return value * 0 + 1.2 * bound if 5 * chunks < calls["n"] <= 10 * chunks else value

    monkeypatch.setattr(step, "chunk_nll", nll)
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "log_interval": 5, "lr": 0.1})
    with pytest.raises(Diverged) as err:
        Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path).fit()
    assert "over batches 6-10 of epoch 1 exceeds 2·log V = 4.97" in str(err.value)
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "model.pt").exists()


def test_the_cli_stops_a_huge_lr_in_one_line(tmp_path, ptb_cache):
    out = tmp_path / "run"
    settings = ["nemb=8", "nhid=16", "batch_size=4", "small_batch_size=2", "bptt=10", "epochs=3", "lr=1000000",
                "train_tokens=4000", "valid_tokens=500", "test_tokens=500", "log_interval=10"]  # fmt: skip
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train", "--dataset", "ptb", "--variant", "softmax",
           "--out", str(out), "--corpus-cache", str(ptb_cache), "--device", "cpu"]  # fmt: skip
    cmd += [arg for item in settings for arg in ("--set", item)]
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("train: training diverged: ") and "of epoch 1" in last
    assert not (out / "metrics.json").exists() and not (out / "model.pt").exists()


def test_json_outputs_refuse_nan_and_infinity(tmp_path):
    path = tmp_path / "metrics.json"
    with pytest.raises(ValueError, match=r"metrics.json: refusing to write curve\[1\].train_ppl = inf"):
        atomic_write_json({"seed": 1, "curve": [{"train_ppl": 3.0}, {"train_ppl": math.inf}]}, path)
    with pytest.raises(ValueError, match="test_ppl = nan"):
        atomic_write_json({"test_ppl": math.nan}, path)
    assert not path.exists() and list(tmp_path.iterdir()) == []  # no temporary left either
    atomic_write_json({"valid_ppl": 61.2}, path)
    assert json.loads(path.read_text()) == {"valid_ppl": 61.2}
