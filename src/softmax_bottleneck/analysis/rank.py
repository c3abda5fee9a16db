"""Press' rank, ε-effective rank and the singular values of (log-probability) matrices (spec §9, §15 item 7).

Definitions
-----------
* **Press' rank** (§9.1, Numerical Recipes' default threshold, as the reference code computes it): with
  ``tol = 0.5 · sqrt(m + n + 1) · σ_max · eps32`` where ``eps32 = np.finfo(np.float32).eps`` (the dtype of the
  reference's stored singular values), the rank is the number of singular values **strictly greater** than
  ``tol``.
* **ε-effective rank** (§9.2): the smallest k with ``Σ_{i≤k} σ_i² ≥ (1 − ε) Σ_i σ_i²``, cumulative sums in
  float64, for ε ∈ :data:`EPSILONS`.

Methods for the singular values
-------------------------------
All methods work in float64, even for a float32 matrix: a float32 SVD has errors of the order of the Press
threshold itself (§15 item 7). Note that ``numpy.linalg.svd`` upcasts float32 input to float64 internally (this is
what the reference relied on) but ``scipy.linalg.svdvals`` does *not* (it calls ``sgesdd``), hence the explicit
cast in :func:`singular_values_exact`.

``"exact"``
    Float64 SVD of the whole matrix (:func:`singular_values_exact`; LAPACK ``gesdd`` on CPU, ``torch.linalg.svdvals``
    on CUDA). Needs the whole matrix in memory: ``m·n·8`` bytes plus workspace.
``"gram"``
    Streamed :class:`GramAccumulator`: ``G = AᵀA`` accumulated chunk by chunk in float64, then
    ``σ = sqrt(clip(eigvalsh(G), 0))``. Memory ``n²·8`` bytes, cost ``m·n²`` flops (one GEMM per chunk), the
    fastest method. Squaring loses precision for small singular values: the eigenvalues carry absolute errors
    ``δ ≈ (1e-16 … 1e-14)·σ_max²``, so singular values below ``≈ sqrt(δ) ≈ 1e-8…1e-7 · σ_max`` are noise (they come
    out as tiny numbers or 0) and a singular value σ near the threshold is perturbed by about ``δ / (2σ)``, i.e. a
    *relative* error ``≈ δ / (2 tol²) ≈ 1e-5`` at ``tol ≈ 1.8e-5·σ_max`` (PTB). The Press rank is therefore the
    same as the exact one unless some singular value lies within that float64 noise band of the tolerance; the
    tail of the spectrum below ``~1e-8·σ_max`` (SM Figures 2 and 4) is not reproduced.
``"tsqr"``
    Streamed :class:`QRAccumulator` (a sequential TSQR): the triangular factor ``R`` (n×n) of the rows seen so far
    is updated with each block of new rows by a float64 Householder QR of ``[R; block]`` (LAPACK ``dtpqrt`` on
    CPU); at the end ``σ = svdvals(R)``. Since ``AᵀA = RᵀR`` with orthogonal transformations only, this is
    backward stable, i.e. as accurate as the exact SVD (including the tail), with ``O(n²)`` memory. It costs
    ``≈ 2·m·n²`` flops (the QR phase of the exact SVD, twice ``gram``); timings in ``benchmarks/rank_methods.py``.

:class:`RankStream` is the single streaming entry point used by ``logp.py`` and the ``rank`` command;
``method="auto"`` buffers rows for the exact SVD while ``m·n·8`` bytes fit ``memory_budget_bytes`` and otherwise
switches (without losing rows) to a streamed method (``fallback``, default ``"tsqr"``).

E12 robustness (SM §5, Algorithms 1 and 2; §9.4): :func:`robustness_reconstruction`, :func:`robustness_noise`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: ε values of the ε-effective rank (Table 6, SM Tables 16–18), as the JSON keys use them.
EPSILONS: tuple[str, ...] = ("1e-3", "1e-4", "1e-5")

#: the machine epsilon of the Press threshold (float32, the dtype of the reference's singular values)
EPS32: float = float(np.finfo(np.float32).eps)

#: methods accepted by :class:`RankStream` and the ``rank`` command
METHODS: tuple[str, ...] = ("auto", "exact", "gram", "tsqr")

#: default memory budget of ``method="auto"`` for the float64 copy of the full matrix (m·n·8 bytes): 8 GiB,
#: so that the PTB matrix (82,429 × 10,000: 6.6 GB) takes the exact path and the WT2 one (8.9 GB) streams.
DEFAULT_MEMORY_BUDGET = 8 * 2**30

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
# rank definitions
# --------------------------------------------------------------------------------------------------------------


def press_tolerance(sigma_max: float, m: int, n: int) -> float:
    """Numerical Recipes' threshold ``0.5 · sqrt(m + n + 1) · σ_max · eps32`` (§9.1)."""
    return 0.5 * math.sqrt(m + n + 1) * float(sigma_max) * EPS32


