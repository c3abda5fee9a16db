"""Robustness of Press' rank (SM §5, Algorithms 1 and 2): SM Tables 14-16.

:func:`robustness_reconstruction` (Algorithm 1) and :func:`robustness_noise` (Algorithm 2) on the first rows of a
saved log-P matrix, and the ``robustness`` command that writes both as one CSV.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Iterable

import numpy as np

from softmax_bottleneck.analysis import svd_stream
from softmax_bottleneck.analysis.inputs import InputError, load_matrix, report, resolve_device, write_error
from softmax_bottleneck.analysis.outputs import OutputError, check_writable
from softmax_bottleneck.analysis.rank import EPSILONS, effective_ranks, press_rank
from softmax_bottleneck.analysis.svd_stream import singular_values_exact
from softmax_bottleneck.argtypes import positive_float, positive_int
from softmax_bottleneck.atomic import atomic_path
from softmax_bottleneck.cluster.signals import stop_on_signals

log = logging.getLogger(__name__)

#: c values of SM Table 15 (union of its three sub-tables), largest first
SM_TABLE15_CS: tuple[float, ...] = (
    1e-2,
    1e-4,
    1e-8,
    1e-16,
    1e-20,
    1e-21,
    1e-22,
    1e-23,
    1e-24,
    1e-25,
    1e-26,
    1e-28,
    1e-32,
)


# --------------------------------------------------------------------------------------------------------------
# E12: robustness of Press' rank (SM §5, Algorithms 1 and 2)
# --------------------------------------------------------------------------------------------------------------


def _svd_full(a, device: str = "cpu"):
    """Thin float64 SVD ``(U, σ, Vᵀ)``: scipy ``gesdd`` on CPU (numpy arrays), ``torch.linalg.svd`` on CUDA."""
    if svd_stream.is_cuda(device):
        torch = svd_stream.torch_module()
        return torch.linalg.svd(a, full_matrices=False)
    import scipy.linalg

    return scipy.linalg.svd(a, full_matrices=False, check_finite=False, lapack_driver="gesdd")


def _as_f64(A, device: str):
    if svd_stream.is_cuda(device):
        torch = svd_stream.torch_module()
        a = A if svd_stream.is_tensor(A) else np.asarray(A)
        return torch.as_tensor(a).to(device=device, dtype=torch.float64)
    if svd_stream.is_tensor(A):
        A = A.detach().cpu().numpy()
    return np.asarray(A, dtype=np.float64)


def _fro(x) -> float:
    if svd_stream.is_tensor(x):
        return float(svd_stream.torch_module().linalg.norm(x))
    return float(np.linalg.norm(x))


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if svd_stream.is_tensor(x) else np.asarray(x)


def svd_reconstruction(A, k: int = 10, device: str = "cpu"):
    """``(B, σ)`` from one float64 SVD of A: ``B = U_k diag(σ_1..σ_k) V_kᵀ`` (all but the top-k singular values set to
    0; a numpy array on CPU, a CUDA tensor for ``device="cuda[:i]"``) and A's singular values σ (numpy)."""
    u, s, vt = _svd_full(_as_f64(A, device), device)
    return (u[:, :k] * s[:k]) @ vt[:k], _np(s)


def rank_k_reconstruction(A, k: int = 10, device: str = "cpu"):
    """Float64 ``U_k diag(σ_1..σ_k) V_kᵀ``: the SVD of A with all but the top-k singular values set to 0
    (:func:`svd_reconstruction`)."""
    return svd_reconstruction(A, k, device)[0]


