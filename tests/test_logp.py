"""Spec §8 (log-P extraction streamed into the rank) and §13 (qualitative top-5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO, TINY

from softmax_bottleneck.analysis.logp import analyze, iter_logp, row_count
from softmax_bottleneck.analysis.qualitative import CONTEXTS, check_contexts, top5
from softmax_bottleneck.corpora.corpus import batchify, load_corpus
from softmax_bottleneck.training.checkpoint import load_model
from softmax_bottleneck.training.evaluation import evaluate
from softmax_bottleneck.training.trainer import train

LIMITS = {"epochs": 1, "train_tokens": 4000, "valid_tokens": 500, "test_tokens": 600}


def _spread(model):
    """After one tiny epoch the logits barely vary, log Z(h) is then nearly affine in h and the rows' variation
    lies below Press' tolerance; a larger tied matrix gives real trained models' spread of logits (the
    algebra log P = H Wᵀ + 1 bᵀ − z 1ᵀ is unchanged)."""
    with torch.no_grad():
        model.encoder.weight.mul_(1000)
        model.output_layer.bias.normal_()
    return model


@pytest.fixture(scope="module")
def trained(ptb_cache, tmp_path_factory):
    """A tiny Softmax and a tiny MoS model trained on the first PTB tokens."""
    out = {}
    for variant, extra in (("softmax", {}), ("mos", {"n_experts": 3, "nhidlast": 12})):
        path = tmp_path_factory.mktemp(variant)
        train(dataset="ptb", variant=variant, schedule="et", out_dir=path, corpus_cache=ptb_cache,
              overrides={**TINY, **LIMITS, **extra})  # fmt: skip
        out[variant] = path / "model.pt"
    return out


def test_reference_row_counts():
    assert row_count("reference", "ptb", 82_430, 10_000, 70) == 82_429
    assert row_count("reference", "wt2", 245_569, 33_278, 70) == 33_320
    assert row_count("full", "wt2", 245_569, 33_278, 70) == 245_568
    assert row_count(100, "wt2", 245_569, 33_278, 70) == 100


def test_softmax_logp_rank_is_d_plus_2_and_rows_are_distributions(trained, ptb_cache):
    corpus = load_corpus(cache=ptb_cache)
    model, meta = load_model(trained["softmax"], corpus=corpus)
    _, summary = analyze(_spread(model), corpus.test, "ptb", rows=400)
    assert summary["shape"] == [400, 10_000]
    assert summary["press_rank"] == meta["hyperparameters"]["nemb"] + 2
    assert summary["max_abs_log_normaliser"] < 1e-4  # every row's probabilities sum to 1


def test_mos_rank_exceeds_d_plus_2(trained, ptb_cache):
    corpus = load_corpus(cache=ptb_cache)
    model, meta = load_model(trained["mos"], corpus=corpus)
    with torch.no_grad():  # the tiny model's latents barely vary yet: widen them too
        model.output_layer.latent.weight.mul_(100)
        model.output_layer.prior.weight.mul_(100)
    _, summary = analyze(_spread(model), corpus.test, "ptb", rows=400)
    assert summary["press_rank"] > meta["hyperparameters"]["nemb"] + 2


def test_mean_nll_of_true_tokens_equals_the_evaluators_test_loss(trained, ptb_cache):
    corpus = load_corpus(cache=ptb_cache).limited(test_tokens=LIMITS["test_tokens"])
    model, _ = load_model(trained["softmax"], corpus=corpus)
    _, summary = analyze(model, corpus.test, "ptb", rows="full")
    t = len(corpus.test)
    evaluator = evaluate(model, batchify(corpus.test, 1), model.hp["bptt"])  # divides by T, not T − 1 (§7)
    assert summary["shape"][0] == t - 1
    assert summary["logp_test_loss"] * (t - 1) / t == pytest.approx(evaluator, rel=1e-6)
    metrics = json.loads((trained["softmax"].parent / "metrics.json").read_text())
    assert metrics["test_loss"] == pytest.approx(evaluator, rel=1e-6)


def test_analyze_cli_saves_matrix_and_rank_cli_agrees(trained, ptb_cache, tmp_path):
    env = {"PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "softmax_bottleneck", "analyze", "--checkpoint", str(trained["mos"]),
           "--corpus-cache", str(ptb_cache), "--rows", "300", "--out-json", str(tmp_path / "rank.json"),
           "--out-spectrum", str(tmp_path / "spectrum.csv"), "--save-logp", str(tmp_path / "logp.npy")]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, env={**env, "PATH": "/usr/bin"})
    summary = json.loads((tmp_path / "rank.json").read_text())
    matrix = np.load(tmp_path / "logp.npy")
    assert matrix.shape == (300, 10_000) and matrix.dtype == np.float32
    assert np.allclose(np.exp(matrix.astype(np.float64)).sum(1), 1.0, atol=1e-4)
    spectrum = pd.read_csv(tmp_path / "spectrum.csv")
    assert len(spectrum) == 300 and spectrum["sigma_normalised"].iloc[0] == 1.0
    rank_cmd = [sys.executable, "-m", "softmax_bottleneck", "rank", str(tmp_path / "logp.npy")]
    out = subprocess.run(rank_cmd, check=True, capture_output=True, text=True, env={**env, "PATH": "/usr/bin"}).stdout
    assert json.loads(out)["press_rank"] == summary["press_rank"]


def test_checkpoint_of_another_vocabulary_is_rejected(trained, shared_data):
    wt2 = load_corpus(shared_data / "wikitext-2")
    with pytest.raises(ValueError, match="does not match the corpus vocabulary"):
        load_model(trained["softmax"], corpus=wt2)


def test_the_18_contexts_are_located_in_the_real_test_set(ptb_cache):
    corpus = load_corpus(cache=ptb_cache)
    check_contexts(corpus.test, corpus.dictionary.idx2word)  # raises on any misplaced context
    with pytest.raises(ValueError, match="Yang #1"):
        check_contexts(corpus.test, corpus.dictionary.idx2word, [("Yang", 1, "tons", 2701)])


def test_top5_table(trained, ptb_cache):
    corpus = load_corpus(cache=ptb_cache)
    model, _ = load_model(trained["softmax"], corpus=corpus)
    table = top5(model, corpus.test, corpus.dictionary.idx2word)
    assert len(table) == 18 and list(table["token_index"]) == [c[3] for c in CONTEXTS]
    words = table[[f"word_{k}" for k in range(1, 6)]].to_numpy()
    assert list(table["hit"]) == [t in row for t, row in zip(table["true_token"], words, strict=True)]
    probs = table[[f"prob_{k}" for k in range(1, 6)]].to_numpy()
    assert (np.diff(probs, axis=1) <= 0).all() and (probs.sum(1) <= 1 + 1e-6).all()
    # the probabilities are the model's: recompute Yang #1 (log-P row 2699) from the stream
    rows = torch.cat([lp for lp, _ in iter_logp(model, corpus.test, 2700)])
    expected = rows[2699].exp().topk(5).values.numpy()
    assert np.allclose(probs[0], expected, atol=1e-6)


@pytest.mark.parametrize("variant", ["softmax", "mos"])
def test_streamed_methods_match_a_float64_exact_svd_on_a_real_models_matrix(variant, trained, ptb_cache):
    """The precision argument of docs/rank-at-scale.md at a reduced size (seconds): a real (tiny) model's log-P rows,
    2,100 × the 1,500 most frequent words' columns; Gram (float64 AᵀA, eigenvalues only) and TSQR against a float64
    exact SVD: σ above Press' threshold to 1e-6 relative (the Gram bound κ²·u, κ = σ_max/tol ≈ 4e4: ≈ 2e-7, times a
    small factor), and the same Press rank and ε-ranks."""
    from softmax_bottleneck.analysis.rank import RankStream
    from softmax_bottleneck.analysis.svd_stream import singular_values_exact

    corpus = load_corpus(cache=ptb_cache)
    model, _ = load_model(trained[variant], corpus=corpus)
    if variant == "mos":
        with torch.no_grad():
            model.output_layer.latent.weight.mul_(100)
            model.output_layer.prior.weight.mul_(100)
    model = _spread(model)
    rows = [lp[:, :1500].double().numpy() for lp, _ in iter_logp(model, corpus.test, 2100)]
    a = np.concatenate(rows)
    assert a.shape == (2100, 1500)
    ref = singular_values_exact(a)
    results = {}
    for method in ("gram", "tsqr"):
        stream = RankStream(a.shape[1], method)
        for chunk in rows:
            stream.update(chunk)
        results[method] = stream.finish()
    ref_summary = RankStream(a.shape[1], "exact")
    ref_summary.update(a)
    _, ref_summary = ref_summary.finish()
    above = ref > ref_summary["tolerance"]
    assert 0 < above.sum() < a.shape[1]
    for method, (sv, summary) in results.items():
        assert summary["press_rank"] == ref_summary["press_rank"], method
        assert summary["effective_rank"] == ref_summary["effective_rank"], method
        rel = np.abs(sv[above] - ref[above]) / ref[above]
        assert rel.max() < 1e-6, (method, rel.max())


@pytest.mark.parametrize("proc", ["linux", "none"])
def test_a_long_step_of_the_analysis_logs_a_heartbeat_with_memory_where_proc_tells_it(capfd, caplog, monkeypatch,
                                                                                      tmp_path, proc):  # fmt: skip
    """A long LAPACK call holds the GIL, so a watcher process logs "running for Ns" meanwhile, with the resident
    memory read from ``/proc``; without ``/proc`` (macOS) the lines give the time alone, and they still come. The
    rows' progress line gives the memory now and at its peak, or the peak alone."""
    import logging
    import time

    from softmax_bottleneck.analysis.logp import Progress
    from softmax_bottleneck.cluster import processes

    if proc == "none":
        monkeypatch.setattr(processes, "PROC", tmp_path / "no-proc")
    with Progress(total=1, every=0.3).heartbeat("singular values"):
        time.sleep(2.0)
    lines = [line for line in capfd.readouterr().err.splitlines() if "singular values: running for" in line]
    assert len(lines) >= 2, lines
    assert all((" GiB (peak " in line) == (proc == "linux") for line in lines), lines
    with caplog.at_level(logging.INFO, logger="softmax_bottleneck.analysis.logp"):
        Progress(total=10, every=0.0).rows(10)
    assert "10/10 rows (100.0%)" in caplog.text
    assert caplog.text.rstrip().endswith(" GiB)" if proc == "linux" else " GiB") and "peak" in caplog.text


