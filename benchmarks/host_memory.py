"""What keeping freed host memory (``training/host_memory.py``) saves a CPU training step: the trainer's own step
(``bench``'s :func:`measure`) in a fresh process each, glibc's default (freed blocks given back to the kernel) beside
the training commands' setting (kept for reuse), at the small scale's model (``config/small.yaml``'s
``model_overrides``) and at the paper's PTB model. Prints a Markdown table: seconds per batch, the process's system
time and minor page faults, its peak resident memory::

    python benchmarks/host_memory.py --data-root ../shared/data
    python benchmarks/host_memory.py --data-root ../shared/data --models small/ptb,small/wt2 --batches 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

#: the small scale's model and data limits: config/small.yaml's model_overrides (all, then the Softmax family's)
SMALL = {**(_small := yaml.safe_load((REPO / "config" / "small.yaml").read_text())["model_overrides"])["all"],
         **_small["families"]["softmax"]}  # fmt: skip
#: name -> (dataset, hyper-parameter overrides)
MODELS = {"small/ptb": ("ptb", SMALL), "small/wt2": ("wt2", SMALL), "paper/ptb": ("ptb", {})}
DATA_DIRS = {"ptb": "ptb", "wt2": "wikitext-2"}

#: one measurement in a fresh process: argv[1] the options of measure() as JSON, argv[2] "kept" or "given back"
ONE = """
import json, resource, sys, torch
from softmax_bottleneck.cluster import processes
from softmax_bottleneck.training.bench import measure
from softmax_bottleneck.training.host_memory import keep_freed_host_memory
opts = json.loads(sys.argv[1])
if sys.argv[2] == "kept":
    assert keep_freed_host_memory(torch.device("cpu"))
result = measure(opts)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s/batch": result["seconds_per_batch"], "sys s": usage.ru_stime, "page faults": usage.ru_minflt,
                  "peak GB": processes.peak_resident_bytes() / 1e9}))
"""


def measure_in_a_process(opts: dict, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", ONE, json.dumps(opts), mode], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{opts['dataset']} ({mode}): {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, help="folder holding ptb/ and wikitext-2/")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--batches", type=int, default=30, help="timed steps per measurement")
    args = parser.parse_args(argv)
    print("| model | freed blocks | s/batch | sys s | page faults | peak GB |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.models.split(","):
        dataset, overrides = MODELS[name]
        opts = {"dataset": dataset, "variant": "softmax", "overrides": overrides, "corpus_cache": None,
                "data": str(Path(args.data_root) / DATA_DIRS[dataset]), "batches": args.batches, "warmup": 3,
                "valid_chunks": 1, "device": "cpu", "phase": "sgd", "threads": 1}  # fmt: skip
        for mode in ("given back", "kept"):
            r = measure_in_a_process(opts, mode)
            print(f"| {name} | {mode} | {r['s/batch']:.4f} | {r['sys s']:.1f} | {r['page faults']:,} | "
                  f"{r['peak GB']:.2f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
