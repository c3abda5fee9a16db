"""Following the study: the trainer's progress file, ``status`` (each state read from generated run folders, the
paper's plan with nothing started, nothing touched), the provisional tables (``n of N``, a table without runs), the
progress page and the learning curves. The small scale interrupted and completed: tests/test_workflow.py."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.cluster import processes, scheduler
from softmax_bottleneck.report import preview, progress
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import plan_table
from softmax_bottleneck.study.runs import SWEEP_PREFIX, TRAIN_LOG, Study, analysis_names
from softmax_bottleneck.study.status import learning_curve, status_text, study_status
from softmax_bottleneck.training.run_files import PROGRESS_NAME, ProgressFile, read_progress
from softmax_bottleneck.training.trainer import Preempted, Trainer


@pytest.fixture(scope="module")
def small() -> Study:
    return Study(study_config.check(study_config.read(REPO / "config" / "small.yaml")))


def _trainer(out, **overrides):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 3, **overrides})
    return Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out)


# --------------------------------------------------------------------------------------------- the progress file
def test_the_trainer_writes_its_progress_each_epoch_keeps_it_across_attempts_and_removes_it_when_done(
    tmp_path, monkeypatch
):
    out = tmp_path / "run"
    original_end = Trainer._end_epoch

    def fail_after_epoch_3(self, epoch, losses=None):
        original_end(self, epoch, losses)
        if epoch == 3:
            raise RuntimeError("disk on fire")

    monkeypatch.setattr(Trainer, "_end_epoch", fail_after_epoch_3)
    with pytest.raises(RuntimeError):
        _trainer(out).fit()
    first = read_progress(out / ".resume" / PROGRESS_NAME)
    assert first["epoch"] == first["epochs"] == 3 and first["error"] == "disk on fire" and first["stopped"] is None
    assert [row["epoch"] for row in first["curve"]] == [1, 2, 3]
    assert all(row["wall_seconds"] >= row["seconds"] > 0 for row in first["curve"])
    assert first["best_valid_ppl"] == min(row["valid_ppl"] for row in first["curve"])
    assert (first["dataset"], first["variant"], first["schedule"], first["host"]) == (
        "ptb", "softmax", "et", platform.node(),
    )  # fmt: skip

    def stop_after_epoch_1(self, epoch, losses=None):
        original_end(self, epoch, losses)
        raise Preempted(f"signal 15 after epoch {epoch}")

    monkeypatch.setattr(Trainer, "_end_epoch", stop_after_epoch_1)
    with pytest.raises(Preempted):
        _trainer(out).fit()  # no resume state was due: the second attempt starts over
    second = read_progress(out / ".resume" / PROGRESS_NAME)
    assert (second["epoch"], second["stopped"], second["error"]) == (1, "signal 15 after epoch 1", None)
    assert second["attempts"] == 2 and second["started"] == first["started"] < second["attempt_started"]

    monkeypatch.setattr(Trainer, "_end_epoch", original_end)
    _trainer(out).fit()
    assert sorted(p.name for p in (out / ".resume").iterdir()) == ["final"]  # gone with the resume state


def test_the_temporaries_a_killed_write_left_are_removed_by_the_next_attempt_and_by_a_restore(tmp_path):
    """A kill while the progress file or the resume state was being written leaves ``.resume/.<name>.*.tmp``; the
    next attempt (it holds the run's lock) removes them, and so does a job that finds the run finished."""
    out = tmp_path / "run"
    stale = [out / ".resume" / name for name in (f".{PROGRESS_NAME}.k1ll3d.tmp", ".state.pt.k1ll3d.tmp")]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"format": 1, "epo')
    _trainer(out).fit()
    assert sorted(p.name for p in (out / ".resume").iterdir()) == ["final"]
    for path in stale:  # a finish killed after its commit, then the job run again: nothing to train
        path.write_text('{"format": 1, "epo')
    _trainer(out).fit()
    assert sorted(p.name for p in (out / ".resume").iterdir()) == ["final"]


# --------------------------------------------------------------------------------------------- status
def _write_progress(folder: Path, **fields) -> None:
    content = {
        "format": 1, "epochs": 6, "epoch": 2, "phase": "sgd", "best_valid_ppl": 412.5, "best_epoch": 2,
        "checkpoint_seconds": 600.0, "started": time.time() - 300, "attempt_started": time.time(),
        "attempts": 1, "host": platform.node(), "pid": os.getpid(), "updated": time.time(), "stopped": None,
        "error": None,
        "curve": [{"epoch": e, "valid_ppl": 500.0 - e, "seconds": 50.0, "wall_seconds": 60.0} for e in (1, 2)],
    }  # fmt: skip
    content.update(fields)
    (folder / ".resume").mkdir(parents=True, exist_ok=True)
    (folder / ".resume" / PROGRESS_NAME).write_text(json.dumps(content))


@pytest.mark.parametrize("attempts", ["two", -3, 2.5, None, [1]])
def test_a_garbled_progress_file_never_stops_a_training(tmp_path, attempts):
    """The file only informs: a corrupt count of attempts (or a file that is not JSON) restarts the count."""
    _write_progress(tmp_path, attempts=attempts)
    progress = ProgressFile(tmp_path / ".resume" / PROGRESS_NAME, run={}, epochs=6, checkpoint_seconds=600.0)
    assert progress.attempts == 1 and progress.walls == {1: 60.0, 2: 60.0}
    (tmp_path / ".resume" / PROGRESS_NAME).write_bytes(b"\xff{")
    assert ProgressFile(tmp_path / ".resume" / PROGRESS_NAME, run={}, epochs=6, checkpoint_seconds=1.0).attempts == 1


@pytest.mark.parametrize("started", [5e9, "tomorrow", -1.0, "soon"])
def test_a_resumed_attempt_carries_over_no_impossible_time_of_an_edited_progress_file(tmp_path, started):
    """Before, a resumed training copied a start in 2128 or tomorrow and a negative epoch time into the file it writes,
    and `status` then called the running run unreadable. What the real writer writes now reads back as possible."""
    from softmax_bottleneck import readback
    from softmax_bottleneck.training.state import Progress

    curve = [{"epoch": 1, "valid_ppl": 499.0, "seconds": 50.0, "wall_seconds": -60.0},
             {"epoch": 2, "valid_ppl": 498.0, "seconds": 50.0, "wall_seconds": 60.0}]  # fmt: skip
    started = time.time() + 86_400 if started == "tomorrow" else started  # a time, not a test id that changes
    _write_progress(tmp_path, started=started, curve=curve)
    before = time.time()
    writer = ProgressFile(tmp_path / ".resume" / PROGRESS_NAME, run={}, epochs=6, checkpoint_seconds=600.0)
    assert before <= writer.started <= time.time() and writer.walls == {2: 60.0}
    writer.write(Progress(epoch=2, best_epoch=2, curve=[{"epoch": e, "valid_ppl": 500.0 - e, "seconds": 50.0}
                                                         for e in (1, 2)]))  # fmt: skip
    written = read_progress(tmp_path / ".resume" / PROGRESS_NAME)
    assert readback.check_progress(written, tmp_path, 6) == written


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_status_reads_each_state_from_the_run_folders_and_changes_nothing(tmp_path, small):
    runs = list(small.jobs.values())
    folders = [tmp_path / run.dir for run in runs]
    logs = [tmp_path / TRAIN_LOG.format(**run.wildcards) for run in runs]
    # 0: finished and analysed; 1: finished, outputs removed by Snakemake, kept in .resume/final
    for folder in folders[:2]:
        (folder / ".resume" / "final").mkdir(parents=True)
    (folders[0] / "model.pt").write_bytes(b"not loaded")
    (folders[0] / "metrics.json").write_text(json.dumps({"test_ppl": 321.5, "seconds_per_epoch": 6.0, "epochs_run": 6}))
    (folders[0] / "rank-300.json").write_text(json.dumps({"press_rank": 18}))
    (folders[1] / ".resume" / "final" / "metrics.json").write_text(json.dumps({"test_ppl": 400.0}))
    # 2: running here (this process, written just now); 3: running on another node
    _write_progress(folders[2])
    _write_progress(folders[3], host="node-elsewhere", pid=1)
    # 4: pre-empted (its newest record says so); 5: killed (its process is gone); 6: silent on another node too long
    _write_progress(folders[4], stopped="signal 15 at epoch 3, batch 40")
    _write_progress(folders[5], pid=_dead_pid(), attempt_started=time.time() - 5)
    _write_progress(folders[6], host="node-elsewhere", pid=1)
    _age(folders[6] / ".resume" / PROGRESS_NAME, 3600)
    # 7: failed, as the trainer's last line in the log says; 8: killed before writing anything but its lock
    logs[7].parent.mkdir(parents=True, exist_ok=True)
    diverged = "train: training diverged: non-finite loss at epoch 2, batch 17; lower lr or check the data"
    logs[7].write_text(f"2026-11-26 10:00:00 INFO softmax_bottleneck.train: epoch 1 ...\n{diverged}\n")
    folders[7].mkdir(parents=True)
    (folders[8]).mkdir(parents=True)
    (folders[8] / ".lock").write_text(f"{_dead_pid()} {platform.node()}\n")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}

    status = study_status(small, directory=tmp_path, config="config/small.yaml", retry_options="--configfile x.yaml")
    states = [r.state for r in status.runs]
    expected = ["finished", "finished", "running", "running", "stalled", "stalled", "stalled", "failed", "stalled"]
    assert states[:9] == expected and set(states[9:]) == {"not started"}
    assert status.counts() == {"finished": 2, "running": 2, "stalled": 4, "failed": 1, "unreadable": 0,
                               "not started": len(runs) - 9}  # fmt: skip
    first, running, failed = status.runs[0], status.runs[2], status.runs[7]
    assert (first.test_ppl, first.press_rank, first.device_seconds) == (321.5, 18.0, 36.0)
    assert (running.epoch, running.best_valid_ppl, running.seconds_left, running.device_seconds) == (2, 412.5, 240, 120)
    assert "signal 15 at epoch 3" in status.runs[4].note and "is gone" in status.runs[5].note
    assert "nothing written for 1h 00m" in status.runs[6].note and "restarts from the beginning" in status.runs[8].note
    assert failed.note.startswith("train: training diverged") and failed.retry == (
        f"snakemake {runs[7].dir}/model.pt --configfile x.yaml"
    )
    text = status_text(status)
    assert failed.note in text and "epoch 2/6, best valid ppl 412.50, about 4m 00s left" in text
    assert runs[9].dir not in text and runs[9].dir in status_text(status, every_run=True)  # --runs lists all
    assert json.loads(json.dumps(status.as_dict()))["counts"] == status.counts()
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before  # read only: nothing written or touched