#: heartbeats during a long step, the whole process group stopped with Ctrl-C (SIGINT) after a second, then again at
#: 0, 2, 4, ... 58 ms into the step (while its watcher starts); the process itself says each time that it stopped, as
#: ``analyze`` does through its signal handler (Python's own, set here: a process started in the background of a shell
#: script inherits SIGINT ignored, and Python then leaves it ignored)
CTRL_C = """
import os, signal, time
from softmax_bottleneck.analysis.logp import Progress
signal.signal(signal.SIGINT, signal.default_int_handler)
for delay in [1.0] + [0.002 * i for i in range(30)]:
    try:
        with Progress(total=1, every=0.2).heartbeat("singular values"):
            time.sleep(delay)
            os.killpg(0, signal.SIGINT)
            time.sleep(5.0)
    except KeyboardInterrupt:
        print("stopped")
time.sleep(1.0)  # time for a watcher to print what it prints on the signal
"""


def test_ctrl_c_during_a_heartbeat_leaves_no_traceback_in_the_log():
    """Ctrl-C, at any moment of a step, leaves no traceback in the analysis's log and no watcher's line after the
    step: the watcher runs in its own process group, which a terminal's Ctrl-C does not reach (before, Ctrl-C in the
    watcher's first ~10 ms, while it imported what it needs, printed its KeyboardInterrupt)."""
    done = subprocess.run([sys.executable, "-c", CTRL_C], capture_output=True, text=True, timeout=300,
                          start_new_session=True)  # fmt: skip
    assert done.stdout.split() == ["stopped"] * 31, done.stdout + done.stderr
    assert "singular values: running for" in done.stderr and "Traceback" not in done.stderr, done.stderr