def _as_sv(singular_values) -> np.ndarray:
    sv = np.asarray(singular_values, dtype=np.float64).ravel()
    if sv.size and not np.all(np.isfinite(sv)):
        raise ValueError("singular values contain NaN or inf")
    return np.sort(sv)[::-1]


def press_rank(singular_values, shape: Sequence[int]) -> int:
    """Number of singular values strictly greater than :func:`press_tolerance` for a matrix of ``shape`` (m, n)."""
    sv = _as_sv(singular_values)
    if sv.size == 0:
        return 0
    m, n = int(shape[0]), int(shape[1])
    tol = press_tolerance(sv[0], m, n)
    return int(np.count_nonzero(sv > tol))


def effective_rank(singular_values, eps: float | str) -> int:
    """ε-effective rank: smallest k with ``Σ_{i≤k} σ_i² ≥ (1 − ε) Σ_i σ_i²`` (float64; 0 for a zero matrix)."""
    sv = _as_sv(singular_values)
    energy = np.cumsum(sv * sv)
    if energy.size == 0 or energy[-1] <= 0.0:
        return 0
    target = (1.0 - float(eps)) * energy[-1]
    return int(min(np.searchsorted(energy, target, side="left") + 1, energy.size))


def effective_ranks(singular_values) -> dict[str, int]:
    """:func:`effective_rank` for every ε of :data:`EPSILONS`, keyed by the ε string."""
    return {e: effective_rank(singular_values, e) for e in EPSILONS}


def rank_summary(singular_values, shape: Sequence[int], method: str) -> dict:
    """The rank JSON of §9: ``press_rank, effective_rank{ε: k}, shape [m, n], sigma_max, tolerance, method``."""
    sv = _as_sv(singular_values)
    m, n = int(shape[0]), int(shape[1])
    sigma_max = float(sv[0]) if sv.size else 0.0
    return {
        "press_rank": press_rank(sv, (m, n)),
        "effective_rank": effective_ranks(sv),
        "shape": [m, n],
        "sigma_max": sigma_max,
        "tolerance": press_tolerance(sigma_max, m, n),
        "method": method,
    }


def spectrum_table(singular_values):
    """``pandas.DataFrame`` with columns ``index`` (0-based), ``sigma`` and ``sigma_normalised`` = σ/σ_max (§9.3)."""
    import pandas as pd

    sv = _as_sv(singular_values)
    smax = sv[0] if sv.size and sv[0] > 0 else 1.0
    return pd.DataFrame({"index": np.arange(sv.size), "sigma": sv, "sigma_normalised": sv / smax})


# --------------------------------------------------------------------------------------------------------------
# singular values: exact and streamed
# --------------------------------------------------------------------------------------------------------------


def _torch():
    import torch

    return torch


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def _is_cuda(device) -> bool:
    return str(device).startswith("cuda")