def test_a_run_whose_slurm_job_is_queued_or_running_is_never_failed_nor_given_a_retry(tmp_path, small, monkeypatch):
    """Before, status never asked SLURM: a requeued run waiting in the queue was "stalled ...; retry: snakemake ..."
    (which, without --profile, trains it on this machine), a retry job already running "failed" until it wrote. A job
    of the same run studied in another folder is not this study's."""
    runs = list(small.jobs.values())[:4]
    folders = [tmp_path / run.dir for run in runs]
    _write_progress(folders[0], stopped="signal 15 at epoch 2, batch 40")  # pre-empted, requeued: pending
    logs = [tmp_path / TRAIN_LOG.format(**run.wildcards) for run in runs]
    logs[1].parent.mkdir(parents=True, exist_ok=True)
    logs[1].write_text("train: training diverged: non-finite loss at epoch 2, batch 17\n")  # its retry runs now
    folders[1].mkdir(parents=True)
    _write_progress(folders[3], stopped="signal 15 at epoch 2, batch 40")  # its job runs in another study's folder
    listed = [("41", "PENDING", runs[0], tmp_path), ("42", "RUNNING", runs[1], tmp_path),
              ("43", "PENDING", runs[2], tmp_path), ("44", "RUNNING", runs[3], tmp_path / "elsewhere")]  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = "".join(
        f"echo '{jobid}|{state}|{scheduler.job_comment('train', [r.dataset, r.variant, r.schedule, r.seed, r.runid])}"
        f"|{where}'\n"
        for jobid, state, r, where in listed
    )
    (bin_dir / "squeue").write_text(f"#!/bin/sh\n{lines}")
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at head is UP'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    status = study_status(small, directory=tmp_path, config="config/small.yaml")
    first, second, third, fourth = status.runs[:4]
    assert (first.state, first.retry) == ("stalled", None) and first.note.startswith(
        "SLURM job 41 is pending: the run resumes"
    )
    assert (second.state, second.retry) == ("running", None) and "SLURM job 42 runs it" in second.note
    assert (third.state, third.retry) == (
        "not started",
        None,
    ) and "SLURM job 43 is pending: the run starts" in third.note
    assert fourth.state == "stalled" and fourth.retry and "SLURM" not in fourth.note
    text = status_text(status)
    assert "failed" not in [line.split()[0] for line in text.splitlines() if line.strip()] and "retry: None" not in text


