"""NVIDIA MPS for jobs that share a GPU: ``gpu-lease --per-gpu K`` (K > 1) runs them under one control daemon per card.

Without MPS, processes on one GPU take turns (time slices); under an MPS control daemon the kernels of different
processes can run at the same time (NVIDIA, *Multi-Process Service*, "When to use MPS"). Each process still
launches its own kernels, so a packed run computes what it computes alone.

What the lease does, per card ``g`` (all files under the lease's own lock directory, node-local and the user's):

* **join** (after taking a slot of card ``g``): under ``gpu<g>.mps.lock`` (an exclusive ``flock``), ask the card's
  daemon whether it is there (its socket ``<pipe>/control`` exists and ``get_server_list`` answers); if not, start
  it as the user:
  ``nvidia-cuda-mps-control -d`` with ``CUDA_VISIBLE_DEVICES=<the card's UUID>``, ``CUDA_MPS_PIPE_DIRECTORY=
  <lock dir>/mps/gpu<g>/pipe`` and ``CUDA_MPS_LOG_DIRECTORY=<lock dir>/mps/gpu<g>/log``, and a detached
  watcher (below). The job then runs with the same two directories and ``CUDA_VISIBLE_DEVICES=<UUID>``: a daemon
  renumbers the devices it sees from 0, so an index would name the wrong card under it, a UUID names the same
  card with or without it (NVIDIA, "CUDA_VISIBLE_DEVICES").
* **leave** (after the job ended and its slot was released): under the same lock, if no slot of card ``g`` is
  held any more, stop the daemon: ``echo quit | nvidia-cuda-mps-control`` with the same environment.
* The references are the slot locks themselves: the kernel drops a dead job's ``flock``, so a killed job can
  neither keep the daemon alive under a count that never reaches 0 nor stop it under the others (their slots
  stay held). The **watcher** (``python -m softmax_bottleneck.cluster.mps watch``, started with the daemon, in a
  session of its own) looks every few seconds and stops the daemon once no slot of its card is held: a daemon
  outlives its last job by seconds even when that job was SIGKILLed and never ran *leave*; it ends with the daemon.
  Two workflows that share the lock directory share the slots, hence the daemon and the count.
* Nothing else: the card's compute mode and settings are never changed (no ``nvidia-smi -c``); a daemon is
  started only by a lease that holds a slot of that card.

**Fallback**: ``SOFTMAX_BOTTLENECK_MPS=off`` (or ``gpu-lease --mps off``) turns it off; without the binary, without
the card's UUID (``nvidia-smi --query-gpu=index,uuid``), or when the daemon does not start (a site may forbid
it), the job runs as before, the jobs on the card taking turns, after one warning line.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from softmax_bottleneck.cluster.lock_files import is_held, open_lock_file, slot_files

log = logging.getLogger("softmax_bottleneck.cluster.gpu_lease")

CONTROL = "nvidia-cuda-mps-control"
#: ``off`` (or ``0``/``no``/``false``) turns MPS off for shared GPUs; ``auto`` (default) uses it where it can
ENV_MPS = "SOFTMAX_BOTTLENECK_MPS"
#: seconds between the watcher's looks (default 5)
ENV_WATCH = "SOFTMAX_BOTTLENECK_MPS_WATCH_SECONDS"
OFF = ("off", "0", "no", "false")


@dataclass
class Daemon:
    """One card's MPS directories and the environment of its clients (and of the daemon itself)."""

    gpu: int
    uuid: str
    root: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "CUDA_VISIBLE_DEVICES": self.uuid,
            "CUDA_MPS_PIPE_DIRECTORY": str(self.root / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(self.root / "log"),
        }


def mps_wanted(cli_value: str | None, environ: dict[str, str] | None = None) -> bool:
    """``--mps``, else ``$SOFTMAX_BOTTLENECK_MPS``, else on."""
    environ = os.environ if environ is None else environ
    value = cli_value if cli_value is not None else environ.get(ENV_MPS, "auto")
    return value.strip().lower() not in OFF