def singular_values_exact(A, device: str = "cpu") -> np.ndarray:
    """Singular values of ``A`` by a float64 SVD, sorted descending (float64 numpy array).

    CPU: ``scipy.linalg.svdvals`` (LAPACK ``gesdd``) on a float64 copy (overwritten in place, so no second copy).
    CUDA (``device="cuda[:i]"``): ``torch.linalg.svdvals`` on a float64 CUDA tensor; a clearly tall matrix
    (m ≥ 1.5·n, e.g. PTB's 82,429 × 10,000) is first reduced to its n×n R factor by a float64 Householder QR, as
    LAPACK's ``gesdd`` does on CPU (orthogonal, so no loss of accuracy; much faster than cuSOLVER's SVD of the tall
    matrix). ``A`` may be a numpy array or a torch tensor (any floating dtype).
    """
    if _is_cuda(device):
        torch = _torch()
        if not _is_tensor(A):
            A = torch.from_numpy(np.ascontiguousarray(A))
        t = A.to(device=device, dtype=torch.float64)
        if t.ndim != 2:
            raise ValueError(f"expected a 2-D matrix, got shape {tuple(t.shape)}")
        if t.shape[0] < t.shape[1]:
            t = t.T
        if t.shape[0] >= 1.5 * t.shape[1]:
            t = torch.linalg.qr(t, mode="r").R
        sv = torch.linalg.svdvals(t).cpu().numpy()
        del t
        return np.sort(sv)[::-1].copy()
    import scipy.linalg

    if _is_tensor(A):
        A = A.detach().cpu().numpy()
    a64 = np.array(A, dtype=np.float64, order="F", copy=True)
    if a64.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {a64.shape}")
    sv = scipy.linalg.svdvals(a64, overwrite_a=True, check_finite=False)
    return np.sort(sv)[::-1].copy()


def _check_chunk(chunk, n_cols: int, first_row: int):
    """Validate a chunk of rows (2-D ``[r, n_cols]`` or one 1-D row); return it 2-D. Raise on NaN/inf."""
    if _is_tensor(chunk):
        torch = _torch()
        if chunk.ndim == 1:
            chunk = chunk.unsqueeze(0)
        if chunk.ndim != 2 or chunk.shape[1] != n_cols:
            raise ValueError(f"chunk of shape {tuple(chunk.shape)} does not have {n_cols} columns")
        if not chunk.is_floating_point():
            raise ValueError(f"chunk dtype {chunk.dtype} is not floating point")
        finite = torch.isfinite(chunk).all(dim=1)
        if not bool(finite.all()):
            bad = int(torch.nonzero(~finite)[0, 0])
            raise ValueError(f"non-finite value (NaN or inf) in row {first_row + bad} of the matrix")
        return chunk
    chunk = np.asarray(chunk)
    if chunk.ndim == 1:
        chunk = chunk[None, :]
    if chunk.ndim != 2 or chunk.shape[1] != n_cols:
        raise ValueError(f"chunk of shape {chunk.shape} does not have {n_cols} columns")
    if not np.issubdtype(chunk.dtype, np.floating):
        raise ValueError(f"chunk dtype {chunk.dtype} is not floating point")
    finite = np.isfinite(chunk).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"non-finite value (NaN or inf) in row {first_row + bad} of the matrix")
    return chunk


def _to_f64(chunk, device):
    torch = _torch()
    if not _is_tensor(chunk):  # numpy (possibly a read-only memmap slice): one float64 copy
        chunk = torch.from_numpy(np.array(chunk, dtype=np.float64))
    return chunk.to(device=device, dtype=torch.float64)


def _drain_to_f64(chunks: list, rows: int, n_cols: int) -> np.ndarray:
    """Stack ``chunks`` into one Fortran-ordered float64 array, releasing each chunk as it is copied."""
    out = np.empty((rows, n_cols), dtype=np.float64, order="F")
    r = 0
    while chunks:
        c = chunks.pop(0)
        out[r : r + c.shape[0]] = c
        r += c.shape[0]
    return out


