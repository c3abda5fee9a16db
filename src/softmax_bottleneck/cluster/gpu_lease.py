"""A file-lock GPU lease for local runs: ``python -m softmax_bottleneck gpu-lease -- CMD ...``.

Snakemake's ``--resources gpu=N`` only *counts* GPU jobs; it never tells a job which device to use
(snakemake/snakemake#281). This module gives each running GPU job its own device:

* one lock file per GPU, ``gpu<id>.lock``, in a node-local directory (default: a per-user directory
  under ``$XDG_RUNTIME_DIR``, else ``/tmp/softmax-bottleneck-gpu-<uid>``);
* the wrapper takes a non-blocking ``fcntl.flock`` on the first free one, sets
  ``CUDA_VISIBLE_DEVICES=<id>`` and runs the command as a child process; the lock is held as long as
  the wrapper *or* the child lives. The kernel releases a ``flock`` when the last descriptor of the
  open file is closed, so a lease is freed even when the job is SIGKILLed;
* the child is asked to die (SIGTERM, Linux ``PR_SET_PDEATHSIG``) if the wrapper is SIGKILLed, so a
  killed job never leaves a trainer running on a GPU that the lease table calls free;
* SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to the child (SLURM-style pre-emption
  and ``snakemake`` cancellation reach the trainer, which saves its resume state); the child's exit
  status is propagated (``128 + signal`` if it died of a signal);
* while every GPU is taken, the wrapper waits, polling every ``--poll`` seconds, and logs one line
  every ``--log-every`` seconds naming the holders (cluster-log friendly, no progress bars).

It **steps aside** (``exec`` of the command, no lock) when

* ``SLURM_JOB_ID`` is set: SLURM has already assigned the job its devices;
* ``CUDA_VISIBLE_DEVICES`` is already set: someone else chose the device(s);
* the GPU count is 0 (CPU-only machine).

The GPU count comes from ``--gpus`` (a count ``4`` or a list of ids ``0,2,3``), else the environment
variable ``SOFTMAX_BOTTLENECK_GPUS`` (same syntax), else the number of ``GPU n:`` lines printed by
``nvidia-smi -L``, else 0.

``--status`` prints the lease table (which GPU is held by which process) and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("softmax_bottleneck.cluster.gpu_lease")

ENV_GPUS = "SOFTMAX_BOTTLENECK_GPUS"
ENV_LOCK_DIR = "SOFTMAX_BOTTLENECK_GPU_LOCK_DIR"
#: set in the child's environment: the leased GPU id (also in CUDA_VISIBLE_DEVICES)
ENV_LEASED = "SOFTMAX_BOTTLENECK_GPU_LEASE"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


# --------------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------------


def parse_gpus(spec: str | int | None) -> list[int] | None:
    """``"4"`` -> ``[0, 1, 2, 3]``; ``"0,2"`` -> ``[0, 2]``; ``"0"``/``""`` -> ``[]``; ``None`` -> ``None``."""
    if spec is None:
        return None
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"GPU count must be >= 0, got {spec}")
        return list(range(spec))
    text = spec.strip()
    if text in ("", "none"):
        return []
    if "," not in text:
        count = int(text)
        if count < 0:
            raise ValueError(f"GPU count must be >= 0, got {count}")
        return list(range(count))
    ids = [int(part) for part in text.split(",") if part.strip()]
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"GPU ids must be distinct and >= 0, got {text!r}")
    return ids


def detect_gpus(nvidia_smi: str | None = None) -> list[int]:
    """GPU ids from ``nvidia-smi -L`` (``GPU 0: ...`` lines); ``[]`` if it is missing or fails."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return list(range(count))


def resolve_gpus(cli_value: str | None, environ: dict[str, str] | None = None) -> tuple[list[int], str]:
    """The GPU ids to lease among, and where they came from (``--gpus``, env, nvidia-smi)."""
    environ = os.environ if environ is None else environ
    if cli_value is not None:
        return parse_gpus(cli_value) or [], "--gpus"
    if environ.get(ENV_GPUS, "").strip():
        return parse_gpus(environ[ENV_GPUS]) or [], ENV_GPUS
    return detect_gpus(), "nvidia-smi -L"


