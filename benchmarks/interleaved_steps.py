"""Batch-interleaved training steps of several variants and loss paths in one process.

On a shared machine, separate processes minutes apart meet different loads; here every round times one
training step (the trainer's own ``train_batch``, at the paper's PTB hyper-parameters, on random tokens of
PTB's sizes, SGD) of each (variant, loss path) in turn, the order rotated each round, with the same sequence
of BPTT lengths for both paths of a variant. Prints the median wall and process-CPU seconds per batch and the
MoS/Softmax ratio per path. Usage::

    python benchmarks/interleaved_steps.py --threads 2 --rounds 10
    python benchmarks/interleaved_steps.py --variants softmax mos --paths nll --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=["softmax", "lms_plif", "mos", "moc"], help="variants")
    parser.add_argument("--paths", nargs="+", default=["nll", "full"], choices=["nll", "full"], help="loss paths")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (the median is reported)")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from softmax_bottleneck import presets
    from softmax_bottleneck.corpora.corpus import batchify
    from softmax_bottleneck.models.awd_lstm import AWDLSTM
    from softmax_bottleneck.training import bench
    from softmax_bottleneck.training.schedule import make_optimizer
    from softmax_bottleneck.training.state import seed_everything
    from softmax_bottleneck.training.step import LossSums, train_batch

    torch.set_num_threads(args.threads)
    corpus = bench.synthetic_corpus("ptb")
    runs = {}
    for variant in args.variants:
        hp = presets.resolve("ptb", variant, "et")
        seed_everything(hp["seed"])
        model = AWDLSTM(corpus.vocab_size, hp)
        data = batchify(corpus.train, hp["batch_size"])
        chunks = hp["batch_size"] // hp["small_batch_size"]
        for path in args.paths:
            runs[variant, path] = {
                "hp": hp, "model": model, "optimizer": make_optimizer(model, hp, "sgd"), "data": data,
                "hidden": [model.init_hidden(hp["small_batch_size"]) for _ in range(chunks)],
                "sums": LossSums(torch.device("cpu")), "position": 0, "wall": [], "cpu": [], "rows": [],
            }  # fmt: skip

    def step(run: dict, path: str) -> None:
        if run["position"] >= run["data"].size(0) - 2:
            run["position"] = 0
        np.random.seed(len(run["wall"]))  # the same BPTT lengths for both paths of a variant
        wall, cpu = time.perf_counter(), time.process_time()
        rows = train_batch(run["model"], run["optimizer"], run["hp"], run["data"], run["position"], run["hidden"],
                           run["sums"], path)  # fmt: skip
        run["sums"].read()
        run["wall"].append(time.perf_counter() - wall)
        run["cpu"].append(time.process_time() - cpu)
        run["rows"].append(rows)
        run["position"] += rows

    for (_, path), run in runs.items():  # warm-up, not counted
        step(run, path)
        for key in ("wall", "cpu", "rows"):
            run[key].clear()
    load_before = os.getloadavg()
    for r in range(args.rounds):
        keys = list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]
        for key in keys:
            step(runs[key], key[1])
    loads = [" ".join(f"{x:.2f}" for x in load) for load in (load_before, os.getloadavg())]
    print(f"load average {loads[0]} before, {loads[1]} after; {args.threads} threads, {args.rounds} rounds\n")
    print("| variant | path | wall s/batch (median) | CPU s/batch (median) | mean BPTT length |")
    print("|---|---|---:|---:|---:|")
    median = {}
    for (variant, path), run in runs.items():
        median[variant, path] = statistics.median(run["wall"])
        print(f"| {variant} | {path} | {median[variant, path]:.3f} | {statistics.median(run['cpu']):.3f} "
              f"| {statistics.mean(run['rows']):.1f} |")  # fmt: skip
    for path in args.paths:
        if ("mos", path) in median and ("softmax", path) in median:
            print(f"\nMoS / Softmax, {path} path: {median['mos', path] / median['softmax', path]:.2f} (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
