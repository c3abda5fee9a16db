"""The authors' way of getting the log-P matrix's rank, re-implemented on this package's model, for comparison.

What the reference code (awd-lstm-lmkit, ``utils/main.py``: ``get_matrices`` and ``calc_rank``) does: the test split
at batch size 1 in chunks of ``bptt`` rows, hidden state carried; the whole float32 matrix grown in memory by one
``torch.cat((all, log_prob))`` per chunk (each one copies everything so far: ``O(m²·n / bptt)`` bytes moved in
all); WT2 stops after the chunk that makes rows > columns; then one ``numpy.linalg.svd(A, compute_uv=False)`` of the
float32 matrix (float32 singular values) and Press' rank with ``eps`` of their dtype. Here the same steps run on
this package's model (``load_model``; the same weights as ``analyze``), so the row pass costs the same and the
difference is the growth and the factorisation.

Prints JSON lines: a growth line every ``--report-every`` chunks (rows so far, seconds, rows/s over the last
interval, seconds of the last ``torch.cat``), then the SVD's seconds, Press' rank, the ε-ranks and the process's
peak RSS. ``--cat-probe R1,R2,...`` times one ``torch.cat`` of a 70-row chunk onto an R-row float32 matrix without
a model (the growth term alone), and ``--no-svd`` stops after the rows. Usage::

    python benchmarks/authors_logp.py --checkpoint MODEL.pt --data DIR --corpus-cache FILE.pt --rows 82429
    python benchmarks/authors_logp.py --cat-probe 7000,14000,28000,56000,82429 --cols 10000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))


def peak_rss_gib() -> float:
    from softmax_bottleneck.cluster import processes

    return processes.peak_resident_bytes() / 2**30


def press_rank_float32(sv: np.ndarray, m: int, n: int) -> int:
    """The reference's ``press_rank``: ``eps`` of the singular values' dtype (float32), strictly greater."""
    tol = 0.5 * np.sqrt(m + n + 1) * sv[0] * np.finfo(sv.dtype).eps
    return int(np.count_nonzero(sv > tol))


def cat_probe(rows_list, cols: int, bptt: int = 70, repeats: int = 3) -> None:
    import torch

    chunk = torch.zeros((bptt, cols), dtype=torch.float32)
    for rows in rows_list:
        big = torch.ones((rows, cols), dtype=torch.float32)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = torch.cat((big, chunk))
            best = min(best, time.perf_counter() - t0)
            del out
        gb = rows * cols * 4 / 1e9
        print(json.dumps({"cat_probe_rows": rows, "seconds": best, "gb_copied": gb, "gb_per_s": gb / best,
                          "load": os.getloadavg()[0]}), flush=True)  # fmt: skip
        del big


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint")
    ap.add_argument("--data")
    ap.add_argument("--corpus-cache")
    ap.add_argument("--rows", default="full", help="full, reference (WT2's stop rule) or a number")
    ap.add_argument("--report-every", type=int, default=50, help="chunks between growth lines")
    ap.add_argument("--no-svd", action="store_true")
    ap.add_argument("--cat-probe", default=None)
    ap.add_argument("--cols", type=int, default=10000)
    args = ap.parse_args(argv)
    import torch

    if args.cat_probe:
        cat_probe([int(r) for r in args.cat_probe.split(",")], args.cols)
        return 0

    from softmax_bottleneck.corpora.corpus import batchify, get_batch, load_corpus
    from softmax_bottleneck.training.checkpoint import load_model

    corpus = load_corpus(args.data, args.corpus_cache)
    model, meta = load_model(args.checkpoint, "cpu", corpus=corpus)
    model.eval()
    bptt = model.hp["bptt"]
    data = batchify(corpus.test, 1)
    limit = None if args.rows in ("full", "reference") else int(args.rows)
    reference_stop = args.rows == "reference" and meta["dataset"] == "wt2"
    log_prob_all = torch.zeros((0, model.vocab_size), dtype=torch.float32)
    hidden = model.init_hidden(1)
    started = last_t = time.perf_counter()
    last_rows, chunks, t_cat = 0, 0, 0.0
    with torch.no_grad():
        for i in range(0, data.size(0) - 1, bptt):
            inputs, _ = get_batch(data, i, bptt)
            log_prob, hidden, _, _ = model(inputs, hidden)
            t0 = time.perf_counter()
            log_prob_all = torch.cat((log_prob_all, log_prob[:, 0, :].float()))  # the whole matrix, copied again
            t_cat = time.perf_counter() - t0
            chunks += 1
            rows = log_prob_all.size(0)
            if chunks % args.report_every == 0:
                now = time.perf_counter()
                print(json.dumps({"rows": rows, "seconds": now - started,
                                  "rows_per_s_interval": (rows - last_rows) / (now - last_t), "last_cat_s": t_cat,
                                  "peak_rss_gib": peak_rss_gib(), "load": os.getloadavg()[0]}), flush=True)  # fmt: skip
                last_rows, last_t = rows, now
            if reference_stop and rows > log_prob_all.size(1):
                break
            if limit is not None and rows >= limit:
                break
    if limit is not None:
        log_prob_all = log_prob_all[:limit]
    m, n = log_prob_all.shape
    seconds_rows = time.perf_counter() - started
    result = {"shape": [m, n], "seconds_rows": seconds_rows, "rows_per_s": m / seconds_rows,
              "peak_rss_gib_rows": peak_rss_gib()}  # fmt: skip
    if not args.no_svd:
        from softmax_bottleneck.analysis.rank import effective_ranks

        t0 = time.perf_counter()
        sv = np.linalg.svd(log_prob_all.cpu().numpy(), compute_uv=False)
        result["seconds_svd"] = time.perf_counter() - t0
        result["press_rank"] = press_rank_float32(sv, m, n)
        result["effective_rank"] = effective_ranks(sv.astype(np.float64))
        result["sigma_max"] = float(sv[0])
    result["seconds"] = time.perf_counter() - started
    result["peak_rss_gib"] = peak_rss_gib()
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