class GramAccumulator:
    """Streamed ``G = AᵀA`` in float64; singular values ``sqrt(clip(eigvalsh(G), 0))``.

    Rows arrive in chunks (:meth:`update`); the full matrix is never held, only the ``n×n`` float64 Gram matrix
    (on ``device``, CPU or CUDA). :attr:`rows` counts the rows seen (m, needed for the Press threshold).

    Precision: exact for Press' rank except within float64 noise of the threshold, but singular values below
    ``≈1e-8·σ_max`` are lost (see the module docstring for the error analysis; spec §15 item 7).
    """

    method = "gram"

    def __init__(self, n_cols: int, device: str = "cpu"):
        torch = _torch()
        self.n_cols = int(n_cols)
        self.device = torch.device(device)
        self.rows = 0
        self.gram = torch.zeros((self.n_cols, self.n_cols), dtype=torch.float64, device=self.device)

    def update(self, rows_chunk) -> None:
        chunk = _check_chunk(rows_chunk, self.n_cols, self.rows)
        if chunk.shape[0] == 0:
            return
        c = _to_f64(chunk, self.device)
        self.gram.addmm_(c.T, c)
        self.rows += int(c.shape[0])

    def singular_values(self) -> np.ndarray:
        torch = _torch()
        # eigvalsh reads only the lower triangle (no n×n symmetrised copy needed)
        ev = torch.linalg.eigvalsh(self.gram).clamp_min(0.0).sqrt()
        # a matrix with m < n rows has only m singular values (the other eigenvalues are rounding noise)
        return np.sort(ev.cpu().numpy())[::-1][: min(self.rows, self.n_cols)].copy()


class QRAccumulator:
    """Streamed TSQR: keep the ``n×n`` triangular factor R of the rows seen so far, in float64.

    Incoming rows are buffered until ``block_rows`` are available, then R is updated with the block by an
    orthogonal (Householder) QR of ``[R; block]``; only the new R is kept. At the end the singular values of A
    are those of R (``svdvals(R)``, float64). Orthogonal transformations only, so the result is backward stable:
    as accurate as a float64 SVD of the whole matrix, tiny singular values included.

    * CPU: LAPACK ``dtpqrt`` (triangular-pentagonal QR, via ``scipy.linalg.lapack``), which exploits the triangle
      of R: ``≈ 2·b·n²`` flops per block of b rows, ``≈ 2·m·n²`` in all (the QR phase of a full ``gesdd``; twice
      the flops of :class:`GramAccumulator`). Default ``block_rows`` 4096. Memory ``(n + block_rows)·n·8`` bytes.
    * CUDA: ``torch.linalg.qr(torch.cat([R, block]), mode="r")`` (no ``tpqrt`` in torch), default
      ``block_rows = max(n, 4096)``; memory ``≈ (2n + block_rows)·n·8`` bytes.
    """

    method = "tsqr"

    def __init__(self, n_cols: int, device: str = "cpu", block_rows: int | None = None):
        self.n_cols = int(n_cols)
        self.device = str(device)
        self.cuda = _is_cuda(self.device)
        default = max(self.n_cols, 4096) if self.cuda else 4096
        self.block_rows = int(block_rows) if block_rows else default
        self.rows = 0
        self.r = None  # CPU: [n, n] Fortran-ordered numpy array; CUDA: tensor [min(rows, n), n]
        self._buf: list = []
        self._buf_rows = 0

    def update(self, rows_chunk) -> None:
        chunk = _check_chunk(rows_chunk, self.n_cols, self.rows)
        if chunk.shape[0] == 0:
            return
        if self.cuda:
            chunk = _to_f64(chunk, self.device)
        elif _is_tensor(chunk):
            chunk = chunk.detach().cpu().numpy()
        self._buf.append(chunk)
        self._buf_rows += int(chunk.shape[0])
        self.rows += int(chunk.shape[0])
        if self._buf_rows >= self.block_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        if self.cuda:
            torch = _torch()
            parts = ([self.r] if self.r is not None else []) + self._buf
            self._buf, self._buf_rows = [], 0
            stacked = torch.cat(parts, dim=0)
            del parts
            self.r = torch.linalg.qr(stacked, mode="r").R
            return
        from scipy.linalg import lapack

        block = _drain_to_f64(self._buf, self._buf_rows, self.n_cols)
        self._buf_rows = 0
        if self.r is None:
            self.r = np.zeros((self.n_cols, self.n_cols), dtype=np.float64, order="F")
        nb = max(1, min(64, self.n_cols))
        self.r, _, _, info = lapack.dtpqrt(0, nb, self.r, block, overwrite_a=1, overwrite_b=1)
        if info != 0:
            raise RuntimeError(f"LAPACK dtpqrt failed (info={info})")

    def singular_values(self) -> np.ndarray:
        self._flush()
        if self.r is None:
            return np.zeros(0)
        if self.cuda:
            torch = _torch()
            sv = torch.linalg.svdvals(self.r).cpu().numpy()
        else:
            import scipy.linalg

            sv = scipy.linalg.svdvals(np.triu(self.r), overwrite_a=True, check_finite=False)
        # a matrix with m < n rows has only m singular values (R then has zero rows)
        return np.sort(sv)[::-1][: min(self.rows, self.n_cols)].copy()


