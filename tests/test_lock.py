"""One writer per run folder: a second training process fails at once, naming the holder's PID."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.training.lock import RunFolderBusy, run_lock
from softmax_bottleneck.training.trainer import RunFinished, Trainer

IMPORT = "from softmax_bottleneck.training.lock import run_lock"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}


def _train_cmd(out, cache):
    settings = ["nemb=8", "nhid=16", "batch_size=4", "small_batch_size=2", "bptt=10", "epochs=1000",
                "train_tokens=24000", "valid_tokens=2000", "test_tokens=1000", "log_interval=20"]  # fmt: skip
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train", "--dataset", "ptb", "--variant", "softmax",
           "--out", str(out), "--corpus-cache", str(cache), "--device", "cpu",
           "--checkpoint-seconds", "0.2"]  # fmt: skip
    return cmd + [arg for item in settings for arg in ("--set", item)]


def test_a_second_training_process_fails_at_once_naming_the_first(tmp_path, ptb_cache):
    out, log_path = tmp_path / "run", tmp_path / "first.log"
    with open(log_path, "w") as log:
        first = subprocess.Popen(_train_cmd(out, ptb_cache), stdout=log, stderr=subprocess.STDOUT, env=ENV)
    try:
        deadline = time.monotonic() + 120
        while "epoch   1 |    40 batches" not in log_path.read_text():
            assert first.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run(_train_cmd(out, ptb_cache), capture_output=True, text=True, env=ENV, timeout=120)
        assert second.returncode != 0 and "Traceback" not in second.stderr
        last = second.stderr.strip().splitlines()[-1]
        assert last.startswith(f"train: {out}: another training process (PID {first.pid} on ")
        assert first.poll() is None  # the first one trains on, undisturbed
    finally:
        first.send_signal(signal.SIGTERM)
        status = first.wait(timeout=60)
    assert status == 143
    state = torch.load(out / ".resume" / "state.pt", weights_only=True)
    assert state["progress"]["batch"] >= 40 or state["progress"]["epoch"] >= 1


def test_lock_is_reentrant_in_its_process_and_released_after(tmp_path):
    holder = [sys.executable, "-c", f"{IMPORT}\nwith run_lock({str(tmp_path)!r}): pass"]
    with run_lock(tmp_path), run_lock(tmp_path):
        other = subprocess.run(holder, capture_output=True, text=True, env=ENV)
        assert other.returncode != 0 and f"PID {os.getpid()} on " in other.stderr
    assert subprocess.run(holder, env=ENV).returncode == 0  # released with the block


def test_a_finished_run_is_never_trained_over(tmp_path):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 1})
    Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path).fit()
    assert not (tmp_path / ".lock").exists()
    before = (tmp_path / "model.pt").read_bytes()
    again = Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path).fit()
    assert again == json.loads((tmp_path / "metrics.json").read_text())  # the finished run's, nothing trained
    shutil.rmtree(tmp_path / ".resume")  # a finished run without its kept final set (e.g. an older version's)
    with pytest.raises(RunFinished, match="already holds a finished run"):
        Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path).fit()
    assert (tmp_path / "model.pt").read_bytes() == before


def test_busy_error_is_raised_in_process_too(tmp_path):
    code = f"{IMPORT}\nimport time\nwith run_lock({str(tmp_path)!r}):\n print('held', flush=True)\n time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy, match=f"PID {child.pid} on "):
            with run_lock(tmp_path):
                pass
    finally:
        child.kill()
        child.wait()
