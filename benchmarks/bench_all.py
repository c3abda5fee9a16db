"""Run ``python -m softmax_bottleneck bench`` for every variant × dataset and write the table into BENCHMARKS.md.

Each combination runs in its own process at the preset's paper hyper-parameters (timed training steps
through the trainer's own step, plus a validation-pass estimate; see ``softmax_bottleneck.training.bench``).
The table replaces the block between ``<!-- bench_all:<device>:begin -->`` and ``<!-- bench_all:<device>:end -->``
in the output file (appended when absent), headed by the command, the device, the date and the
machine's load average before and after. Usage::

    python benchmarks/bench_all.py --device cpu --batches 3 --warmup 1 --threads 1
    python benchmarks/bench_all.py --device cuda --batches 100 --warmup 10 --runs 1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS

REPO = Path(__file__).resolve().parents[1]


def run_one(dataset: str, variant: str, args) -> dict:
    cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", "--dataset", dataset, "--variant", variant,
           "--batches", str(args.batches), "--warmup", str(args.warmup), "--valid-chunks", str(args.valid_chunks),
           "--device", args.device, "--runs", str(args.runs), "--phase", args.phase]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.data_root:
        cmd += ["--data", str(Path(args.data_root) / CORPUS_DIRS[dataset])]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        return {"dataset": dataset, "variant": variant, "error": result.stderr.strip().splitlines()[-1]}
    return json.loads(result.stdout)


def table(rows: list[dict]) -> str:
    lines = [
        "| dataset | variant | #param (M) | s/batch | tokens/s | projected s/epoch (train + valid) | peak mem. (GiB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dataset']} | {r['variant']} | — | — | — | failed: {r['error']} | — |")
            continue
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {r['parameters'] / 1e6:.2f} | {r['seconds_per_batch']:.3f} "
            f"| {r['tokens_per_second']:,.0f} | {r['projected_seconds_per_epoch']:,.0f} "
            f"({r['projected_train_seconds_per_epoch']:,.0f} + {r['projected_valid_seconds_per_epoch']:,.0f}) "
            f"| {r['peak_memory_bytes'] / 2**30:.2f} |"
        )
    return "\n".join(lines)


def write_block(path: Path, device: str, body: str) -> None:
    begin, end = f"<!-- bench_all:{device}:begin -->", f"<!-- bench_all:{device}:end -->"
    block = f"{begin}\n{body}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (one table per device type)")
    parser.add_argument("--batches", type=int, default=3, help="timed training steps per combination")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--valid-chunks", type=int, default=2, help="validation chunks timed for the estimate")
    parser.add_argument("--runs", type=int, default=1, help="concurrent runs per combination (aggregate tokens/s)")
    parser.add_argument("--phase", choices=("sgd", "asgd"), default="sgd", help="time SGD or ASGD steps")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per run")
    parser.add_argument("--data-root", default=None, help="folder with ptb/ and wikitext-2/ (default: random tokens)")
    parser.add_argument("--out", default=str(REPO / "BENCHMARKS.md"), help="markdown file to update")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    for dataset in presets.DATASETS:
        for variant in presets.variants():
            if dataset in presets.variant_datasets(variant):
                rows.append(run_one(dataset, variant, args))
                print(json.dumps(rows[-1]), flush=True)
    load_after = os.getloadavg()
    first = next((r for r in rows if "error" not in r), {})
    device = first.get("device_name") or f"{platform.processor() or platform.machine()} CPU"
    command = "python benchmarks/bench_all.py " + " ".join(argv if argv is not None else sys.argv[1:])
    header = (
        f"{datetime.date.today().isoformat()}, device {args.device} ({device}), torch {first.get('torch')}, "
        f"cuDNN {first.get('cudnn')}, tf32 {first.get('tf32')}, {first.get('threads')} thread(s), "
        f"data {first.get('data')}, {args.phase.upper()} steps, {args.runs} run(s) at once; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after.\n\n`{command}`\n"
    )
    body = header + "\n" + table(rows)
    write_block(Path(args.out), args.device.split(":")[0], body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