class _ExactBuffer:
    """Buffers float32 chunks (numpy on CPU, tensors on CUDA) for one float64 SVD at the end."""

    method = "exact"

    def __init__(self, n_cols: int, device: str = "cpu"):
        self.n_cols = int(n_cols)
        self.device = str(device)
        self.rows = 0
        self.chunks: list = []

    def update(self, rows_chunk) -> None:
        chunk = _check_chunk(rows_chunk, self.n_cols, self.rows)
        if chunk.shape[0] == 0:
            return
        if _is_cuda(self.device):
            torch = _torch()
            chunk = torch.as_tensor(chunk).to(device=self.device, dtype=torch.float32)
        else:
            if _is_tensor(chunk):
                chunk = chunk.detach().cpu().numpy()
            chunk = np.array(chunk, dtype=np.float32, copy=True)
        self.chunks.append(chunk)
        self.rows += int(chunk.shape[0])

    def singular_values(self) -> np.ndarray:
        if self.rows == 0:
            return np.zeros(0)
        if _is_cuda(self.device):
            torch = _torch()
            a = torch.cat(self.chunks, dim=0)
            self.chunks = []
            return singular_values_exact(a, self.device)
        import scipy.linalg

        a64 = _drain_to_f64(self.chunks, self.rows, self.n_cols)
        sv = scipy.linalg.svdvals(a64, overwrite_a=True, check_finite=False)
        return np.sort(sv)[::-1].copy()


def _make(method: str, n_cols: int, device: str):
    if method == "exact":
        return _ExactBuffer(n_cols, device)
    if method == "gram":
        return GramAccumulator(n_cols, device)
    if method == "tsqr":
        return QRAccumulator(n_cols, device)
    raise ValueError(f"unknown rank method {method!r}; choose one of {METHODS}")


