"""This machine's float64 matrix-product speed, the floor of the streamed Gram method, and the n×n eigen-reduction.

Measures (best of ``--repeats``, wall seconds, after one warm-up):

* ``gemm``: a ``--size``² float64 product, ``torch.mm`` (MKL) and ``numpy`` (OpenBLAS): ``2·s³`` flops;
* ``gram``: the Gram update ``G += CᵀC`` of a chunk ``C`` of ``b`` rows × ``--cols`` columns, for each ``b`` in
  ``--chunks``: ``torch.addmm_`` (a full GEMM, ``2·b·n²`` flops), OpenBLAS ``dsyrk`` (scipy) and MKL ``dsyrk``
  through :func:`softmax_bottleneck.analysis.svd_stream.syrk_update` (the lower triangle only, ``b·n²`` flops).
  The speed column counts the flops the method needs (``b·n²`` for ``syrk``, ``2·b·n²`` for a GEMM) so that it
  compares with ``gemm``; "useful" GFLOP/s (``b·n²`` in both cases) say what a row of the Gram costs;
* ``eig``: eigenvalues only of an ``--eig-size``² symmetric matrix: ``torch.linalg.eigvalsh`` (MKL ``syevd``, copies
  its input) and ``scipy.linalg.eigh(eigvals_only=True, overwrite_a=True, check_finite=False)`` with the
  ``evr``/``evd``/``ev`` drivers (OpenBLAS, in place), with ``(4/3)·n³`` flops the reference count.

Prints one JSON object per line and, at the end, a summary object. Usage::

    python benchmarks/gemm_speed.py                   # 4096² GEMM, Gram chunks 1024..8192 at n = 10,000
    python benchmarks/gemm_speed.py --eig-size 4000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))


WARMUP = True


def best(fn, repeats: int) -> float:
    if WARMUP:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=10000)
    ap.add_argument("--chunks", default="1024,4096,8192")
    ap.add_argument("--eig-size", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: gemm,gram,eig")
    ap.add_argument("--gram-variants", default="addmm,syrk,blocked", help="which Gram updates to time")
    ap.add_argument("--no-warmup", action="store_true", help="time the first call too (large sizes)")
    args = ap.parse_args(argv)
    global WARMUP
    WARMUP = not args.no_warmup
    import scipy.linalg
    import torch

    from softmax_bottleneck.analysis.svd_stream import blas_syrk_update, syrk_update

    skip = set(filter(None, args.skip.split(",")))
    out = {"threads_torch": torch.get_num_threads(), "load_before": load()}
    rng = np.random.default_rng(0)
    if "gemm" not in skip:
        s = args.size
        a = torch.from_numpy(rng.standard_normal((s, s)))
        b = torch.from_numpy(rng.standard_normal((s, s)))
        t = best(lambda: torch.mm(a, b), args.repeats)
        out["gemm_torch_gflops"] = 2 * s**3 / t / 1e9
        an, bn = a.numpy(), b.numpy()
        t = best(lambda: an @ bn, args.repeats)
        out["gemm_numpy_gflops"] = 2 * s**3 / t / 1e9
        print(json.dumps({"part": "gemm", "size": s, **{k: v for k, v in out.items() if k.startswith("gemm")}}))
        del a, b, an, bn
    if "gram" not in skip:
        n = args.cols
        g = torch.zeros((n, n), dtype=torch.float64)
        gn = g.numpy()
        for bsz in map(int, args.chunks.split(",")):
            c = torch.from_numpy(rng.standard_normal((bsz, n)))
            flops = bsz * n * n
            cn = c.numpy()
            variants = args.gram_variants.split(",")
            row = {"part": "gram", "cols": n, "chunk_rows": bsz, "load": load()}
            if "addmm" in variants:
                t = best(lambda c=c: g.addmm_(c.T, c), args.repeats)
                row.update(addmm_s=t, addmm_gflops=2 * flops / t / 1e9, addmm_useful_gflops=flops / t / 1e9)
            if "syrk" in variants:
                t = best(lambda cn=cn: blas_syrk_update(gn, cn), args.repeats)
                row.update(openblas_syrk_s=t, openblas_syrk_gflops=flops / t / 1e9)
            if "blocked" in variants:
                t = best(lambda c=c: syrk_update(g, c), args.repeats)
                row.update(blocked_s=t, blocked_gflops=flops / t / 1e9)
            print(json.dumps(row), flush=True)
            out.setdefault("gram", []).append(row)
        del g, gn
    if "eig" not in skip:
        n = args.eig_size
        x = rng.standard_normal((n, n))
        sym = x @ x.T
        flops = 4 / 3 * n**3
        t = best(lambda: torch.linalg.eigvalsh(torch.from_numpy(sym)), 1)
        row = {"part": "eig", "n": n, "torch_eigvalsh_s": t, "torch_gflops": flops / t / 1e9}
        for driver in ("evr", "evd", "ev"):

            def run(driver=driver):
                a = np.array(sym, order="F")
                scipy.linalg.eigh(a, eigvals_only=True, overwrite_a=True, check_finite=False, driver=driver)

            t = best(run, 1)
            row[f"scipy_{driver}_s"] = t
            row[f"scipy_{driver}_gflops"] = flops / t / 1e9
        print(json.dumps(row), flush=True)
        out["eig"] = row
    out["load_after"] = load()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