#: a heartbeat whose process prints its watcher's pid (its one child), then waits to be killed
KILLED = """
import os, pathlib, time
from softmax_bottleneck.analysis.logp import Progress
with Progress(total=1, every=0.2).heartbeat("singular values"):
    children = pathlib.Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
    print(*children, flush=True)
    time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process's children from /proc")
def test_the_watcher_ends_when_its_analysis_is_killed_with_its_whole_process_group():
    """An analysis killed with SIGKILL, as Snakemake and job schedulers kill a job's process group: its watcher, in a
    process group of its own, finds its stdin closed and ends (no orphan goes on writing into the log)."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        (watcher,) = map(int, proc.stdout.readline().split())
        assert os.getpgid(watcher) != os.getpgid(proc.pid)  # Ctrl-C of the analysis's group does not reach it
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 10
        while alive(watcher) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(watcher), f"the watcher {watcher} still runs after its analysis was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_pass_over_the_rows_sums_the_loss_and_finds_the_worst_log_normaliser():
    """feed_rows against numpy: −Σ log P(target), max |logsumexp(row)| of rows that are not normalised (3.0 off, one
    row 5.0 off), every row streamed and saved; a non-finite entry stops it naming its row."""
    from softmax_bottleneck.analysis.logp_rows import NonFiniteLogP, feed_rows
    from softmax_bottleneck.analysis.rank import RankStream

    rng = np.random.default_rng(2)
    logits = rng.standard_normal((12, 6))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True)) + 3.0
    logp[7] += 2.0
    targets = rng.integers(0, 6, 12)
    chunks = [(torch.tensor(logp[i : i + 5], dtype=torch.float32), torch.tensor(targets[i : i + 5]))
              for i in range(0, 12, 5)]  # fmt: skip
    saved, seen = np.zeros((12, 6), np.float32), []
    stream = RankStream(6, "exact")
    totals = feed_rows(chunks, stream, saved, seen.append)
    assert totals.rows == 12 and seen == [5, 10, 12] and np.array_equal(saved, logp.astype(np.float32))
    assert totals.nll_sum == pytest.approx(-logp[np.arange(12), targets].sum(), rel=1e-6)
    assert totals.worst_norm == pytest.approx(5.0, abs=1e-5)
    bad = logp.copy()
    bad[8, 2] = np.nan
    with pytest.raises(NonFiniteLogP, match="row 8 "):
        feed_rows([(torch.tensor(bad, dtype=torch.float32), torch.tensor(targets))], RankStream(6, "exact"))
