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

from softmax_bottleneck.cluster import gpu_lease, lock_files, mps

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
              "lease": os.environ.get("SOFTMAX_BOTTLENECK_GPU_LEASE"),
              "mps": os.environ.get("CUDA_MPS_PIPE_DIRECTORY")}
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
    env.pop(gpu_lease.ENV_SLOTS, None)
    env[mps.ENV_MPS] = "off"  # never a real MPS daemon from these tests (tests/test_mps.py uses a stand-in)
    env.update(extra)
    return env


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT's default action in the wrapper, as a command typed in a terminal has it: started in the background by a
    shell without job control (CI's), a process inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
            cmd,
            env=env or _env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_ctrl_c_as_in_a_terminal,
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


def _said(stderr: str) -> list[str]:
    """The lines a lease logged, without the logging prefix (time, level, logger)."""
    return [line.partition(f" {gpu_lease.log.name}: ")[2] or line for line in stderr.strip().splitlines()]


def _status(lock_dir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(lock_dir), "--status", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=env or _env()).stdout


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


def test_slots_per_gpu_sources():
    assert gpu_lease.resolve_slots(None, {}) == (1, "default")
    assert gpu_lease.resolve_slots(None, {gpu_lease.ENV_SLOTS: " 4 "}) == (4, gpu_lease.ENV_SLOTS)
    assert gpu_lease.resolve_slots(2, {gpu_lease.ENV_SLOTS: "4"}) == (2, "--per-gpu")


@pytest.mark.parametrize(
    ("cli", "env", "named"), [(0, {}, "--per-gpu"), (None, {"x": "abc"}, "SLOTS"), (-2, {}, "--per")]
)
def test_slots_per_gpu_rejects(cli, env, named):
    environ = {gpu_lease.ENV_SLOTS: env["x"]} if env else {}
    with pytest.raises(ValueError, match=named):
        gpu_lease.resolve_slots(cli, environ)


def test_bad_gpu_spec_names_its_source():
    with pytest.raises(ValueError, match="--gpus='0,0'"):
        gpu_lease.resolve_gpus("0,0", {})
    with pytest.raises(ValueError, match=f"{gpu_lease.ENV_GPUS}='x'"):
        gpu_lease.resolve_gpus(None, {gpu_lease.ENV_GPUS: "x"})


def test_step_aside_reasons():
    assert "SLURM" in gpu_lease.step_aside_reason([0, 1], {"SLURM_JOB_ID": "17"})
    assert "CUDA_VISIBLE_DEVICES" in gpu_lease.step_aside_reason([0, 1], {"CUDA_VISIBLE_DEVICES": "1"})
    assert "CPU" in gpu_lease.step_aside_reason([], {})
    assert gpu_lease.step_aside_reason([0], {}) is None


def test_default_lock_dir_is_per_user_and_independent_of_the_login_session(tmp_path):
    """A job under tmux or nohup (no $XDG_RUNTIME_DIR, or a removed one) locks in the same place as the others."""
    fixed = Path(f"/var/tmp/softmax-bottleneck-gpu-{os.getuid()}")
    assert gpu_lease.default_lock_dir({}) == fixed
    assert gpu_lease.default_lock_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == fixed
    assert gpu_lease.default_lock_dir({"XDG_RUNTIME_DIR": str(tmp_path / "gone")}) == fixed
    assert gpu_lease.default_lock_dir({gpu_lease.ENV_LOCK_DIR: "/x"}) == Path("/x")


def _unsafe_lock_dir(kind: str, tmp_path: Path) -> Path:
    """A lock directory another user could tamper with."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    if kind == "symlink":
        link = tmp_path / "link"
        link.symlink_to(real, target_is_directory=True)
        return link
    if kind in ("group-writable", "world-writable"):
        real.chmod(0o770 if kind == "group-writable" else 0o1777)
        return real
    if kind == "file":
        (tmp_path / "file").write_text("")
        return tmp_path / "file"
    raise AssertionError(kind)


UNSAFE = {
    "symlink": "symbolic link",
    "group-writable": "writable by group or others",
    "world-writable": "writable by group or others",
    "file": "is not a directory",
}


@pytest.mark.parametrize("kind", list(UNSAFE))
def test_unsafe_lock_dir_is_refused(tmp_path, kind):
    lock_dir = _unsafe_lock_dir(kind, tmp_path)
    with pytest.raises(OSError, match=UNSAFE[kind]):
        gpu_lease.try_acquire(lock_dir, [0])
    assert not list(tmp_path.rglob("*.lock")), "a lock file was created in a refused directory"


def test_lock_dir_of_another_user_is_refused(tmp_path, monkeypatch):
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    if os.getuid() == 0:  # root can make it truly someone else's
        os.chown(lock_dir, 65534, 65534)
    else:  # otherwise: this process pretends to be another user
        uid = os.getuid()
        monkeypatch.setattr(gpu_lease.os, "getuid", lambda: uid + 1)
    with pytest.raises(lock_files.UnsafeLockDir, match="belongs to uid"):
        gpu_lease.try_acquire(lock_dir, [0])
    assert not list(lock_dir.iterdir())


@pytest.mark.parametrize("status", [False, True], ids=["lease", "status"])
@pytest.mark.parametrize("kind", ["symlink", "world-writable"])
def test_unsafe_lock_dir_fails_in_one_line(tmp_path, kind, status):
    lock_dir = _unsafe_lock_dir(kind, tmp_path)
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(lock_dir), "--gpus", "1"]
    cmd += ["--status"] if status else ["--", sys.executable, "-c", "open('ran', 'w')"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(lock_dir) in lines[0] and UNSAFE[kind] in lines[0], r.stderr
    assert not (tmp_path / "ran").exists()


def test_in_process_lease_is_exclusive(tmp_path):
    first = gpu_lease.try_acquire(tmp_path, [0, 1])
    second = gpu_lease.try_acquire(tmp_path, [0, 1])
    assert (first.gpu, second.gpu) == (0, 1)
    assert gpu_lease.try_acquire(tmp_path, [0, 1]) is None
    with pytest.raises(TimeoutError):
        gpu_lease.acquire(tmp_path, [0, 1], poll=0.01, timeout=0.1)
    assert [r["held"] for r in gpu_lease.lease_table(tmp_path, [0, 1])] == [1, 1]
    assert gpu_lease.lease_table(tmp_path, [0])[0]["holders"][0]["pid"] == os.getpid()
    second.release()
    assert gpu_lease.try_acquire(tmp_path, [0, 1]).gpu == 1
    first.release()


def test_slots_spread_over_gpus_then_share(tmp_path):
    """K slots per GPU: a new lease goes to the least-loaded GPU; K leases per GPU at most."""
    leases = [gpu_lease.try_acquire(tmp_path, [0, 1], slots=2) for _ in range(4)]
    assert [lease.gpu for lease in leases] == [0, 1, 0, 1]
    assert len({(lease.gpu, lease.slot) for lease in leases}) == 4
    assert gpu_lease.try_acquire(tmp_path, [0, 1], slots=2) is None
    assert [r["held"] for r in gpu_lease.lease_table(tmp_path, [0, 1], slots=2)] == [2, 2]
    leases[3].release()
    again = gpu_lease.try_acquire(tmp_path, [0, 1], slots=2)
    assert again.gpu == 1
    for lease in [*leases, again]:
        lease.release()


def test_least_loaded_gpu_wins_over_the_lowest_free_slot(tmp_path):
    """GPU 0 holds slots 1 and 2, GPU 1 holds slot 0: the next lease goes to GPU 1 (load 1 < 2)."""
    a, b, c, d, e = (gpu_lease.try_acquire(tmp_path, [0, 1], slots=3) for _ in range(5))
    assert [(x.gpu, x.slot) for x in (a, b, c, d, e)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    a.release()
    d.release()
    nxt = gpu_lease.try_acquire(tmp_path, [0, 1], slots=3)
    assert nxt.gpu == 1
    for lease in (b, c, e, nxt):
        lease.release()


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

    rows = [json.loads(line) for line in _status(jobs.lock_dir, "--gpus", "4", "--json").splitlines()]
    assert [r["held"] for r in rows] == [1] * 4
    assert all("job.py" in h["cmd"] for r in rows for h in r["holders"])

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


def test_a_set_cuda_visible_devices_is_said_in_the_jobs_log(jobs):
    """Outside SLURM, a CUDA_VISIBLE_DEVICES left exported makes every job see the same devices: the job's log says
    so in one line (under SLURM, which chose them, nothing is said)."""
    base = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(jobs.lock_dir), "--gpus", "4"]
    shown = subprocess.run([*base, "--", "true"], env=_env(CUDA_VISIBLE_DEVICES="0,1,2,3"), capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    said = [line for line in shown.stderr.splitlines() if "no lease" in line]
    assert shown.returncode == 0 and len(said) == 1, shown.stderr
    assert "CUDA_VISIBLE_DEVICES is already set ('0,1,2,3')" in said[0] and "unset it" in said[0]
    quiet = subprocess.run([*base, "--", "true"], env=_env(CUDA_VISIBLE_DEVICES="1", SLURM_JOB_ID="7"),
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert quiet.returncode == 0 and "no lease" not in quiet.stderr


def test_timeout_and_missing_command(jobs, tmp_path):
    jobs.start("a", "--gpus", "1")
    jobs.wait_record("a")
    base = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(jobs.lock_dir)]
    r = subprocess.run(base + ["--gpus", "1", "--poll", "0.05", "--timeout", "0.3", "--", "true"], env=_env())
    assert r.returncode == 75
    # said at once, not after waiting for the slot "a" holds (before, it waited, then failed)
    missing = str(tmp_path / "no-such-program")
    r = subprocess.run(base + ["--gpus", "1", "--", missing], env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 127
    assert _said(r.stderr) == [f"gpu-lease: {missing}: command not found (or not executable)"]
    r = subprocess.run(base + ["--gpus", "2"], env=_env())
    assert r.returncode == 2
    jobs.release("a")


def test_exit_status_of_a_signalled_command(tmp_path):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(tmp_path), "--gpus", "1"]
    r = subprocess.run(cmd + ["--", "sh", "-c", "kill -KILL $$"], env=_env())
    assert r.returncode == 128 + signal.SIGKILL
    r = subprocess.run(cmd + ["--", "sh", "-c", "exit 7"], env=_env())
    assert r.returncode == 7


def test_per_gpu_two_holders_share_a_gpu_and_a_third_gets_another(jobs):
    """``--per-gpu 2`` on 2 GPUs: four holders, two per GPU; a fifth waits until a SIGKILLed holder's slot frees."""
    for name in ("a", "b", "c", "d"):
        jobs.start(name, "--gpus", "2", "--per-gpu", "2")
        jobs.wait_record(name)  # one after the other: the spreading order is deterministic
    cuda = {name: jobs.record(name)["cuda"] for name in "abcd"}
    assert cuda == {"a": "0", "b": "1", "c": "0", "d": "1"}, cuda

    text = _status(jobs.lock_dir, "--gpus", "2", "--per-gpu", "2")
    assert "gpu 0: 2/2 slots held" in text and "gpu 1: 2/2 slots held" in text, text
    for name in "abcd":
        assert f"pid {jobs.procs[name].pid}" in text, text  # the wrapper holds the slot
    rows = [json.loads(line) for line in _status(jobs.lock_dir, "--gpus", "2", "--per-gpu", "2", "--json").splitlines()]
    assert [(r["gpu"], r["slots"], r["held"], sorted(h["slot"] for h in r["holders"])) for r in rows] == [
        (0, 2, 2, [0, 1]),
        (1, 2, 2, [0, 1]),
    ]

    # a plain --status (K = 1 in this shell) still lists every held slot (before: "gpu 0: 1/1 slots held")
    text = _status(jobs.lock_dir, "--gpus", "2")
    for gpu in (0, 1):
        assert f"gpu {gpu}: 2/2 slots held (its jobs lease 2 per GPU)" in text, text
    assert all(f"pid {jobs.procs[name].pid}" in text for name in "abcd"), text

    fifth = jobs.start("e", "--gpus", "2", "--per-gpu", "2")
    time.sleep(1.0)
    assert jobs.record("e") is None, "a 5th job started although both slots of both GPUs were held"
    os.killpg(jobs.procs["b"].pid, signal.SIGKILL)  # wrapper and job, as the OOM killer or scancel -s KILL would
    assert jobs.wait_record("e")["cuda"] == "1"
    assert fifth.poll() is None
    for name in "acde":
        assert jobs.release(name) == 0


def test_a_plain_status_reads_the_jobs_per_gpu_from_the_holders(jobs):
    """A GPU whose one job leased it with ``--per-gpu 2`` has a free slot: a plain ``--status`` (K = 1 in its shell)
    says 1/2, from the holder's lock file, not that the GPU is full."""
    jobs.start("a", "--gpus", "1", "--per-gpu", "2")
    jobs.wait_record("a")
    text = _status(jobs.lock_dir, "--gpus", "1")
    assert "gpu 0: 1/2 slots held (its jobs lease 2 per GPU)" in text and f"pid {jobs.procs['a'].pid}" in text, text
    rows = [json.loads(line) for line in _status(jobs.lock_dir, "--gpus", "1", "--json").splitlines()]
    assert [(r["slots"], r["held"], [h["per_gpu"] for h in r["holders"]]) for r in rows] == [(2, 1, [2])], rows
    assert jobs.release("a") == 0
    assert "gpu 0: free" in _status(jobs.lock_dir, "--gpus", "1")


def test_slots_from_environment(jobs):
    """The workflow's plain ``gpu-lease --`` prefix reads the slot count from the environment."""
    env = _env(**{gpu_lease.ENV_SLOTS: "2", gpu_lease.ENV_GPUS: "1"})
    jobs.start("a", env=env)
    jobs.start("b", env=env)
    assert jobs.wait_record("a")["cuda"] == jobs.wait_record("b")["cuda"] == "0"
    jobs.start("c", env=env)
    time.sleep(0.8)
    assert jobs.record("c") is None, "a 3rd job started on a GPU with 2 slots"
    jobs.release("a")
    assert jobs.wait_record("c")["cuda"] == "0"
    jobs.release("b")
    jobs.release("c")


def test_status_without_gpus_says_so(tmp_path):
    env = _env(PATH=str(tmp_path / "no-nvidia-smi"))
    text = _status(tmp_path / "locks", env=env)
    assert text.strip() == (f"no GPUs found ({gpu_lease.ENV_GPUS} unset, nvidia-smi absent): jobs run on the CPU")
    text = _status(tmp_path / "locks", "--gpus", "2", env=_env(SLURM_JOB_ID="17"))
    assert "gpu 0: free" in text and "gpu 1: free" in text
    assert "SLURM job 17" in text


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--per-gpu", "0"], {}, "--per-gpu='0'"),
        ([], {gpu_lease.ENV_SLOTS: "two"}, f"{gpu_lease.ENV_SLOTS}='two'"),
        (["--gpus", "1,1"], {}, "--gpus='1,1'"),
    ],
)
def test_bad_options_fail_in_one_line(tmp_path, args, env, named):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(tmp_path), *args, "--", "true"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(**env))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], r.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--poll", "-1"), ("--poll", "0"), ("--log-every", "nan"), ("--timeout", "inf"), ("--timeout", "-5")],
)
def test_bad_waiting_times_are_refused_before_anything_runs(tmp_path, option, value):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(tmp_path / "locks")]
    cmd += ["--gpus", "1", option, value, "--", sys.executable, "-c", "open('ran', 'w')"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"argument {option}: expected a positive number, not '{value}'" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "ran").exists() and not (tmp_path / "locks").exists()


