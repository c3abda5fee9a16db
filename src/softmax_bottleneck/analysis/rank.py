"""Press' rank, ε-effective rank and the rank summary of (log-probability) matrices (Tables 2 and 6, SM Tables 16-18).

Definitions
-----------
* **Press' rank** (Numerical Recipes 3rd ed.'s default SVD threshold, as the paper's code computes it): with
  ``tol = 0.5 · sqrt(m + n + 1) · σ_max · eps32`` where ``eps32 = np.finfo(np.float32).eps`` (the dtype of the
  reference's stored singular values), the rank is the number of singular values **strictly greater** than
  ``tol``.
* **ε-effective rank** (Table 6, SM §5.4): the smallest k with ``Σ_{i≤k} σ_i² ≥ (1 − ε) Σ_i σ_i²``, cumulative sums in
  float64, for ε ∈ :data:`EPSILONS`.

The singular values come from :mod:`softmax_bottleneck.analysis.svd_stream` (methods ``"exact"``, ``"gram"``,
``"tsqr"``, with their precision and memory).

:class:`RankStream` is the single streaming entry point used by ``logp.py`` and the ``rank`` command;
``method="auto"`` buffers rows for the exact SVD while the float64 matrix (``m·n·8`` bytes) is at most
:data:`EXACT_AUTO_BYTES` (1 GiB: an exact SVD of seconds to a minute, with the whole spectrum) and fits
``memory_budget_bytes``; otherwise it streams the ``fallback`` method (default ``"gram"``, the fastest: see
``docs/rank-at-scale.md``), switching without losing rows. Every method's peak memory is estimated up front
(:func:`memory_needed`); a method whose estimate exceeds ``memory_budget_bytes`` is refused before any row is
read (:class:`MemoryBudgetError`, naming the memory needed and a method or budget that fits).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Sequence

import numpy as np

from softmax_bottleneck.analysis.svd_stream import accumulator, iter_row_chunks
from softmax_bottleneck.argtypes import positive_float, positive_int

log = logging.getLogger(__name__)

#: ε values of the ε-effective rank (Table 6, SM Tables 16–18), as the JSON keys use them.
EPSILONS: tuple[str, ...] = ("1e-3", "1e-4", "1e-5")

#: the machine epsilon of the Press threshold (float32, the dtype of the reference's singular values)
EPS32: float = float(np.finfo(np.float32).eps)

#: methods accepted by :class:`RankStream` and the ``rank`` command
METHODS: tuple[str, ...] = ("auto", "exact", "gram", "tsqr")

#: default memory budget of the singular-value computation (:func:`memory_needed`): 17 GiB, so that WT2's full
#: matrix (245,568 × 33,278) streams its Gram matrix (9.3 GiB with a block of rows), and on CPU its eigenvalues
#: take MKL's solver, which copies G (2 × 8.25 GiB once the block is freed; LAPACK in place, the alternative, is a
#: memory-bound one-stage reduction, far slower at n = 33,278); with the model and the row pass the whole
#: ``analyze`` stays under 20 GiB (a 24 GiB node).
DEFAULT_MEMORY_BUDGET = 17 * 2**30

#: ``auto`` takes the exact SVD only up to this float64 matrix size (1 GiB), beyond it the streamed Gram method
EXACT_AUTO_BYTES = 2**30


def exact_auto_fits(rows: int, n_cols: int) -> bool:
    """Whether ``auto`` may take the exact SVD of ``rows`` × ``n_cols`` by size: a float64 copy of at most
    :data:`EXACT_AUTO_BYTES` (13,421 PTB rows, 4,033 WT2 rows; the memory budget is checked apart)."""
    return rows * n_cols * 8 <= EXACT_AUTO_BYTES


class MemoryBudgetError(ValueError):
    """The chosen method would need more memory than the budget (the message says how much, and what fits)."""


def memory_needed(method: str, rows: int, n_cols: int, device: str = "cpu", itemsize: int = 4) -> int:
    """Estimated peak bytes of ``method`` for a ``rows × n_cols`` matrix of ``itemsize``-byte entries (the model
    and the row pass not included). See :mod:`softmax_bottleneck.analysis.svd_stream` for each formula:

    * exact: the buffered rows plus their float64 copy (``m·n·(itemsize + 8)``) and ``gesdd``'s n×n work (CPU);
      ``2·m·n·8`` on CUDA;
    * gram: ``(n² + b·n)·8`` (G and one block of b rows) on either device; the eigenvalue step takes more only
      where the budget left over holds it (``svd_stream.eig_on_device``), else runs off the device (CPU: in
      place; CUDA: on the host);
    * tsqr: ``(n² + 1.5·b·n)·8`` (CPU), ``4·(n + b)·n·8`` (CUDA, measured).
    """
    from softmax_bottleneck.analysis.svd_stream import GRAM_BLOCK_ROWS, TSQR_BLOCK_ROWS, is_cuda

    m, n = int(rows), int(n_cols)
    k = min(m, n)
    cuda = is_cuda(device)
    if method == "exact":
        return 2 * m * n * 8 if cuda else m * n * (max(itemsize, 4) + 8) + k * k * 8
    if method == "gram":
        b = min(GRAM_BLOCK_ROWS, m)
        return (n * n + b * n) * 8
    if method == "tsqr":
        b = TSQR_BLOCK_ROWS
        return 4 * (n + b) * n * 8 if cuda else int((n * n + 1.5 * b * n) * 8)
    raise ValueError(f"unknown rank method {method!r}")


def _gib(nbytes: float) -> str:
    """``9.3 GiB``; below 1 GiB in MiB or KiB (``0.1 GiB`` over a budget of ``0.1 GiB`` would say nothing)."""
    unit, scale = next((u, s) for u, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if nbytes >= s or u == "KiB")
    return f"{nbytes / scale:.1f} {unit}"


def check_memory(method: str, rows: int, n_cols: int, device: str, budget_bytes: int, itemsize: int = 4) -> int:
    """Raise :class:`MemoryBudgetError` when ``method`` (not ``auto``) would exceed the budget; return its bytes."""
    need = memory_needed(method, rows, n_cols, device, itemsize)
    if need <= budget_bytes:
        return need
    fits = [(memory_needed(o, rows, n_cols, device, itemsize), o) for o in ("gram", "tsqr", "exact") if o != method]
    fits = sorted(f for f in fits if f[0] <= budget_bytes)
    hint = f"--method {fits[0][1]} needs {_gib(fits[0][0])}, or " if fits else ""
    raise MemoryBudgetError(
        f"the {method} method on a {rows:,} × {n_cols:,} matrix needs about {_gib(need)}, over the memory budget of "
        f"{_gib(budget_bytes)}; {hint}raise --memory-budget-gb to {math.ceil(need / 2**30 + 0.05)}"
    )


# --------------------------------------------------------------------------------------------------------------
# rank definitions
# --------------------------------------------------------------------------------------------------------------


def press_tolerance(sigma_max: float, m: int, n: int) -> float:
    """Numerical Recipes' threshold ``0.5 · sqrt(m + n + 1) · σ_max · eps32`` (Numerical Recipes)."""
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
    """The rank JSON of ``analyze`` and ``rank``.

    Keys: ``press_rank, effective_rank{ε: k}, shape [m, n], sigma_max, tolerance, method``.
    """
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
    """``pandas.DataFrame`` with columns ``index`` (0-based), ``sigma``, ``sigma_normalised`` = σ/σ_max (Figure 7)."""
    import pandas as pd

    sv = _as_sv(singular_values)
    smax = sv[0] if sv.size and sv[0] > 0 else 1.0
    return pd.DataFrame({"index": np.arange(sv.size), "sigma": sv, "sigma_normalised": sv / smax})


