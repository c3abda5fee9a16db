"""Benchmark the singular-value methods of ``softmax_bottleneck.analysis.svd_stream`` on a PTB-size log-P-like matrix.

Builds an ``--rows × --cols`` float32 matrix (default 82,429 × 10,000, the PTB test log-P matrix) as the
log-softmax of low-rank-plus-noise logits::

    L = H Wᵀ + E D,   A = L − logsumexp(L) 1ᵀ,    H ~ N(0, 1)^{m×r}, W ~ N(0, s²/r)^{n×r}, E ~ N(0, 1)^{m×n},

with D diagonal, geometric from ``--noise-hi`` to ``--noise-lo`` over the columns: a rank-(r + 1) part plus a
column-decaying full-rank part, so Press' rank lands strictly between r + 1 and n. The matrix is written in
chunks to a ``.npy`` in ``--workdir`` (never built in one piece), then every method runs in its own
subprocess, so that each peak-memory figure is that method's alone: the worker's own high-water mark
(``cluster.processes.peak_resident_bytes``; not ``ru_maxrss``, which on Linux carries over the peak of the parent
that wrote the matrix), ``torch.cuda.max_memory_allocated`` on CUDA:

* ``numpy``: ``numpy.linalg.svd(A, compute_uv=False)`` on the float32 matrix, what the reference code does
  (float64 inside, float32 singular values out); the reference of the error column;
* ``exact``, ``gram``, ``tsqr``: :class:`softmax_bottleneck.analysis.rank.RankStream`, fed ``--chunk-rows`` rows
  at a time read from the file (not memory-mapped, so RSS counts only what the method holds), on CPU and,
  when available, CUDA.

Seconds (wall and CPU = user + system of the worker) include reading the matrix from the (page-cached) file;
on a shared or oversubscribed machine the CPU seconds are the more stable figure (``--threads 1`` avoids
multi-threaded BLAS collapsing under contention). The error column is the maximum relative
difference to numpy's singular values over those above the Press threshold (numpy's are float32, so ~6e-8 is
the floor). Prints a markdown table. Usage::

    python benchmarks/rank_methods.py                       # full PTB size (slow on few cores)
    python benchmarks/rank_methods.py --rows 8000 --cols 2000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
METHODS = ("numpy", "gram", "exact", "tsqr")


# ----------------------------------------------------------------------------------------------------------------
# the matrix
# ----------------------------------------------------------------------------------------------------------------


def build_matrix(path: Path, rows: int, cols: int, rank: int, scale: float, hi: float, lo: float, seed: int) -> None:
    rng = np.random.default_rng([seed, 0])
    w = rng.standard_normal((cols, rank)) * (scale / math.sqrt(rank))
    d = np.geomspace(hi, lo, cols)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, cols))
    step = 2048
    for i, start in enumerate(range(0, rows, step)):
        r = min(step, rows - start)
        crng = np.random.default_rng([seed, 1, i])
        logits = crng.standard_normal((r, rank)) @ w.T
        logits += crng.standard_normal((r, cols)) * d
        mx = logits.max(axis=1, keepdims=True)
        logits -= mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True))
        out[start : start + r] = logits
    out.flush()
    del out


def _data_offset(path: Path) -> tuple[int, tuple[int, int]]:
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
        assert dtype == np.float32 and len(shape) == 2
        return fh.tell(), shape


# ----------------------------------------------------------------------------------------------------------------
# one method (subprocess)
# ----------------------------------------------------------------------------------------------------------------


def worker(method: str, device: str, matrix: Path, chunk_rows: int, out_sv: Path) -> dict:
    from softmax_bottleneck.cluster import processes

    offset, (m, n) = _data_offset(matrix)
    cuda = device.startswith("cuda")
    torch = None
    if method != "numpy":
        import torch  # noqa: F401  (imported before timing)

        from softmax_bottleneck.analysis.rank import RankStream

        if cuda:
            torch.cuda.init()
            torch.cuda.reset_peak_memory_stats()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage0.ru_utime + usage0.ru_stime
    t0 = time.perf_counter()
    if method == "numpy":
        a = np.load(matrix)
        sv = np.linalg.svd(a, compute_uv=False)
        del a
    else:
        # budget irrelevant: the method is forced
        stream = RankStream(n, method, device=device)
        with open(matrix, "rb") as fh:
            fh.seek(offset)
            done = 0
            while done < m:
                r = min(chunk_rows, m - done)
                chunk = np.fromfile(fh, dtype=np.float32, count=r * n).reshape(r, n)
                stream.update(torch.from_numpy(chunk).to(device) if cuda else chunk)
                done += r
        sv, _ = stream.finish()
        if cuda:
            torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    np.save(out_sv, np.asarray(sv))
    res = {
        "method": method,
        "device": device,
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu0,
        "peak_rss_gib": processes.peak_resident_bytes() / 2**30,
        "shape": [m, n],
    }
    if cuda:
        res["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return res


# ----------------------------------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------------------------------


def _press(sv: np.ndarray, m: int, n: int) -> tuple[int, float]:
    eps = float(np.finfo(np.float32).eps)
    tol = 0.5 * math.sqrt(m + n + 1) * float(sv[0]) * eps
    return int(np.count_nonzero(sv > tol)), tol


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=82429)
    p.add_argument("--cols", type=int, default=10000)
    p.add_argument("--rank", type=int, default=400, help="rank of the low-rank logit part (default 400 = d)")
    p.add_argument("--logit-scale", type=float, default=3.0, help="std of the low-rank logits (default 3)")
    p.add_argument("--noise-hi", type=float, default=1e-1)
    p.add_argument("--noise-lo", type=float, default=1e-7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk-rows", type=int, default=2048, help="rows per streamed chunk (default 2048)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {METHODS}")
    p.add_argument("--devices", default="auto", help="comma list (cpu,cuda) or auto = cpu + cuda when available")
    p.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP threads per method (default: library's)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per method (skip the rest of it)")
    p.add_argument("--workdir", type=Path, default=None, help="where the matrix goes (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the matrix file")
    # internal: one method in a subprocess
    p.add_argument("--worker", nargs=4, metavar=("METHOD", "DEVICE", "MATRIX", "OUT_SV"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        method, device, matrix, out_sv = args.worker
        print(json.dumps(worker(method, device, Path(matrix), args.chunk_rows, Path(out_sv))))
        return 0

    devices = args.devices.split(",")
    if args.devices == "auto":
        import torch

        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    methods = [m for m in args.methods.split(",") if m]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="rank_methods_"))
    workdir.mkdir(parents=True, exist_ok=True)
    matrix = workdir / f"logp_{args.rows}x{args.cols}.npy"

    t0 = time.perf_counter()
    build_matrix(matrix, args.rows, args.cols, args.rank, args.logit_scale, args.noise_hi, args.noise_lo, args.seed)
    print(
        f"built {args.rows}×{args.cols} float32 ({args.rows * args.cols * 4 / 2**30:.2f} GiB) in "
        f"{time.perf_counter() - t0:.1f}s",
        file=sys.stderr,
        flush=True,
    )

    runs = [("numpy", "cpu")] if "numpy" in methods else []
    runs += [(m, d) for d in devices for m in methods if m != "numpy"]
    results, svs = [], {}
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if args.threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.threads)
    for method, device in runs:
        out_sv = workdir / f"sv_{method}_{device}.npy"
        cmd = [sys.executable, str(HERE), "--chunk-rows", str(args.chunk_rows), "--worker"]
        cmd += [method, device, str(matrix), str(out_sv)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            print(f"{method}/{device}: timed out after {args.timeout}s", file=sys.stderr, flush=True)
            results.append({"method": method, "device": device, "seconds": float("inf")})
            continue
        if proc.returncode != 0:
            print(f"{method}/{device} failed:\n{proc.stderr}", file=sys.stderr, flush=True)
            continue
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        svs[(method, device)] = np.load(out_sv).astype(np.float64)
        results.append(res)
        pr, _ = _press(svs[(method, device)], args.rows, args.cols)
        print(f"{method}/{device}: {res['seconds']:.1f}s, Press rank {pr}", file=sys.stderr, flush=True)

    ref_key = ("numpy", "cpu") if ("numpy", "cpu") in svs else next((k for k in svs if k[0] == "tsqr"), None)
    ref = svs.get(ref_key)
    ref_name = ref_key[0] if ref_key else "numpy"
    lines = [
        f"Matrix {args.rows:,} × {args.cols:,} float32 (log-softmax of rank-{args.rank} logits + column-decaying "
        f"noise {args.noise_hi:g}…{args.noise_lo:g}); {os.cpu_count()} CPU cores, "
        f"threads: {args.threads or 'library default'}; load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        f"| method | device | wall s | CPU s | peak memory | Press rank | max rel. err. vs {ref_name} (σ>tol) |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for res in results:
        key = (res["method"], res["device"])
        if key not in svs:
            lines.append(f"| {key[0]} | {key[1]} | timed out (> {args.timeout:g}) | | | | |")
            continue
        sv = svs[key]
        pr, _ = _press(sv, args.rows, args.cols)
        err = "—"
        if ref is not None and key != ref_key:
            _, tol = _press(ref, args.rows, args.cols)
            k = ref > tol
            k_sv = min(int(k.sum()), sv.size)
            err = f"{np.max(np.abs(sv[:k_sv] - ref[:k_sv]) / ref[:k_sv]):.1e}"
        mem = f"{res['peak_rss_gib']:.2f} GiB RSS"
        if "peak_cuda_gib" in res:
            mem += f", {res['peak_cuda_gib']:.2f} GiB CUDA"
        cpu = f"{res['cpu_seconds']:.1f}"
        lines.append(f"| {key[0]} | {key[1]} | {res['seconds']:.1f} | {cpu} | {mem} | {pr:,} | {err} |")
    print("\n".join(lines), flush=True)

    if not args.keep:
        for f in workdir.glob("*.npy"):
            f.unlink()
        if args.workdir is None:
            workdir.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
