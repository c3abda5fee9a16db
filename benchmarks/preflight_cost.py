"""What the preflight (training/preflight.py) adds to the start of a paper-size run: its wall time per model.

Builds each model at the preset's paper hyper-parameters on the real corpus, as ``train`` does, and times
:func:`~softmax_bottleneck.training.preflight.preflight` alone (every shape and mode the run meets, once). Prints a
Markdown table::

    python benchmarks/preflight_cost.py --data-root ../shared/data --device cpu
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import batchify, load_corpus
from softmax_bottleneck.corpora.download import CORPUS_DIRS
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.training.preflight import preflight, run_shapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, type=Path, help="folder holding ptb/ and wikitext-2/")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="ptb:softmax,ptb:mos", help="dataset:variant,... (default: %(default)s)")
    args = parser.parse_args(argv)
    print(f"`python benchmarks/preflight_cost.py --device {args.device} --models {args.models}`, {platform.node()}, "
          f"{os.cpu_count()} cores, load average before {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}\n")  # fmt: skip
    print("| model | shapes | preflight s |\n|---|---:|---:|")
    for item in args.models.split(","):
        dataset, variant = item.split(":")
        corpus = load_corpus(args.data_root / CORPUS_DIRS[dataset], dataset=dataset)
        hp = presets.resolve(dataset, variant, "et", {})
        torch.manual_seed(hp["seed"])
        model = AWDLSTM(corpus.vocab_size, hp).to(args.device)
        sizes = (("train", "batch_size"), ("valid", "eval_batch_size"), ("test", "test_batch_size"))
        data = [batchify(getattr(corpus, split), hp[size]).to(args.device) for split, size in sizes]
        shapes = run_shapes(hp, *(d.size(0) for d in data))
        started = time.monotonic()
        preflight(model, hp, *data)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        print(f"| {dataset} {variant} | {len(shapes)} | {time.monotonic() - started:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
