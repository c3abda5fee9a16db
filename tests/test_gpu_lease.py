"""The local GPU lease (``python -m softmax_bottleneck gpu-lease``), with a fake device count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from softmax_bottleneck.cluster import gpu_lease

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the lease uses fcntl.flock and prctl (Linux)")

# The "job": records its GPU and pid, then holds the lease until told to go (or killed).
JOB = textwrap.dedent(
    """
    import json, os, signal, sys, time
    out, name = sys.argv[1], sys.argv[2]
    def on_term(signum, frame):
        open(os.path.join(out, name + ".sigterm"), "w").write(str(signum))
        sys.exit(3)
    signal.signal(signal.SIGTERM, on_term)
    record = {"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
              "lease": os.environ.get("SOFTMAX_BOTTLENECK_GPU_LEASE")}
    tmp = os.path.join(out, name + ".tmp")
    open(tmp, "w").write(json.dumps(record))
    os.replace(tmp, os.path.join(out, name + ".json"))
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(out, name + ".release")) and time.time() < deadline:
        time.sleep(0.05)
    """
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES")}
    env.pop(gpu_lease.ENV_GPUS, None)
    env.pop(gpu_lease.ENV_LOCK_DIR, None)
    env.update(extra)
    return env


class Jobs:
    """Starts ``gpu-lease`` wrappers around :data:`JOB` and inspects what they recorded."""

    def __init__(self, tmp_path: Path):
        self.out = tmp_path / "out"
        self.out.mkdir()
        self.lock_dir = tmp_path / "locks"
        self.script = tmp_path / "job.py"
        self.script.write_text(JOB)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *lease_args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(self.lock_dir)]
        cmd += ["--poll", "0.1", "--log-every", "0.5", *lease_args, "--"]
        cmd += [sys.executable, str(self.script), str(self.out), name]
        proc = subprocess.Popen(
            cmd, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def record(self, name: str) -> dict | None:
        path = self.out / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def wait_record(self, name: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rec = self.record(name)
            if rec is not None:
                return rec
            proc = self.procs[name]
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}: {proc.communicate()}")
            time.sleep(0.05)
        raise AssertionError(f"{name} did not start within {timeout} s")

    def release(self, name: str, timeout: float = 30) -> int:
        (self.out / f"{name}.release").touch()
        return self.procs[name].wait(timeout)

    def cleanup(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()


@pytest.fixture
def jobs(tmp_path):
    j = Jobs(tmp_path)
    yield j
    j.cleanup()


def _wait_gone(pid: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still alive")


# ----------------------------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("spec", "ids"),
    [("4", [0, 1, 2, 3]), ("1", [0]), ("0", []), ("", []), ("0,2,3", [0, 2, 3]), ("3,", [3]), (2, [0, 1])],
)
def test_parse_gpus(spec, ids):
    assert gpu_lease.parse_gpus(spec) == ids


@pytest.mark.parametrize("spec", ["-1", "0,0", "a", "1,-2"])
def test_parse_gpus_rejects(spec):
    with pytest.raises(ValueError):
        gpu_lease.parse_gpus(spec)


def test_gpu_count_sources(tmp_path, monkeypatch):
    assert gpu_lease.resolve_gpus("2", {gpu_lease.ENV_GPUS: "4"}) == ([0, 1], "--gpus")
    assert gpu_lease.resolve_gpus(None, {gpu_lease.ENV_GPUS: "1,3"}) == ([1, 3], gpu_lease.ENV_GPUS)
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-a)'\necho '  MIG 1g.10gb Device 0: (UUID: MIG-x)'\n"
        "echo 'GPU 1: NVIDIA H100 (UUID: GPU-b)'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert gpu_lease.resolve_gpus(None, {}) == ([0, 1], "nvidia-smi -L")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu_lease.resolve_gpus(None, {}) == ([], "nvidia-smi -L")


def test_step_aside_reasons():
    assert "SLURM" in gpu_lease.step_aside_reason([0, 1], {"SLURM_JOB_ID": "17"})
    assert "CUDA_VISIBLE_DEVICES" in gpu_lease.step_aside_reason([0, 1], {"CUDA_VISIBLE_DEVICES": "1"})
    assert "CPU" in gpu_lease.step_aside_reason([], {})
    assert gpu_lease.step_aside_reason([0], {}) is None


def test_default_lock_dir_is_per_user(tmp_path):
    assert gpu_lease.default_lock_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == tmp_path / "softmax-bottleneck-gpu"
    assert gpu_lease.default_lock_dir({}) == Path(f"/tmp/softmax-bottleneck-gpu-{os.getuid()}")
    assert gpu_lease.default_lock_dir({gpu_lease.ENV_LOCK_DIR: "/x"}) == Path("/x")


def test_in_process_lease_is_exclusive(tmp_path):
    first = gpu_lease.try_acquire(tmp_path, [0, 1])
    second = gpu_lease.try_acquire(tmp_path, [0, 1])
    assert (first.gpu, second.gpu) == (0, 1)
    assert gpu_lease.try_acquire(tmp_path, [0, 1]) is None
    with pytest.raises(TimeoutError):
        gpu_lease.acquire(tmp_path, [0, 1], poll=0.01, timeout=0.1)
    assert [r["held"] for r in gpu_lease.lease_table(tmp_path, [0, 1])] == [True, True]
    assert gpu_lease.lease_table(tmp_path, [0])[0]["pid"] == os.getpid()
    second.release()
    assert gpu_lease.try_acquire(tmp_path, [0, 1]).gpu == 1
    first.release()


# ------------------------------------------------------------------------------------------ processes


def test_four_gpus_five_jobs(jobs):
    """4 concurrent jobs hold 4 distinct ids; the 5th waits (and says so) until one ends."""
    for i in range(4):
        jobs.start(f"job{i}", "--gpus", "4")
    records = {f"job{i}": jobs.wait_record(f"job{i}") for i in range(4)}
    assert sorted(r["cuda"] for r in records.values()) == ["0", "1", "2", "3"]
    assert all(r["lease"] == r["cuda"] for r in records.values())

    fifth = jobs.start("job4", "--gpus", "4")
    time.sleep(1.5)
    assert jobs.record("job4") is None, "a 5th job started although all 4 GPUs were leased"
    assert fifth.poll() is None

    status = subprocess.run(
        [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(jobs.lock_dir), "--gpus", "4"]
        + ["--status"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    rows = [json.loads(line) for line in status.stdout.splitlines()]
    assert [r["held"] for r in rows] == [True] * 4
    assert all("job.py" in r["cmd"] for r in rows)

    freed = records["job2"]["cuda"]
    assert jobs.release("job2") == 0
    assert jobs.wait_record("job4")["cuda"] == freed
    for i in (0, 1, 3, 4):
        assert jobs.release(f"job{i}") == 0
    _, err = fifth.communicate()
    assert "waiting for a free GPU" in err


def test_sigkilled_wrapper_frees_its_lease(jobs):
    """SIGKILL of the wrapper: the job gets SIGTERM (parent-death signal), and its GPU is free again."""
    holder = jobs.start("holder", "--gpus", "1")
    rec = jobs.wait_record("holder")
    assert rec["cuda"] == "0"
    jobs.start("waiter", "--gpus", "1")
    time.sleep(0.8)
    assert jobs.record("waiter") is None

    holder.kill()  # the wrapper only, not its process group
    holder.wait(10)
    _wait_gone(rec["pid"])
    assert (jobs.out / "holder.sigterm").read_text() == str(int(signal.SIGTERM))
    assert jobs.wait_record("waiter")["cuda"] == "0"
    assert jobs.release("waiter") == 0


def test_sigkilled_job_frees_its_lease(jobs):
    """SIGKILL of the whole job (wrapper and command, as a process group): the kernel drops the lock."""
    holder = jobs.start("holder", "--gpus", "1")
    jobs.wait_record("holder")
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait(10)
    jobs.start("next", "--gpus", "1")
    assert jobs.wait_record("next")["cuda"] == "0"
    assert jobs.release("next") == 0


def test_sigterm_is_forwarded_and_exit_code_propagated(jobs):
    proc = jobs.start("job", "--gpus", "2")
    rec = jobs.wait_record("job")
    proc.send_signal(signal.SIGTERM)  # to the wrapper only: what SLURM or snakemake would send
    assert proc.wait(15) == 3  # the job's own exit code (its SIGTERM handler exits 3)
    assert (jobs.out / "job.sigterm").exists()
    _wait_gone(rec["pid"])
    # and the lease is free again
    jobs.start("again", "--gpus", "1")
    assert jobs.wait_record("again")["cuda"] == "0"
    jobs.release("again")


def test_one_gpu_serialises(jobs):
    jobs.start("a", "--gpus", "1")
    assert jobs.wait_record("a")["cuda"] == "0"
    jobs.start("b", "--gpus", "1")
    time.sleep(0.8)
    assert jobs.record("b") is None
    jobs.release("a")
    assert jobs.wait_record("b")["cuda"] == "0"
    jobs.release("b")


def test_gpu_ids_from_environment(jobs):
    jobs.start("a", env=_env(**{gpu_lease.ENV_GPUS: "2,5"}))
    jobs.start("b", env=_env(**{gpu_lease.ENV_GPUS: "2,5"}))
    assert sorted([jobs.wait_record("a")["cuda"], jobs.wait_record("b")["cuda"]]) == ["2", "5"]
    jobs.release("a")
    jobs.release("b")


@pytest.mark.parametrize(
    ("env", "expected_cuda"),
    [
        ({"SLURM_JOB_ID": "42"}, None),  # SLURM assigned the devices (here: none)
        ({"SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "3"}, "3"),
        ({"CUDA_VISIBLE_DEVICES": "1"}, "1"),  # already chosen by someone else
        ({gpu_lease.ENV_GPUS: "0"}, None),  # CPU only
        ({"PATH": "/nonexistent"}, None),  # no --gpus, no env, no nvidia-smi: CPU
    ],
)
def test_steps_aside(jobs, env, expected_cuda):
    """No lock, no CUDA_VISIBLE_DEVICES change, and a plain exec (the command keeps the wrapper's pid)."""
    proc = jobs.start("job", env=_env(**env))
    rec = jobs.wait_record("job")
    assert rec["cuda"] == expected_cuda
    assert rec["lease"] is None
    assert rec["pid"] == proc.pid
    assert not jobs.lock_dir.exists()
    assert jobs.release("job") == 0


def test_timeout_and_missing_command(jobs, tmp_path):
    jobs.start("a", "--gpus", "1")
    jobs.wait_record("a")
    base = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(jobs.lock_dir)]
    r = subprocess.run(base + ["--gpus", "1", "--poll", "0.05", "--timeout", "0.3", "--", "true"], env=_env())
    assert r.returncode == 75
    r = subprocess.run(base + ["--gpus", "2", "--", str(tmp_path / "no-such-program")], env=_env())
    assert r.returncode == 127
    r = subprocess.run(base + ["--gpus", "2"], env=_env())
    assert r.returncode == 2
    jobs.release("a")


def test_exit_status_of_a_signalled_command(tmp_path):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(tmp_path), "--gpus", "1"]
    r = subprocess.run(cmd + ["--", "sh", "-c", "kill -KILL $$"], env=_env())
    assert r.returncode == 128 + signal.SIGKILL
    r = subprocess.run(cmd + ["--", "sh", "-c", "exit 7"], env=_env())
    assert r.returncode == 7