class RankStream:
    """Feed the rows of a matrix chunk by chunk, get its singular values and rank summary at the end.

    ``method``: ``"exact"`` (buffer float32 rows, one float64 SVD at the end), ``"gram"``, ``"tsqr"`` (streamed,
    see the module docstring) or ``"auto"``: exact while the float64 copy (``m·n·8`` bytes) fits
    ``memory_budget_bytes``; the first time it would not, the buffered rows are handed to the ``fallback``
    streamed method, which takes all later rows. ``expected_rows`` (optional) lets ``auto`` decide up front.

    Chunks (``numpy.ndarray`` or ``torch.Tensor``, ``[rows, n_cols]`` or a single 1-D row) with NaN or inf raise
    ``ValueError`` naming the first bad row (0-based, counted over the whole stream).
    """

    def __init__(
        self,
        n_cols: int,
        method: str = "auto",
        device: str = "cpu",
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET,
        fallback: str = "tsqr",
        expected_rows: int | None = None,
    ):
        if method not in METHODS:
            raise ValueError(f"unknown rank method {method!r}; choose one of {METHODS}")
        if fallback not in ("gram", "tsqr"):
            raise ValueError(f"fallback must be 'gram' or 'tsqr', not {fallback!r}")
        self.n_cols = int(n_cols)
        self.device = str(device)
        self.requested = method
        self.memory_budget_bytes = int(memory_budget_bytes)
        self.fallback = fallback
        if method == "auto":
            fits = expected_rows is None or self._fits(int(expected_rows))
            method = "exact" if fits else fallback
        self._impl = _make(method, self.n_cols, self.device)

    def _fits(self, rows: int) -> bool:
        return rows * self.n_cols * 8 <= self.memory_budget_bytes

    @property
    def method(self) -> str:
        """The method in use now (``auto`` resolves to ``exact`` or the fallback)."""
        return self._impl.method

    @property
    def rows(self) -> int:
        return self._impl.rows

    def update(self, chunk) -> None:
        if self.requested == "auto" and self._impl.method == "exact":
            n_new = 1 if np.ndim(chunk) == 1 else int(chunk.shape[0])
            if not self._fits(self._impl.rows + n_new):
                log.info(
                    "rank: %d×%d float64 exceeds the %.1f GiB budget; switching to the streamed %r method",
                    self._impl.rows + n_new,
                    self.n_cols,
                    self.memory_budget_bytes / 2**30,
                    self.fallback,
                )
                old, self._impl = self._impl, _make(self.fallback, self.n_cols, self.device)
                while old.chunks:
                    self._impl.update(old.chunks.pop(0))
        self._impl.update(chunk)

    def finish(self) -> tuple[np.ndarray, dict]:
        """Return ``(singular values, float64, descending; summary dict of :func:`rank_summary`)``."""
        m = self._impl.rows
        if m == 0:
            raise ValueError("no rows were given")
        t0 = time.perf_counter()
        sv = self._impl.singular_values()
        log.debug("rank: %s singular values of %d×%d in %.1fs", self.method, m, self.n_cols, time.perf_counter() - t0)
        return sv, rank_summary(sv, (m, self.n_cols), self.method)


def iter_row_chunks(A, chunk_rows: int = 4096) -> Iterable:
    """Yield consecutive row blocks of a 2-D array (works on ``np.memmap`` without loading it)."""
    for start in range(0, A.shape[0], chunk_rows):
        yield A[start : start + chunk_rows]


# --------------------------------------------------------------------------------------------------------------
# E12: robustness of Press' rank (SM §5, Algorithms 1 and 2)
# --------------------------------------------------------------------------------------------------------------


def _svd_full(a, device: str = "cpu"):
    """Thin float64 SVD ``(U, σ, Vᵀ)``: scipy ``gesdd`` on CPU (numpy arrays), ``torch.linalg.svd`` on CUDA."""
    if _is_cuda(device):
        torch = _torch()
        return torch.linalg.svd(a, full_matrices=False)
    import scipy.linalg

    return scipy.linalg.svd(a, full_matrices=False, check_finite=False, lapack_driver="gesdd")


def _as_f64(A, device: str):
    if _is_cuda(device):
        torch = _torch()
        return torch.as_tensor(np.asarray(A) if not _is_tensor(A) else A).to(device=device, dtype=torch.float64)
    if _is_tensor(A):
        A = A.detach().cpu().numpy()
    return np.asarray(A, dtype=np.float64)


def _fro(x) -> float:
    if _is_tensor(x):
        return float(_torch().linalg.norm(x))
    return float(np.linalg.norm(x))


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if _is_tensor(x) else np.asarray(x)


def rank_k_reconstruction(A, k: int = 10, device: str = "cpu"):
    """Float64 ``U_k diag(σ_1..σ_k) V_kᵀ``: the SVD of A with all but the top-k singular values set to 0.

    Returns a numpy array on CPU, a CUDA tensor for ``device="cuda[:i]"``.
    """
    a = _as_f64(A, device)
    u, s, vt = _svd_full(a, device)
    return (u[:, :k] * s[:k]) @ vt[:k]


