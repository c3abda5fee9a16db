"""Press' rank, ε-effective rank and the exact / Gram / TSQR singular-value methods (spec §9)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from softmax_bottleneck.analysis import rank as R
from softmax_bottleneck.analysis import robustness as RB
from softmax_bottleneck.analysis import svd_stream as S
from softmax_bottleneck.cli import main as cli_main

STREAMED = ("gram", "tsqr")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny matrices: torch's thread pool only adds contention on a busy machine (restored afterwards)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


ALL = ("exact",) + STREAMED


def _known_rank(m=300, n=120, r=37, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, r)) @ rng.standard_normal((r, n))).astype(np.float32)


def _decaying(m=300, n=120, lo=1e-9, seed=1) -> tuple[np.ndarray, np.ndarray]:
    """float32 matrix whose float64 prototype has singular values geometric from 1 to ``lo``."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.logspace(0, math.log10(lo), n)
    return ((u * s) @ v.T).astype(np.float32), s


def _stream(a, method, chunk=37, **kw):
    st = R.RankStream(a.shape[1], method, **kw)
    for c in S.iter_row_chunks(a, chunk):
        st.update(c)
    return st.finish()


# ---------------------------------------------------------------------------------------------------------------
# definitions
# ---------------------------------------------------------------------------------------------------------------


def test_tolerance_formula():
    eps = np.finfo(np.float32).eps
    assert R.press_tolerance(2.0, 82429, 10000) == pytest.approx(0.5 * math.sqrt(92430) * 2.0 * eps, rel=1e-15)
    # spec §9.1: PTB tol ≈ 1.812e-5·σ_max, WT2 ≈ 1.538e-5·σ_max
    assert R.press_tolerance(1.0, 82429, 10000) == pytest.approx(1.812e-5, rel=1e-3)
    assert R.press_tolerance(1.0, 33320, 33278) == pytest.approx(1.538e-5, rel=1e-3)


def test_press_rank_is_strictly_greater():
    m, n = 10, 5
    tol = R.press_tolerance(1.0, m, n)
    sv = np.array([1.0, 0.5, np.nextafter(tol, 2.0), tol, tol / 2])
    assert R.press_rank(sv, (m, n)) == 3  # the value equal to tol does not count
    assert R.press_rank(sv[::-1], (m, n)) == 3  # order does not matter
    assert R.press_rank([], (m, n)) == 0


def test_effective_rank_by_hand():
    # σ² = 100, 10, 1, 0.1 → total 111.1; cumulative 100, 110, 111, 111.1
    sv = np.sqrt([100.0, 10.0, 1.0, 0.1])
    assert R.effective_rank(sv, 0.1) == 1  # 100 ≥ 0.9·111.1 = 99.99
    assert R.effective_rank(sv, 0.05) == 2  # 105.545 → 110
    assert R.effective_rank(sv, 1e-3) == 3  # 110.989 → 111
    assert R.effective_rank(sv, "1e-4") == 4  # 111.089 → 111.1
    assert R.effective_rank(sv, 0.0) == 4
    assert R.effective_ranks(sv) == {"1e-3": 3, "1e-4": 4, "1e-5": 4}
    assert R.effective_rank(np.zeros(3), 1e-3) == 0
    # exactly at the boundary counts (≥): σ² = 3, 1 → 0.75 of the energy in the first one
    assert R.effective_rank(np.sqrt([3.0, 1.0]), 0.25) == 1


def test_rank_summary_and_spectrum_table():
    sv = np.array([4.0, 2.0, 1.0, 0.0])
    s = R.rank_summary(sv, (10, 4), "exact")
    assert set(s) == {"press_rank", "effective_rank", "shape", "sigma_max", "tolerance", "method"}
    assert s["press_rank"] == 3 and s["shape"] == [10, 4] and s["sigma_max"] == 4.0
    assert set(s["effective_rank"]) == set(R.EPSILONS)
    json.dumps(s)  # plain JSON types
    t = R.spectrum_table(sv[::-1])
    assert list(t.columns) == ["index", "sigma", "sigma_normalised"]
    assert t["index"].tolist() == [0, 1, 2, 3]
    assert t["sigma"].tolist() == [4.0, 2.0, 1.0, 0.0]
    assert t["sigma_normalised"].tolist() == [1.0, 0.5, 0.25, 0.0]


