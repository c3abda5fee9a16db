"""The workflow's own jobs end to end on this machine, with one training job killed and resumed by the next run.

Runs ``snakemake TARGET --cores C --resources gpu=N`` on ``config/gpu-smoke.yaml`` (``--smoke``:
``config/small.yaml``, which a CPU runs in minutes) in ``--workdir``, with ``SOFTMAX_BOTTLENECK_GPU_SLOTS=K`` (the
lease's jobs per card; MPS under K > 1) and the lease's lock directory inside the workdir. Once a training job's
trainer (a run's, or a fused group's under ``fusion: runs_per_job`` > 1, as in the small scale) has logged its first
batches and run ``--kill-after`` seconds more, it gets SIGTERM, as a pre-emption
would send (it saves its resume state and exits; Snakemake, with ``--keep-going``, finishes the other jobs and
fails); then the same command runs again and must resume that run and finish. Reports, as JSON
(``<workdir>/smoke.json``, and printed last): the wall time of each run, the killed run and whether its log says
it resumed, the MPS lines of the lease, the training and analysis jobs done, and whether every table and figure
of the target exists. ``--deadline`` stops Snakemake (SIGTERM: its jobs save their state) and reports what was
done::

    python benchmarks/smoke_workflow.py --data-root ../shared/data --workdir /tmp/smoke --target table3 \\
        --slots 1 --resources 1
    python benchmarks/smoke_workflow.py --data-root ../shared/data --workdir /tmp/smoke --slots 2 --resources 2
    python benchmarks/smoke_workflow.py --data-root ../shared/data --workdir /tmp/smoke-cpu --smoke --target table3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def trainers(workdir: Path) -> list[int]:
    """Pids of this workflow's trainer processes (``softmax_bottleneck train`` or ``train-fused`` writing under
    ``workdir``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        words = _cmdline(int(entry.name))
        if "softmax_bottleneck" not in words or "gpu-lease" in words:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        after = words[words.index("softmax_bottleneck") + 1 :]
        if after[:1] in (["train"], ["train-fused"]) and cwd == str(workdir):
            found.append(int(entry.name))
    return found


def run_snakemake(cmd: list[str], env: dict, workdir: Path, deadline: float, kill_after: float | None) -> dict:
    """One Snakemake run; with ``kill_after``, SIGTERM to the first trainer that has lived that long."""
    started = time.monotonic()
    with open(workdir / f"snakemake-{int(time.time())}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        seen: dict[int, float] = {}
        killed = None
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                os.killpg(proc.pid, signal.SIGTERM)  # Snakemake passes it on; trainers save their state
                proc.wait(120)
                break
            if kill_after is not None and killed is None:
                for pid in trainers(workdir):
                    run, log_file = _trainer_log(workdir, _cmdline(pid))
                    training = log_file is not None and log_file.exists() and " batches |" in log_file.read_text()
                    if training:  # past its first logged batches: a kill now interrupts training itself
                        seen.setdefault(pid, now)
                        if now - seen[pid] >= kill_after:
                            os.kill(pid, signal.SIGTERM)
                            killed = {"pid": pid, "run": run, "log": str(log_file), "after_s": now - seen[pid]}
                            break
            time.sleep(0.5)
    return {"cmd": " ".join(cmd), "rc": proc.returncode, "seconds": time.monotonic() - started, "killed": killed,
            "log": log.name}  # fmt: skip


def _trainer_log(workdir: Path, words: list[str]) -> tuple[str | None, Path | None]:
    """The run (a solo trainer's run folder) or fused group (its ``--record``) of a trainer's command line, and the
    log the workflow writes it to (``logs/train/<run>.log``, ``logs/train_fused/<group>.log``)."""
    if "train-fused" in words and "--record" in words:
        group = Path(words[words.index("--record") + 1]).stem
        return group, workdir / "logs" / "train_fused" / f"{group}.log"
    run = next((a for a in words if a.startswith("results/runs/")), None)
    return run, (workdir / "logs" / "train" / f"{run[len('results/runs/') :]}.log" if run else None)


def _cmdline(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, help="data mirror: ptb/, wikitext-2/, word-sim/")
    parser.add_argument("--workdir", required=True, help="the workflow's working directory (kept between runs)")
    parser.add_argument("--target", default="all", help="Snakemake target (default: all)")
    parser.add_argument("--slots", type=int, default=1, help="jobs per card (SOFTMAX_BOTTLENECK_GPU_SLOTS)")
    parser.add_argument("--resources", type=int, default=1, help="--resources gpu=N")
    parser.add_argument("--cores", type=int, default=16)
    parser.add_argument("--kill-after", type=float, default=20.0, help="seconds of a trainer before its SIGTERM")
    parser.add_argument("--no-kill", action="store_true", help="no training job is killed")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for both runs together")
    parser.add_argument("--smoke", action="store_true", help="config/small.yaml (a CPU's minutes)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    deadline = start + args.deadline
    workdir = Path(args.workdir).resolve()
    (workdir / "locks").mkdir(mode=0o700, parents=True, exist_ok=True)
    config = REPO / "config" / ("small.yaml" if args.smoke else "gpu-smoke.yaml")
    cmd = [sys.executable, "-m", "snakemake", args.target, "--cores", str(args.cores), "--resources",
           f"gpu={args.resources}", "--keep-going", "--scheduler", "greedy", "-s", str(REPO / "Snakefile"),
           "--configfile", str(config), "--config", f"data_mirror={Path(args.data_root).resolve()}",
           "--directory", str(workdir)]  # fmt: skip
    env = {**os.environ, "SOFTMAX_BOTTLENECK_GPU_SLOTS": str(args.slots),
           "SOFTMAX_BOTTLENECK_GPU_LOCK_DIR": str(workdir / "locks"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    first = run_snakemake(cmd, env, workdir, deadline, None if args.no_kill else args.kill_after)
    runs = [first]
    if first["rc"] != 0 and time.monotonic() < deadline:
        runs.append(run_snakemake(cmd, env, workdir, deadline, None))
    subdir = "small" if args.smoke else "gpu-smoke"
    logs = sorted(f for folder in ("train", "train_fused") for f in (workdir / "logs" / folder).rglob("*.log"))
    killed = first["killed"]
    resumed = None
    if killed:
        text = Path(killed["log"]).read_text(errors="replace") if Path(killed["log"]).exists() else ""
        resumed = "resumed from" in text
    mps_lines = sorted({line.split("] ")[-1][:160] for f in logs for line in f.read_text(errors="replace").splitlines()
                        if "MPS" in line})  # fmt: skip
    reports = workdir / "reports" / subdir
    result = {
        "config": str(config.relative_to(REPO)), "target": args.target, "slots": args.slots,
        "resources": args.resources, "runs": runs, "killed": killed, "killed_run_resumed": resumed,
        "models_trained": sum(".resume" not in p.parts for p in (workdir / "results" / "runs").rglob("model.pt")),
        "ranks": len(list((workdir / "results" / "runs").rglob("rank-*.json"))),
        "tables_md": len(list((reports / "tables").glob("*.md"))) if (reports / "tables").is_dir() else 0,
        "figures_png": len(list((reports / "figures").glob("*.png"))) if (reports / "figures").is_dir() else 0,
        "finished": runs[-1]["rc"] == 0, "mps_lines": mps_lines[:10], "seconds": time.monotonic() - start,
    }  # fmt: skip
    (workdir / "smoke.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0 if result["finished"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