def robustness_reconstruction(
    A, k: int = 10, iterations: int = 10, device: str = "cpu"
) -> list[tuple[int, int, float]]:
    """SM Algorithm 1 (SM Table 14): rank-k reconstruction, then ``iterations`` times SVD + full reconstruction.

    ``A_0`` = rank-k reconstruction of ``A`` (float64). Iteration i computes the SVD of ``A_{i-1}``, reports the
    Press rank of those singular values (shape of A) and reconstructs ``A_i = U diag(σ) Vᵀ`` with *all*
    singular values. Returns ``[(i, press_rank, error_i)]`` with ``error_i = ‖A_i − A_{i-1}‖_F``, the float64
    Frobenius norm of the difference between successive reconstructions (our choice). The paper states neither
    its error metric nor its precision: float64 round-off alone makes this norm of order ``1e-16·‖A‖_F`` times a
    modest factor, far above the paper's ~1e-28, so only the constant rank (k at every iteration) and a slowly
    growing error are comparable (spec §9.4, §16 U15).
    """
    prev = rank_k_reconstruction(A, k, device)
    shape = tuple(prev.shape)
    out = []
    for i in range(1, iterations + 1):
        u, s, vt = _svd_full(prev, device)
        cur = (u * s) @ vt
        del u, vt
        err = _fro(cur - prev)
        out.append((i, press_rank(_np(s), shape), err))
        prev = cur
    return out


def robustness_noise(
    A, k: int = 10, cs: Iterable[float] = SM_TABLE15_CS, seed: int = 0, device: str = "cpu"
) -> list[dict]:
    """SM Algorithm 2 (SM Tables 15, 16): rank-k reconstruction of A plus i.i.d. Gaussian noise of std ``c / n²``.

    n = number of columns of A (10,000 in the paper, square matrix). One standard-normal matrix Z (float64,
    ``numpy.random.default_rng(seed)``, the same on every device) is drawn and scaled per c, so the sweep differs
    only in the scale. For each c returns ``{"c", "press_rank", "effective_rank": {ε: k}, "error"}`` with
    ``error = ‖(B + sZ) − B‖_F`` as realised in float64 (0 when the noise is rounded away entirely).

    Qualitative only (spec §16 U15): the paper does not say whether c/n² is the std or the variance, nor the
    precision, and its threshold c between rank 10 and full rank cannot be reconciled with a float64 matrix with
    the σ_max of a real log-P matrix. What carries over: full rank for large c, exactly k once the noise is
    rounded away against the entries, a steep transition in between, and ε-effective ranks that stay ≤ k while the
    noise holds less than a fraction ε of the energy.
    """
    b = rank_k_reconstruction(A, k, device)
    shape = tuple(b.shape)
    n = shape[1]
    z = _as_f64(np.random.default_rng(seed).standard_normal(shape), device)
    out = []
    for c in cs:
        std = float(c) / float(n) ** 2
        noisy = b + std * z
        err = _fro(noisy - b)
        sv = singular_values_exact(noisy, device)
        del noisy
        out.append(
            {"c": float(c), "press_rank": press_rank(sv, shape), "effective_rank": effective_ranks(sv), "error": err}
        )
    return out


# --------------------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------------------


class InputError(ValueError):
    """A matrix file that cannot be analysed (message names the file and the problem)."""


