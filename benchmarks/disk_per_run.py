"""The disk one training run takes, measured from real files: one paper-size model of each size the study trains.

For each distinct (dataset, parameter count) of a configuration's plan (``config/config.yaml`` by default: 15 sizes;
with ``--extremes`` only the smallest and the largest of each dataset, which ``plan`` scales by the parameters for the
sizes between), the first job of that size is trained for three short epochs on the CPU (two batches each; ET with the
switch after epoch 1, so that epochs 2 and 3 are ASGD and the resume state holds the weights, the ASGD averages and
the best weights, as it does for most of a paper run), with ``--checkpoint-seconds 0`` (the resume state is written
after every batch). While it trains, the run folder is polled every 50 ms: the largest ``.resume/state.pt`` and the
largest folder (a state being saved beside the previous one included) are recorded. Then the sizes of ``model.pt``,
``metrics.json``, ``curve.csv`` and the training log. Then E12's log-P slice (``analyze --rows ROWS --save-logp``, the
configuration's ``analysis/robustness/rows``: float32 rows × vocabulary, whichever model of its dataset writes it)
with its rank and spectrum files. Each run's row is kept beside its folder (``<run>.json``) and reused by the next
call, so an interrupted measurement goes on where it stopped.

Writes ``src/softmax_bottleneck/data/measured/disk.csv`` (``--out``), which ``plan`` reads::

    python benchmarks/disk_per_run.py --data-root ../shared/data --work /tmp/disk --extremes
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "softmax_bottleneck" / "data" / "measured" / "disk.csv"
COLUMNS = ["kind", "dataset", "variant", "sets", "parameters", "rows", "bytes", "state_bytes", "peak_bytes",
           "metrics_bytes", "text_bytes_per_epoch", "measured"]  # fmt: skip
EPOCHS = 3


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # renamed or removed while walking
                pass
    return total


def short_sets(run, hp: dict) -> list[str]:
    """The run's own --set arguments, then three short epochs of two batches each (ET, ASGD from epoch 2)."""
    rows = 2 * hp["bptt"] + 2
    return [
        *run.set_arguments,
        f"epochs={EPOCHS}",
        "switch_epoch=1",
        f"train_tokens={hp['batch_size'] * rows}",
        f"valid_tokens={hp['eval_batch_size'] * (hp['bptt'] + 1)}",
        "test_tokens=200",
    ]


def measure_training(run, data: Path, work: Path) -> dict:
    hp = run.hyperparameters
    count = presets.parameter_count(hp, presets.VOCAB_SIZES[run.dataset])
    out = work / f"{run.dataset}_{run.variant}_{count}_parameters"  # not -<8 digits>: that names a run's hash
    log = out.with_suffix(".log")
    kept = out.with_suffix(".json")
    if kept.is_file() and (out / "model.pt").is_file():  # measured by an earlier call
        return {**json.loads(kept.read_text()), "model": out / "model.pt"}
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train", "--dataset", run.dataset, "--variant", run.variant,
           "--schedule", "et", "--seed", str(run.seed), "--out", str(out), "--data", str(data), "--corpus-cache",
           str(work / f"{run.dataset}.pt"), "--device", "cpu", "--checkpoint-seconds", "0"]  # fmt: skip
    for item in short_sets(run, hp):
        cmd += ["--set", item]
    state, peak = 0, 0
    with open(log, "w") as handle:
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            try:
                state = max(state, (out / ".resume" / "state.pt").stat().st_size)
            except FileNotFoundError:
                pass
            peak = max(peak, folder_bytes(out)) if out.exists() else peak
            time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{log.read_text()[-2000:]}")
    peak = max(peak, folder_bytes(out))
    text = sum((out / name).stat().st_size for name in ("curve.csv",)) + log.stat().st_size
    row = {
        "kind": "run",
        "dataset": run.dataset,
        "variant": run.variant,
        "sets": " ".join(run.set_arguments),
        "parameters": count,
        "bytes": (out / "model.pt").stat().st_size,
        "state_bytes": state,
        "peak_bytes": peak,
        "metrics_bytes": (out / "metrics.json").stat().st_size,
        "text_bytes_per_epoch": round(text / EPOCHS),
    }
    kept.write_text(json.dumps(row))
    return {**row, "model": out / "model.pt"}


def measure_slice(model: Path, data: Path, work: Path, dataset: str, rows: int) -> list[dict]:
    """E12's log-P slice, its rank and spectrum files, from ``analyze --rows ROWS --save-logp``."""
    folder = work / "robustness"
    folder.mkdir(exist_ok=True)
    files = {"logp": folder / "logp.npy", "rank": folder / "rank.json", "spectrum": folder / "spectrum.csv"}
    cmd = [sys.executable, "-m", "softmax_bottleneck", "analyze", "--checkpoint", str(model), "--data", str(data),
           "--corpus-cache", str(work / f"{dataset}.pt"), "--rows", str(rows), "--save-logp", str(files["logp"]),
           "--out-json", str(files["rank"]), "--out-spectrum", str(files["spectrum"]), "--device", "cpu"]  # fmt: skip
    subprocess.run(cmd, check=True)
    with open(files["spectrum"]) as handle:
        values = sum(1 for _ in handle) - 1
    rows_of = {"logp": rows, "rank": "", "spectrum": values}
    return [{"kind": kind, "dataset": dataset, "rows": rows_of[kind], "bytes": path.stat().st_size}
            for kind, path in files.items()]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, type=Path, help="folder holding ptb/ and wikitext-2/")
    parser.add_argument("--work", required=True, type=Path, help="scratch folder for the short runs")
    parser.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--extremes", action="store_true", help="only each dataset's smallest and largest model")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    config = study_config.check(study_config.load([args.config]))
    study = Study(config)
    sizes: dict[tuple[str, int], object] = {}
    for run in study.jobs.values():
        count = presets.parameter_count(run.hyperparameters, presets.VOCAB_SIZES[run.dataset])
        sizes.setdefault((run.dataset, count), run)
    if args.extremes:
        counts = {d: sorted(n for dd, n in sizes if dd == d) for d, _ in sizes}
        sizes = {key: run for key, run in sizes.items() if key[1] in (counts[key[0]][0], counts[key[0]][-1])}
    stamp = (f"{datetime.date.today().isoformat()} {platform.machine()} {os.cpu_count()} cores, "
             f"benchmarks/disk_per_run.py")  # fmt: skip
    rows = []
    for (dataset, count), run in sorted(sizes.items()):
        data = args.data_root / CORPUS_DIRS[dataset]
        started = time.monotonic()
        row = measure_training(run, data, args.work)
        print(f"{dataset} {run.variant} {' '.join(run.set_arguments)}: {count:,} parameters, model.pt "
              f"{row['bytes']:,} B, state {row['state_bytes']:,} B, peak {row['peak_bytes']:,} B "
              f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
        rows.append(row)
    e12 = config["analysis"]["robustness"]
    source = next(r for r in rows if r["dataset"] == e12["dataset"])  # the slice's size is not the model's
    rows += measure_slice(source["model"], args.data_root / CORPUS_DIRS[e12["dataset"]], args.work, e12["dataset"],
                          int(e12["rows"]))  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({**{c: "" for c in COLUMNS}, **row, "measured": stamp})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