@pytest.mark.parametrize("proc", ["linux", "none"])
def test_a_live_training_is_running_with_or_without_proc_and_a_reused_pid_is_gone_where_proc_tells(
    tmp_path, small, monkeypatch, proc
):
    """Whether a run's process lives is asked of the OS by its PID; Linux's ``/proc`` also gives the process's start,
    so a PID that now belongs to a process started after the run's attempt is not the run's. Without ``/proc``
    (macOS) that start is unknown: a live PID is taken as the run's, never called gone."""
    if proc == "none":
        monkeypatch.setattr(processes, "PROC", tmp_path / "no-proc")
    folders = [tmp_path / run.dir for run in list(small.jobs.values())[:3]]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        _write_progress(folders[0], pid=child.pid, attempt_started=time.time())  # the run's own process
        _write_progress(folders[1], pid=_dead_pid())  # gone
        _write_progress(folders[2], pid=child.pid, attempt_started=time.time() - 3600)  # its PID, given to another
        status = study_status(small, directory=tmp_path, config="config/small.yaml")
    finally:
        child.kill()
        child.wait()
    states = [r.state for r in status.runs[:3]]
    assert states == ["running", "stalled", "stalled" if proc == "linux" else "running"]
    assert "is gone" in status.runs[1].note


def test_a_pid_no_process_can_have_is_never_alive_and_a_new_process_started_just_now():
    """``kill(0)``, ``kill(-1)`` would signal process groups and a PID beyond C's int overflows: none is a process."""
    assert not any(processes.pid_exists(pid) for pid in (0, -1, 2**40)) and processes.start_time(2**40) is None
    before = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = processes.start_time(child.pid)
        assert processes.pid_exists(child.pid) and before - 1.0 <= started <= time.time() + 1.0, (before, started)
    finally:
        child.kill()
        child.wait()
    assert not processes.pid_exists(child.pid)