def default_lock_dir(environ: dict[str, str] | None = None) -> Path:
    """A node-local, per-user directory: ``$XDG_RUNTIME_DIR/softmax-bottleneck-gpu`` or ``/tmp/...-<uid>``."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_LOCK_DIR):
        return Path(environ[ENV_LOCK_DIR])
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "softmax-bottleneck-gpu"
    return Path("/tmp") / f"softmax-bottleneck-gpu-{os.getuid()}"


def step_aside_reason(gpus: Sequence[int], environ: dict[str, str] | None = None) -> str | None:
    """Why no lease is needed (``None``: take one)."""
    environ = os.environ if environ is None else environ
    if environ.get("SLURM_JOB_ID"):
        return f"SLURM job {environ['SLURM_JOB_ID']} (SLURM assigns the devices)"
    if "CUDA_VISIBLE_DEVICES" in environ:
        return f"CUDA_VISIBLE_DEVICES is already set ({environ['CUDA_VISIBLE_DEVICES']!r})"
    if not gpus:
        return "no GPUs (CPU run)"
    return None


# --------------------------------------------------------------------------------------------------
# the lease
# --------------------------------------------------------------------------------------------------


@dataclass
class Lease:
    gpu: int
    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def _lock_path(lock_dir: Path, gpu: int) -> Path:
    return lock_dir / f"gpu{gpu}.lock"


def _prepare_lock_dir(lock_dir: Path) -> None:
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.access(lock_dir, os.W_OK):
        raise PermissionError(f"GPU lock directory {lock_dir} is not writable")


def try_acquire(lock_dir: Path, gpus: Sequence[int], holder: dict | None = None) -> Lease | None:
    """Take the first free GPU among ``gpus`` (non-blocking); ``None`` if all are held.

    The lock files are never deleted (deleting a lock file that another process is waiting on breaks
    ``flock`` mutual exclusion); the holder's pid and command are written into it for ``--status``.
    """
    _prepare_lock_dir(lock_dir)
    for gpu in gpus:
        path = _lock_path(lock_dir, gpu)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                continue
            raise
        info = {"gpu": gpu, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        info.update(holder or {})
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return Lease(gpu, path, fd)
    return None


def is_held(path: Path) -> bool:
    """True if another open file description holds a lock on ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def lease_table(lock_dir: Path, gpus: Sequence[int]) -> list[dict]:
    """One row per GPU: ``{"gpu", "held", "pid", "cmd", "since"}`` (holder info only while held)."""
    rows = []
    for gpu in gpus:
        path = _lock_path(lock_dir, gpu)
        row: dict = {"gpu": gpu, "held": is_held(path)}
        if row["held"]:
            with contextlib.suppress(OSError, ValueError):
                row.update({k: v for k, v in json.loads(path.read_text() or "{}").items() if k != "gpu"})
        rows.append(row)
    return rows


def acquire(
    lock_dir: Path,
    gpus: Sequence[int],
    *,
    poll: float = 2.0,
    log_every: float = 60.0,
    timeout: float | None = None,
    holder: dict | None = None,
) -> Lease:
    """Wait until one of ``gpus`` is free and lease it; logs a line every ``log_every`` seconds."""
    start = last_log = time.monotonic()
    logged_once = False
    while True:
        lease = try_acquire(lock_dir, gpus, holder)
        if lease is not None:
            if logged_once:
                log.info("leased GPU %d after waiting %.0f s", lease.gpu, time.monotonic() - start)
            return lease
        now = time.monotonic()
        if timeout is not None and now - start >= timeout:
            raise TimeoutError(f"no free GPU among {list(gpus)} in {lock_dir} after {timeout:g} s")
        if not logged_once or now - last_log >= log_every:
            holders = ", ".join(
                f"gpu{r['gpu']}=pid {r.get('pid', '?')}" for r in lease_table(lock_dir, gpus) if r["held"]
            )
            log.info(
                "waiting for a free GPU: all %d leases in %s are held (%s); waited %.0f s",
                len(gpus),
                lock_dir,
                holders or "holders unknown",
                now - start,
            )
            last_log, logged_once = now, True
        # jitter, so that jobs started together do not poll in lock-step
        time.sleep(poll * random.uniform(0.75, 1.25))


# --------------------------------------------------------------------------------------------------
# running the command
# --------------------------------------------------------------------------------------------------


