"""GPUs shared by ``gpu-lease --per-gpu K`` run their jobs under an MPS control daemon (``cluster/mps.py``).

No GPU here: a stand-in ``nvidia-cuda-mps-control`` first on PATH behaves as NVIDIA's does for the lease (``-d``
forks a daemon that lives until told ``quit``; on stdin, ``get_server_list`` answers 0 while a daemon runs on
``$CUDA_MPS_PIPE_DIRECTORY`` and 1 otherwise, ``quit`` stops it) and records every start and quit; a stand-in
``nvidia-smi`` gives the cards' UUIDs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_gpu_lease import Jobs, _env, _wait_gone

from softmax_bottleneck.cluster import mps
from softmax_bottleneck.study.status import pid_exists

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the lease uses fcntl.flock and prctl (Linux)")

CONTROL = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    pidfile = os.path.join(pipe, "control.pid")

    def note(**event):
        with open(os.environ["MPS_STANDIN_RECORD"], "a") as out:
            out.write(json.dumps(event) + "\\n")

    def daemon_pid():
        try:
            pid = int(open(pidfile).read())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    if sys.argv[1:] == ["--serve"]:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            time.sleep(0.2)
    if sys.argv[1:] == ["-d"]:
        if os.environ.get("MPS_STANDIN_FAIL"):
            print("MPS is not allowed on this machine")
            sys.exit(1)
        if daemon_pid():
            print("An instance of this daemon is already running")
            sys.exit(1)
        proc = subprocess.Popen([sys.executable, __file__, "--serve"], start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(pidfile + ".tmp", "w").write(str(proc.pid))
        os.replace(pidfile + ".tmp", pidfile)
        open(os.path.join(pipe, "control"), "w").close()  # NVIDIA's daemon listens on the socket <pipe>/control
        note(event="start", pipe=pipe, log=os.environ.get("CUDA_MPS_LOG_DIRECTORY"),
             cuda=os.environ.get("CUDA_VISIBLE_DEVICES"), pid=proc.pid)
        sys.exit(0)
    command, pid = sys.stdin.read().strip(), daemon_pid()
    if pid is None:
        print("Cannot find MPS control daemon process")
        sys.exit(1)
    if command == "quit":
        os.kill(pid, signal.SIGTERM)
        while daemon_pid():
            time.sleep(0.02)
        os.remove(pidfile)
        os.remove(os.path.join(pipe, "control"))
        note(event="quit", pipe=pipe, pid=pid)
    elif command != "get_server_list":
        sys.exit(1)
    """
)
NVIDIA_SMI = textwrap.dedent(
    """
    import sys
    if sys.argv[1:] == ["-L"]:
        print("GPU 0: Stand-in (UUID: GPU-standin-0)\\nGPU 1: Stand-in (UUID: GPU-standin-1)")
    elif sys.argv[1:2] == ["--query-gpu=index,uuid"]:
        print("0, GPU-standin-0\\n1, GPU-standin-1")
    """
)


class Card:
    """The stand-in binaries on PATH, and what the control binary recorded."""

    def __init__(self, tmp_path: Path, control: bool = True):
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.record = tmp_path / "mps-events.jsonl"
        programs = {"nvidia-smi": NVIDIA_SMI, **({mps.CONTROL: CONTROL} if control else {})}
        for name, text in programs.items():
            (self.bin / name).write_text(f"#!{sys.executable}\n{text}")
            (self.bin / name).chmod(0o755)

    def env(self, **extra: str) -> dict[str, str]:
        settings = {mps.ENV_MPS: "auto", mps.ENV_WATCH: "0.2", **extra}
        return _env(PATH=f"{self.bin}{os.pathsep}{os.environ['PATH']}", MPS_STANDIN_RECORD=str(self.record), **settings)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def wait_events(self, kind: str, count: int, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.events() if e["event"] == kind]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{count} {kind} event(s) expected, recorded: {self.events()}")

    def stop_leftovers(self) -> None:
        """The stand-in daemons this test started, by pid (a failed test must not leave them running)."""
        for event in self.events():
            if event["event"] == "start":
                try:
                    os.kill(event["pid"], signal.SIGTERM)
                except ProcessLookupError:
                    pass


@pytest.fixture
def card(tmp_path):
    c = Card(tmp_path)
    yield c
    c.stop_leftovers()


@pytest.fixture
def jobs(tmp_path):
    j = Jobs(tmp_path)
    yield j
    j.cleanup()