class RankStream:
    """Feed the rows of a matrix chunk by chunk, get its singular values and rank summary at the end.

    ``method``: ``"exact"`` (buffer the rows in their own precision, one float64 SVD at the end), ``"gram"``,
    ``"tsqr"`` (streamed, see the module docstring) or ``"auto"``: exact while the float64 copy (``m·n·8`` bytes)
    is at most :data:`EXACT_AUTO_BYTES` and fits ``memory_budget_bytes``; the first time it would not, the
    buffered rows are handed to the ``fallback`` streamed method, which takes all later rows. ``expected_rows``
    (optional) lets ``auto`` decide up front, and makes any method whose :func:`memory_needed` exceeds the budget
    raise :class:`MemoryBudgetError` here, before a row is read (``auto``: when even the fallback does not fit).

    Chunks (``numpy.ndarray`` or ``torch.Tensor``, ``[rows, n_cols]`` or a single 1-D row) with NaN or inf raise
    ``ValueError`` naming the first bad row (0-based, counted over the whole stream).
    """

    def __init__(
        self,
        n_cols: int,
        method: str = "auto",
        device: str = "cpu",
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET,
        fallback: str = "gram",
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
        if expected_rows is not None:
            check_memory(method, int(expected_rows), self.n_cols, self.device, self.memory_budget_bytes)
        self._impl = accumulator(method, self.n_cols, self.device, self._spare(method))

    def _spare(self, method: str) -> int:
        """Budget the method may use beyond its own memory at its last step: Gram's eigenvalues, once the block of
        rows is freed and G alone is held (``n²·8`` bytes), may take the rest (a solver that copies G)."""
        return max(0, self.memory_budget_bytes - self.n_cols**2 * 8) if method == "gram" else 0

    def _fits(self, rows: int) -> bool:
        """``auto``'s rule for staying exact with ``rows`` rows."""
        return exact_auto_fits(rows, self.n_cols) and memory_needed("exact", rows, self.n_cols, self.device) <= (
            self.memory_budget_bytes
        )

    @property
    def method(self) -> str:
        """The method in use now (``auto`` resolves to ``exact`` or the fallback)."""
        return self._impl.method

    @property
    def rows(self) -> int:
        return self._impl.rows

    @property
    def flops(self) -> float:
        """Flops of the streamed updates so far (the Gram method counts them; 0 for the others)."""
        return getattr(self._impl, "flops", 0)

    @property
    def eig_where(self) -> str | None:
        """Where the Gram method's eigenvalues will run, for the log (None for the other methods)."""
        return getattr(self._impl, "eig_where", None)

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
                old, self._impl = (
                    self._impl,
                    accumulator(self.fallback, self.n_cols, self.device, self._spare(self.fallback)),
                )
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


# --------------------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------------------


def add_memory_budget_option(parser: argparse.ArgumentParser) -> None:
    """``--memory-budget-gb`` of ``analyze`` and ``rank``: a positive, finite number of GiB."""
    parser.add_argument(
        "--memory-budget-gb",
        type=positive_float,
        default=DEFAULT_MEMORY_BUDGET / 2**30,
        metavar="GB",
        help="memory the singular values may take (default: %(default)s GiB); a method that needs more is refused "
        "up front, naming one that fits",
    )


def add_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Press' rank (Numerical Recipes' threshold, as the paper), ε-effective ranks and singular values of a "
        "matrix saved as .npy (e.g. by analyze --save-logp), streamed from disk."
    )
    parser.add_argument(
        "matrix",
        metavar="FILE.npy",
        help="2-D float32 or float64 matrix (e.g. a saved log-P matrix); Press' threshold "
        "uses float32's ε either way, as the paper's float32 matrices",
    )
    parser.add_argument("--method", choices=METHODS, default="auto", help="singular-value method (default: auto)")
    parser.add_argument("--device", default="cpu", help="where the SVD runs: cpu, cuda or cuda:N (default: cpu)")
    parser.add_argument("--spectrum-out", metavar="CSV", help="also write index, sigma, sigma_normalised")
    parser.add_argument(
        "--chunk-rows", type=positive_int, default=4096, help="rows read from disk per chunk (default: 4096)"
    )
    add_memory_budget_option(parser)
    parser.add_argument(
        "--fallback", choices=("gram", "tsqr"), default="gram", help="auto's streamed method (default: gram)"
    )