def robustness_reconstruction(
    A, k: int = 10, iterations: int = 10, device: str = "cpu", *, reconstruction=None
) -> list[tuple[int, int, float]]:
    """SM Algorithm 1 (SM Table 14): rank-k reconstruction, then ``iterations`` times SVD + full reconstruction.

    ``A_0`` = rank-k reconstruction of ``A`` (float64). Iteration i computes the SVD of ``A_{i-1}``, reports the
    Press rank of those singular values (shape of A) and reconstructs ``A_i = U diag(σ) Vᵀ`` with *all*
    singular values. Returns ``[(i, press_rank, error_i)]`` with ``error_i = ‖A_i − A_{i-1}‖_F``, the float64
    Frobenius norm of the difference between successive reconstructions (our choice). The paper states neither
    its error metric nor its precision: float64 round-off alone makes this norm of order ``1e-16·‖A‖_F`` times a
    modest factor, far above the paper's ~1e-28, so only the constant rank (k at every iteration) and a slowly
    growing error are comparable. ``reconstruction``: A's rank-k reconstruction where the caller has it.
    """
    started = time.monotonic()
    prev = rank_k_reconstruction(A, k, device) if reconstruction is None else reconstruction
    shape = tuple(prev.shape)
    out = []
    for i in range(1, iterations + 1):
        u, s, vt = _svd_full(prev, device)
        cur = (u * s) @ vt
        del u, vt
        err = _fro(cur - prev)
        out.append((i, press_rank(_np(s), shape), err))
        prev = cur
        log.info("Algorithm 1: iteration %d of %d, Press' rank %d (%.0fs)", i, iterations, out[-1][1],
                 time.monotonic() - started)  # fmt: skip
    return out


def robustness_noise(
    A, k: int = 10, cs: Iterable[float] = SM_TABLE15_CS, seed: int = 0, device: str = "cpu", *, reconstruction=None
) -> list[dict]:
    """SM Algorithm 2 (SM Tables 15, 16): rank-k reconstruction of A plus i.i.d. Gaussian noise of std ``c / n²``.

    n = number of columns of A (10,000 in the paper, square matrix). One standard-normal matrix Z (float64,
    ``numpy.random.default_rng(seed)``, the same on every device) is drawn and scaled per c, so the sweep differs
    only in the scale. For each c returns ``{"c", "press_rank", "effective_rank": {ε: k}, "error"}`` with
    ``error = ‖(B + sZ) − B‖_F`` as realised in float64 (0 when the noise is rounded away entirely).

    Qualitative only: the paper does not say whether c/n² is the std or the variance, nor the
    precision, and its threshold c between rank 10 and full rank cannot be reconciled with a float64 matrix with
    the σ_max of a real log-P matrix. What carries over: full rank for large c, exactly k once the noise is
    rounded away against the entries, a steep transition in between, and ε-effective ranks that stay ≤ k while the
    noise holds less than a fraction ε of the energy. ``reconstruction``: A's rank-k reconstruction where the caller
    has it.
    """
    b = rank_k_reconstruction(A, k, device) if reconstruction is None else reconstruction
    shape = tuple(b.shape)
    n = shape[1]
    z = _as_f64(np.random.default_rng(seed).standard_normal(shape), device)
    out, cs, started = [], list(cs), time.monotonic()
    for i, c in enumerate(cs, 1):
        std = float(c) / float(n) ** 2
        noisy = b + std * z
        err = _fro(noisy - b)
        sv = singular_values_exact(noisy, device)
        del noisy
        out.append(
            {"c": float(c), "press_rank": press_rank(sv, shape), "effective_rank": effective_ranks(sv), "error": err}
        )
        log.info("Algorithm 2: c = %g (%d of %d), Press' rank %d (%.0fs)", c, i, len(cs), out[-1]["press_rank"],
                 time.monotonic() - started)  # fmt: skip
    return out