def load_matrix(path: str | Path) -> np.ndarray:
    """Open a 2-D floating-point ``.npy`` read-only (memory-mapped); :class:`InputError` explains a bad file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError/OSError/EOFError/UnpicklingError for non-.npy content
        raise InputError(f"{path}: not a .npy file ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path}: not a .npy file holding one array (a .npz archive?)")
    if arr.ndim != 2:
        raise InputError(f"{path}: expected a 2-D matrix, got {arr.ndim}-D array of shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise InputError(f"{path}: expected a floating-point matrix, got dtype {arr.dtype}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{path}: empty matrix of shape {arr.shape}")
    return arr


def _error(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def add_rank_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", metavar="FILE.npy", help="2-D floating-point matrix (e.g. a saved log-P matrix)")
    parser.add_argument("--method", choices=METHODS, default="auto", help="singular-value method (default: auto)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i] (default: cpu)")
    parser.add_argument("--spectrum-out", metavar="CSV", help="write index, sigma, sigma_normalised")
    parser.add_argument("--chunk-rows", type=int, default=4096, help="rows streamed per chunk (default: 4096)")
    parser.add_argument(
        "--memory-budget-gb",
        type=float,
        default=DEFAULT_MEMORY_BUDGET / 2**30,
        help="auto: largest float64 matrix (GiB) for the exact SVD (default: %(default)s)",
    )
    parser.add_argument("--fallback", choices=("gram", "tsqr"), default="tsqr", help="auto's streamed method")


def run_rank_cli(args) -> int:
    try:
        arr = load_matrix(args.matrix)
    except InputError as exc:
        return _error("rank", str(exc))
    stream = RankStream(
        arr.shape[1],
        method=args.method,
        device=args.device,
        memory_budget_bytes=int(args.memory_budget_gb * 2**30),
        fallback=args.fallback,
        expected_rows=arr.shape[0],
    )
    try:
        for chunk in iter_row_chunks(arr, max(1, args.chunk_rows)):
            stream.update(np.asarray(chunk))
    except ValueError as exc:
        return _error("rank", f"{args.matrix}: {exc}")
    sv, summary = stream.finish()
    if args.spectrum_out:
        out = Path(args.spectrum_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        spectrum_table(sv).to_csv(out, index=False, float_format="%.9g")
    print(json.dumps(summary, indent=2))
    return 0


def add_robustness_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", metavar="FILE.npy", help="log-P matrix (MoS, PTB in the paper)")
    parser.add_argument("--rows", type=int, default=10000, help="use the first ROWS rows (default: 10000)")
    parser.add_argument("--out", required=True, metavar="CSV", help="robustness.csv")
    parser.add_argument("--k", type=int, default=10, help="rank of the reconstruction (default: 10)")
    parser.add_argument("--iterations", type=int, default=10, help="Algorithm 1 iterations (default: 10)")
    parser.add_argument(
        "--cs",
        type=float,
        nargs="+",
        default=list(SM_TABLE15_CS),
        help="Algorithm 2 noise scales c (default: every c of SM Table 15)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the Gaussian noise (default: 0)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i]: where the float64 SVDs run (default: cpu)")


ROBUSTNESS_COLUMNS = ["algorithm", "iteration_or_c", "press_rank", "error"] + [f"erank_{e}" for e in EPSILONS]


def robustness_table(
    A, k: int = 10, iterations: int = 10, cs: Iterable[float] = SM_TABLE15_CS, seed: int = 0, device: str = "cpu"
):
    """Both algorithms as one ``pandas.DataFrame`` with :data:`ROBUSTNESS_COLUMNS` (robustness.csv).

    Algorithm 1 rows have no ε-effective ranks (NaN): the paper reports none for it.
    """
    import pandas as pd

    rows = []
    for i, pr, err in robustness_reconstruction(A, k, iterations, device):
        rows.append({"algorithm": 1, "iteration_or_c": float(i), "press_rank": pr, "error": err})
    for r in robustness_noise(A, k, cs, seed, device):
        row = {"algorithm": 2, "iteration_or_c": r["c"], "press_rank": r["press_rank"], "error": r["error"]}
        row.update({f"erank_{e}": r["effective_rank"][e] for e in EPSILONS})
        rows.append(row)
    table = pd.DataFrame(rows, columns=ROBUSTNESS_COLUMNS)
    return table.astype({c: "Int64" for c in ["press_rank"] + [f"erank_{e}" for e in EPSILONS]})


def run_robustness_cli(args) -> int:
    try:
        arr = load_matrix(args.matrix)
    except InputError as exc:
        return _error("robustness", str(exc))
    a = np.array(arr[: args.rows], dtype=np.float64)
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
        return _error("robustness", f"{args.matrix}: non-finite value (NaN or inf) in row {bad} of the matrix")
    log.info("robustness: %d×%d matrix, k=%d", a.shape[0], a.shape[1], args.k)
    table = robustness_table(a, args.k, args.iterations, args.cs, args.seed, args.device)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    return 0
