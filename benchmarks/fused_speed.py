"""Fused training's speed: tokens/s of K runs trained fused in one process against one run alone (``bench --fused``),
for each model and K, on one device, and the seconds of the K runs' validation one after another (as alone) and
together (as a fused group validates). Each model's rows are written as soon as they are measured
(``<out>/fused-speed.json`` and ``.md``), so a call cut off keeps what finished.

    python benchmarks/fused_speed.py --data-root benchmarks/data --device cuda --models ptb/softmax,ptb/mos \\
        --groups 1,4,8,16,32 --batches 20 --warmup 3 --out /tmp/fused
    python benchmarks/fused_speed.py --data-root ../shared/data --device cpu --models ptb/softmax --groups 2 \\
        --batches 2 --warmup 1 --set train_tokens=20000 --out /tmp/fused      # a CPU: the per-run recurrence
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402
from softmax_bottleneck.training.bench import bench_corpus, measure_fused  # noqa: E402
from softmax_bottleneck.training.environment import resolve_device  # noqa: E402
from softmax_bottleneck.training.host_memory import keep_freed_host_memory  # noqa: E402

COLUMNS = ("model", "K", "recurrence", "solo tok/s", "fused tok/s", "speed-up", "fused s/batch", "peak GiB",
           "valid s/epoch: K alone, together")  # fmt: skip


def table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        peak = r["fused_peak_memory_bytes"]
        lines.append([f"{r['dataset']}/{r['variant']}", r["fused_runs"], r["recurrence"],
                      f"{r['solo_tokens_per_second']:,.0f}", f"{r['fused_tokens_per_second']:,.0f}",
                      f"{r['speedup']:.2f}×", f"{r['fused_seconds_per_batch']:.3f}",
                      "–" if peak is None else f"{peak / 2**30:.1f}",
                      f"{r['fused_runs'] * r['projected_valid_seconds_per_epoch']:.1f}, "
                      f"{r['fused_valid_seconds_per_epoch']:.1f}"])  # fmt: skip
    return pd.DataFrame(lines, columns=COLUMNS).to_markdown(index=False, disable_numparse=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", required=True, help="folder with ptb/ and wikitext-2/")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="ptb/softmax,ptb/mos", help="dataset/variant, comma-separated")
    parser.add_argument("--groups", default="1,4,8,16,32", help="the K to time, comma-separated")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--recurrence", choices=("auto", "batched", "per-run"), default="auto")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    parser.add_argument("--bench-dir", default=None,
                        help="also write each row as its own bench file here, <dataset>-<variant>-fused<K>.json, for "
                        "costs --bench (the study's price with K runs fused)")  # fmt: skip
    args = parser.parse_args(argv)
    keep_freed_host_memory(resolve_device(args.device))  # on the CPU, as `bench` and the trainer's process run
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for model in args.models.split(","):
        dataset, variant = model.split("/")
        opts = {"dataset": dataset, "variant": variant, "overrides": presets.parse_overrides(args.overrides),
                "device": args.device, "phase": "sgd", "batches": args.batches, "warmup": args.warmup,
                "recurrence": args.recurrence, "threads": None}  # fmt: skip
        corpus, source = bench_corpus(dataset, Path(args.data_root) / CORPUS_DIRS[dataset], None)
        try:
            rows += measure_fused(opts, corpus, source, [int(k) for k in args.groups.split(",")])
        except Exception as err:  # e.g. out of memory at the largest K: keep what was measured
            print(f"{model}: {type(err).__name__}: {err}", file=sys.stderr)
        (out / "fused-speed.json").write_text(json.dumps(rows, indent=2))
        if args.bench_dir:
            Path(args.bench_dir).mkdir(parents=True, exist_ok=True)
            for row in rows:
                name = f"{row['dataset']}-{row['variant']}-fused{row['fused_runs']}.json"
                (Path(args.bench_dir) / name).write_text(json.dumps(row, indent=2, sort_keys=True))
        (out / "fused-speed.md").write_text(table(rows))
        print(table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