def test_the_first_job_on_a_card_starts_its_daemon_and_the_last_stops_it_across_two_workflows(jobs, card):
    """Two workflows (K = 2 and K = 3) share the slot table: one daemon, started once, stopped by the last job."""
    jobs.start("a", "--gpus", "1", "--per-gpu", "2", env=card.env())
    first = jobs.wait_record("a")
    jobs.start("b", "--gpus", "1", "--per-gpu", "3", env=card.env())
    second = jobs.wait_record("b")
    pipe = str(jobs.lock_dir / "mps" / "gpu0" / "pipe")
    (start,) = card.wait_events("start", 1)
    assert (start["cuda"], start["pipe"], start["log"]) == ("GPU-standin-0", pipe, str(jobs.lock_dir / "mps/gpu0/log"))
    # the clients name the card by its UUID (a daemon renumbers its devices from 0) and use its pipe
    assert first["cuda"] == second["cuda"] == "GPU-standin-0" and first["mps"] == second["mps"] == pipe
    assert first["lease"] == second["lease"] == "0"

    assert jobs.release("a") == 0  # the first workflow's last job leaves: the other's job still runs on it
    time.sleep(0.6)  # three of the watcher's looks
    assert [e["event"] for e in card.events()] == ["start"] and pid_exists(start["pid"])
    assert jobs.release("b") == 0
    said = jobs.procs["b"].stderr.read()  # the device the job got, not the card's index (before: "=0")
    assert "leased GPU 0, slot 1 of 3 (GPUs [0] from --gpus): CUDA_VISIBLE_DEVICES=GPU-standin-0, under MPS" in said
    (quit_,) = card.wait_events("quit", 1)
    assert quit_["pid"] == start["pid"]
    _wait_gone(start["pid"])
    assert not (jobs.lock_dir / "mps" / "gpu0" / "pipe" / "control").exists()


def test_a_killed_job_neither_keeps_the_daemon_alive_nor_stops_it_under_the_others(jobs, card):
    a = jobs.start("a", "--gpus", "1", "--per-gpu", "2", env=card.env())
    jobs.wait_record("a")
    b = jobs.start("b", "--gpus", "1", "--per-gpu", "2", env=card.env())
    jobs.wait_record("b")
    (start,) = card.wait_events("start", 1)

    os.killpg(a.pid, signal.SIGKILL)  # wrapper and job: no leave() runs
    a.wait(10)
    time.sleep(0.6)
    assert [e["event"] for e in card.events()] == ["start"] and pid_exists(start["pid"])  # b still runs under it
    os.killpg(b.pid, signal.SIGKILL)  # the last job dies without leaving: the watcher stops the daemon
    b.wait(10)
    (quit_,) = card.wait_events("quit", 1)
    assert quit_["pid"] == start["pid"]
    _wait_gone(start["pid"])

    jobs.start("c", "--gpus", "1", "--per-gpu", "2", env=card.env())  # a later job starts a fresh daemon
    assert jobs.wait_record("c")["mps"] is not None
    assert len(card.wait_events("start", 2)) == 2
    assert jobs.release("c") == 0
    assert len(card.wait_events("quit", 2)) == 2


@pytest.mark.parametrize(
    ("case", "args", "extra", "warning"),
    [
        ("no binary", ["--per-gpu", "2"], {}, f"{mps.CONTROL} not found"),
        ("refused", ["--per-gpu", "2"], {"MPS_STANDIN_FAIL": "1"}, "exited 1: MPS is not allowed on this machine"),
        ("turned off", ["--per-gpu", "2", "--mps", "off"], {}, None),
        ("turned off by env", ["--per-gpu", "2"], {mps.ENV_MPS: "off"}, None),
        ("one job per GPU", ["--per-gpu", "1"], {}, None),
    ],
)
def test_without_mps_the_jobs_share_the_card_as_before(tmp_path, jobs, case, args, extra, warning):
    """No daemon: CUDA_VISIBLE_DEVICES is the index, no MPS variable, at most one warning line saying why."""
    card = Card(tmp_path, control=case != "no binary")
    proc = jobs.start("a", "--gpus", "1", *args, env=card.env(**extra))
    record = jobs.wait_record("a")
    assert (record["cuda"], record["mps"]) == ("0", None)
    assert jobs.release("a") == 0
    warnings = [line for line in proc.stderr.read().splitlines() if "without MPS" in line]
    assert card.events() == []
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0], warnings


def test_uuids_and_the_switch(tmp_path):
    card = Card(tmp_path)
    assert mps.gpu_uuids(str(card.bin / "nvidia-smi")) == {0: "GPU-standin-0", 1: "GPU-standin-1"}
    assert mps.gpu_uuids(str(tmp_path / "absent")) == {}
    assert mps.mps_wanted(None, {}) and mps.mps_wanted(None, {mps.ENV_MPS: "auto"})
    assert not mps.mps_wanted(None, {mps.ENV_MPS: "OFF"}) and not mps.mps_wanted("off", {mps.ENV_MPS: "auto"})