def test_unusable_lock_dir_fails_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(blocker / "locks")]
    r = subprocess.run(cmd + ["--gpus", "1", "--", "true"], capture_output=True, text=True, env=_env())
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(blocker / "locks") in lines[0], r.stderr


@pytest.mark.parametrize(
    ("kind", "said"), [("file", "is not a directory"), ("dangling link", "is a symbolic link, not a directory")]
)
def test_a_lock_dir_with_something_else_in_its_place_is_named_for_what_it_is(tmp_path, kind, said):
    """Before, a lease said "[Errno 17] File exists" where --status said what was there."""
    lock_dir = tmp_path / "locks"
    lock_dir.write_text("") if kind == "file" else lock_dir.symlink_to(tmp_path / "nowhere")
    cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(lock_dir), "--gpus", "1"]
    for args in (["--", "true"], ["--status"]):
        r = subprocess.run(cmd + args, capture_output=True, text=True, env=_env())
        assert r.returncode == 2
        assert _said(r.stderr) == [
            f"gpu-lease: lock directory {lock_dir}: {said} (choose one with --lock-dir or ${gpu_lease.ENV_LOCK_DIR})"
        ]


def test_ctrl_c_while_waiting_for_a_slot_is_one_line(jobs):
    """Before, SIGINT to a waiting lease printed a traceback ending in KeyboardInterrupt into the job's log."""
    jobs.start("a", "--gpus", "1")
    jobs.wait_record("a")
    waiting = jobs.start("b", "--gpus", "1", "--log-every", "600")  # one "waiting" line, whatever the load
    deadline = time.monotonic() + 60
    while "waiting for a free GPU" not in (line := waiting.stderr.readline()):
        assert line and time.monotonic() < deadline, "the second lease never said it was waiting"
    waiting.send_signal(signal.SIGINT)
    assert waiting.wait(30) == 130
    rest = _said(waiting.stderr.read())
    assert rest == [f"gpu-lease: interrupted while waiting for a free GPU; {sys.executable} was not started"], rest
    assert jobs.record("b") is None and jobs.release("a") == 0


def test_every_option_has_help():
    import argparse

    parser = argparse.ArgumentParser()
    gpu_lease.add_gpu_lease_cli(parser)
    assert parser.description
    for action in parser._actions:
        assert action.help and "\n" not in action.help, action.dest


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_lock_file_that_is_a_link_or_not_a_file_is_refused_and_never_written(tmp_path, kind):
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    slot = lock_dir / "gpu0.slot0.lock"
    if kind == "symlink":
        slot.symlink_to(victim)
    else:
        os.mkfifo(slot)
    with pytest.raises(lock_files.UnsafeLockFile, match=f"lock file {slot} is "):
        gpu_lease.try_acquire(lock_dir, [0])
    for status in (False, True):
        cmd = [sys.executable, "-m", "softmax_bottleneck", "gpu-lease", "--lock-dir", str(lock_dir), "--gpus", "1"]
        cmd += ["--status"] if status else ["--", sys.executable, "-c", "open('ran', 'w')"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and str(slot) in lines[0], r.stderr
        assert not (tmp_path / "ran").exists()
    assert victim.read_text() == "precious\n"