def _set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """In the child (before exec): receive ``sig`` when the wrapper dies (Linux only, best effort)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)


def _in_terminal_foreground() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_with_lease(command: Sequence[str], lease: Lease) -> int:
    """Run ``command`` with ``CUDA_VISIBLE_DEVICES=<leased id>``; returns its exit status."""
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = str(lease.gpu)
    env[ENV_LEASED] = str(lease.gpu)
    parent = os.getpid()

    def preexec() -> None:
        _set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent:  # the wrapper died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    # the child inherits the locked descriptor: the lease stays held while the child runs, even if
    # the wrapper itself is killed; it is freed when both are gone
    os.set_inheritable(lease.fd, True)
    terminal_sigint = _in_terminal_foreground()
    received: list[int] = []
    proc: subprocess.Popen | None = None

    def forward(signum, _frame) -> None:
        received.append(signum)
        # a terminal's Ctrl-C already reached the child (same foreground process group)
        if signum == signal.SIGINT and terminal_sigint:
            return
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        try:
            proc = subprocess.Popen(list(command), env=env, pass_fds=(lease.fd,), preexec_fn=preexec)
        except FileNotFoundError:
            log.error("command not found: %s", command[0])
            return 127
        except PermissionError:
            log.error("command not executable: %s", command[0])
            return 126
        # a signal that arrived between installing the handlers and Popen returning
        for signum in received:
            if not (signum == signal.SIGINT and terminal_sigint):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signum)
        while True:
            try:
                code = proc.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        lease.release()
    if code < 0:
        log.info("command died of signal %d; released GPU %d", -code, lease.gpu)
        return 128 - code
    log.debug("command exited with %d; released GPU %d", code, lease.gpu)
    return code


def _exec(command: Sequence[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except FileNotFoundError:
        log.error("command not found: %s", command[0])
        return 127
    except PermissionError:
        log.error("command not executable: %s", command[0])
        return 126
    return 0  # pragma: no cover - exec does not return


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------


def add_gpu_lease_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run CMD holding a lease on one free local GPU (CUDA_VISIBLE_DEVICES=<id>); "
        "a plain exec under SLURM, with CUDA_VISIBLE_DEVICES already set, or with no GPUs."
    )
    parser.add_argument(
        "--lock-dir",
        type=Path,
        default=None,
        help=f"node-local directory of the gpu<id>.lock files (default: ${ENV_LOCK_DIR}, "
        "else $XDG_RUNTIME_DIR/softmax-bottleneck-gpu, else /tmp/softmax-bottleneck-gpu-<uid>)",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help=f"GPU count (4) or ids (0,2,3) to lease among (default: ${ENV_GPUS}, else nvidia-smi -L, else 0)",
    )
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between attempts while waiting")
    parser.add_argument("--log-every", type=float, default=60.0, help="seconds between 'waiting' log lines")
    parser.add_argument("--timeout", type=float, default=None, help="give up (exit 75) after this many seconds")
    parser.add_argument("--status", action="store_true", help="print the lease table as JSON lines and exit")
    # dest is not "command": the dispatcher (cli.py) keeps the sub-command name there
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments")


def run_gpu_lease_cli(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        gpus, source = resolve_gpus(args.gpus)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    lock_dir = args.lock_dir or default_lock_dir()
    if args.status:
        for row in lease_table(lock_dir, gpus):
            print(json.dumps(row))
        return 0
    if not command:
        log.error("no command given: gpu-lease [options] -- CMD [ARGS ...]")
        return 2
    reason = step_aside_reason(gpus)
    if reason is not None:
        log.debug("gpu-lease steps aside: %s", reason)
        return _exec(command)
    holder = {"cmd": " ".join(command)[:500]}
    log.debug("leasing one of GPUs %s (from %s) in %s", gpus, source, lock_dir)
    try:
        lease = acquire(lock_dir, gpus, poll=args.poll, log_every=args.log_every, timeout=args.timeout, holder=holder)
    except TimeoutError as exc:
        log.error("%s", exc)
        return 75  # EX_TEMPFAIL
    log.info("leased GPU %d (of %s, from %s): CUDA_VISIBLE_DEVICES=%d", lease.gpu, gpus, source, lease.gpu)
    return run_with_lease(command, lease)


# the dispatcher also accepts the plain names
add_cli = add_gpu_lease_cli
run_cli = run_gpu_lease_cli
