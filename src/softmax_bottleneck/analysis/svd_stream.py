"""Singular values of a matrix whose rows arrive in chunks: exact, streamed Gram, streamed TSQR.

All methods work in float64, even for a float32 matrix: a float32 SVD has errors of the order of the Press
threshold itself (≈1.8e-5·σ_max for PTB); and none ever rounds its input to a lower precision. Note that
``numpy.linalg.svd`` upcasts float32 input to float64 internally (this is what the reference relied on) but
``scipy.linalg.svdvals`` does *not* (it calls ``sgesdd``), hence the explicit cast in :func:`singular_values_exact`.

``"exact"``
    Float64 SVD of the whole matrix (:func:`singular_values_exact`; LAPACK ``gesdd`` on CPU, ``torch.linalg.svdvals``
    on CUDA). Needs the whole matrix in memory: rows buffered in their own precision (float32 log-P rows:
    ``m·n·4`` bytes; float64 rows stay float64), then ``m·n·8`` bytes for the float64 copy plus workspace on CPU,
    ``≈ 2·m·n·8`` bytes of GPU memory on CUDA (PTB: 13 GB).
``"gram"``
    Streamed :class:`GramAccumulator`: ``G = AᵀA`` accumulated in float64 by one symmetric rank-k update (GEMMs on
    the block-lower triangle, :func:`syrk_update`) per block of 4,096 rows, then
    ``σ = sqrt(clip(eigenvalues(G), 0))``, eigenvalues only. Memory ``(n² + b·n)·8`` bytes (plus the solver's copy
    where the budget holds it, see :func:`eig_on_device`), cost ``≈ m·n²`` flops
    at GEMM speed plus ``(4/3)·n³`` for the eigenvalues, the fastest method. Squaring loses precision for small
    singular values: the eigenvalues carry absolute errors
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

:class:`softmax_bottleneck.analysis.rank.RankStream` chooses among these accumulators (``method="auto"``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def torch_module():
    """``torch``, imported on first use (the ``rank`` command on a CPU need not pay for importing it)."""
    import torch

    return torch


def is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def is_cuda(device) -> bool:
    return str(device).startswith("cuda")


def singular_values_exact(A, device: str = "cpu") -> np.ndarray:
    """Singular values of ``A`` by a float64 SVD, sorted descending (float64 numpy array).

    CPU: ``scipy.linalg.svdvals`` (LAPACK ``gesdd``) on a float64 copy (overwritten in place, so no second copy).
    CUDA (``device="cuda[:i]"``): ``torch.linalg.svdvals`` on a float64 CUDA tensor; a clearly tall matrix
    (m ≥ 1.5·n, e.g. PTB's 82,429 × 10,000) is first reduced to its n×n R factor by a float64 Householder QR, as
    LAPACK's ``gesdd`` does on CPU (orthogonal, so no loss of accuracy; much faster than cuSOLVER's SVD of the tall
    matrix). ``A`` may be a numpy array or a torch tensor (any floating dtype).
    """
    if is_cuda(device):
        if not is_tensor(A):
            A = read_view(np.ascontiguousarray(A))
        if A.ndim != 2:
            raise ValueError(f"expected a 2-D matrix, got shape {tuple(A.shape)}")
        return _svdvals_torch([A], device)
    if is_tensor(A):
        A = A.detach().cpu().numpy()
    a64 = np.array(A, dtype=np.float64, order="F", copy=True)
    if a64.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {a64.shape}")
    return _svdvals_inplace(a64)


def _svdvals_inplace(a64: np.ndarray) -> np.ndarray:
    """σ (descending) of a float64 numpy matrix by LAPACK ``gesdd``, which overwrites it (no second copy)."""
    import scipy.linalg

    sv = scipy.linalg.svdvals(a64, overwrite_a=True, check_finite=False)
    return np.sort(sv)[::-1].copy()


def _svdvals_torch(parts: list, device) -> np.ndarray:
    """σ (descending) of the row-stack of the 2-D tensors ``parts``, in float64 on ``device``; ``parts`` is emptied.

    The float64 matrix is assembled while the parts are released, and a tall matrix is reduced to its R factor
    first (see :func:`singular_values_exact`): peak memory ``≈ 2·m·n·8`` bytes (the matrix and the copy the QR
    factorises), e.g. 13 GB of GPU memory for PTB's 82,429 × 10,000.
    """
    torch = torch_module()
    m, n = sum(int(p.shape[0]) for p in parts), int(parts[0].shape[1])
    t = torch.empty((m, n), dtype=torch.float64, device=device)
    pos = 0
    while parts:
        part = parts.pop(0)
        t[pos : pos + part.shape[0]] = part
        pos += int(part.shape[0])
        del part
    if m < n:
        t = t.T
    if t.shape[0] >= 1.5 * t.shape[1]:
        r = torch.linalg.qr(t, mode="r").R
        del t
        t = r
    sv = torch.linalg.svdvals(t).cpu().numpy()
    del t
    return np.sort(sv)[::-1].copy()


def _check_chunk(chunk, n_cols: int, first_row: int):
    """Validate a chunk of rows (2-D ``[r, n_cols]`` or one 1-D row); return it 2-D. Raise on NaN/inf."""
    if is_tensor(chunk):
        torch = torch_module()
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


def _new_rows(acc, rows_chunk):
    """``rows_chunk`` checked for ``acc.update`` (:func:`_check_chunk`); raises once ``acc``'s σ are computed."""
    if acc._sv is not None:
        raise ValueError("rows added after the singular values were computed")
    return _check_chunk(rows_chunk, acc.n_cols, acc.rows)