def add_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Robustness of Press' rank (SM §5, Tables 14-16): Algorithm 1 (repeated SVD and reconstruction of a rank-k "
        "matrix) and Algorithm 2 (rank-k matrix plus Gaussian noise of scale c/n²) on the first rows of a .npy matrix."
    )
    parser.add_argument("matrix", metavar="FILE.npy", help="log-P matrix (the paper: PTB MoS, analyze --save-logp)")
    parser.add_argument("--rows", type=positive_int, default=10000, help="use the first ROWS rows (default: 10000)")
    parser.add_argument("--out", required=True, metavar="CSV", help="where to write robustness.csv")
    parser.add_argument("--k", type=positive_int, default=10, help="rank of the reconstruction (default: 10)")
    parser.add_argument("--iterations", type=positive_int, default=10, help="Algorithm 1 iterations (default: 10)")
    parser.add_argument(
        "--cs",
        type=positive_float,
        nargs="+",
        default=list(SM_TABLE15_CS),
        metavar="C",
        help="Algorithm 2 noise scales c (default: every c of SM Table 15)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the Gaussian noise (default: 0)")
    parser.add_argument(
        "--device", default="cpu", help="where the float64 SVDs run: cpu, cuda or cuda:N (default: cpu)"
    )


ROBUSTNESS_COLUMNS = ["algorithm", "iteration_or_c", "press_rank", "error"] + [f"erank_{e}" for e in EPSILONS]


def robustness_table(
    A, k: int = 10, iterations: int = 10, cs: Iterable[float] = SM_TABLE15_CS, seed: int = 0, device: str = "cpu"
):
    """Both algorithms as one ``pandas.DataFrame`` with :data:`ROBUSTNESS_COLUMNS` (robustness.csv), after a first
    row for the matrix itself (``algorithm`` 0, ``iteration_or_c`` 0: its Press' and ε-effective ranks; SM §5 gives
    the paper's MoS matrix Press' rank 8,933).

    Algorithm 1 rows have no ε-effective ranks (NaN): the paper reports none for it. One SVD of A gives its ranks and
    the rank-k reconstruction both algorithms start from.
    """
    import pandas as pd

    b, sv = svd_reconstruction(A, k, device)
    itself = {"algorithm": 0, "iteration_or_c": 0.0, "press_rank": press_rank(sv, tuple(A.shape)), "error": math.nan}
    rows = [{**itself, **{f"erank_{e}": r for e, r in effective_ranks(sv).items()}}]
    log.info("the matrix itself: Press' rank %d", itself["press_rank"])
    for i, pr, err in robustness_reconstruction(A, k, iterations, device, reconstruction=b):
        rows.append({"algorithm": 1, "iteration_or_c": float(i), "press_rank": pr, "error": err})
    for r in robustness_noise(A, k, cs, seed, device, reconstruction=b):
        row = {"algorithm": 2, "iteration_or_c": r["c"], "press_rank": r["press_rank"], "error": r["error"]}
        row.update({f"erank_{e}": r["effective_rank"][e] for e in EPSILONS})
        rows.append(row)
    table = pd.DataFrame(rows, columns=ROBUSTNESS_COLUMNS)
    return table.astype({c: "Int64" for c in ["press_rank"] + [f"erank_{e}" for e in EPSILONS]})


def run_cli(args) -> int:
    with stop_on_signals("robustness"):
        try:
            check_writable(args.out, inputs=[args.matrix])
            device = resolve_device(args.device)
            arr = load_matrix(args.matrix)
        except (InputError, OutputError) as err:
            return report("robustness", err)
        a = np.array(arr[: args.rows], dtype=np.float64)
        if not np.all(np.isfinite(a)):
            bad = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
            return report("robustness", f"{args.matrix}: non-finite value (NaN or inf) in row {bad} of the matrix")
        if args.k > min(a.shape):
            return report("robustness", f"--k {args.k} exceeds the {a.shape[0]}×{a.shape[1]} matrix's possible rank")
        log.info("robustness: %d×%d matrix, k=%d", a.shape[0], a.shape[1], args.k)
        table = robustness_table(a, args.k, args.iterations, args.cs, args.seed, device)
        try:
            with atomic_path(args.out) as tmp:
                table.to_csv(tmp, index=False)
        except OSError as err:
            return report("robustness", write_error(args.out, err))
    return 0