def run_cli(args) -> int:
    from softmax_bottleneck.analysis.inputs import InputError, load_matrix, report, resolve_device
    from softmax_bottleneck.analysis.outputs import OutputError, check_writable
    from softmax_bottleneck.atomic import atomic_path
    from softmax_bottleneck.cluster.signals import stop_on_signals

    with stop_on_signals("rank"):
        try:
            check_writable(args.spectrum_out, inputs=[args.matrix])
            device = resolve_device(args.device)
            arr = load_matrix(args.matrix)
        except (InputError, OutputError) as err:
            return report("rank", err)
        try:
            stream = RankStream(
                arr.shape[1],
                method=args.method,
                device=device,
                memory_budget_bytes=int(args.memory_budget_gb * 2**30),
                fallback=args.fallback,
                expected_rows=arr.shape[0],
            )
        except MemoryBudgetError as err:
            return report("rank", f"{args.matrix}: {err}")
        try:
            for chunk in iter_row_chunks(arr, args.chunk_rows):
                stream.update(np.asarray(chunk))
        except ValueError as exc:  # a non-finite row (named by its index)
            return report("rank", f"{args.matrix}: {exc}")
        sv, summary = stream.finish()
        if args.spectrum_out:
            with atomic_path(args.spectrum_out) as tmp:
                spectrum_table(sv).to_csv(tmp, index=False)  # every digit, as analyze writes it
    print(json.dumps(summary, indent=2))
    return 0
