"""The numbers typed into `plan` and read by `costs --bench` are bounded, and a special file is never waited on: each
bad input ends in one line naming it, with no traceback, no hang and no impossible figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from softmax_bottleneck.study.plan import makespan_hours


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("gpus", [str(10**30), "1000001", "0", "-3", "four"])
def test_plan_refuses_an_impossible_number_of_gpus_in_one_line(gpus):
    done = run("plan", "--gpus", gpus)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "argument --gpus: expected a positive integer" in done.stderr and repr(gpus) in done.stderr


def test_more_gpus_than_jobs_is_the_longest_job():
    """A slot without a job changes nothing (and costs no memory: a million GPUs plan at once)."""
    assert makespan_hours([5.0, 3.0, 1.0], 1_000_000) == 5.0
    assert makespan_hours([5.0, 3.0, 1.0], 1) == 9.0
    assert makespan_hours([5.0, 3.0, 1.0], 2, per_gpu=2, gain=2.0) == 5.0


def bench_file(tmp_path, seconds) -> str:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"dataset": "ptb", "variant": "softmax", "phase": "sgd", "device": "cuda",
                                "projected_seconds_per_epoch": seconds, "runs": 1}))  # fmt: skip
    return str(path)


@pytest.mark.parametrize("seconds", [1e308, 10 * 366 * 24 * 3600.0])
def test_costs_refuses_a_bench_file_of_an_impossible_epoch(tmp_path, seconds):
    done = run("costs", "--bench", bench_file(tmp_path, seconds))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(lines) == 1 and "projected_seconds_per_epoch" in lines[0] and "impossible" in lines[0], done.stderr
    assert "inf" not in done.stdout


def test_costs_never_waits_on_a_fifo(tmp_path):
    fifo = tmp_path / "bench.json"
    os.mkfifo(fifo)
    done = run("costs", "--bench", str(fifo), timeout=60)  # a blocking open would hang until the timeout
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(lines) == 1 and "not a regular file (a FIFO)" in lines[0], done.stderr
