"""How fast ``status`` answers on a study folder of the paper's 283 runs (``config/config.yaml``).

Generates, in a temporary folder, the run folders of every training job of the plan in a mix of states, with the
files a real study leaves there (sizes as at the paper's scale unless said):

* finished (150): ``model.pt`` (a stand-in of ``--model-mb`` MB of random bytes: ``status`` never opens it; a real
  one is 100-140 MB), ``metrics.json`` as the trainer writes it (2.7 kB), ``curve.csv`` (one row per epoch),
  ``rank-reference.json``, ``spectrum-reference.csv`` (10,000 rows), the kept set ``.resume/final/`` (hard links),
  and the training log (4 lines per epoch);
* running (40, on another node: judged by the age of their writes) and stalled (20, same host, their process gone):
  ``.resume/state.pt`` (a ``--model-mb`` stand-in), ``.resume/progress.json`` with one curve row per epoch so far,
  ``.lock`` and the log;
* failed (3): the same, the log ending in the trainer's one-line error;
* not started: the rest (70).

Then times, best of ``--repeat``: ``study_status`` in-process (the run folders read, the study already expanded),
the expansion of the study (``Study(config).jobs``: hashing every run's identity) and the command
``python -m softmax_bottleneck status`` (a fresh interpreter: imports, config, expansion, reading, printing), and
prints a Markdown table. Usage::

    python benchmarks/status_speed.py [--repeat 3] [--model-mb 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
COUNTS = {"finished": 150, "running": 40, "stalled": 20, "failed": 3}


def _metrics(run, epochs: int) -> dict:
    hp = {**run.hyperparameters, "seed": run.seed}
    return {
        "dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
        "hyperparameters": hp, "parameters": 24_221_600, "trainable_parameters": 24_221_600, "train_ppl": 33.9,
        "valid_ppl": 59.5, "valid_loss": 4.086, "test_ppl": 57.1, "test_loss": 4.045, "epochs_run": epochs,
        "best_epoch": epochs - 3, "switch_epoch": 201, "seconds_per_epoch": 55.0,
        "tokens": {"train": 929_589, "valid": 73_760, "test": 82_430}, "device": "cuda",
        "environment": {"hostname": "node17", "cuda_visible_devices": "0", "software": {"package": "0.1.0",
                        "output_layer": {"name": run.variant, "source_sha256": "0" * 64}},
                        "versions": {"torch": "2.11.0", "python": "3.11.7", "numpy": "2.2.6"}},
        "versions": {"torch": "2.11.0", "python": "3.11.7", "numpy": "2.2.6"},
        "run_fingerprint": "f" * 64, "model_sha256": "a" * 64, "curve_sha256": "b" * 64,
    }  # fmt: skip


def _log(epochs: int, last: str | None = None) -> str:
    line = "2026-11-26 10:00:00 INFO softmax_bottleneck.train: epoch {e:3d} | {b:5d} batches | lr 30 | ms/batch 80.1 | "
    lines = [line.format(e=e, b=b) + "loss 4.10 | ppl 60.34" for e in range(1, epochs + 1) for b in (200, 400, 600)]
    return "\n".join([*lines, last or ""]) + "\n"


def _progress(run, epochs: int, epoch: int, **fields) -> dict:
    curve = [{"epoch": e, "valid_ppl": 60.0 + 100.0 / e, "seconds": 55.0, "wall_seconds": 58.0}
             for e in range(1, epoch + 1)]  # fmt: skip
    return {"format": 1, "dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
            "epochs": epochs, "epoch": epoch, "phase": "sgd", "best_valid_ppl": 61.0, "best_epoch": epoch,
            "checkpoint_seconds": 600.0, "started": time.time() - 58.0 * epoch, "attempt_started": time.time() - 600,
            "attempts": 1, "host": "node-elsewhere", "pid": 1, "updated": time.time(), "stopped": None,
            "error": None, "curve": curve, **fields}  # fmt: skip


def generate(study, root: Path, model_mb: float) -> dict[str, int]:
    """Write the run folders (module docstring) under ``root``; returns how many runs of each state it made."""
    from softmax_bottleneck.study.runs import TRAIN_LOG

    blob = os.urandom(int(model_mb * 2**20))
    spectrum = "index,sigma\n" + "".join(f"{i},{1.0 / (i + 1):.9g}\n" for i in range(10_000))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    plan = [state for state, n in COUNTS.items() for _ in range(n)]
    made = {}
    for k, run in enumerate(study.jobs.values()):
        state = plan[k] if k < len(plan) else "not started"
        made[state] = made.get(state, 0) + 1
        if state == "not started":
            continue
        folder, log = root / run.dir, root / TRAIN_LOG.format(**run.wildcards)
        epochs = int(run.hyperparameters["epochs"])
        (folder / ".resume").mkdir(parents=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        if state == "finished":
            final = folder / ".resume" / "final"
            final.mkdir()
            (final / "model.pt").write_bytes(blob)
            (final / "metrics.json").write_text(json.dumps(_metrics(run, epochs), indent=2, sort_keys=True))
            rows = "".join(f"{e},sgd,60.1,4.1,60.3,55.0,False\n" for e in range(1, epochs + 1))
            (final / "curve.csv").write_text("epoch,phase,train_ppl,valid_loss,valid_ppl,seconds,is_best\n" + rows)
            for name in ("model.pt", "metrics.json", "curve.csv"):
                os.link(final / name, folder / name)
            (folder / "rank-reference.json").write_text(json.dumps({"press_rank": 402, "effective_rank": {}}))
            (folder / "spectrum-reference.csv").write_text(spectrum)
            log.write_text(_log(epochs, "2026-11-26 10:00:00 INFO softmax_bottleneck.train: done: test ppl 57.08"))
            continue
        epoch = epochs // 3
        fields = {}
        if state == "stalled":
            fields = {"host": platform.node(), "pid": dead.pid}
        elif state == "failed":
            fields = {"error": "training diverged: non-finite loss at epoch 12, batch 301; lower lr or check the data"}
        progress = _progress(run, epochs, epoch, **fields)
        (folder / ".resume" / "progress.json").write_text(json.dumps(progress, indent=2, sort_keys=True))
        (folder / ".resume" / "state.pt").write_bytes(blob)
        (folder / ".lock").write_text(f"{progress['pid']} {progress['host']}\n")
        last = f"train: {fields['error']}" if state == "failed" else None
        log.write_text(_log(epoch, last))
        if state == "failed":
            now = time.time()
            os.utime(folder / ".resume" / "progress.json", (now - 5, now - 5))
    return made


def best(seconds: list[float]) -> str:
    return f"{min(seconds):.3f}"


def timed_command(command: list[str]) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of a command, and its output."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model-mb", type=float, default=2.0, help="size of each stand-in model.pt and state.pt")
    args = parser.parse_args()

    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study
    from softmax_bottleneck.study.status import study_status

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    config = study_config.check(study_config.read(CONFIG))
    expand = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        study = Study(dict(config))
        study.jobs  # noqa: B018
        expand.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory(prefix="status-speed-") as tmp:
        root = Path(tmp)
        made = generate(study, root, args.model_mb)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        reads, commands, imports = [], [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            status = study_status(study, directory=root)
            reads.append(time.perf_counter() - start)
        status_command = [sys.executable, "-m", "softmax_bottleneck", "status", "--config", str(CONFIG), "--directory",
                          str(root)]  # fmt: skip
        for _ in range(args.repeat):
            *seconds, output = timed_command(status_command)
            commands.append(seconds)
            *seconds, _ = timed_command([sys.executable, "-c", "import softmax_bottleneck.study.status"])
            imports.append(seconds)
    counts = status.counts()
    print(f"{len(study.jobs)} runs generated ({size / 2**20:,.0f} MiB): {made}; status read {counts}")
    print(output.splitlines()[0])
    print(f"\nload average before: {load}; {os.cpu_count()} CPUs\n")
    print(f"| step | wall s (best of {args.repeat}) | CPU s |")
    print("|---|---:|---:|")
    print(f"| read the 283 run folders (`study_status`, in-process) | {best(reads)} | |")
    print(f"| expand the study (`Study(config).jobs`, in-process) | {best(expand)} | |")
    wall, cpu = min(commands)
    print(f"| `python -m softmax_bottleneck status`: a fresh interpreter, all of it | {wall:.3f} | {cpu:.3f} |")
    wall, cpu = min(imports)
    print(f"| of which importing the package (torch through the output-layer registry) | {wall:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
