"""The streamed singular-value methods against a float64 exact SVD on a saved log-P matrix (``analyze --save-logp``).

Reads the ``.npy`` by plain reads (no memory map, so RSS is what each method holds), optionally its first
``--rows`` rows and ``--cols`` columns, and computes, each timed (wall and process CPU seconds):

* ``exact``: ``svd_stream.singular_values_exact`` (LAPACK ``gesdd`` on a float64 copy, overwritten in place);
* each of ``--methods`` (default ``gram``): :class:`softmax_bottleneck.analysis.rank.RankStream`, fed 70-row chunks
  (the row pass's size) from the same file.

Prints one JSON object: per method the seconds, Press' rank, ε-ranks, and the largest relative difference to the
exact σ over those above the exact Press threshold (also over the first 10·(Press rank) and all σ > 1e-7·σ_max).
Usage::

    python benchmarks/exact_check.py /tmp/logp.npy --cols 3000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))


def cpu_seconds() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def read_rows(path, rows=None, cols=None, chunk=70):
    """Yield float32 row chunks ``[r, cols]`` of a C-ordered float32 ``.npy`` without memory-mapping it."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        assert dtype == np.float32 and not fortran and len(shape) == 2
        m, n = shape
        m = min(m, rows or m)
        for start in range(0, m, chunk):
            r = min(chunk, m - start)
            block = np.fromfile(fh, dtype=np.float32, count=r * n).reshape(r, n)
            yield np.ascontiguousarray(block[:, :cols]) if cols else block


def model_rows(args) -> list:
    """The first ``--rows`` log-P rows of ``--checkpoint`` (first ``--cols`` columns) as 70-row float32 chunks; the
    row pass's seconds appended last."""
    import torch

    from softmax_bottleneck.analysis.logp import iter_logp
    from softmax_bottleneck.corpora.corpus import load_corpus
    from softmax_bottleneck.training.checkpoint import load_model

    corpus = load_corpus(args.data, args.corpus_cache)
    model, _ = load_model(args.checkpoint, "cpu", corpus=corpus)
    if args.spread:
        with torch.no_grad():
            model.output_layer.latent.weight.mul_(args.spread)
            model.output_layer.prior.weight.mul_(args.spread)
            model.encoder.weight.mul_(10 * args.spread)
    t0 = time.perf_counter()
    rows = args.rows or len(corpus.test) - 1
    chunks = [lp[:, : args.cols].numpy().copy() for lp, _ in iter_logp(model, corpus.test, rows)]
    return chunks + [time.perf_counter() - t0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("matrix", nargs="?", help=".npy of analyze --save-logp (or give --checkpoint)")
    ap.add_argument("--checkpoint", help="instead of a .npy: a model.pt whose log-P rows are computed here")
    ap.add_argument("--data")
    ap.add_argument("--corpus-cache")
    ap.add_argument(
        "--spread",
        type=float,
        default=0.0,
        help="MoS: scale latent/prior weights by this, the "
        "embedding by 10× it (as tests/test_logp.py: a one-epoch model's logits barely vary)",
    )
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--cols", type=int, default=None)
    ap.add_argument("--methods", default="gram")
    args = ap.parse_args(argv)
    from softmax_bottleneck.analysis.rank import RankStream, rank_summary
    from softmax_bottleneck.analysis.svd_stream import singular_values_exact
    from softmax_bottleneck.cluster import processes

    out = {"matrix": args.matrix or args.checkpoint, "load_before": os.getloadavg()[0]}
    if args.checkpoint:
        chunks = model_rows(args)
        out["seconds_row_pass"] = chunks.pop()
        source = lambda: iter(chunks)  # noqa: E731
    else:
        source = lambda: read_rows(args.matrix, args.rows, args.cols)  # noqa: E731
    a = np.concatenate(list(source()))
    m, n = a.shape
    out["shape"] = [m, n]
    t0, c0 = time.perf_counter(), cpu_seconds()
    ref = singular_values_exact(a)
    out["exact"] = {"seconds": time.perf_counter() - t0, "cpu_seconds": cpu_seconds() - c0,
                    **rank_summary(ref, (m, n), "exact")}  # fmt: skip
    del a
    tol = out["exact"]["tolerance"]
    print(json.dumps({"exact": out["exact"]}), flush=True)
    for method in args.methods.split(","):
        t0, c0 = time.perf_counter(), cpu_seconds()
        stream = RankStream(n, method)
        for chunk in source():
            stream.update(chunk)
        sv, summary = stream.finish()
        res = {"seconds": time.perf_counter() - t0, "cpu_seconds": cpu_seconds() - c0, **summary}
        above = ref > tol
        k = int(above.sum())
        res["max_rel_err_above_tol"] = float(np.max(np.abs(sv[:k] - ref[:k]) / ref[:k]))
        res["rel_err_at_the_last_above_tol"] = float(abs(sv[k - 1] - ref[k - 1]) / ref[k - 1])
        res["smallest_above_tol_over_tol"] = float(ref[k - 1] / tol)
        res["largest_below_tol_over_tol"] = float(ref[k] / tol) if k < ref.size else None
        deep = ref > 1e-7 * ref[0]
        kd = int(deep.sum())
        res["max_rel_err_above_1e-7_sigma_max"] = float(np.max(np.abs(sv[:kd] - ref[:kd]) / ref[:kd]))
        res["same_press_rank"] = summary["press_rank"] == out["exact"]["press_rank"]
        res["same_effective_ranks"] = summary["effective_rank"] == out["exact"]["effective_rank"]
        out[method] = res
        print(json.dumps({method: res}), flush=True)
    out["peak_rss_gib"] = processes.peak_resident_bytes() / 2**30
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