# ---------------------------------------------------------------------------------------------------------------
# methods agree
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape_rank", [(300, 120, 37), (300, 120, 120), (500, 64, 1), (90, 120, 37)])
def test_methods_agree_on_known_rank(shape_rank):
    m, n, r = shape_rank
    a = _known_rank(m, n, r)
    expected = min(r, m, n)
    for method in ALL:
        sv, summary = _stream(a, method)
        assert summary["press_rank"] == expected, method
        assert summary["shape"] == [m, n] and summary["method"] == method
    assert R.press_rank(S.singular_values_exact(a), a.shape) == expected


def test_exact_is_float64_svd_of_float32_input():
    a, _ = _decaying()
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    sv = S.singular_values_exact(a)
    assert sv.dtype == np.float64
    np.testing.assert_allclose(sv, ref, rtol=1e-10, atol=1e-14 * ref[0])
    # the numpy call of the reference (float32 in, float64 inside, float32 out) agrees to float32 rounding
    np.testing.assert_allclose(sv, np.linalg.svd(a, compute_uv=False), rtol=2e-7)


@pytest.mark.parametrize("path", ["numpy", "tensor", "torch-svd", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_exact_keeps_float64_input_in_float64(path, monkeypatch):
    """A float64 rank-10 matrix streamed through ``exact``: its tail singular values are float64 round-off
    (≤ 1e-12·σ_max), not the ≈1e-7·σ_max of a float32 copy. ``torch-svd``: the CUDA branch, run on CPU tensors."""
    torch = pytest.importorskip("torch")
    if path == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((400, 10)) @ rng.standard_normal((10, 150))
    if path == "torch-svd":
        monkeypatch.setattr(S, "is_cuda", lambda device: True)
    stream = R.RankStream(a.shape[1], "exact", device="cuda" if path == "cuda" else "cpu")
    for chunk in S.iter_row_chunks(a, 64):
        stream.update(torch.from_numpy(chunk.copy()) if path == "tensor" else chunk)
    sv, summary = stream.finish()
    assert summary["method"] == "exact" and summary["press_rank"] == 10
    assert sv[10] <= 1e-12 * sv[0], sv[10] / sv[0]
    np.testing.assert_allclose(sv[:10], np.linalg.svd(a, compute_uv=False)[:10], rtol=1e-12)


def test_methods_agree_on_decaying_spectrum():
    a, _ = _decaying()
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    tol = R.press_tolerance(ref[0], *a.shape)
    above = ref > tol
    ranks = {}
    for method in ALL:
        sv, summary = _stream(a, method, chunk=50)
        ranks[method] = summary["press_rank"]
        rtol = 1e-4 if method == "gram" else 1e-10  # gram: relative error ~δ/(2σ²) near the threshold
        np.testing.assert_allclose(sv[above], ref[above], rtol=rtol, err_msg=method)
    assert len(set(ranks.values())) == 1 and ranks["exact"] == int(above.sum())
    assert 0 < ranks["exact"] < a.shape[1]
    # TSQR keeps the tail the Gram method loses
    sv_tsqr, _ = _stream(a, "tsqr")
    np.testing.assert_allclose(sv_tsqr, ref, rtol=1e-6, atol=1e-15)


def test_gram_and_qr_accumulators_directly():
    a = _known_rank(200, 50, 20)
    g, q = S.GramAccumulator(50), S.QRAccumulator(50, block_rows=64)
    for c in S.iter_row_chunks(a, 30):
        g.update(c)
        q.update(c)
    g.update(np.zeros((0, 50), np.float32))
    assert g.rows == q.rows == 200
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(q.singular_values(), ref, rtol=1e-9, atol=1e-12 * ref[0])
    np.testing.assert_allclose(g.singular_values()[:20], ref[:20], rtol=1e-9)


def test_stream_accepts_tensors_and_single_rows():
    torch = pytest.importorskip("torch")
    a = _known_rank(60, 20, 5)
    for method in ALL:
        st = R.RankStream(20, method)
        st.update(torch.from_numpy(a[:30]))
        for row in a[30:]:
            st.update(row)
        _, s = st.finish()
        assert s["press_rank"] == 5 and s["shape"] == [60, 20]


def test_auto_switches_to_streamed_without_losing_rows():
    a = _known_rank(300, 120, 37)
    budget = 100 * 120 * 8  # exact for the first 100 rows only
    st = R.RankStream(120, "auto", memory_budget_bytes=budget, fallback="tsqr")
    for c in S.iter_row_chunks(a, 40):
        st.update(c)
    assert st.method == "tsqr"
    sv, s = st.finish()
    assert s["shape"] == [300, 120] and s["press_rank"] == 37 and s["method"] == "tsqr"
    np.testing.assert_allclose(sv, S.singular_values_exact(a), rtol=1e-8, atol=1e-10 * sv[0])
    budget = R.memory_needed("gram", 300, 120)  # under the exact SVD's
    assert R.RankStream(120, "auto", memory_budget_bytes=budget, expected_rows=300).method == "gram"
    assert R.RankStream(120, "auto", expected_rows=300).method == "exact"


def test_auto_takes_gram_beyond_the_exact_limit_and_refuses_what_does_not_fit():
    """PTB's full matrix streams the Gram method by default; WT2's full one too, within the default budget (the
    rank computation under 10 GiB); a method over the budget is refused before any row, naming one that fits."""
    ptb, wt2 = (82_429, 10_000), (245_568, 33_278)
    assert R.RankStream(ptb[1], "auto", expected_rows=ptb[0]).method == "gram"
    need = R.memory_needed("gram", *wt2)
    assert 9 * 2**30 < need < 10 * 2**30  # n²·8 (8.3 GiB) and a block of 4096 rows (1.0 GiB)
    assert R.RankStream(wt2[1], "auto", expected_rows=wt2[0]).method == "gram"
    with pytest.raises(R.MemoryBudgetError) as err:
        R.RankStream(wt2[1], "exact", expected_rows=wt2[0])
    msg = str(err.value)
    assert "245,568 × 33,278" in msg and "--method gram needs 9.3 GiB" in msg and "--memory-budget-gb to 100" in msg
    with pytest.raises(R.MemoryBudgetError, match="needs about 9.3 GiB, over the memory budget of 8.0 GiB; raise"):
        R.RankStream(wt2[1], "auto", expected_rows=wt2[0], memory_budget_bytes=8 * 2**30)


@pytest.mark.parametrize("method", ALL)
def test_non_finite_rows_are_rejected(method):
    a = _known_rank(50, 10, 3)
    a[37, 4] = np.nan
    st = R.RankStream(10, method)
    st.update(a[:30])
    with pytest.raises(ValueError, match="row 37"):
        st.update(a[30:])
    b = np.ones((3, 10), np.float32)
    b[1, 0] = -np.inf
    with pytest.raises(ValueError, match="row 1 "):
        R.RankStream(10, method).update(b)


def test_bad_chunks_and_method():
    st = R.RankStream(10, "exact")
    with pytest.raises(ValueError, match="columns"):
        st.update(np.ones((3, 9)))
    with pytest.raises(ValueError, match="floating"):
        st.update(np.ones((3, 10), dtype=np.int64))
    with pytest.raises(ValueError, match="no rows"):
        st.finish()
    with pytest.raises(ValueError, match="unknown rank method"):
        R.RankStream(10, "svd")


# ---------------------------------------------------------------------------------------------------------------
# E12 robustness (SM §5)
# ---------------------------------------------------------------------------------------------------------------


def test_robustness_reconstruction_keeps_rank_k():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((80, 60))
    out = RB.robustness_reconstruction(a, k=10, iterations=3)
    assert [i for i, _, _ in out] == [1, 2, 3]
    assert all(pr == 10 for _, pr, _ in out)
    assert all(0.0 <= err < 1e-10 for _, _, err in out)


def test_robustness_noise_transition():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((80, 60))
    out = RB.robustness_noise(a, k=10, cs=(1e2, 1e-30), seed=0)
    big, tiny = out
    assert big["press_rank"] == 60  # noise std 1e2/3600 dominates the rounding → full rank
    assert tiny["press_rank"] == 10 and tiny["error"] == 0.0  # noise rounded away entirely
    for r in out:
        assert set(r["effective_rank"]) == set(R.EPSILONS)
    assert tiny["effective_rank"]["1e-5"] <= 10


def test_sm_table15_cs_union():
    assert len(RB.SM_TABLE15_CS) == 13 and 1e-32 in RB.SM_TABLE15_CS and 1e-2 in RB.SM_TABLE15_CS


# ---------------------------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["auto", "exact", "gram", "tsqr"])
def test_rank_cli_prints_json(tmp_path, capsys, method):
    a = _known_rank(120, 40, 9)
    f = tmp_path / "logp.npy"
    np.save(f, a)
    spec = tmp_path / "out" / "spectrum.csv"
    args = ["rank", str(f), "--method", method, "--chunk-rows", "50", "--spectrum-out", str(spec)]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"press_rank", "effective_rank", "shape", "sigma_max", "method", "tolerance"} <= set(out)
    assert out["press_rank"] == 9 and out["shape"] == [120, 40]
    assert set(out["effective_rank"]) == {"1e-3", "1e-4", "1e-5"}
    assert out["method"] == ("exact" if method == "auto" else method)
    import pandas as pd

    t = pd.read_csv(spec)
    assert list(t.columns) == ["index", "sigma", "sigma_normalised"] and len(t) == 40
    # every digit, as analyze writes them (before: 9 significant digits)
    exact = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert t["sigma"].iloc[0] == pytest.approx(exact[0], rel=1e-12) and t["sigma"].iloc[0] == out["sigma_max"]


def _cli_error(tmp_path, capsys, name, payload) -> str:
    f = tmp_path / name
    if isinstance(payload, np.ndarray):
        np.save(f, payload)
    else:
        f.write_text(payload)
    assert cli_main(["rank", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err
    return err


def test_rank_cli_errors(tmp_path, capsys):
    assert "2-D" in _cli_error(tmp_path, capsys, "vec.npy", np.ones(5, np.float32))
    assert "floating" in _cli_error(tmp_path, capsys, "int.npy", np.ones((4, 3), np.int64))
    assert "not a .npy" in _cli_error(tmp_path, capsys, "text.npy", "hello\n1 2 3\n")
    bad = np.ones((6, 3), np.float32)
    bad[4, 1] = np.inf
    assert "row 4" in _cli_error(tmp_path, capsys, "inf.npy", bad)
    assert cli_main(["rank", str(tmp_path / "missing.npy")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_rank_cli_subprocess_exit_code(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("1,2\n3,4\n")
    p = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "rank", str(f)], capture_output=True, text=True)
    assert p.returncode == 2 and str(f) in p.stderr and "not a .npy" in p.stderr


def test_robustness_cli(tmp_path):
    rng = np.random.default_rng(5)
    f = tmp_path / "logp.npy"
    np.save(f, rng.standard_normal((70, 40)).astype(np.float32))
    out = tmp_path / "robustness.csv"
    args = ["robustness", str(f), "--rows", "50", "--out", str(out), "--iterations", "2", "--cs", "1e2", "1e-30"]
    assert cli_main(args) == 0
    import pandas as pd

    t = pd.read_csv(out)
    assert list(t.columns) == [
        "algorithm",
        "iteration_or_c",
        "press_rank",
        "error",
        "erank_1e-3",
        "erank_1e-4",
        "erank_1e-5",
    ]
    assert t["algorithm"].tolist() == [0, 1, 1, 2, 2]
    # the matrix itself: 50 × 40 standard normal rows, full rank (as numpy's SVD says independently)
    assert t["press_rank"].tolist() == [np.linalg.matrix_rank(np.load(f)[:50].astype(np.float64)), 10, 10, 40, 10]
    assert t["press_rank"].iloc[0] == 40
    assert t["erank_1e-3"].isna().tolist() == [False, True, True, False, False]
    assert "10.0" not in out.read_text()  # ranks written as integers


def test_torch_code_paths_of_cuda_run_on_cpu(monkeypatch):
    """The CUDA branches (torch SVD/QR, tensor buffering) exercised on CPU tensors by pretending 'cpu' is CUDA."""
    pytest.importorskip("torch")
    monkeypatch.setattr(S, "is_cuda", lambda device: True)
    a, _ = _decaying(200, 60)
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    for method in ALL:
        sv, s = _stream(a, method, chunk=45, device="cpu")
        assert s["press_rank"] == R.press_rank(ref, a.shape), method
        rtol = 1e-4 if method == "gram" else 1e-9
        above = ref > s["tolerance"]
        np.testing.assert_allclose(sv[above], ref[above], rtol=rtol, err_msg=method)
    rng = np.random.default_rng(6)
    b = rng.standard_normal((40, 30))
    assert [pr for _, pr, _ in RB.robustness_reconstruction(b, k=5, iterations=2, device="cpu")] == [5, 5]
    noisy = RB.robustness_noise(b, k=5, cs=(1e2, 1e-30), device="cpu")
    assert [r["press_rank"] for r in noisy] == [30, 5]


@pytest.mark.parametrize("shape", [(300, 60), (60, 300), (70, 60)])
def test_exact_torch_path_tall_wide_square(monkeypatch, shape):
    pytest.importorskip("torch")
    monkeypatch.setattr(S, "is_cuda", lambda device: True)
    a = _known_rank(*shape, r=25)
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    sv = S.singular_values_exact(a, "cpu")
    np.testing.assert_allclose(sv, ref, rtol=1e-9, atol=1e-12 * ref[0])


def test_tsqr_singular_values_twice_and_no_rows_after():
    a = _known_rank(200, 50, 20)
    q = S.QRAccumulator(50, block_rows=64)
    q.update(a)
    first = q.singular_values()
    np.testing.assert_array_equal(q.singular_values(), first)  # R is consumed, the result kept
    with pytest.raises(ValueError, match="after the singular values"):
        q.update(a[:3])


def test_tsqr_torch_path_keeps_only_r(monkeypatch):
    """Between blocks the torch (CUDA) path holds R alone: a compact n×n tensor, not a view into the factorisation
    of [R; block] (which is (n + b)×n), and no buffered rows; memory stays O(n²) however many rows stream by."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(S, "is_cuda", lambda device: True)
    n, b = 40, 64
    a = _known_rank(500, n, 30)
    q = S.QRAccumulator(n, device="cpu", block_rows=b)
    for chunk in S.iter_row_chunks(a, 16):
        q.update(torch.from_numpy(chunk))
        if q._buf_rows == 0:  # just flushed
            assert q.r.shape == (n, n) and q.r.is_contiguous()
            assert q.r.untyped_storage().nbytes() == n * n * 8
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(q.singular_values(), ref, rtol=1e-9, atol=1e-12 * ref[0])


@pytest.mark.gpu
def test_tsqr_cuda_peak_memory_is_bounded_by_4_n_plus_b_n_doubles():
    """GPU: streaming m rows through TSQR peaks at ≈ 4·(n + b)·n·8 bytes, independent of m (``memory_needed``)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    n, b, m = 2048, 1024, 40_000
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = S.QRAccumulator(n, device="cuda", block_rows=b)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    for _ in range(0, m, 256):
        q.update(torch.randn(256, n, device="cuda", generator=gen))
    sv = q.singular_values()
    peak = torch.cuda.max_memory_allocated() - base
    bound = 4 * (n + b) * n * 8
    assert peak <= 1.1 * bound, (peak, bound)
    assert sv.shape == (n,) and sv[-1] > 0


def test_gram_eigenvalues_run_on_the_device_only_where_the_spare_budget_holds_the_solver_memory():
    """``torch.linalg.eigvalsh`` copies G (CPU: n²·8 bytes more; CUDA: cuSOLVER's 5·n²·8); without that room the
    eigenvalues are computed in place on the host, and both paths give the same σ."""
    n = 1000
    assert S.eig_on_device(n, "cpu", n * n * 8) and not S.eig_on_device(n, "cpu", n * n * 8 - 1)
    assert not S.eig_on_device(n, "cuda", 4 * n * n * 8) and S.eig_on_device(n, "cuda:1", 5 * n * n * 8)
    a = _known_rank(700, 90, 40)
    sv = []
    for spare in (0, 10 * 90 * 90 * 8):
        acc = S.GramAccumulator(90, copy_bytes=spare)
        assert acc.eig_copies == bool(spare)
        for chunk in S.iter_row_chunks(a, 64):
            acc.update(chunk)
        sv.append(acc.singular_values())
    # the 40 non-zero σ agree; the rounding tail under ≈1e-8·σ_max is the Gram method's noise (module docstring)
    np.testing.assert_allclose(sv[0][:40], sv[1][:40], rtol=1e-9)
    assert np.all(sv[0][40:] < 1e-7 * sv[0][0]) and np.all(sv[1][40:] < 1e-7 * sv[0][0])


def test_the_gram_eigen_step_may_use_the_budget_left_beside_g_once_the_block_is_freed():
    """RankStream hands Gram the budget minus G (n²·8): a copy of G fits from a budget of 2·n²·8 bytes, even though
    G and a block of rows (the accumulation's peak) need more than n²·8."""
    n, m = 5000, 5000
    both = 2 * n * n * 8
    assert n * n * 8 < R.memory_needed("gram", m, n) <= both
    assert R.RankStream(n, "gram", memory_budget_bytes=both, expected_rows=m)._impl.eig_copies
    assert not R.RankStream(n, "gram", memory_budget_bytes=both - 1, expected_rows=m)._impl.eig_copies
    # the default budget takes MKL's copying solver for WT2's full matrix (2 × 8.25 GiB), and stays under 20 GiB
    assert R.DEFAULT_MEMORY_BUDGET >= 2 * 33_278**2 * 8 and R.DEFAULT_MEMORY_BUDGET <= 18 * 2**30


@pytest.mark.gpu
def test_gram_cuda_peak_memory_follows_where_the_eigenvalues_run():
    """GPU: G and one block on the device ((n² + b·n)·8 bytes, ``memory_needed``); cuSOLVER's eigenvalues add
    5·n²·8 where the budget holds them, else G moves to the host and the GPU peak stays at the accumulation."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    n, b, m = 4096, 1024, 6144
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = torch.randn(m, n, device="cuda", generator=gen)
    assert R.memory_needed("gram", m, n, "cuda") == (n * n + S.GRAM_BLOCK_ROWS * n) * 8
    need = (n * n + b * n) * 8  # this test's block of b rows
    results = {}
    for spare in (0, S.CUSOLVER_EIG_WORK * n * n * 8):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        acc = S.GramAccumulator(n, device="cuda", block_rows=b, copy_bytes=spare)
        for start in range(0, m, 512):
            acc.update(rows[start : start + 512])
        results[spare] = (acc.singular_values(), torch.cuda.max_memory_allocated() - base)
    (sv_host, peak_host), (sv_dev, peak_dev) = results[0], results[S.CUSOLVER_EIG_WORK * n * n * 8]
    assert peak_host <= 1.1 * need, (peak_host, need)
    assert peak_dev <= 1.1 * (need + S.CUSOLVER_EIG_WORK * n * n * 8), (peak_dev, need)
    np.testing.assert_allclose(sv_host, sv_dev, rtol=1e-9)


def test_tsqr_with_fewer_rows_than_columns_in_one_block():
    """m < n rows that never filled a block: the SVD of those rows (m×n), not of an n×n R, gives the same σ."""
    a = _known_rank(30, 200, 25)
    q = S.QRAccumulator(200, block_rows=64)
    for chunk in S.iter_row_chunks(a, 7):
        q.update(chunk)
    assert q.r is None  # never flushed
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    sv = q.singular_values()
    assert sv.shape == (30,)
    np.testing.assert_allclose(sv, ref, rtol=1e-10, atol=1e-13 * ref[0])


@pytest.mark.gpu
def test_exact_cuda_peak_memory_is_about_2_m_n_doubles():
    """GPU: the exact path assembles the float64 matrix while it frees the float32 rows; peak ≈ 2·m·n·8 bytes."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    m, n = 30_000, 2_000
    gen = torch.Generator(device="cuda").manual_seed(0)
    st = R.RankStream(n, "exact", device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    for _ in range(0, m, 500):
        st.update(torch.randn(500, n, device="cuda", generator=gen))
    sv, summary = st.finish()
    peak = torch.cuda.max_memory_allocated() - base
    assert peak <= 1.15 * 2 * m * n * 8, (peak, 2 * m * n * 8)
    assert summary["press_rank"] == n and sv.shape == (n,)


def test_rank_stream_reports_the_gram_updates_flops_and_where_its_eigenvalues_run():
    """What ``analyze`` logs: the Gram method's update flops (m·n² counted per full block) and its eigen-solver's place;
    the exact SVD has neither."""
    a = _known_rank(300, 50, 10)
    gram = R.RankStream(50, "gram", memory_budget_bytes=2**30)
    exact = R.RankStream(50, "exact", memory_budget_bytes=2**30)
    for stream in (gram, exact):
        stream.update(a)
    assert exact.flops == 0 and exact.eig_where is None
    assert gram.eig_where == "eigenvalues by torch.linalg.eigvalsh on cpu"
    gram.finish()
    assert gram.flops == 300 * 50**2


def test_the_guides_own_model_example_runs_as_written_and_gives_its_rank(tmp_path):
    """docs/analyze-lm.md, "A model that is not a Hugging Face folder": its Python and its command, as written."""
    import re

    from conftest import REPO

    text = (REPO / "docs" / "analyze-lm.md").read_text()
    section = text.split("## A model that is not a Hugging Face folder", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (command,) = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    said = int(re.search(r"`press_rank` \((\d+) here", section).group(1))
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=300)
    subprocess.run(["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)], cwd=tmp_path, check=True,
                   timeout=300)  # fmt: skip
    summary = json.loads((tmp_path / "rank.json").read_text())
    assert summary["press_rank"] == said == 32 + 2 and summary["shape"] == [1200, 500]
    assert (tmp_path / "spectrum.csv").read_text().startswith("index,sigma,sigma_normalised")


def test_robustness_starts_with_the_matrix_itself():
    """robustness.csv's algorithm-0 row is the matrix's own Press' and ε-effective ranks, as numpy's SVD gives them
    (a matrix of rank 37: its rank-10 reconstruction is 10, the matrix itself 37)."""
    a = _known_rank(m=80, n=60, r=37, seed=3)
    table = RB.robustness_table(a, k=10, iterations=1, cs=(1e-30,))
    itself = table[table["algorithm"] == 0].iloc[0]
    sv = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert itself["press_rank"] == R.press_rank(sv, a.shape) == 37  # float32 entries: Press' tolerance, not numpy's
    assert {e: itself[f"erank_{e}"] for e in R.EPSILONS} == R.effective_ranks(sv)
    assert table["algorithm"].tolist() == [0, 1, 2] and table["press_rank"].tolist()[1:] == [10, 10]
