"""Several training runs on one card: aggregate throughput with and without MPS, and bit-identity with solo runs.

1. **Packing table**: ``bench --runs K`` (K independent runs started at once on the device, aggregate tokens/s)
   for each ``--softmax-runs`` K of PTB Softmax and each ``--mos-runs`` K of PTB MoS, first without MPS, then
   under an MPS control daemon started and stopped by the lease's own code (:mod:`softmax_bottleneck.cluster.mps`,
   in a lock directory of this script's); a card where no daemon starts gets its rows marked unavailable.
2. **Bit-identity**: PTB Softmax trained by the workflow's ``train`` for ``--identity-batches`` batches, each
   seed once alone, then ``--identity-runs`` runs at once on the card through ``gpu-lease --per-gpu K`` (so under
   MPS where it starts), seeds cycling over ``--identity-seeds``: each packed run's weights (every tensor of its
   ``model.pt``) must equal, byte for byte, those of the solo run of its seed.

Writes ``<out>/packing.json`` and prints the Markdown tables last. ``--smoke`` runs toy sizes on any device::

    python benchmarks/packing.py --data-root ../shared/data --device cuda --out /tmp/packing
    python benchmarks/packing.py --data-root ../shared/data --device cpu --smoke --out /tmp/packing
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from softmax_bottleneck.cluster import mps  # noqa: E402
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402

CLI = [sys.executable, "-m", "softmax_bottleneck"]
#: the MPS variables a run must not inherit when it is meant to run without MPS
MPS_ENV = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in MPS_ENV}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


def bench_row(variant: str, runs: int, args, env: dict[str, str], toy: list[str]) -> dict:
    """One ``bench --runs K`` call: its JSON (kept whole in ``--bench-dir`` for ``costs --bench``), or an error."""
    cmd = [*CLI, "bench", "--dataset", args.dataset, "--variant", variant, "--device", args.device, "--runs",
           str(runs), "--batches", str(args.batches), "--warmup", str(args.warmup), "--valid-chunks", "1",
           "--data", str(Path(args.data_root) / CORPUS_DIRS[args.dataset]), *toy]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"variant": variant, "runs": runs, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    result = json.loads(proc.stdout)
    if args.bench_dir:
        name = f"{args.dataset}-{variant}-runs{runs}{'-mps' if result.get('mps') else ''}.json"
        Path(args.bench_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.bench_dir) / name).write_text(proc.stdout)
    keys = ("variant", "runs", "mps", "tokens_per_second", "seconds_per_batch", "per_run_tokens_per_second",
            "peak_memory_bytes", "device_name")  # fmt: skip
    return {key: result.get(key) for key in keys}


def packing_table(args, toy: list[str], lock_dir: Path) -> list[dict]:
    """Every (variant, K) without MPS, then under a daemon of this script's (if one starts)."""
    plan = [("softmax", k) for k in args.softmax_runs] + [("mos", k) for k in args.mos_runs]
    rows = [{**bench_row(v, k, args, base_env(), toy), "with_mps": False} for v, k in plan]
    daemon = mps.join(lock_dir, 0) if args.device.startswith("cuda") else None
    if daemon is None:
        rows += [{"variant": v, "runs": k, "with_mps": True, "error": "MPS unavailable"} for v, k in plan]
        return rows
    try:
        rows += [{**bench_row(v, k, args, base_env(**daemon.env), toy), "with_mps": True} for v, k in plan]
    finally:
        mps.leave(lock_dir, daemon)  # no slot is held here: the daemon stops
    return rows


