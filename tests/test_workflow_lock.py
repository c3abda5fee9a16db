"""Another Snakemake's lock on files of this run, said in one line with what to do: while a Snakemake runs in the
folder, a run stops (wait, or work in another folder; never ``--unlock``) and a dry run notes it instead of
Snakemake's "Error: Directory cannot be locked" before exiting 0 (a dry run takes no lock and goes on); where the
lock is a killed run's, ``--unlock`` lifts it. The lock is a real Snakemake's, running a tiny workflow of its own in
the same folder whose output is one of the study's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO

#: an output of the smoke configuration's `training_plan`, which the other Snakemake also builds
PLAN_OUTPUT = "results/smoke/plan/training_jobs.csv"
HOLDER = f"""
rule hold:
    output: "{PLAN_OUTPUT}"
    shell: "sleep 120; touch {{output}}"
"""


def _arguments(folder: Path, *args: str) -> list[str]:
    return ["training_plan", *args, "--cores", "1", "-s", str(REPO / "Snakefile"), "--configfile",
            str(REPO / "config" / "smoke.yaml"), "--directory", str(folder)]  # fmt: skip


def _snakemake(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", *_arguments(folder, *args)]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, check=False)


def test_a_run_beside_a_running_snakemake_stops_in_one_line_and_never_invites_unlock(tmp_path):
    (tmp_path / "holder.smk").write_text(HOLDER)
    holder = subprocess.Popen([sys.executable, "-m", "snakemake", "-s", "holder.smk", "--cores", "1"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        locks, deadline = tmp_path / ".snakemake" / "locks", time.monotonic() + 120
        while not any(PLAN_OUTPUT in p.read_text() for p in locks.glob("*.lock")) if locks.is_dir() else True:
            assert holder.poll() is None and time.monotonic() < deadline, "the other Snakemake took no lock"
            time.sleep(0.2)
        refused = _snakemake(tmp_path)
        out = refused.stdout + refused.stderr
        assert refused.returncode != 0, out[-3000:]
        assert f"snakemake: another Snakemake runs in this folder (process {holder.pid}, started " in out, out[-3000:]
        assert "do not --unlock while it runs" in out and "can be removed with the --unlock argument" not in out
        assert not (tmp_path / PLAN_OUTPUT).exists()
        dry = _snakemake(tmp_path, "-n")
        out = dry.stdout + dry.stderr
        assert dry.returncode == 0 and "Directory cannot be locked" not in out, out[-3000:]
        assert f"note: another Snakemake runs in this folder (process {holder.pid}, " in out
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # killed: its lock stays behind
        holder.wait()
    stale = _snakemake(tmp_path)
    out = stale.stdout + stale.stderr
    assert stale.returncode != 0 and "no longer runs on this machine" in out, out[-3000:]
    assert "lift it with snakemake --unlock, then run this again" in out
    # run through a wrapper (`timeout 100 snakemake ...`): the wrapper is not another Snakemake (before: "another
    # Snakemake runs in this folder (process <the wrapper>)", wait for it)
    script = Path(sys.executable).parent / "snakemake"
    wrapped = subprocess.run(["timeout", "100", str(script), *_arguments(tmp_path)], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300, check=False)  # fmt: skip
    out = wrapped.stdout + wrapped.stderr
    assert wrapped.returncode != 0 and "no longer runs on this machine" in out, out[-3000:]


def test_a_run_beside_a_running_snakemake_stops_even_when_it_needs_none_of_its_files(tmp_path):
    """Before, `snakemake plan` (or a table already made) beside a running study ran, and when it ended Snakemake
    removed the whole `.snakemake/locks`, the study's lock too: a second start of the study was then accepted. Now it
    stops at once, changing nothing, and the running one keeps its lock; a dry run still plans beside it."""
    (tmp_path / "holder.smk").write_text(HOLDER.replace(PLAN_OUTPUT, "elsewhere.txt"))
    holder = subprocess.Popen([sys.executable, "-m", "snakemake", "-s", "holder.smk", "--cores", "1"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        locks, deadline = tmp_path / ".snakemake" / "locks", time.monotonic() + 120
        while not any("elsewhere.txt" in p.read_text() for p in locks.glob("*.lock")) if locks.is_dir() else True:
            assert holder.poll() is None and time.monotonic() < deadline, "the other Snakemake took no lock"
            time.sleep(0.2)
        held = sorted(locks.glob("*.lock"))
        refused = _snakemake(tmp_path)
        out = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "Traceback" not in out, out[-3000:]
        assert f"snakemake: another Snakemake runs in this folder (process {holder.pid}, started " in out, out[-3000:]
        assert "Snakemake would remove its lock with this one's" in out and "do not --unlock while it runs" in out
        assert not (tmp_path / PLAN_OUTPUT).exists() and sorted(locks.glob("*.lock")) == held  # its lock stays
        dry = _snakemake(tmp_path, "-n")
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
        assert sorted(locks.glob("*.lock")) == held
        # before: an explicit --nolock ran the jobs beside it, and --unlock lifted its lock, saying only "Unlocked"
        for option, said in (("--nolock", "--nolock would run this beside it, both writing the same files"),
                             ("--unlock", "its lock is live, so nothing was unlocked")):  # fmt: skip
            refused = _snakemake(tmp_path, option)
            out = refused.stdout + refused.stderr
            assert refused.returncode != 0 and f"(process {holder.pid}, started " in out and said in out, out[-3000:]
            assert not (tmp_path / PLAN_OUTPUT).exists() and sorted(locks.glob("*.lock")) == held
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()


def test_a_jobs_snakemake_in_the_folder_is_not_taken_for_a_running_controller(tmp_path):
    """A cluster job on this node runs Snakemake in the study's folder for one job (``--target-jobs``): it holds no
    lock, so a killed controller's lock is still a dead one's (``--unlock`` offered), while a controller's own
    Snakemake in the folder is one that runs."""
    from softmax_bottleneck.cluster.lock_free import snakemakes_here

    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nsleep 60\n")
    fake.chmod(0o755)
    job = subprocess.Popen([str(fake), "--target-jobs", "train:seed=1", "--mode", "remote"], cwd=tmp_path)
    controller = subprocess.Popen([str(fake), "all", "--cores", "1"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not (Path(f"/proc/{job.pid}/cmdline").exists() and Path(f"/proc/{controller.pid}/cmdline").exists()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.3)  # the shell has read its arguments
        pids = [pid for pid, _ in snakemakes_here(tmp_path)]
        assert controller.pid in pids and job.pid not in pids, pids
    finally:
        for proc in (job, controller):
            proc.kill()
            proc.wait()


def test_where_processes_cannot_be_listed_a_lock_is_never_called_a_dead_ones(tmp_path, monkeypatch):
    """Without ``/proc`` (macOS) a running Snakemake cannot be found: the line says so and sends the user to ``ps``
    before ``--unlock``, where on Linux it would say the lock's Snakemake no longer runs."""
    from softmax_bottleneck.cluster import lock_free, processes

    monkeypatch.setattr(processes, "PROC", tmp_path / "no-proc")
    assert lock_free.snakemakes_here(tmp_path) is None
    run, dry = lock_free.lock_line(False, tmp_path), lock_free.lock_line(True, tmp_path)
    for line in (run, dry):
        assert "no longer runs" not in line and "whether it still runs cannot be told here" in line, line
        assert "ps -u $USER -o pid,command | grep snakemake" in line and "snakemake --unlock" in line
    assert run.startswith("snakemake: ") and "never while it runs" in run and dry.startswith("note: ")
    monkeypatch.undo()  # this Linux's /proc: no Snakemake runs in tmp_path
    assert lock_free.snakemakes_here(tmp_path) == [] and "no longer runs" in lock_free.lock_line(False, tmp_path)