def read_view(array: np.ndarray):
    """A torch tensor sharing ``array``'s memory, for reading only (the callers copy from it). torch warns about a
    NumPy array that is not writable (a read-only memmap of a log-P matrix) because writing through the tensor would
    be undefined; nothing writes through these, so the warning is left out instead of copying the array."""
    import warnings

    torch = torch_module()
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
        return torch.from_numpy(array)


def _to_device(chunk, device):
    """A torch tensor on ``device`` in the chunk's own floating dtype, at least float32 (numpy input is copied once)."""
    torch = torch_module()
    if not is_tensor(chunk):
        chunk = torch.from_numpy(np.array(chunk))
    return chunk.detach().to(device=device, dtype=torch.promote_types(chunk.dtype, torch.float32))


def _to_f64(chunk, device):
    torch = torch_module()
    if not is_tensor(chunk):  # numpy (possibly a read-only memmap slice): one float64 copy
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


def syrk_update(gram, block, col_blocks: int = 8) -> None:
    """``gram += blockᵀ·block`` on the lower triangle only (a blocked symmetric rank-k update), in place.

    ``gram`` is ``[n, n]`` (torch tensor or numpy array, float64, row-major) and ``block`` ``[b, n]`` float64 rows.
    The columns are cut into ``col_blocks`` panels; panel ``k`` gets one matrix product
    ``gram[panel_k, :end_k] += block[:, panel_k]ᵀ · block[:, :end_k]``, i.e. the block-lower triangle, through
    torch's BLAS (MKL's ``dgemm`` on CPU, whose public ``dsyrk`` torch does not export): ``b·n²·(1 + 1/p)`` flops
    (p = ``col_blocks``) instead of a full product's ``2·b·n²``, at GEMM speed. The strict upper triangle of
    ``gram`` is left partly written (only the lower one is read later).
    """
    torch = torch_module()
    g = gram if is_tensor(gram) else torch.from_numpy(gram)
    c = block if is_tensor(block) else torch.from_numpy(block)
    n = int(g.shape[0])
    p = max(1, min(int(col_blocks), n // 256 or 1))
    edges = [round(n * k / p) for k in range(p + 1)]
    for k in range(p):
        lo, hi = edges[k], edges[k + 1]
        if hi > lo:
            g[lo:hi, :hi].addmm_(c[:, lo:hi].T, c[:, :hi])


#: rows per Gram update (CPU): large enough for GEMM speed (``benchmarks/gemm_speed.py``), small beside n²
GRAM_BLOCK_ROWS = 4096
#: rows per QR step of the TSQR method (its default ``block_rows``)
TSQR_BLOCK_ROWS = 4096

#: GPU memory that ``torch.linalg.eigvalsh`` (cuSOLVER ``syevd``, eigenvalues only) allocates beside an n×n float64
#: matrix, in units of ``n²·8`` bytes: 5.0 measured for n = 4,096, 8,192 and 16,384 on an NVIDIA H200 (torch 2.11,
#: CUDA 13.0, 2026-11-26); MAGMA's solver needed 1.0 but ran 12× slower at n = 16,384 (33.5 s against 2.8 s)
CUSOLVER_EIG_WORK = 5


def eig_on_device(n_cols: int, device, spare_bytes: int) -> bool:
    """Whether the Gram method's eigenvalues are computed by ``torch.linalg.eigvalsh`` on ``device`` (it copies G:
    ``n²·8`` bytes on CPU, :data:`CUSOLVER_EIG_WORK`·n²·8 on CUDA) rather than off it (CPU: LAPACK in place,
    :func:`eigvalsh_inplace`; CUDA: on the host): only when that extra memory fits ``spare_bytes``."""
    work = n_cols * n_cols * 8 * (CUSOLVER_EIG_WORK if is_cuda(device) else 1)
    return work <= int(spare_bytes)


def blas_syrk_update(gram: np.ndarray, block: np.ndarray) -> None:
    """``gram += blockᵀ·block`` on the lower triangle of the row-major float64 ``gram``, in place, by one BLAS
    ``dsyrk`` (scipy's OpenBLAS: ``b·n²`` flops, the symmetric half of a GEMM). ``gram.T`` is a Fortran-ordered
    view whose upper triangle is ``gram``'s lower one, and ``block.T`` a Fortran-ordered ``[n, b]`` view: no copy."""
    from scipy.linalg import blas

    out = blas.dsyrk(1.0, block.T, beta=1.0, c=gram.T, trans=0, lower=0, overwrite_c=1)
    if not np.shares_memory(out, gram):  # f2py copied (not contiguous float64): write the result back
        gram.T[...] = out


class GramAccumulator:
    """Streamed ``G = AᵀA`` in float64; singular values ``sqrt(clip(eigenvalues(G), 0))``.

    Rows arrive in chunks (:meth:`update`) of any size (the log-P pass gives 70); they are copied, in float64, into
    a block of ``block_rows`` rows, and each full block updates the lower triangle of ``G`` by one symmetric
    rank-k update on the block-lower triangle (:func:`syrk_update`: torch's GEMMs, MKL on CPU, ``1.125·b·n²`` flops).
    :attr:`rows` counts the rows seen (m, needed for the Press threshold). Memory: ``(n² + b·n)·8`` bytes (G and
    the block; WT2, n = 33,278: 8.9 GB for G + 1.1 GB for the block), on the device. The eigenvalues at the end
    (:func:`eig_on_device`): ``torch.linalg.eigvalsh`` on the device when ``copy_bytes`` holds its extra memory
    (CPU: MKL ``syevd``, a copy of G; CUDA: cuSOLVER, 5·n²·8 bytes beside G, 41 GiB for WT2); else, on CPU, the
    eigenvalues only, in place, by LAPACK through
    ``scipy.linalg.eigh(eigvals_only=True, overwrite_a=True, check_finite=False)`` (no second n×n copy), and from
    CUDA G is moved to host memory (freed on the GPU) and MKL's solver runs there (2·n²·8 bytes of host memory).

    Precision: exact for Press' rank except within float64 noise of the threshold, but singular values below
    ``≈1e-8·σ_max`` are lost (see the module docstring and ``docs/rank-at-scale.md``).
    """

    method = "gram"

    def __init__(self, n_cols: int, device: str = "cpu", block_rows: int | None = None, copy_bytes: int = 0):
        torch = torch_module()
        self.n_cols = int(n_cols)
        self.device = torch.device(device)
        self.block_rows = int(block_rows) if block_rows else GRAM_BLOCK_ROWS
        #: ``torch.linalg.eigvalsh`` on the device (CPU: MKL's ``syevd``, faster here than OpenBLAS's; CUDA: cuSOLVER)
        #: when its extra memory fits in ``copy_bytes``; else off the device (:func:`eig_on_device`)
        self.eig_copies = eig_on_device(self.n_cols, self.device, copy_bytes)
        self.rows = 0
        self.gram = torch.zeros((self.n_cols, self.n_cols), dtype=torch.float64, device=self.device)
        self._block = None  # [block_rows, n] float64, allocated on the first rows
        self._fill = 0
        self.flops = 0  # of the Gram updates so far (for the progress log)
        self._sv: np.ndarray | None = None

    def update(self, rows_chunk) -> None:
        chunk = _new_rows(self, rows_chunk)
        if chunk.shape[0] == 0:
            return
        torch = torch_module()
        if not is_tensor(chunk):
            chunk = read_view(np.asarray(chunk))
        chunk = chunk.detach()
        if self._block is None:
            self._block = torch.empty((self.block_rows, self.n_cols), dtype=torch.float64, device=self.device)
        pos = 0
        while pos < chunk.shape[0]:
            take = min(int(chunk.shape[0]) - pos, self._block.shape[0] - self._fill)
            self._block[self._fill : self._fill + take].copy_(chunk[pos : pos + take])  # converts to float64
            self._fill += take
            pos += take
            if self._fill == self._block.shape[0]:
                self._flush()
        self.rows += int(chunk.shape[0])

    def _flush(self) -> None:
        if self._fill:
            # torch's GEMMs on the block-lower triangle (MKL on CPU): OpenBLAS's dsyrk through scipy (blas_syrk_update)
            # crashed (SIGSEGV) at n = 33,278 with 1,024-row blocks on 2026-11-25 (scipy-openblas 0.3.31)
            syrk_update(self.gram, self._block[: self._fill])
            self.flops += self._fill * self.n_cols**2
            self._fill = 0

    @property
    def eig_where(self) -> str:
        """Where the eigenvalues will be computed, for the log."""
        if self.eig_copies:
            return f"eigenvalues by torch.linalg.eigvalsh on {self.device}"
        if self.device.type == "cuda":
            return "eigenvalues by torch.linalg.eigvalsh on the host (G moved off the GPU)"
        return "eigenvalues by LAPACK in place on the host"

    def singular_values(self) -> np.ndarray:
        """Flush the buffered rows and return σ (descending); G is consumed, later calls return the same σ."""
        if self._sv is not None:
            return self._sv.copy()
        self._flush()
        self._block = None
        if not self.eig_copies and self.device.type == "cuda":
            host = self.gram.cpu()  # G is freed on the GPU; on the host MKL's solver copies it (2·n²·8 bytes there)
            self.gram = None
            ev = torch_module().linalg.eigvalsh(host, UPLO="L").numpy()
        elif not self.eig_copies:
            ev = eigvalsh_inplace(self.gram.numpy())
        else:
            ev = torch_module().linalg.eigvalsh(self.gram, UPLO="L").cpu().numpy()
        self.gram = None
        sv = np.sqrt(np.clip(ev, 0.0, None))
        # a matrix with m < n rows has only m singular values (the other eigenvalues are rounding noise)
        self._sv = np.sort(sv)[::-1][: min(self.rows, self.n_cols)].copy()
        return self._sv.copy()


#: LAPACK driver of :func:`eigvalsh_inplace` (``benchmarks/gemm_speed.py`` times them; ``evd`` with eigenvalues
#: only is ``dsterf`` after the reduction, O(n) workspace)
EIG_DRIVER = "evd"


def eigvalsh_inplace(gram: np.ndarray, driver: str | None = None) -> np.ndarray:
    """Eigenvalues (ascending) of the symmetric float64 matrix whose **lower** triangle is that of the row-major
    ``gram``; ``gram`` is destroyed. No n×n copy: its transpose is a Fortran-ordered view whose upper triangle is
    ``gram``'s lower one, handed to LAPACK with ``overwrite_a`` (``scipy.linalg.eigh(eigvals_only=True)``)."""
    import scipy.linalg

    a = gram.T
    if not (a.flags.f_contiguous and a.dtype == np.float64):
        raise ValueError("eigvalsh_inplace needs a C-contiguous float64 matrix")
    return scipy.linalg.eigh(a, lower=False, eigvals_only=True, overwrite_a=True, check_finite=False,
                             driver=driver or EIG_DRIVER)  # fmt: skip


class QRAccumulator:
    """Streamed TSQR: keep the ``n×n`` triangular factor R of the rows seen so far, in float64.

    Incoming rows are buffered until ``block_rows`` are available, then R is updated with the block by an
    orthogonal (Householder) QR of ``[R; block]``; only the new R is kept. At the end the singular values of A
    are those of R (``svdvals(R)``, float64). Orthogonal transformations only, so the result is backward stable:
    as accurate as a float64 SVD of the whole matrix, tiny singular values included.

    Memory does not depend on the number of rows m (b = ``block_rows``, default 4096 on both devices):

    * CPU: LAPACK ``dtpqrt`` (triangular-pentagonal QR, via ``scipy.linalg.lapack``), which exploits the triangle
      of R: ``≈ 2·b·n²`` flops per block of b rows, ``≈ 2·m·n²`` in all (the QR phase of a full ``gesdd``; twice
      the flops of :class:`GramAccumulator`). Peak memory ``≈ (n² + 1.5·b·n)·8`` bytes (R, the buffered float32
      rows and their float64 block); the final SVD works on R in place. WT2, n = 33,278: ≈ 10.5 GB.
    * CUDA: ``torch.linalg.qr([R; block], mode="r")`` (no ``tpqrt`` in torch): ``[R; block]`` is assembled in one
      float64 tensor while R and the buffered rows are released, and only a compact copy of the new R is kept.
      Peak GPU memory ``≈ 4·(n + b)·n·8`` bytes: the stacked matrix, the copy QR factorises, cuSOLVER's workspace
      and the new R (measured 4.04× for n = 2,048, b = 1,024 on an H200, torch 2.11, 2026-11-26). WT2: ≈ 40 GB;
      PTB (n = 10,000): ≈ 4.5 GB.
    """

    method = "tsqr"

    def __init__(self, n_cols: int, device: str = "cpu", block_rows: int | None = None):
        self.n_cols = int(n_cols)
        self.device = str(device)
        self.cuda = is_cuda(self.device)
        self.block_rows = int(block_rows) if block_rows else TSQR_BLOCK_ROWS
        self.rows = 0
        self.r = None  # CPU: [n, n] Fortran-ordered numpy array; CUDA: tensor [min(rows, n), n]
        self._buf: list = []
        self._buf_rows = 0
        self._sv: np.ndarray | None = None

    def update(self, rows_chunk) -> None:
        chunk = _new_rows(self, rows_chunk)
        if chunk.shape[0] == 0:
            return
        if self.cuda:  # kept in its own dtype (float32 log-P rows: half the memory of float64) until the QR
            chunk = _to_device(chunk, self.device)
        elif is_tensor(chunk):
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
            self._flush_cuda()
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

    def _flush_cuda(self) -> None:
        torch = torch_module()
        r_rows = 0 if self.r is None else int(self.r.shape[0])
        stacked = torch.empty((r_rows + self._buf_rows, self.n_cols), dtype=torch.float64, device=self.device)
        if self.r is not None:
            stacked[:r_rows] = self.r
            self.r = None
        pos = r_rows
        while self._buf:
            chunk = self._buf.pop(0)
            stacked[pos : pos + chunk.shape[0]] = chunk
            pos += int(chunk.shape[0])
        self._buf_rows = 0
        r = torch.linalg.qr(stacked, mode="r").R  # a view into QR's own copy of ``stacked``
        del stacked
        self.r = r.clone(memory_format=torch.contiguous_format)  # keep R alone, not the whole factorisation

    def singular_values(self) -> np.ndarray:
        """Flush the buffered rows and return σ (descending); R is consumed, later calls return the same σ."""
        if self._sv is not None:
            return self._sv.copy()
        if not self.cuda and self.r is None and 0 < self._buf_rows < self.n_cols:
            # fewer rows than columns, all still buffered: their own SVD (m×n) is far cheaper than R's (n×n)
            self._sv = _svdvals_inplace(_drain_to_f64(self._buf, self._buf_rows, self.n_cols))
            return self._sv.copy()
        self._flush()
        if self.r is None:
            return np.zeros(0)
        if self.cuda:
            sv = np.sort(torch_module().linalg.svdvals(self.r).cpu().numpy())[::-1]
        else:
            r = self.r  # Fortran order: zero the strict lower triangle column by column, in place
            for j in range(r.shape[1] - 1):
                r[j + 1 :, j] = 0.0
            sv = _svdvals_inplace(r)
        self.r = None
        # a matrix with m < n rows has only m singular values (R then has zero rows)
        self._sv = sv[: min(self.rows, self.n_cols)].copy()
        return self._sv.copy()


class _ExactBuffer:
    """Buffers the chunks (numpy on CPU, tensors on CUDA) for one float64 SVD at the end.

    Each chunk keeps its own precision, at least float32 (``np.result_type(dtype, float32)``): float32 log-P rows
    take half the memory of float64, and a float64 matrix is not rounded to float32 (which would put a noise floor
    at ≈1e-7·σ_max under its spectrum).
    """

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
        if is_cuda(self.device):
            chunk = _to_device(chunk, self.device)
        else:
            if is_tensor(chunk):
                chunk = chunk.detach().cpu().numpy()
            chunk = np.array(chunk, dtype=np.result_type(chunk.dtype, np.float32), copy=True)
        self.chunks.append(chunk)
        self.rows += int(chunk.shape[0])

    def singular_values(self) -> np.ndarray:
        if self.rows == 0:
            return np.zeros(0)
        if is_cuda(self.device):
            chunks, self.chunks = self.chunks, []
            return _svdvals_torch(chunks, self.device)
        return _svdvals_inplace(_drain_to_f64(self.chunks, self.rows, self.n_cols))


def accumulator(method: str, n_cols: int, device: str, spare_bytes: int = 0):
    """The accumulator of ``method``; ``spare_bytes``: memory beyond the method's own that it may use (Gram: for a
    faster eigenvalue solver that copies G)."""
    if method == "exact":
        return _ExactBuffer(n_cols, device)
    if method == "gram":
        return GramAccumulator(n_cols, device, copy_bytes=spare_bytes)
    if method == "tsqr":
        return QRAccumulator(n_cols, device)
    raise ValueError(f"unknown rank method {method!r}; choose one of exact, gram, tsqr")


def iter_row_chunks(A, chunk_rows: int = 4096) -> Iterable:
    """Yield consecutive row blocks of a 2-D array (works on ``np.memmap`` without loading it)."""
    for start in range(0, A.shape[0], chunk_rows):
        yield A[start : start + chunk_rows]