def weights_digest(path: Path) -> dict[str, str]:
    """SHA-256 of every tensor of a run's ``model.pt`` (this package's own file; weights only)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    return {key: hashlib.sha256(state[key].contiguous().numpy().tobytes()).hexdigest() for key in sorted(state)}


def identity(args, toy: list[str], work: Path) -> dict:
    """Solo runs per seed, then the packed runs at once through gpu-lease; each packed run against its seed's."""
    tokens = args.identity_batches * 20 * 70 + 2 * 20 * 110  # PTB Softmax: batch 20 × bptt 70 per batch
    sets = ["--set", "epochs=1", "--set", f"train_tokens={tokens}", "--set", "valid_tokens=2000",
            "--set", "test_tokens=2000", *toy]  # fmt: skip

    def train(out: Path, seed: int) -> list[str]:
        return [*CLI, "train", "--dataset", "ptb", "--variant", "softmax", "--seed", str(seed), "--out", str(out),
                "--data", str(Path(args.data_root) / "ptb"), "--device", args.device, *sets]  # fmt: skip

    solo = {}
    started = time.monotonic()
    for seed in args.identity_seeds:
        out = work / f"solo-{seed}"
        subprocess.run(train(out, seed), env=base_env(), check=True, capture_output=True)
        solo[seed] = weights_digest(out / "model.pt")
    solo_seconds = time.monotonic() - started
    seeds = [args.identity_seeds[i % len(args.identity_seeds)] for i in range(args.identity_runs)]
    lease = [*CLI, "gpu-lease", "--lock-dir", str(work / "locks"), "--gpus", "1", "--per-gpu", str(len(seeds)), "--"]
    env = base_env(**({} if args.device.startswith("cuda") else {mps.ENV_MPS: "off"}))
    started = time.monotonic()
    procs = [subprocess.Popen(lease + train(work / f"packed-{i}", seed), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i, seed in enumerate(seeds)]  # fmt: skip
    errors = [proc.communicate()[1] for proc in procs]
    packed_seconds = time.monotonic() - started
    runs = []
    for i, (seed, proc) in enumerate(zip(seeds, procs, strict=True)):
        mps_line = next((line for line in errors[i].splitlines() if "MPS" in line), "")
        if proc.returncode != 0:
            runs.append({"seed": seed, "error": (errors[i].strip().splitlines() or ["?"])[-1]})
            continue
        same = weights_digest(work / f"packed-{i}" / "model.pt") == solo[seed]
        runs.append({"seed": seed, "identical": same, "lease_mps_line": mps_line})
    return {"batches": args.identity_batches, "train_tokens": tokens, "seeds": seeds, "runs": runs,
            "all_identical": all(r.get("identical") for r in runs), "solo_seconds": solo_seconds,
            "packed_seconds": packed_seconds}  # fmt: skip


def markdown(rows: list[dict], same: dict | None) -> str:
    head = "| model | runs | MPS | tokens/s (all runs) | × one run | s/batch (mean) | peak mem. (GiB) |"
    lines = [head, "|---|---:|---|---:|---:|---:|---:|"] if rows else []
    alone = {r["variant"]: r["tokens_per_second"] for r in rows if r["runs"] == 1 and not r["with_mps"]
             and "error" not in r}  # fmt: skip
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['variant']} | {r['runs']} | {r['with_mps']} | {r['error']} | | | |")
            continue
        gain = f"{r['tokens_per_second'] / alone[r['variant']]:.2f}" if r["variant"] in alone else "—"
        lines.append(f"| {r['variant']} | {r['runs']} | {r['mps']} | {r['tokens_per_second']:,.0f} | {gain} | "
                     f"{r['seconds_per_batch']:.4f} | {r['peak_memory_bytes'] / 2**30:.2f} |")  # fmt: skip
    if same:
        lines += ["" if lines else None, f"Bit-identity ({same['batches']} batches, seeds {same['seeds']}): "
                  + ", ".join(f"seed {r['seed']}: {r.get('identical', r.get('error'))}" for r in same["runs"])
                  + f"; all identical: {same['all_identical']}"]  # fmt: skip
    return "\n".join(line for line in lines if line is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, help="folder with ptb/ (and wikitext-2/)")
    parser.add_argument("--dataset", default="ptb", choices=sorted(CORPUS_DIRS), help="the table's dataset")
    parser.add_argument("--bench-dir", default=None, help="keep each bench JSON here (for costs --bench)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    runs = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--softmax-runs", type=runs, default=[1, 2, 4, 8], help="K of the Softmax rows")
    parser.add_argument("--mos-runs", type=runs, default=[1, 4], help="K of the MoS rows")
    parser.add_argument("--batches", type=int, default=60, help="timed batches per run (default 60)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--identity-batches", type=int, default=300)
    parser.add_argument("--identity-runs", type=int, default=4)
    parser.add_argument("--identity-seeds", type=lambda s: [int(x) for x in s.split(",")], default=[141, 7])
    parser.add_argument("--skip", default="", help="comma-separated: table, identity")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per bench run (default: torch's)")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, to check the script on any device")
    args = parser.parse_args(argv)
    toy = []
    if args.smoke:
        toy = ["--set", "nemb=8", "--set", "nhid=8", "--set", "nhidlast=8"]
        args.softmax_runs, args.mos_runs, args.batches, args.warmup = args.softmax_runs[:2], args.mos_runs[-1:], 2, 1
        args.identity_batches, args.identity_runs = 3, 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"device": args.device, "smoke": args.smoke}
    with tempfile.TemporaryDirectory(prefix="packing-") as tmp:
        lock_dir = Path(tmp) / "locks"
        lock_dir.mkdir(mode=0o700)
        if "table" not in args.skip:
            result["table"] = packing_table(args, toy + (["--set", "n_experts=2"] if args.smoke else []), lock_dir)
            print("packing table done", flush=True)
        if "identity" not in args.skip:
            work = Path(tmp) / "identity"
            work.mkdir()
            result["identity"] = identity(args, toy, work)
    (out / "packing.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result.get("table", []), result.get("identity"))
    (out / "packing.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
