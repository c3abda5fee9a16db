"""``job-start``: a job's first act takes its run's lock (which the training adopts), and a job the scheduler gave a
GPU that sees no CUDA device stops at once in one line; ``wait-for-job`` and the queued ``train`` jobs of squeue."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from softmax_bottleneck.cluster import scheduler
from softmax_bottleneck.study.status import RunStatus, read_run_status
from softmax_bottleneck.training.job_start import cuda_refusal, given_gpus

SRC = Path(__file__).resolve().parents[1] / "src"
#: the variables a SLURM job that was given one GPU has
GPU_JOB = {"SLURM_JOB_ID": "17", "SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SOFTMAX_BOTTLENECK_GPU")) and k != "CUDA_VISIBLE_DEVICES"}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _job_start(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "softmax_bottleneck", "job-start", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # fmt: skip


def test_the_run_lock_is_taken_first_and_adopted_by_the_training(tmp_path):
    run = tmp_path / "results" / "runs" / "ptb" / "softmax" / "et" / "seed1" / "default-0"
    release = tmp_path / "release"
    # the "training": takes the run's lock as the trainer does, says whose it is, waits until told to stop
    child = (
        "import sys, time, os, pathlib; from softmax_bottleneck.training.lock import run_lock\n"
        f"with run_lock({str(run)!r}) as path:\n"
        "    print(os.getpid(), path.read_text().split()[0], flush=True)\n"
        f"    while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\n"
    )
    first = _job_start(["--run", str(run), "--", sys.executable, "-c", child], _env())
    try:
        pid, holder = first.stdout.readline().split()
        assert pid == holder, "the training did not adopt the lock its job took (it would have failed on it)"
        # what status reads: the run is running from the job's first act on, before any progress file
        base = RunStatus(run=str(run), tag=run.name, experiments=[], state="not started", projected_hours=0.0,
                         dataset="ptb", variant="softmax", schedule="et", seed=1, epochs=3)  # fmt: skip
        status = read_run_status(run, tmp_path / "none.log", "rank.json", base, time.time())
        assert status.state == "running", status
        # a second job for the same run stops at once, in one line, and never starts its command
        marker = tmp_path / "second-ran"
        second = _job_start(["--run", str(run), "--", "touch", str(marker)], _env())
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1 and not marker.exists()
        lines = err.strip().splitlines()
        assert (
            len(lines) == 1 and "another training process" in lines[0] and f"PID {pid} on {platform.node()}" in lines[0]
        )
    finally:
        release.touch()
        first.communicate(timeout=60)
    assert first.returncode == 0
    # released with its process: the next attempt takes it
    again = _job_start(["--run", str(run), "--", "true"], _env())
    again.communicate(timeout=60)
    assert again.returncode == 0


def test_a_job_for_a_run_trained_under_another_name_makes_no_folder(tmp_path):
    """Before, the job took the lock of the new name's folder (making it) and the training then refused; the folder
    left behind held the name, and moving the trained one there as advised put it inside it."""
    seed = tmp_path / "results" / "runs" / "ptb" / "mos" / "nt" / "seed28"
    (seed / "default-57f50c09").mkdir(parents=True)
    (seed / "default-57f50c09" / "model.pt").write_bytes(b"")
    marker = tmp_path / "ran"
    job = _job_start(["--run", str(seed / "K2-57f50c09"), "--", "touch", str(marker)], _env())
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1 and not marker.exists() and not (seed / "K2-57f50c09").exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{seed / 'default-57f50c09'} holds this same run (identity 57f50c09)" in lines[0]
    assert "it holds the trained model, which the workflow uses on its next start" in lines[0]
    starting = seed / "K3-0123abcd"  # another job's folder that holds only its lock: not called a leftover
    starting.mkdir()
    (starting / ".lock").write_text("123 node7\n")
    job = _job_start(["--run", str(seed / "default-0123abcd"), "--", "touch", str(marker)], _env())
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1 and not marker.exists() and not (seed / "default-0123abcd").exists()
    assert "it holds only a job's lock: a job may be starting this run there" in err


def test_a_fused_groups_job_takes_every_runs_lock_and_its_training_adopts_each(tmp_path):
    runs = [tmp_path / "runs" / name for name in ("a", "b", "c")]
    release = tmp_path / "release"
    child = (
        "import contextlib, os, pathlib, sys, time; from softmax_bottleneck.training.lock import run_lock\n"
        "with contextlib.ExitStack() as stack:\n"
        f"    paths = [stack.enter_context(run_lock(p)) for p in {[str(r) for r in runs]!r}]\n"
        "    print(os.getpid(), *[p.read_text().split()[0] for p in paths], flush=True)\n"
        f"    while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\n"
    )
    locks = [arg for run in runs for arg in ("--run", str(run))]
    group = _job_start([*locks, "--", sys.executable, "-c", child], _env())
    try:
        pid, *holders = group.stdout.readline().split()
        assert holders == [pid] * 3, "the group's training did not adopt every lock its job took"
        # a solo job of any of them, or a second group sharing one run, stops at once naming the holder
        for args in (["--run", str(runs[1])], ["--run", str(tmp_path / "runs" / "d"), "--run", str(runs[2])]):
            marker = tmp_path / "ran"
            other = _job_start([*args, "--", "touch", str(marker)], _env())
            _, err = other.communicate(timeout=60)
            assert other.returncode == 1 and not marker.exists() and f"PID {pid}" in err, err
        # a group's job names every run of its group: with --leave-busy the held one is left to its holder, the free
        # one locked, the command run
        marker = tmp_path / "group-ran"
        free = tmp_path / "runs" / "e"
        child = ("from pathlib import Path; from softmax_bottleneck.training.lock import LOCK_NAME, inherited_lock; "
                 f"held = inherited_lock((Path({str(free)!r}) / LOCK_NAME).resolve()) is not None; "
                 f"Path({str(marker)!r}).write_text(str(held))")  # fmt: skip
        other = _job_start(["--leave-busy", "--run", str(runs[0]), "--run", str(free), "--", sys.executable, "-c",
                            child], _env())  # fmt: skip
        _, err = other.communicate(timeout=60)
        assert other.returncode == 0 and marker.read_text() == "True", err
        assert f"PID {pid}" in err and "left to it" in err, err
    finally:
        release.touch()
        group.communicate(timeout=60)
    assert group.returncode == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a usable GPU passes the check")
def test_a_job_given_a_gpu_without_cuda_stops_in_one_line_with_cuda_checks_diagnosis(tmp_path):
    marker = tmp_path / "ran"
    check = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "cuda-check"], env=_env(),
                           capture_output=True, text=True)  # fmt: skip
    diagnosis = check.stdout.strip().splitlines()[-1].removeprefix("cuda-check: ")
    for given in (GPU_JOB, {"SLURM_JOB_ID": "17", "CUDA_VISIBLE_DEVICES": "2"}, {"SLURM_JOB_GPUS": "1"}):
        proc = _job_start(["--", "touch", str(marker)], _env(**given))
        out, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert proc.returncode == 1 and not marker.exists(), (given, out, err)
        assert len(lines) == 1 and "Traceback" not in err, err
        assert "was given a GPU" in lines[0] and diagnosis in lines[0], (lines[0], diagnosis)
    # a local GPU leased by gpu-lease (here four simulated ones) without CUDA: the same line, the command never runs
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    command = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(locks), "--",
               sys.executable, "-m", "softmax_bottleneck", "job-start", "--", "touch", str(marker)]  # fmt: skip
    lease = subprocess.run(command, env=_env(SOFTMAX_BOTTLENECK_GPUS="4"), capture_output=True, text=True, timeout=120)
    refusal = [line for line in lease.stderr.splitlines() if "was given a GPU" in line]
    assert lease.returncode == 1 and not marker.exists(), lease.stderr
    assert len(refusal) == 1 and "leased by gpu-lease" in refusal[0] and diagnosis in refusal[0], lease.stderr
    assert "Traceback" not in lease.stderr
    # no GPU given (a CPU job, a local run), or the test cluster's stand-in GPUs allowed: the command runs
    for env in (_env(), _env(SLURM_JOB_ID="17", CUDA_VISIBLE_DEVICES=""),
                _env(**GPU_JOB, SOFTMAX_BOTTLENECK_ALLOW_CPU="1")):  # fmt: skip
        proc = _job_start(["--", "touch", str(marker)], env)
        proc.communicate(timeout=120)
        assert proc.returncode == 0 and marker.exists()
        marker.unlink()


def test_which_jobs_count_as_given_a_gpu():
    assert given_gpus(GPU_JOB) == "SLURM_JOB_GPUS=0"
    assert given_gpus({"SLURM_JOB_ID": "3", "CUDA_VISIBLE_DEVICES": "1,2"}) == "CUDA_VISIBLE_DEVICES=1,2"
    assert given_gpus({"CUDA_VISIBLE_DEVICES": "0"}) is None  # set by hand: the user's own choice
    assert given_gpus({"SLURM_JOB_ID": "3", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}) is None
    leased = {"SOFTMAX_BOTTLENECK_GPU_LEASE": "2", "CUDA_VISIBLE_DEVICES": "2"}  # what gpu-lease sets
    assert given_gpus(leased) == "GPU 2, leased by gpu-lease"
    assert cuda_refusal(GPU_JOB, check=lambda: (True, ["GPU 0: usable"])) is None
    why = cuda_refusal(GPU_JOB, check=lambda: (False, ["torch x", "cuda-check: CUDA is not available: no GPU"]))
    assert why.startswith("this job was given a GPU (SLURM_JOB_GPUS=0) but cannot use it: CUDA is not available")


def _fake_squeue(tmp_path: Path, states: list[str]) -> str:
    """An squeue that lists job 41 (a train job) in ``states``, one per call, then no more; and a CPU job 42."""
    counter = tmp_path / "calls"
    lines = "\n".join(
        f"  {i}) echo '41|{s}|rule_train_wildcards_ptb_mos_et_28_default-1' ;;" for i, s in enumerate(states)
    )
    script = tmp_path / "squeue"
    script.write_text(
        "#!/bin/bash\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}\n"
        "echo '42|RUNNING|rule_analyze_wildcards_ptb_mos_et_28_default-1_2000'\n"
        f'case "$n" in\n{lines}\nesac\n'
    )
    script.chmod(0o755)
    return str(script)


def test_queued_train_jobs_are_found_by_their_comment_and_waited_for(tmp_path):
    squeue = _fake_squeue(tmp_path, ["PENDING", "RUNNING", "RUNNING", "COMPLETING"])
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'Slurmctld(primary) at head is UP'\n")
    scontrol.chmod(0o755)
    key = scheduler.job_comment("train", ["ptb", "mos", "et", 28, "default-1"])
    assert scheduler.queued_jobs("train", squeue, str(scontrol)) == {key: ("41", "PENDING")}
    slept: list[float] = []
    assert scheduler.wait_for_job("41", 7.0, squeue, sleep=slept.append) == 0
    assert slept == [7.0, 7.0, 7.0]  # pending, running, running, completing: waited; then gone
    assert scheduler.queued_jobs("train", squeue, str(scontrol)) == {}
    # no SLURM controller here (the tests' scontrol says so), or no SLURM at all: nothing queued, squeue never asked
    calls = (tmp_path / "calls").read_text()
    assert scheduler.queued_jobs("train", squeue) == {} and (tmp_path / "calls").read_text() == calls
    assert scheduler.queued_jobs("train", str(tmp_path / "no-squeue"), str(tmp_path / "no-scontrol")) == {}


def test_a_queued_job_of_the_same_run_in_another_study_folder_is_not_this_studys(tmp_path):
    """Before, a job was matched by its comment alone: the same configuration studied in folder G waited for folder
    F's training job (days, at paper scale), then failed ("not started"), training nothing."""
    comment = scheduler.job_comment("train", ["ptb", "mos", "et", 28, "default-1"])
    study, other = tmp_path / "study", tmp_path / "other"
    study.mkdir()
    (tmp_path / "link").symlink_to(study)
    squeue = tmp_path / "squeue"
    squeue.write_text(f"#!/bin/sh\necho '41|RUNNING|{comment}|{other}'\necho '42|PENDING|{comment}|{tmp_path}/link'\n")
    squeue.chmod(0o755)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'Slurmctld(primary) at head is UP'\n")
    scontrol.chmod(0o755)
    assert scheduler.queued_jobs("train", str(squeue), str(scontrol), directory=study) == {comment: ("42", "PENDING")}
    assert scheduler.queued_jobs("train", str(squeue), str(scontrol), directory=other) == {comment: ("41", "RUNNING")}
    assert scheduler.queued_jobs("train", str(squeue), str(scontrol), directory=tmp_path / "third") == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is of a machine without CUDA")
@pytest.mark.parametrize("command", ["train", "train-fused"])
def test_a_training_given_refuse_cpu_stops_on_a_cpu_in_one_line_before_reading_anything(tmp_path, command):
    """The workflow passes --refuse-cpu to a paper-scale run's job (unless allow_cpu_training): where the study's rules
    are a module of another workflow its check at the start does not run, and before, such a job trained for months
    on the CPU. The data folder does not exist: the refusal comes first."""
    out = tmp_path / "run"
    run = (["--variant", "softmax", "--schedule", "et", "--seed", "141", "--out", str(out)] if command == "train"
           else ["--run", "softmax", "et", "141", str(out)])  # fmt: skip
    argv = [sys.executable, "-m", "softmax_bottleneck", command, "--dataset", "ptb", *run, "--data",
            str(tmp_path / "no-data"), "--refuse-cpu"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"{command}: a paper-scale training would run on this machine's CPU, which has no CUDA")
    assert "--config allow_cpu_training=true" in lines[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