def gpu_uuids(nvidia_smi: str | None = None) -> dict[int, str]:
    """``{index: UUID}`` from ``nvidia-smi --query-gpu=index,uuid --format=csv,noheader``; ``{}`` if it fails."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return {}
    try:
        out = subprocess.run([exe, "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        index, _, uuid = (part.strip() for part in line.partition(","))
        if index.isdigit() and uuid.startswith(("GPU-", "MIG-")):
            found[int(index)] = uuid
    return found


def _control(daemon: Daemon, command: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """``nvidia-cuda-mps-control`` in the card's environment: ``-d`` (start; its output goes to ``log/start.log``,
    which a forked daemon may keep open) or one command on its stdin (``get_server_list``, ``quit``)."""
    env = {**os.environ, **daemon.env}
    if command is not None:
        return subprocess.run([CONTROL], input=command + "\n", env=env, capture_output=True, text=True, timeout=timeout)
    with open(daemon.root / "log" / "start.log", "a+") as out:
        start = out.tell()
        done = subprocess.run([CONTROL, "-d"], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                              timeout=timeout)  # fmt: skip
        out.seek(start)
        return subprocess.CompletedProcess(done.args, done.returncode, out.read(), "")


def running(daemon: Daemon) -> bool:
    """The card's daemon is there: its socket ``<pipe>/control`` exists and answers (``get_server_list`` exits 0)."""
    if not (daemon.root / "pipe" / "control").exists():
        return False
    try:
        return _control(daemon, "get_server_list", timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@contextlib.contextmanager
def card_lock(lock_dir: Path, gpu: int):
    """The exclusive ``flock`` that orders every start and stop decision of card ``gpu`` (all leases, all workflows)."""
    fd = open_lock_file(lock_dir / f"gpu{gpu}.mps.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def held_slots(lock_dir: Path, gpu: int) -> int:
    """Slots of card ``gpu`` held by a live process (whatever K the leases use)."""
    return sum(is_held(path) for path in slot_files(lock_dir, gpu).values())


def _start(daemon: Daemon, lock_dir: Path) -> str | None:
    """Start the daemon and its watcher; ``None``, or why it did not start."""
    for sub in ("pipe", "log"):
        (daemon.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        started = _control(daemon)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{CONTROL} -d failed: {err}"
    if started.returncode != 0:
        said = started.stdout.strip().splitlines()
        return f"{CONTROL} -d exited {started.returncode}" + (f": {said[-1]}" if said else "")
    for _ in range(20):  # -d returns once it has forked; the pipe answers soon after
        if running(daemon):
            break
        time.sleep(0.25)
    else:
        return f"{CONTROL} -d started no daemon that answers on {daemon.root / 'pipe'}"
    watcher = [sys.executable, "-m", "softmax_bottleneck.cluster.mps", "watch", "--lock-dir", str(lock_dir),
               "--gpu", str(daemon.gpu), "--uuid", daemon.uuid]  # fmt: skip
    with open(daemon.root / "watch.log", "a") as out:
        subprocess.Popen(watcher, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    log.info("started the MPS control daemon of GPU %d (%s)", daemon.gpu, daemon.root)
    return None


def join(lock_dir: Path, gpu: int, uuids: dict[int, str] | None = None) -> Daemon | None:
    """Card ``gpu``'s daemon for a job that holds one of its slots, started if needed; ``None`` and one warning
    line when MPS cannot be used (the job then runs as without MPS)."""
    if shutil.which(CONTROL) is None:
        reason = f"{CONTROL} not found"
    else:
        uuid = (gpu_uuids() if uuids is None else uuids).get(gpu)
        socket = lock_dir / "mps" / f"gpu{gpu}" / "pipe" / "control"
        if uuid is None:
            reason = f"no UUID for GPU {gpu} from nvidia-smi --query-gpu=index,uuid"
        elif len(str(socket).encode()) > 100:  # a UNIX socket's path holds at most 107 bytes
            reason = f"the path of its socket {socket} is too long; choose a shorter --lock-dir"
        else:
            daemon = Daemon(gpu, uuid, lock_dir / "mps" / f"gpu{gpu}")
            with card_lock(lock_dir, gpu):
                reason = None if running(daemon) else _start(daemon, lock_dir)
            if reason is None:
                return daemon
    log.warning("gpu-lease: GPU %d may be shared, and without MPS (%s) the jobs that share it take turns; %s=off "
                "hides this", gpu, reason, ENV_MPS)  # fmt: skip
    return None


def stop_if_unused(lock_dir: Path, daemon: Daemon) -> bool:
    """Under the card's lock: stop its daemon if no slot of the card is held; True if it was stopped."""
    with card_lock(lock_dir, daemon.gpu):
        if held_slots(lock_dir, daemon.gpu) or not running(daemon):
            return False
        try:
            _control(daemon, "quit")
        except (OSError, subprocess.SubprocessError) as err:
            log.warning("gpu-lease: could not stop the MPS daemon of GPU %d: %s", daemon.gpu, err)
            return False
    log.info("stopped the MPS control daemon of GPU %d: no job left on it", daemon.gpu)
    return True


leave = stop_if_unused


def watch(lock_dir: Path, daemon: Daemon, interval: float) -> int:
    """Until the daemon is gone: every ``interval`` seconds, stop it once no slot of its card is held."""
    while True:
        time.sleep(interval)
        with card_lock(lock_dir, daemon.gpu):
            alive = running(daemon)
        if not alive or stop_if_unused(lock_dir, daemon):
            return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the watcher of one card's MPS daemon (started by gpu-lease)")
    parser.add_argument("action", choices=["watch"])
    parser.add_argument("--lock-dir", type=Path, required=True)
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--uuid", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    interval = float(os.environ.get(ENV_WATCH) or 5.0)
    return watch(args.lock_dir, Daemon(args.gpu, args.uuid, args.lock_dir / "mps" / f"gpu{args.gpu}"), interval)


if __name__ == "__main__":
    raise SystemExit(main())
