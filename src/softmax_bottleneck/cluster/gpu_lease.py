"""A file-lock GPU lease for local runs: ``python -m softmax_bottleneck gpu-lease -- CMD ...``.

Snakemake's ``--resources gpu=N`` only *counts* GPU jobs; it never tells a job which device to use
(snakemake/snakemake#281). This module gives each running GPU job a device:

* ``K`` slots per GPU (``--per-gpu K``, else ``$SOFTMAX_BOTTLENECK_GPU_SLOTS``, else 1), one lock
  file per slot, ``gpu<id>.slot<k>.lock``, in one node-local directory per user: ``--lock-dir``, else
  ``$SOFTMAX_BOTTLENECK_GPU_LOCK_DIR``, else ``/var/tmp/softmax-bottleneck-gpu-<uid>`` (the same path in every
  process, whatever its login session). It must be the user's own directory (not a symbolic link) that nobody
  else can write, or the wrapper refuses it in one line. A lock file is opened without following a symbolic link
  (``O_NOFOLLOW``) and must be a regular file, or the wrapper refuses it in one line naming it (it never writes
  through a link to another file). With ``K > 1`` up to K
  jobs share one device (an AWD-LSTM at paper scale uses a fraction of a modern GPU); a new job goes
  to the least-loaded GPU, so the runs spread over the devices before they share one;
* the wrapper takes a non-blocking ``fcntl.flock`` on a free slot, sets ``CUDA_VISIBLE_DEVICES=<id>``
  and runs the command as a child process; the lock is held as long as the wrapper *or* the child
  lives. The kernel releases a ``flock`` when the last descriptor of the open file is closed, so a
  slot is freed even when the job is SIGKILLed;
* the child is asked to die (SIGTERM, Linux ``PR_SET_PDEATHSIG``) if the wrapper is SIGKILLed, so a
  killed job never leaves a trainer running on a GPU that the lease table calls free;
* SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to the child (SLURM-style pre-emption
  and ``snakemake`` cancellation reach the trainer, which saves its resume state); the child's exit
  status is propagated (``128 + signal`` if it died of a signal);
* with ``K > 1`` the jobs of a GPU run under an NVIDIA MPS control daemon that the leases start and stop
  (:mod:`.mps`; ``--mps off`` or ``$SOFTMAX_BOTTLENECK_MPS=off`` to turn it off);
* while every slot is taken, the wrapper waits, polling every ``--poll`` seconds, and logs one line
  every ``--log-every`` seconds naming the holders (cluster-log friendly, no progress bars).

It **steps aside** (``exec`` of the command, no lock) when

* ``SLURM_JOB_ID`` is set: SLURM has already assigned the job its devices;
* ``CUDA_VISIBLE_DEVICES`` is already set: someone else chose the device(s);
* the GPU count is 0 (CPU-only machine).

The GPU count comes from ``--gpus`` (a count ``4`` or a list of ids ``0,2,3``), else the environment
variable ``SOFTMAX_BOTTLENECK_GPUS`` (same syntax), else the number of ``GPU n:`` lines printed by
``nvidia-smi -L``, else 0. Snakemake's counter should match: ``--resources gpu=<GPUs x K>``.

``--status`` prints the lease table (which slot of which GPU is held by which process) and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.cluster import mps
from softmax_bottleneck.cluster.lock_files import (
    check_lock_dir,
    is_held,
    open_lock_file,
    prepare_lock_dir,
    slot_files,
)
from softmax_bottleneck.cluster.supervise import exec_command, run_supervised

log = logging.getLogger("softmax_bottleneck.cluster.gpu_lease")

ENV_GPUS = "SOFTMAX_BOTTLENECK_GPUS"
ENV_LOCK_DIR = "SOFTMAX_BOTTLENECK_GPU_LOCK_DIR"
#: jobs per GPU (``--per-gpu``); the workflow's plain ``gpu-lease --`` prefix reads it
ENV_SLOTS = "SOFTMAX_BOTTLENECK_GPU_SLOTS"
#: set in the child's environment: the leased GPU id (also in CUDA_VISIBLE_DEVICES)
ENV_LEASED = "SOFTMAX_BOTTLENECK_GPU_LEASE"
#: the most of a slot's lock file that the lease table reads (its holder's one JSON line)
HOLDER_BYTES = 1 << 20


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
        source, spec = "--gpus", cli_value
    elif environ.get(ENV_GPUS, "").strip():
        source, spec = ENV_GPUS, environ[ENV_GPUS]
    else:
        return detect_gpus(), "nvidia-smi -L"
    try:
        return parse_gpus(spec) or [], source
    except ValueError as exc:
        raise ValueError(f"{source}={spec!r}: {exc} (a count such as 4, or ids such as 0,2,3)") from None


def resolve_slots(cli_value: int | None, environ: dict[str, str] | None = None) -> tuple[int, str]:
    """Jobs per GPU, and where the number came from (``--per-gpu``, env, default 1)."""
    environ = os.environ if environ is None else environ
    if cli_value is not None:
        source, spec = "--per-gpu", str(cli_value)
    elif environ.get(ENV_SLOTS, "").strip():
        source, spec = ENV_SLOTS, environ[ENV_SLOTS].strip()
    else:
        return 1, "default"
    try:
        slots = int(spec)
    except ValueError:
        slots = 0
    if slots < 1:
        raise ValueError(f"{source}={spec!r}: expected a whole number of jobs per GPU, >= 1")
    return slots, source


def no_gpu_reason(source: str, environ: dict[str, str] | None = None) -> str:
    """Why the GPU list is empty, for people: which sources were tried."""
    environ = os.environ if environ is None else environ
    if source != "nvidia-smi -L":
        return f"{source} gives no GPUs"
    env = f"{ENV_GPUS} unset" if not environ.get(ENV_GPUS, "").strip() else f"{ENV_GPUS}={environ[ENV_GPUS]!r}"
    smi = "nvidia-smi -L lists none" if shutil.which("nvidia-smi") else "nvidia-smi absent"
    return f"{env}, {smi}"


def default_lock_dir(environ: dict[str, str] | None = None) -> Path:
    """``$SOFTMAX_BOTTLENECK_GPU_LOCK_DIR``, else the fixed per-user ``/var/tmp/softmax-bottleneck-gpu-<uid>``.

    Fixed, so that every job of the user on this node sees the same slots: a login-session directory such as
    ``$XDG_RUNTIME_DIR`` comes and goes with the session (systemd removes ``/run/user/<uid>`` when the last one
    ends), and a job started under tmux or nohup would then lock in another directory than its siblings.
    ``/var/tmp`` is node-local and survives reboots on most systems; a stale lock file holds no lock.
    """
    environ = os.environ if environ is None else environ
    if environ.get(ENV_LOCK_DIR):
        return Path(environ[ENV_LOCK_DIR])
    return Path("/var/tmp") / f"softmax-bottleneck-gpu-{os.getuid()}"


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
    slot: int
    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def _lock_path(lock_dir: Path, gpu: int, slot: int) -> Path:
    return lock_dir / f"gpu{gpu}.slot{slot}.lock"


def _lock_slot(path: Path) -> int | None:
    """A descriptor holding an exclusive ``flock`` on ``path``; ``None`` if someone else holds it."""
    fd = open_lock_file(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def try_acquire(lock_dir: Path, gpus: Sequence[int], holder: dict | None = None, slots: int = 1) -> Lease | None:
    """Take a free slot on the least-loaded GPU among ``gpus`` (non-blocking); ``None`` if all are held.

    Ties go to the GPU listed first. Another wrapper may take the chosen slot between the look and
    the lock: then the loads are read again, so that wrappers started together still spread out.
    The lock files are never deleted (deleting a lock file that another process is waiting on breaks
    ``flock`` mutual exclusion); the holder's pid and command are written into it for ``--status``.
    """
    prepare_lock_dir(lock_dir)
    for _ in range(4 * len(gpus) * slots + 1):
        held = {gpu: [is_held(_lock_path(lock_dir, gpu, s)) for s in range(slots)] for gpu in gpus}
        free = [
            (sum(held[gpu]), position, slot, gpu)
            for position, gpu in enumerate(gpus)
            for slot in range(slots)
            if not held[gpu][slot]
        ]
        if not free:
            return None
        *_, slot, gpu = min(free)
        path = _lock_path(lock_dir, gpu, slot)
        fd = _lock_slot(path)
        if fd is None:  # raced: look again
            continue
        info = {"gpu": gpu, "slot": slot, "per_gpu": slots, "pid": os.getpid(), "host": socket.gethostname(),
                "since": time.time()}  # fmt: skip
        info.update(holder or {})
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return Lease(gpu, slot, path, fd)
    return None


def lease_table(lock_dir: Path, gpus: Sequence[int], slots: int = 1) -> list[dict]:
    """One row per GPU: ``{"gpu", "slots", "held", "holders"}``; a holder is ``{"slot", "per_gpu", "pid", "cmd",
    ...}``. Every held slot is listed, also one beyond ``slots``; a row's ``slots`` is the most of ``slots``, the jobs
    per GPU its holders leased with (``--per-gpu``, in their lock files) and the highest slot in use + 1."""
    rows = []
    for gpu in gpus:
        holders = []
        files = slot_files(lock_dir, gpu)
        for slot in sorted(set(range(slots)) | set(files)):
            path = files.get(slot, _lock_path(lock_dir, gpu, slot))
            if not is_held(path):
                continue
            holder: dict = {"slot": slot}
            with contextlib.suppress(OSError, ValueError, AttributeError):
                fd = open_lock_file(path, os.O_RDONLY)
                with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:  # a holder's line: bounded
                    info = readback.parse_json(handle.read(HOLDER_BYTES) or "{}", path)
                holder.update({k: v for k, v in info.items() if k not in ("gpu", "slot")})
            holders.append(holder)
        leased_with = [h["per_gpu"] for h in holders if type(h.get("per_gpu")) is int and h["per_gpu"] >= 1]
        in_use = max([slots, *leased_with, *(h["slot"] + 1 for h in holders)])
        rows.append({"gpu": gpu, "slots": in_use, "held": len(holders), "holders": holders})
    return rows


def acquire(
    lock_dir: Path,
    gpus: Sequence[int],
    *,
    slots: int = 1,
    poll: float = 2.0,
    log_every: float = 60.0,
    timeout: float | None = None,
    holder: dict | None = None,
) -> Lease:
    """Wait until a slot on one of ``gpus`` is free and lease it; logs a line every ``log_every`` seconds."""
    start = last_log = time.monotonic()
    logged_once = False
    while True:
        lease = try_acquire(lock_dir, gpus, holder, slots)
        if lease is not None:
            if logged_once:
                log.info("leased GPU %d after waiting %.0f s", lease.gpu, time.monotonic() - start)
            return lease
        now = time.monotonic()
        if timeout is not None and now - start >= timeout:
            raise TimeoutError(f"no free slot on GPUs {list(gpus)} ({slots} per GPU) in {lock_dir} after {timeout:g} s")
        if not logged_once or now - last_log >= log_every:
            holders = ", ".join(
                f"gpu{row['gpu']}.slot{h['slot']}=pid {h.get('pid', '?')}"
                for row in lease_table(lock_dir, gpus, slots)
                for h in row["holders"]
            )
            log.info(
                "waiting for a free GPU: all %d slots (%d per GPU) in %s are held (%s); waited %.0f s",
                len(gpus) * slots,
                slots,
                lock_dir,
                holders or "holders unknown",
                now - start,
            )
            last_log, logged_once = now, True
        # jitter, so that jobs started together do not poll in lock-step
        time.sleep(poll * random.uniform(0.75, 1.25))


def run_with_lease(command: Sequence[str], lease: Lease, extra_env: dict[str, str] | None = None) -> int:
    """Run ``command`` with ``CUDA_VISIBLE_DEVICES=<leased id>`` (and ``extra_env``: MPS's); returns its exit status.

    The child inherits the locked descriptor: the slot stays held while the child runs, even if the
    wrapper itself is killed; it is freed when both are gone.
    """
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = str(lease.gpu)
    env[ENV_LEASED] = str(lease.gpu)
    env.update(extra_env or {})
    try:
        code = run_supervised(command, env, lease.fd)
    finally:
        lease.release()
    log.debug("command exited with %d; released GPU %d, slot %d", code, lease.gpu, lease.slot)
    return code


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------


def add_gpu_lease_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run CMD holding a slot on a free local GPU (CUDA_VISIBLE_DEVICES=<id>); up to --per-gpu jobs "
        "share one GPU. A plain exec under SLURM, with CUDA_VISIBLE_DEVICES already set, or with no GPUs."
    )
    parser.add_argument(
        "--lock-dir",
        type=Path,
        default=None,
        help=f"node-local directory of the lock files, yours alone (default: ${ENV_LOCK_DIR}, "
        "else /var/tmp/softmax-bottleneck-gpu-<uid>)",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help=f"GPU count (4) or ids (0,2,3) to lease among (default: ${ENV_GPUS}, else nvidia-smi -L, else 0)",
    )
    parser.add_argument(
        "--per-gpu",
        type=int,
        default=None,
        metavar="K",
        help=f"jobs that may share one GPU (default: ${ENV_SLOTS}, else 1); give Snakemake --resources gpu=<GPUs x K>",
    )
    from softmax_bottleneck.argtypes import positive_float

    parser.add_argument("--poll", type=positive_float, default=2.0, help="seconds between attempts while waiting")
    parser.add_argument("--log-every", type=positive_float, default=60.0, help="seconds between 'waiting' log lines")
    parser.add_argument(
        "--timeout", type=positive_float, default=None, help="give up (exit 75) after this many seconds"
    )
    parser.add_argument(
        "--mps", choices=("auto", "off"), default=None,
        help=f"with K > 1: run the jobs of a GPU under an NVIDIA MPS daemon (default: ${mps.ENV_MPS}, else auto)",
    )  # fmt: skip
    parser.add_argument("--status", action="store_true", help="print which GPU slots are held, by whom, and exit")
    parser.add_argument("--json", action="store_true", help="with --status: one JSON object per GPU instead of text")
    # dest is not "command": the dispatcher (cli.py) keeps the sub-command name there
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments")


def _age(seconds: float) -> str:
    minutes = int(max(seconds, 0) // 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def status_lines(
    lock_dir: Path, gpus: Sequence[int], source: str, slots: int, environ: dict[str, str] | None = None
) -> list[str]:
    """The ``--status`` text: where the GPUs come from, whether a lease would be taken, who holds what."""
    environ = os.environ if environ is None else environ
    if not gpus:
        return [f"no GPUs found ({no_gpu_reason(source, environ)}): jobs run on the CPU"]
    ids = ",".join(map(str, gpus))
    lines = [f"GPUs {ids} (from {source}), {slots} job(s) per GPU, lock files in {lock_dir}"]
    reason = step_aside_reason(gpus, environ)
    if reason is not None:
        lines.append(f"here gpu-lease takes no lease: {reason}")
    now = time.time()
    for row in lease_table(lock_dir, gpus, slots):
        state = "free" if not row["held"] else f"{row['held']}/{row['slots']} slots held"
        if row["slots"] > slots:
            state += f" (its jobs lease {row['slots']} per GPU)"
        lines.append(f"gpu {row['gpu']}: {state}")
        for h in row["holders"]:
            since = f", for {_age(now - h['since'])}" if isinstance(h.get("since"), (int, float)) else ""
            lines.append(f"  slot {h['slot']}: pid {h.get('pid', '?')}{since}: {h.get('cmd', '?')}")
    return lines


def run_gpu_lease_cli(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        gpus, source = resolve_gpus(args.gpus)
        slots, slots_source = resolve_slots(args.per_gpu)
    except ValueError as exc:
        log.error("gpu-lease: %s", exc)
        return 2
    lock_dir = args.lock_dir or default_lock_dir()
    if args.status:
        try:
            if os.path.lexists(lock_dir):  # --status creates nothing, but reads only a safe directory
                check_lock_dir(lock_dir)
            if args.json:
                lines = [json.dumps(row) for row in lease_table(lock_dir, gpus, slots)]
            else:
                lines = status_lines(lock_dir, gpus, source, slots)
        except OSError as exc:
            log.error(
                "gpu-lease: lock directory %s: %s (choose one with --lock-dir or $%s)", lock_dir, exc, ENV_LOCK_DIR
            )
            return 2
        if lines:
            print("\n".join(lines))
        return 0
    if not command:
        log.error("gpu-lease: no command given: gpu-lease [options] -- CMD [ARGS ...]")
        return 2
    if shutil.which(command[0]) is None:  # said now, not after waiting for a GPU
        log.error("gpu-lease: %s: command not found (or not executable)", command[0])
        return 127
    reason = step_aside_reason(gpus)
    if reason is not None:
        if "CUDA_VISIBLE_DEVICES" in os.environ and not os.environ.get("SLURM_JOB_ID"):  # said in the job's log
            log.info("gpu-lease: no lease: %s, so this job uses those devices, whatever the other jobs use (unset it "
                     "to give each job a GPU of its own)", reason)  # fmt: skip
        else:
            log.debug("gpu-lease steps aside: %s", reason)
        return exec_command(command)
    holder = {"cmd": " ".join(command)[:500]}
    log.debug("leasing one of GPUs %s (from %s), %d per GPU (%s), in %s", gpus, source, slots, slots_source, lock_dir)
    try:
        lease = acquire(
            lock_dir,
            gpus,
            slots=slots,
            poll=args.poll,
            log_every=args.log_every,
            timeout=args.timeout,
            holder=holder,
        )
    except TimeoutError as exc:
        log.error("gpu-lease: %s", exc)
        return 75  # EX_TEMPFAIL
    except KeyboardInterrupt:
        log.error("gpu-lease: interrupted while waiting for a free GPU; %s was not started", command[0])
        return 130
    except OSError as exc:
        log.error("gpu-lease: lock directory %s: %s (choose one with --lock-dir or $%s)", lock_dir, exc, ENV_LOCK_DIR)
        return 2
    try:
        daemon = mps.join(lock_dir, lease.gpu) if slots > 1 and mps.mps_wanted(args.mps) else None
    except KeyboardInterrupt:
        lease.release()
        log.error(
            "gpu-lease: interrupted while starting GPU %d's MPS daemon; %s was not started", lease.gpu, command[0]
        )
        return 130
    device = daemon.env["CUDA_VISIBLE_DEVICES"] if daemon else str(lease.gpu)  # under MPS, the card's UUID
    log.info("leased GPU %d, slot %d of %d (GPUs %s from %s): CUDA_VISIBLE_DEVICES=%s%s", lease.gpu, lease.slot,
             slots, gpus, source, device, ", under MPS" if daemon else "")  # fmt: skip
    try:
        return run_with_lease(command, lease, daemon.env if daemon else None)
    finally:
        if daemon:
            mps.leave(lock_dir, daemon)


# the dispatcher also accepts the plain names
add_cli = add_gpu_lease_cli
run_cli = run_gpu_lease_cli
