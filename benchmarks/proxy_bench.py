"""``bench`` the study's models that ``costs`` prices at another model's measured time on a card (its "priced by
proxy" share), the most GPU-hours first, so that the next ``costs --bench`` prices them at their own.

The models come from the package (:func:`softmax_bottleneck.report.cards.proxied_models`: the paper's configuration
projected with the card's measurements in ``data/measured/speeds.csv``). Each ``bench`` runs in its own process at
the paper's hyper-parameters on the real corpus, tokenized once per dataset (``--corpus-cache`` files under
``--out``). Each result is written as soon as it is measured, as a bench file of ``--bench-dir``
(``<dataset>-<variant>-proxy.json``, what ``costs --bench`` reads) and as a row of ``<out>/proxy-bench.md``, so a
call cut off keeps what finished::

    python benchmarks/proxy_bench.py --data-root benchmarks/data --device cuda --bench-dir /tmp/gs/bench \\
        --out /tmp/gs/proxy
    python benchmarks/proxy_bench.py --data-root ../shared/data --device cpu --only 2 --batches 1 --warmup 1 \\
        --bench-dir /tmp/proxy/bench --out /tmp/proxy      # the script's check on a CPU
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402
from softmax_bottleneck.report.cards import proxied_models  # noqa: E402

COLUMNS = ("dataset", "variant", "hours priced by proxy", "s/batch", "tokens/s", "projected s/epoch", "bench s")


def table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        measured = ["—", "—", f"failed: {r['error']}"] if "error" in r else [
            f"{r['seconds_per_batch']:.4f}", f"{r['tokens_per_second']:,.0f}", f"{r['projected_seconds_per_epoch']:.1f}"
        ]  # fmt: skip
        lines.append([r["dataset"], r["variant"], f"{r['hours']:,.0f}", *measured, f"{r['seconds']:.0f}"])
    return pd.DataFrame(lines, columns=COLUMNS).to_markdown(index=False, disable_numparse=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", required=True, help="folder with ptb/ and wikitext-2/")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--card", default="NVIDIA H200", help="the measured card whose proxies to bench")
    parser.add_argument("--config", default=str(REPO / "config" / "config.yaml"), help="the study (the paper's)")
    parser.add_argument("--only", type=int, default=None, metavar="N", help="the N models of the most hours only")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--valid-chunks", type=int, default=1)
    parser.add_argument("--bench-dir", required=True, help="where each model's bench file is written")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    out, bench_dir = Path(args.out), Path(args.bench_dir)
    out.mkdir(parents=True, exist_ok=True)
    bench_dir.mkdir(parents=True, exist_ok=True)
    models = proxied_models(args.card, args.config)[: args.only]
    print(f"{len(models)} models priced by proxy on {args.card}: "
          + ", ".join(f"{d}/{v} ({h:,.0f} h)" for d, v, h in models), flush=True)  # fmt: skip
    rows: list[dict] = []
    for dataset, variant, hours in models:
        cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", "--dataset", dataset, "--variant", variant,
               "--device", args.device, "--data", str(Path(args.data_root) / CORPUS_DIRS[dataset]),
               "--corpus-cache", str(out / f"corpus-{dataset}.pt"), "--batches", str(args.batches),
               "--warmup", str(args.warmup), "--valid-chunks", str(args.valid_chunks)]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        row = {"dataset": dataset, "variant": variant, "hours": hours, "seconds": time.monotonic() - started}
        if done.returncode != 0:
            row["error"] = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        else:
            result = json.loads(done.stdout)
            (bench_dir / f"{dataset}-{variant}-proxy.json").write_text(json.dumps(result, indent=2, sort_keys=True))
            row.update({k: result[k] for k in ("seconds_per_batch", "tokens_per_second",
                                                "projected_seconds_per_epoch")})  # fmt: skip
        rows.append(row)
        (out / "proxy-bench.json").write_text(json.dumps(rows, indent=2))
        (out / "proxy-bench.md").write_text(table(rows))
        print(table(rows), flush=True)
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
