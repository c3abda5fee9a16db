"""A running training is never shown failed: a run whose newest log line is the heartbeat
(:mod:`softmax_bottleneck.cluster.heartbeat`, ``train: still working, 4m 21s in``, written whenever an epoch takes
longer than its interval) is running, read from a real run folder whose process still runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import TRAIN_LOG, Study
from softmax_bottleneck.study.status import last_line, log_event, status_text, study_status
from softmax_bottleneck.training.run_files import PROGRESS_NAME

#: ``python -m softmax_bottleneck train`` as the workflow runs it, with a heartbeat every 0.3 s, its trainer's work
#: replaced by what a trainer does up to a long second epoch: it takes the run's lock, writes its progress file with
#: the trainer's own writer (epoch 1 done), then logs nothing for the epoch; its log gets the real heartbeat's lines
LONG_EPOCH = """
import sys, time
from pathlib import Path
from softmax_bottleneck import cli
from softmax_bottleneck.cluster import heartbeat
from softmax_bottleneck.training import train_command as trainer
from softmax_bottleneck.training.lock import run_lock
from softmax_bottleneck.training.run_files import PROGRESS_NAME, ProgressFile
from softmax_bottleneck.training.state import Progress

def long_epoch(args):
    run = {"dataset": args.dataset, "variant": args.variant, "schedule": args.schedule, "seed": args.seed}
    with run_lock(args.out):
        writer = ProgressFile(Path(args.out) / ".resume" / PROGRESS_NAME, run=run, epochs=EPOCHS,
                              checkpoint_seconds=600.0)
        writer.epoch_done(1, 60.0)
        writer.write(Progress(epoch=1, best_epoch=1, curve=[{"epoch": 1, "valid_ppl": 612.5, "seconds": 50.0}]))
        time.sleep(120)

beat = heartbeat.start
heartbeat.start = lambda command: beat(command, seconds=0.3)
trainer.run_cli = long_epoch
sys.exit(cli.main(sys.argv[1:], heartbeat=True))
"""


@pytest.fixture(scope="module")
def small() -> Study:
    return Study(study_config.check(study_config.read(REPO / "config" / "small.yaml")))


def test_a_run_whose_last_log_line_is_the_heartbeat_is_running(tmp_path, small):
    run = next(iter(small.jobs.values()))
    folder, log = tmp_path / run.dir, tmp_path / TRAIN_LOG.format(**run.wildcards)
    folder.mkdir(parents=True)
    log.parent.mkdir(parents=True)
    argv = ["train", "--dataset", run.dataset, "--variant", run.variant, "--schedule", run.schedule, "--seed",
            str(run.seed), "--out", str(folder)]  # fmt: skip
    code = LONG_EPOCH.replace("EPOCHS", str(int(run.hyperparameters["epochs"])))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with open(log, "ab") as out:  # as the workflow's rule: ``>> {log} 2>&1``
        child = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=out, stderr=out, env=env)
    try:
        deadline = time.time() + 60
        while "still working" not in log.read_text() and time.time() < deadline:
            assert child.poll() is None, log.read_text()
            time.sleep(0.1)
        line = last_line(log)
        assert line is not None and " INFO softmax_bottleneck.heartbeat: train: still working, " in line, line
        assert log_event(line) == (None, None)
        progress = folder / ".resume" / PROGRESS_NAME
        assert log.stat().st_mtime >= progress.stat().st_mtime  # the log is the newest record of the attempt
        status = study_status(small, directory=tmp_path, config="config/small.yaml")
        assert child.poll() is None  # still training while read
    finally:
        child.kill()
        child.wait()
    shown = status.runs[0]
    assert (shown.state, shown.note, shown.retry, shown.epoch) == ("running", "", None, 1)
    assert status.counts()["failed"] == 0
    text = status_text(status)
    assert "failed (" not in text and "retry" not in text and f"  {run.dir}  epoch 1/" in text


def test_the_trainers_failure_is_still_read_from_the_last_line(tmp_path):
    """The trainer's one-line failure ends the command on a bare line (``SystemExit``), not a logged one."""
    log = tmp_path / "train.log"
    code = "raise SystemExit('train: training diverged: NaN loss')"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-c", code], stderr=out, check=False,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})  # fmt: skip
    assert log_event(last_line(log)) == ("train: training diverged: NaN loss", None)
    logged = Path(tmp_path / "info.log")
    logged.write_text("2026-11-26 10:00:00 INFO softmax_bottleneck.train: train: loaded 10 batches\n")
    assert log_event(last_line(logged)) == (None, None)


#: an attempt of a training up to the point named by argv[2]: ``epoch`` takes the run's lock, writes its progress
#: file with the trainer's own writer (epoch 1 done) and exits (a killed first attempt); ``start`` takes the lock, as a
#: resumed attempt's first act, and waits there (loading its corpus and state) before it writes any progress
ATTEMPT = """
import sys, time
from pathlib import Path
from softmax_bottleneck.training.lock import run_lock
from softmax_bottleneck.training.run_files import PROGRESS_NAME, ProgressFile
from softmax_bottleneck.training.state import Progress

folder, what = Path(sys.argv[1]), sys.argv[2]
with run_lock(folder):
    if what == "epoch":
        writer = ProgressFile(folder / ".resume" / PROGRESS_NAME, run={}, epochs=EPOCHS, checkpoint_seconds=600.0)
        writer.epoch_done(1, 60.0)
        writer.write(Progress(epoch=1, best_epoch=1, curve=[{"epoch": 1, "valid_ppl": 612.5, "seconds": 50.0}]))
    else:
        print("locked", flush=True)
        time.sleep(120)
"""


def test_a_resumed_run_is_running_from_the_moment_it_takes_its_lock(tmp_path, small):
    """Before, a resumed attempt was shown stalled ("its process is gone") until it first wrote its progress file: the
    PID was read from the previous attempt's progress file although the newer lock named the new process."""
    run = next(iter(small.jobs.values()))
    folder = tmp_path / run.dir
    code = ATTEMPT.replace("EPOCHS", str(int(run.hyperparameters["epochs"])))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "-c", code, str(folder), "epoch"], env=env, check=True, timeout=120)
    time.sleep(0.05)  # the next attempt's lock is written after the killed attempt's progress, as on any clock
    killed = study_status(small, directory=tmp_path, config="config/small.yaml").runs[0]
    assert killed.state == "stalled" and "is gone" in killed.note, killed
    child = subprocess.Popen([sys.executable, "-c", code, str(folder), "start"], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline() == b"locked\n"
        resumed = study_status(small, directory=tmp_path, config="config/small.yaml").runs[0]
        assert child.poll() is None  # still holds the lock while read
    finally:
        child.kill()
        child.wait()
    assert (resumed.state, resumed.note, resumed.epoch) == ("running", "", 1), resumed