#: a program that writes a 256 MiB block, then starts two fresh ones as ``subprocess`` starts them (``vfork``; ``fork``
#: where a ``preexec_fn`` is given), which report their own peaks; ``/proc`` is where its first argument says
PEAKS = """
import json, os, pathlib, subprocess, sys
from softmax_bottleneck.cluster import processes, scheduler
processes.PROC = pathlib.Path(sys.argv[1])
block = bytearray(256 * 2**20)
block[:: os.sysconf("SC_PAGE_SIZE")] = b"x" * (len(block) // os.sysconf("SC_PAGE_SIZE"))
child = "from softmax_bottleneck.cluster import processes; print(processes.peak_resident_bytes())"
children = [int(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True, **how).stdout)
            for how in ({}, {"preexec_fn": os.getpid})]
print(json.dumps({"peak": processes.peak_resident_bytes(), "block": len(block), "children": children,
                  "machine": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}))
"""


@pytest.mark.parametrize("proc", ["/proc", "missing"])
def test_the_peak_resident_memory_is_the_programs_own_in_bytes(proc, tmp_path):
    """A program that wrote a 256 MiB block peaks above it and below the machine's memory (``ru_maxrss``'s unit read
    wrong is 1,024× off either way); where ``/proc`` tells, a program it starts reports its own peak, far below the
    block, not its parent's (which ``ru_maxrss`` carries over on Linux)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    where = proc if proc == "/proc" else str(tmp_path / "no-proc")
    got = json.loads(subprocess.run([sys.executable, "-c", PEAKS, where], capture_output=True, text=True, check=True,
                                    env=env, timeout=120).stdout)  # fmt: skip
    assert got["block"] < got["peak"] < got["machine"], got
    if proc == "/proc" and Path("/proc/self/status").exists():
        assert all(0 < peak < got["block"] / 4 for peak in got["children"]), got


def test_status_shows_an_impossible_record_as_its_reason_not_its_number(tmp_path, small):
    """A finished run's metrics.json or rank file read back as every reader does (readback): an impossible number
    or a key written twice is named with its file, never shown as a result; the run is counted unreadable (before,
    finished, its reason shown with ``--runs`` only, and the tables then stopped on it)."""
    runs = list(small.jobs.values())[:2]
    for run in runs:
        (tmp_path / run.dir).mkdir(parents=True)
        (tmp_path / run.dir / "model.pt").write_bytes(b"not loaded")
    (tmp_path / runs[0].dir / "metrics.json").write_text('{"test_ppl": -5, "epochs_run": 6}')
    (tmp_path / runs[1].dir / "metrics.json").write_text('{"test_ppl": 400.0, "test_ppl": 300.0}')
    status = study_status(small, directory=tmp_path)
    first, second = status.runs[:2]
    assert first.state == second.state == "unreadable" and first.test_ppl is None and second.test_ppl is None
    assert (
        first.note
        == f"{tmp_path / runs[0].dir / 'metrics.json'}: test_ppl = -5 is impossible (a perplexity is at least 1)"
    )
    assert "metrics.json" in second.note and "test_ppl" in second.note
    assert status.counts()["unreadable"] == 2 and status.counts()["finished"] == 0
    assert first.note in status_text(status)  # on the one-screen view


def test_status_of_the_paper_plan_with_nothing_started(tmp_path, capsys):
    from softmax_bottleneck import cli

    assert cli.main(["status", "--config", str(REPO / "config" / "config.yaml"), "--directory", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    study = Study(study_config.check(study_config.read(REPO / "config" / "config.yaml")))
    hours = float(plan_table(study).iloc[-1]["V100 GPU-hours (new jobs)"])
    assert "283 training jobs: 283 not started." in text
    assert f"The plan projects {hours:,.0f} V100 GPU-hours: 0.0 done" in text and f"{hours:,.0f}" == "7,015"
    assert "| total (distinct jobs)      |    283 |" in text and "Projected finish: none" in text
    assert not any(tmp_path.iterdir())


def test_status_merges_several_config_files_and_its_retry_command_names_them_all(tmp_path, capsys, small):
    """``--config A --config B`` reads the configuration ``snakemake --configfile A B`` runs; a failed run's retry
    command gives Snakemake the same files."""
    from softmax_bottleneck import cli

    extra = tmp_path / "extra.yaml"
    extra.write_text("seeds:\n  random: [1627000489, 7]\n")  # one random seed more: more runs
    merged = Study(study_config.check(study_config.load([REPO / "config" / "small.yaml", extra])))
    assert len(merged.jobs) > len(small.jobs)
    run = next(iter(merged.jobs.values()))
    (tmp_path / run.dir).mkdir(parents=True)
    _write_progress(tmp_path / run.dir, started=time.time() - 20_000, updated=time.time() - 10_000, pid=None,
                    error="training diverged")  # fmt: skip
    small_file, argv = str(REPO / "config" / "small.yaml"), ["--config", str(REPO / "config" / "small.yaml")]
    assert cli.main(["status", *argv, "--config", str(extra), "--directory", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"] == f"{small_file} + {extra}" and out["jobs"] == len(merged.jobs)
    failed = [r for r in out["runs"] if r["state"] == "failed"]
    # in the study's folder wherever it is pasted (before: none, and run from the checkout it trained the run there)
    retry = f"snakemake {run.dir}/model.pt --configfile {small_file} {extra} --directory {tmp_path}"
    assert [r["retry"] for r in failed] == [retry]
    assert cli.main(["status", *argv, "--config", str(extra), "--directory", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert f"retry: {retry}\n" in text and "add the options you run the study with (--profile on a cluster" in text


def test_a_retry_command_pasted_anywhere_names_the_same_files_and_folder(tmp_path, capsys, monkeypatch):
    """The study's configuration inside its folder, `status` asked there with a relative `--config` (and by the
    workflow's own `snakemake status`, its files relative to the folder): the retry names the files by absolute path
    and the folder (before: `--configfile study.yaml`, which Snakemake reads from where it is pasted, before it
    changes to `--directory`, and no folder at all from inside it)."""
    from softmax_bottleneck import cli

    study_dir = tmp_path / "study"
    study_dir.mkdir()
    (study_dir / "study.yaml").write_text((REPO / "config" / "small.yaml").read_text())
    run = next(iter(Study(study_config.check(study_config.read(study_dir / "study.yaml"))).jobs.values()))
    (study_dir / run.dir).mkdir(parents=True)
    _write_progress(study_dir / run.dir, started=time.time() - 20_000, updated=time.time() - 10_000, pid=None,
                    error="training diverged")  # fmt: skip
    expected = ["snakemake", f"{run.dir}/model.pt", "--configfile", str(study_dir / "study.yaml"), "--directory",
                str(study_dir)]  # fmt: skip
    monkeypatch.chdir(study_dir)
    assert cli.main(["status", "--config", "study.yaml", "--json"]) == 0
    (retry,) = [r["retry"] for r in json.loads(capsys.readouterr().out)["runs"] if r["state"] == "failed"]
    assert shlex.split(retry) == expected
    monkeypatch.chdir(REPO)
    workflow = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(study_dir),
         "--configfile", str(study_dir / "study.yaml"), "--cores", "1", "status"],
        capture_output=True, text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert workflow.returncode == 0, workflow.stderr[-3000:]
    said = [line.split("retry: ", 1)[1] for line in workflow.stdout.splitlines() if "retry: " in line]
    assert [shlex.split(line) for line in said] == [expected], workflow.stdout[-3000:]


def test_a_followed_studys_retry_command_gives_its_config_values_too(tmp_path, capsys):
    """Before, a study started with `--config 'model_overrides={all: {lr: 1000000.0}}' output_subdir=bad` was followed
    by `status`, whose retry command named its file alone: `snakemake <run>/model.pt --configfile ...` then had no rule
    for that run. The command now gives the values back, and Snakemake reads them as the workflow did."""
    from snakemake.cli import parse_config

    from softmax_bottleneck import cli
    from softmax_bottleneck.cluster import workflow_run

    small_file = str(REPO / "config" / "small.yaml")
    values = parse_config(["model_overrides={all: {lr: 1000000.0}}", "output_subdir=bad"])  # as the workflow has them
    study = Study(study_config.check(study_config.load([small_file], values)))
    run = next(iter(study.jobs.values()))
    (tmp_path / run.dir).mkdir(parents=True)
    _write_progress(tmp_path / run.dir, started=time.time() - 20_000, updated=time.time() - 10_000, pid=None,
                    error="training diverged")  # fmt: skip
    logs = tmp_path / "logs" / "bad" / workflow_run.RECORD
    workflow_run.write(logs, files=[small_file], values=values, slots=2, jobs=[])  # the workflow's start
    assert cli.main(["status", "--directory", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (retry,) = [r["retry"] for r in out["runs"] if r["state"] == "failed"]
    words = shlex.split(retry)
    assert words[:4] == ["snakemake", f"{run.dir}/model.pt", "--configfile", small_file], retry
    assert words[4] == "--config" and study_config.load([small_file], parse_config(words[5:-2])) == study.config
    assert words[-2:] == ["--directory", str(tmp_path)]


# --------------------------------------------------------------------------------------------- preview, progress
def _finish_run(root: Path, run, test_ppl: float) -> None:
    folder = root / run.dir
    folder.mkdir(parents=True)
    (folder / "model.pt").write_bytes(b"x")
    metrics = {"dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
               "hyperparameters": {**run.hyperparameters, "seed": run.seed}, "parameters": 1000, "train_ppl": 300.0,
               "valid_ppl": test_ppl + 5, "test_ppl": test_ppl, "seconds_per_epoch": 2.0, "epochs_run": 6,
               "switch_epoch": 5}  # fmt: skip
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "curve.csv").write_text("epoch,valid_ppl\n1,900\n2,700\n")


def test_the_preview_of_a_sweep_reads_each_finished_runs_rank_as_the_final_sweep_does(tmp_path):
    config = study_config.read(REPO / "config" / "small.yaml")
    config["sweeps"] = {"c": {"variant": "gss", "datasets": ["ptb"], "schedule": "et", "seeds": "authors",
                              "grid": {"gss_c": [1.0, 2.0]}}}  # fmt: skip
    study = Study(study_config.check(config))
    runs = study.sweeps["c"]
    rank_file = analysis_names(study.config)[0]
    for number, run in enumerate(runs):
        _finish_run(tmp_path, run, 300.0 + number)
    rank = {"press_rank": 7, "shape": [300, 10000], "effective_rank": {"1e-3": 7, "1e-4": 8, "1e-5": 9}}
    (tmp_path / runs[0].dir / rank_file).write_text(json.dumps(rank))  # the other run is not analysed yet
    preview.write_summaries(study, tmp_path, tmp_path / "summary")
    sweep = pd.read_csv(tmp_path / "summary" / f"{SWEEP_PREFIX}c.csv").set_index("gss_c")
    assert sweep.loc[runs[0].hyperparameters["gss_c"], "press_rank"] == 7
    assert sweep["press_rank"].isna().sum() == 1


def test_preview_renders_finished_runs_with_n_of_N_and_says_when_a_table_has_none(tmp_path, small):
    main = small.experiments["main"]
    ptb_softmax = [r for r in main if (r.dataset, r.variant) == ("ptb", "softmax")]
    _finish_run(tmp_path, ptb_softmax[0], 300.0)
    _finish_run(tmp_path, next(r for r in main if (r.dataset, r.variant) == ("ptb", "ss")), 280.0)
    names = {"table2", "table3", "sm_table13", "sm_table3"}
    outcome = preview.render_preview(small, directory=tmp_path, stamp="2026-11-26 12:00", names=names)
    assert outcome["table2"] == "rendered" and outcome["table3"] == "no run of this table is in yet (0 of 4)"
    assert outcome["sm_table3"] == "no model of this table is in yet (0 of 12)"
    assert outcome["sm_table13"] == "no corpus of this table is in yet (0 of 2)"  # SM Table 13 reads no model
    tables = tmp_path / "reports" / "small" / "preview" / "tables"
    md = (tables / "table2.md").read_text()
    assert md.startswith("**PROVISIONAL, 2026-11-26 12:00: 2 of 20 runs in — small scale")
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows[0].rstrip(" |").endswith("n of N seeds")
    softmax = next(line for line in rows if "| PTB " in line and "Softmax" in line)
    assert "300.00 (57.08 ± 0.09)" in softmax and softmax.rstrip(" |").endswith("1 of 2")
    assert sum(line.rstrip(" |").endswith("0 of 2") for line in rows) == 8
    csv = pd.read_csv(tables / "table2.csv")
    assert set(csv["provisional"]) == {"2026-11-26 12:00"} and csv["finished"].sum() == 2
    assert csv["planned"].tolist() == [len(ptb_softmax)] * 10
    assert "no run of this table is in yet (0 of 4)" in (tables / "table3.md").read_text()
    assert (tables / "table3.html").read_text().count("PROVISIONAL, 2026-11-26 12:00") == 1


@pytest.mark.parametrize(
    ("text", "why"),
    [("epoch,valid_ppl\n1,0.5\n", "valid_ppl = 0.5"), ("epoch,valid_ppl\n0,300\n", "epoch = 0"),
     ("epoch,loss\n1,3\n", "valid_ppl"), ("epoch,valid_ppl\n1,x\n", "could not convert")],
)  # fmt: skip
def test_a_curve_with_an_impossible_number_is_left_out_of_the_learning_curves_and_named(tmp_path, caplog, text, why):
    (tmp_path / "curve.csv").write_text(text)
    assert learning_curve(tmp_path) == []
    assert f"{tmp_path / 'curve.csv'}: left out of the learning curves" in caplog.text and why in caplog.text
    (tmp_path / "curve.csv").write_text("epoch,valid_ppl\n1,900\n2,700.5\n")
    assert learning_curve(tmp_path) == [(1, 900.0), (2, 700.5)]


def test_progress_page_and_learning_curves(tmp_path, small):
    main = small.experiments["main"]
    _finish_run(tmp_path, main[0], 300.0)
    _write_progress(tmp_path / main[1].dir)
    status = progress.render_progress(small, directory=tmp_path, config="config/small.yaml")
    page_file, curves = progress.progress_files(small)
    page = (tmp_path / page_file).read_text()
    assert "finished runs over time" in page and 'src="data:image/png;base64,' in page
    assert "<td>E1 main comparison</td>" in page and main[1].dir in page  # the running run, listed
    assert status.counts()["finished"] == 1 and status.counts()["running"] == 1
    assert all((tmp_path / path).read_bytes().startswith(b"\x89PNG") for path in curves)
    expected = ["main", "frozen", "ntet", "gss_grid", "mos_k", "mos_dropoutl", "fair", "analysis"]
    assert [Path(p).stem for p in curves] == list(status.groups) == expected


@pytest.mark.parametrize(
    ("line", "event"),
    [
        ("train: training diverged: non-finite loss at epoch 2, batch 17", ("error", "train: training diverged")),
        ("2026-11-26 16:11:16 ERROR softmax_bottleneck.cluster: gpu-lease: no GPU", ("error", "gpu-lease: no GPU")),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", ("error", "RuntimeError: CUDA")),
        ("2026-11-26 16:11:16 WARNING softmax_bottleneck.train: pre-empted (signal 2 at epoch 1, batch 1); state saved",
         ("stop", "pre-empted (signal 2 at epoch 1")),
        ("KeyboardInterrupt", ("stop", "KeyboardInterrupt")),
        ("2026-11-26 16:11:15 INFO softmax_bottleneck.train: end of epoch   3 | ... | epoch 3/6", None),
    ],
)  # fmt: skip
def test_the_last_log_line_says_whether_an_attempt_failed_or_was_stopped(line, event):
    from softmax_bottleneck.study.status import log_event

    error, stop = log_event(line)
    if event is None:
        assert error is None and stop is None
    else:
        kind, start = event
        assert (error if kind == "error" else stop).startswith(start) and (stop if kind == "error" else error) is None
