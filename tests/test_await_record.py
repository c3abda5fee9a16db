"""A run that a local await rule saw finish is not trained again by the next controller: the await rules record what
``train`` records (its inputs and parameters), and the run's training log is never emptied by a job that did not
train (Snakemake empties a job's ``log:`` before it starts; the training log is not ``train``'s ``log:``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import data_dir, needs_data

REPO = Path(__file__).resolve().parents[1]


@needs_data
@pytest.mark.slow
def test_a_run_finished_under_await_training_is_not_trained_again(tmp_path):
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            "--configfile", str(REPO / "config" / "small.yaml"), "--config", f"data_mirror={data_dir()}",
            "--cores", "1"]  # fmt: skip
    plan = subprocess.run([*base, "--dry-run", "figure7"], capture_output=True, text=True, timeout=300)
    target = re.search(r"results/runs/ptb/softmax/\S+/model\.pt", plan.stdout).group(0)
    run = tmp_path / Path(target).parent
    train_log = tmp_path / "logs" / "train" / Path(*Path(target).parent.parts[2:])
    train_log = train_log.with_suffix(".log")

    trained = subprocess.run([*base, target], capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    log_text = train_log.read_text()
    assert "training ptb/softmax" in log_text
    # the next controller finds the run finished: its job, started again (a finish Snakemake did not record, here
    # forced), is the local await rule, a no-op; it leaves the training log as it was
    waited = subprocess.run([*base, target, "--forcerun", "await_training"], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert waited.returncode == 0, waited.stdout[-3000:] + waited.stderr[-3000:]
    stats = (waited.stdout + waited.stderr).split("Job stats:")[1].split("total")[0]
    assert {line.split()[0] for line in stats.splitlines()[3:] if line.strip()} == {"await_training"}, stats
    assert train_log.read_text() == log_text
    # and the controller after it has nothing to do: the await rule's record is the one train would have made
    again = subprocess.run([*base, "--dry-run", target], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
    assert (run / "model.pt").is_file()
