"""The analysis commands on bad inputs (one line naming the file, non-zero exit), on SIGTERM/SIGINT (no partial
output left), and their help texts."""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, TINY

from softmax_bottleneck import cli
from softmax_bottleneck.analysis import rank, svd_stream, wordsim
from softmax_bottleneck.analysis.logp import analyze
from softmax_bottleneck.analysis.rank import memory_needed
from softmax_bottleneck.corpora.corpus import load_corpus
from softmax_bottleneck.corpora.integrity import seal
from softmax_bottleneck.training.checkpoint import load_model
from softmax_bottleneck.training.trainer import train

LIMITS = {"epochs": 1, "train_tokens": 2000, "valid_tokens": 300, "test_tokens": 400}


@pytest.fixture(scope="module")
def model_pt(ptb_cache, tmp_path_factory) -> Path:
    """A tiny Softmax model trained on the first PTB tokens."""
    out = tmp_path_factory.mktemp("softmax")
    train(dataset="ptb", variant="softmax", schedule="et", out_dir=out, corpus_cache=ptb_cache,
          overrides={**TINY, **LIMITS})  # fmt: skip
    return out / "model.pt"


def _bad_checkpoint(kind: str, folder: Path, good: Path) -> Path:
    path = folder / f"{kind}.pt"
    if kind == "missing":
        return path
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif kind == "text":
        path.write_text("epoch 1 | loss 5.3\n")
    elif kind == "pickle":
        path.write_bytes(pickle.dumps(collections.Counter("a pickle is not a checkpoint")))
    elif kind == "pickled-objects":  # a torch zip archive holding a whole module: never unpickled
        torch.save(torch.nn.Linear(3, 4), path)
    elif kind == "state-dict":  # the weights of some other model
        torch.save(torch.nn.Linear(3, 4).state_dict(), path)
    elif kind == "other-weights":  # our format, but the weights do not fit the hyper-parameters
        blob = torch.load(good, map_location="cpu", weights_only=True)
        blob["hyperparameters"] = {**blob["hyperparameters"], "nhid": blob["hyperparameters"]["nhid"] + 2}
        torch.save(seal(blob), path)  # sealed anew: the weights check, not the checksum, must refuse it
    elif kind == "nan-weights":  # our format, weights that fit, but the run diverged
        blob = torch.load(good, map_location="cpu", weights_only=True)
        blob["state_dict"]["rnns.1.lstm.bias_hh_l0"][3] = float("nan")
        torch.save(seal(blob), path)
    elif kind == "directory":
        path.mkdir()
    return path


BAD_CHECKPOINTS = ["missing", "empty", "truncated", "text", "pickle", "pickled-objects", "state-dict",
                   "other-weights", "nan-weights", "directory"]  # fmt: skip


def _one_line_error(capsys, path) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0] and "Traceback" not in err
    return lines[0]


def _benchmarks(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for name in wordsim.BENCHMARKS.values():
        (folder / name).write_text("the a 1\nof and 2\nin to 3\n")
    return folder


def _exit_code(argv) -> int:
    try:
        return cli.main(argv)
    except SystemExit as stop:  # argparse, or a command that exits
        return stop.code if isinstance(stop.code, int) else 1


@pytest.mark.parametrize("kind", BAD_CHECKPOINTS)
@pytest.mark.parametrize("command", ["analyze", "qualitative", "wordsim"])
def test_bad_checkpoint_is_one_line_naming_it(command, kind, model_pt, ptb_cache, tmp_path, capsys):
    bad = _bad_checkpoint(kind, tmp_path, model_pt)
    out = tmp_path / "out"
    argv = {
        "analyze": ["analyze", "--checkpoint", str(bad), "--corpus-cache", str(ptb_cache),
                    "--out-json", str(out / "rank.json"), "--device", "cpu"],
        "qualitative": ["qualitative", "--checkpoint", str(bad), "--corpus-cache", str(ptb_cache),
                        "--out", str(out / "top5.csv"), "--device", "cpu"],
        "wordsim": ["wordsim", "--checkpoint", str(bad), "--benchmarks", str(_benchmarks(tmp_path / "ws")),
                    "--own-benchmarks", "--out", str(out / "wordsim.csv")],
    }[command]  # fmt: skip
    capsys.readouterr()
    assert _exit_code(argv) != 0
    line = _one_line_error(capsys, bad)
    assert line.startswith(f"{command}: ")
    assert not out.exists()


def test_the_good_checkpoint_passes(model_pt, ptb_cache, tmp_path):
    """The same command lines work on the real checkpoint (the failures above are about the files)."""
    out = tmp_path / "out"
    argv = ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(ptb_cache), "--rows", "50",
            "--out-json", str(out / "rank.json"), "--device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 0
    assert json.loads((out / "rank.json").read_text())["shape"] == [50, 10_000]
    argv = ["wordsim", "--checkpoint", str(model_pt), "--benchmarks", str(_benchmarks(tmp_path / "ws")),
            "--own-benchmarks", "--out", str(out / "wordsim.csv")]  # fmt: skip
    assert cli.main(argv) == 0


@pytest.mark.parametrize("budget", ["nan", "inf", "-1", "0", "lots"])
def test_bad_memory_budget_is_refused_by_the_parser(budget, tmp_path, capsys):
    argv = ["analyze", "--checkpoint", str(tmp_path / "m.pt"), "--out-json", str(tmp_path / "r.json"),
            "--memory-budget-gb", budget]  # fmt: skip
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"argument --memory-budget-gb: expected a positive number, not '{budget}'" in err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["analyze", "analyze-lm"])
@pytest.mark.parametrize("name", ["logp.txt", "logp.csv", "logp"])
def test_save_logp_refuses_a_name_that_is_not_npy(command, name, tmp_path, capsys):
    """Before, ``--save-logp logp.txt`` wrote NumPy's binary .npy under a text file's name."""
    model = ["--checkpoint", str(tmp_path / "m.pt")] if command == "analyze" else ["--model", "m", "--text", "t.txt"]
    argv = [command, *model, "--out-json", str(tmp_path / "r.json"), "--save-logp", str(tmp_path / name)]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / name).exists()
    said = f"{command}: error: argument --save-logp: '{tmp_path / name}': the matrix is written as NumPy's binary .npy"
    assert f"python -m softmax_bottleneck {said}; give a name ending in .npy" in err.strip().splitlines()[-1]


def test_corpus_cache_that_is_a_directory_is_one_line(model_pt, tmp_path, capsys):
    folder = tmp_path / "cache.pt"
    folder.mkdir()
    argv = ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(folder), "--out-json",
            str(tmp_path / "r.json"), "--device", "cpu"]  # fmt: skip
    assert _exit_code(argv) == 2
    assert "is a directory" in _one_line_error(capsys, folder)
    assert not (tmp_path / "r.json").exists()


def test_non_finite_log_p_is_one_line_naming_the_checkpoint(model_pt, ptb_cache, tmp_path, capsys, monkeypatch):
    """Finite weights can still overflow to a NaN log-probability: the command says which model, no traceback."""
    from softmax_bottleneck.analysis import logp

    original = logp.iter_logp

    def poisoned(*args, **kwargs):
        for i, (log_prob, targets) in enumerate(original(*args, **kwargs)):
            if i == 1:
                log_prob = log_prob.clone()
                log_prob[4, 7] = float("inf")
            yield log_prob, targets

    monkeypatch.setattr(logp, "iter_logp", poisoned)
    out = tmp_path / "out"
    argv = ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(ptb_cache), "--rows", "150",
            "--save-logp", str(out / "logp.npy"), "--out-json", str(out / "r.json"), "--device", "cpu"]  # fmt: skip
    assert _exit_code(argv) == 2
    line = _one_line_error(capsys, model_pt)
    assert "log-P row 14 has non-finite entries" in line  # TINY bptt = 10: chunk 1 starts at row 10
    assert not out.exists() or not list(out.iterdir())


def test_checkpoint_of_another_vocabulary_names_both(model_pt, ptb_cache, tmp_path, capsys):
    from softmax_bottleneck.corpora.corpus import vocab_sha256

    blob = torch.load(model_pt, map_location="cpu", weights_only=True)
    blob["vocab"] = list(reversed(blob["vocab"]))  # same words, other ids
    blob["vocab_sha256"] = vocab_sha256(blob["vocab"])
    other = tmp_path / "other-vocab.pt"
    torch.save(seal(blob), other)
    argv = ["analyze", "--checkpoint", str(other), "--corpus-cache", str(ptb_cache), "--out-json",
            str(tmp_path / "r.json"), "--device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 2
    line = _one_line_error(capsys, other)
    assert "does not match the corpus" in line and str(ptb_cache) in line


def test_edited_data_is_refused_before_the_model_runs(model_pt, shared_data, tmp_path, capsys):
    data = tmp_path / "ptb"
    data.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.txt").write_bytes((shared_data / "ptb" / f"{split}.txt").read_bytes())
    with open(data / "test.txt", "a") as handle:
        handle.write(" an extra line \n")
    argv = ["analyze", "--checkpoint", str(model_pt), "--data", str(data), "--out-json", str(tmp_path / "r.json"),
            "--device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 2
    line = _one_line_error(capsys, data / "test.txt")
    assert "published ptb test.txt" in line and not (tmp_path / "r.json").exists()


def test_qualitative_refuses_a_wt2_model_before_reading_data(model_pt, tmp_path, capsys):
    blob = torch.load(model_pt, map_location="cpu", weights_only=True)
    blob["dataset"] = "wt2"
    wt2 = tmp_path / "wt2.pt"
    torch.save(seal(blob), wt2)
    argv = ["qualitative", "--checkpoint", str(wt2), "--data", str(tmp_path / "nowhere"), "--out",
            str(tmp_path / "top5.csv"), "--device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 2
    assert "needs a ptb model" in _one_line_error(capsys, wt2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
@pytest.mark.parametrize("command", ["analyze", "rank"])
def test_cuda_without_cuda_is_one_line(command, model_pt, tmp_path, capsys):
    matrix = tmp_path / "m.npy"
    np.save(matrix, np.ones((4, 3), np.float32))
    argv = {
        "analyze": ["analyze", "--checkpoint", str(model_pt), "--out-json", str(tmp_path / "r.json"),
                    "--device", "cuda"],
        "rank": ["rank", str(matrix), "--device", "cuda"],
    }[command]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CUDA is not available" in err


def _bad_matrix(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.npy"
    good = np.arange(60, dtype=np.float32).reshape(12, 5)
    if kind == "missing":
        return path
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        np.save(path, good)
        path.write_bytes(path.read_bytes()[:150])
    elif kind == "header-only":
        np.save(path, good)
        path.write_bytes(path.read_bytes()[:40])
    elif kind == "text":
        path.write_text("1,2,3\n4,5,6\n")
    elif kind == "object-array":
        np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    elif kind == "torch-file":
        torch.save({"w": torch.ones(3)}, path)
    elif kind == "npz":
        with open(path, "wb") as handle:
            np.savez(handle, a=good)
    elif kind == "vector":
        np.save(path, good.ravel())
    elif kind == "integers":
        np.save(path, good.astype(np.int64))
    elif kind == "nan-row":
        good[7, 2] = np.nan
        np.save(path, good)
    elif kind == "float16":  # its rounding lies above Press' float32 tolerance (before: rank 984 of a rank-32 matrix)
        np.save(path, good.astype(np.float16))
    return path


BAD_MATRICES = ["missing", "empty", "truncated", "header-only", "text", "object-array", "torch-file", "npz",
                "vector", "integers", "nan-row", "float16"]  # fmt: skip


@pytest.mark.parametrize("kind", BAD_MATRICES)
@pytest.mark.parametrize("command", ["rank", "robustness"])
def test_bad_matrix_is_one_line_naming_it(command, kind, tmp_path, capsys):
    bad = _bad_matrix(kind, tmp_path)
    out = tmp_path / "out" / "robustness.csv"
    argv = ["rank", str(bad)] if command == "rank" else ["robustness", str(bad), "--k", "2", "--out", str(out)]
    assert _exit_code(argv) == 2
    line = _one_line_error(capsys, bad)
    assert line.startswith(f"{command}: error: ")
    if kind == "nan-row":
        assert "row 7" in line
    if kind == "float16":
        assert "a float16 matrix: its rounding (ε = 9.8e-04) lies far above Press' float32 tolerance" in line
    assert not out.parent.exists()


@pytest.mark.parametrize("command", ["rank", "robustness", "analyze", "analyze-lm"])
def test_a_device_the_package_does_not_run_on_is_one_line(command, tmp_path, capsys):
    """Before, --device mps passed the check and ended in a traceback (PyTorch not linked with MPS)."""
    matrix = tmp_path / "m.npy"
    np.save(matrix, np.ones((4, 3), np.float32))
    argv = {"rank": ["rank", str(matrix)], "robustness": ["robustness", str(matrix), "--out", str(tmp_path / "r.csv")],
            "analyze": ["analyze", "--checkpoint", str(tmp_path / "m.pt"), "--out-json", str(tmp_path / "r.json")],
            "analyze-lm": ["analyze-lm", "--model", str(tmp_path), "--text", str(matrix), "--out-json",
                           str(tmp_path / "r.json")]}[command]  # fmt: skip
    assert _exit_code([*argv, "--device", "mps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"{command}: error: --device mps: mps is not supported; use auto, cpu, cuda or cuda:N", err


def test_wt2_full_rows_never_buffer_the_matrix(model_pt, ptb_cache, monkeypatch):
    """``rows="full"`` beyond the exact method's budget streams the Gram method from the first row: the exact buffer
    is never touched (the n = 10,000 eigenvalues are stubbed: this is about the routing, not the solver)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the exact method buffered rows")

    monkeypatch.setattr(svd_stream._ExactBuffer, "update", refuse)
    monkeypatch.setattr(svd_stream.GramAccumulator, "singular_values", lambda self: np.geomspace(1.0, 1e-3, 300))
    corpus = load_corpus(cache=ptb_cache).limited(test_tokens=301)
    model, _ = load_model(model_pt, corpus=corpus)
    monkeypatch.setattr(rank, "EXACT_AUTO_BYTES", 299 * model.vocab_size * 8)  # "small" ends one row short
    budget = memory_needed("gram", 300, model.vocab_size)  # the Gram method fits, the exact one does not
    _, summary = analyze(model, corpus.test, "wt2", rows="full", memory_budget_bytes=budget)
    assert summary["method"] == "gram" and summary["shape"] == [300, model.vocab_size]


def test_over_the_memory_budget_is_refused_before_the_model_runs(model_pt, ptb_cache, tmp_path, capsys, monkeypatch):
    import softmax_bottleneck.analysis.logp as logp

    def refuse(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setattr(logp, "iter_logp", refuse)
    out = tmp_path / "out"
    argv = ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(ptb_cache), "--rows", "full",
            "--method", "exact", "--memory-budget-gb", "2", "--out-json", str(out / "rank.json")]  # fmt: skip
    assert _exit_code(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        f"analyze: error: {model_pt}: the exact method on a 82,429 × 10,000 matrix needs about 10.0 GiB, over the "
        "memory budget of 2.0 GiB; --method gram needs 1.1 GiB, or raise --memory-budget-gb to 11"
    )
    assert not out.exists()


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["exact", "tsqr"])
def test_analyze_on_cuda_agrees_with_cpu(method, model_pt, ptb_cache):
    """GPU: the same log-P rows give the same Press' rank and singular values on CUDA, with the peak memory."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from softmax_bottleneck.training.environment import configure_precision

    configure_precision(tf32=False)  # what analyze does: no TF32 on Ampere and later
    corpus = load_corpus(cache=ptb_cache)
    results = {}
    for device in ("cpu", "cuda"):
        model, _ = load_model(model_pt, device, corpus=corpus)
        results[device] = analyze(model, corpus.test, "ptb", rows=700, method=method)
    (sv_cpu, cpu), (sv_cuda, gpu) = results["cpu"], results["cuda"]
    assert gpu["press_rank"] == cpu["press_rank"] and gpu["method"] == method
    above = sv_cpu > cpu["tolerance"]
    np.testing.assert_allclose(sv_cuda[above], sv_cpu[above], rtol=1e-4)
    assert 0 < gpu["peak_cuda_memory_gib"] < 4 and "peak_cuda_memory_gib" not in cpu


# ---------------------------------------------------------------------------------------------------------------
# SIGTERM / SIGINT: no partial output
# ---------------------------------------------------------------------------------------------------------------

#: runs the analyze command with iter_logp paused (signal.pause) after its third chunk, so the signal arrives
#: while the memory-mapped .npy is being written; "ready" on stdout says when
PAUSED_ANALYZE = """
import signal, sys
import softmax_bottleneck.analysis.logp as logp
original = logp.iter_logp
def paused(*args, **kwargs):
    for i, chunk in enumerate(original(*args, **kwargs)):
        yield chunk
        if i == 2:
            print("ready", flush=True)
            signal.pause()
logp.iter_logp = paused
from softmax_bottleneck.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_save_logp_leaves_no_temporary(sig, model_pt, ptb_cache, tmp_path):
    out = tmp_path / "out"
    argv = ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(ptb_cache), "--rows", "200",
            "--save-logp", str(out / "logp.npy"), "--out-json", str(out / "rank.json"),
            "--out-spectrum", str(out / "spectrum.csv"), "--device", "cpu"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_ANALYZE, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        partial = list(out.glob(".logp.npy.*.tmp"))
        assert len(partial) == 1 and partial[0].stat().st_size > 200 * 10_000 * 4  # the memmap is being written
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig
    assert err.strip().splitlines()[-1] == f"analyze: stopped by {signal.Signals(sig).name}; partial outputs removed"
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == []  # no temporary, no logp.npy, no rank.json


# ---------------------------------------------------------------------------------------------------------------
# help texts
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["fetch", "analyze", "rank", "robustness", "wordsim", "qualitative"])
def test_every_option_has_a_one_line_help_and_the_command_a_description(command):
    module, summary = cli.COMMANDS[command]
    assert summary and "\n" not in summary
    parser = argparse.ArgumentParser(prog=command)
    cli._load(module, command).add_cli(parser)
    assert parser.description and len(parser.description) > 40
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"{command} {name} has no help"
        assert "\n" not in action.help and "§" not in action.help.replace("SM §", ""), f"{command} {name}"


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_commands_help_renders_its_percent_signs(command, capsys):
    """argparse %-formats option help but not a description: "95 %% interval" showed its two signs in ``claims``."""
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    shown = capsys.readouterr().out
    assert done.value.code == 0 and shown.startswith("usage:") and "%%" not in shown and "%(" not in shown


# ---------------------------------------------------------------------------------------------------------------
# a full disk, and a run killed by SIGKILL: one line, nothing partial left; the next run cleans up
# ---------------------------------------------------------------------------------------------------------------


def _analyze_argv(model_pt, ptb_cache, out: Path, rows: int = 200) -> list[str]:
    return ["analyze", "--checkpoint", str(model_pt), "--corpus-cache", str(ptb_cache), "--rows", str(rows),
            "--save-logp", str(out / "logp.npy"), "--out-json", str(out / "rank.json"),
            "--out-spectrum", str(out / "spectrum.csv"), "--device", "cpu"]  # fmt: skip


def test_full_disk_while_saving_logp_is_one_line_naming_the_file(model_pt, ptb_cache, tmp_path, capsys, monkeypatch):
    """ENOSPC comes when the .npy's disk space is reserved, before any row (not as SIGBUS inside the memory map)."""

    def full(fd, offset, length):
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "posix_fallocate", full)
    out = tmp_path / "out"
    assert _exit_code(_analyze_argv(model_pt, ptb_cache, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"analyze: error: {out / 'logp.npy'}: cannot write " + (
        "(no space left on the device (disk or quota full)); nothing was written"
    )
    assert not any("Traceback" in line for line in err)
    assert sorted(p.name for p in out.iterdir()) == []


def test_full_disk_while_writing_the_json_is_one_line_naming_it(model_pt, ptb_cache, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    real_fsync = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp") and ".rank.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(28, os.strerror(28))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert _exit_code(_analyze_argv(model_pt, ptb_cache, out, rows=100)) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"analyze: error: {out / 'rank.json'}: cannot write " + (
        "(no space left on the device (disk or quota full)); nothing was written"
    )
    assert not list(out.glob(".*.tmp")) and not (out / "rank.json").exists()


#: the analyze command with the file-size limit (RLIMIT_FSIZE) under the .npy's size: a real write error of the
#: kernel (EFBIG; Python ignores SIGXFSZ), like a full disk
LIMITED_ANALYZE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
from softmax_bottleneck.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_write_error_of_the_kernel_is_one_line_and_leaves_nothing(model_pt, ptb_cache, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", LIMITED_ANALYZE, *_analyze_argv(model_pt, ptb_cache, out)],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line == f"analyze: error: {out / 'logp.npy'}: cannot write (file too large for this file system or the " + (
        "process's file-size limit); nothing was written"
    )
    assert sorted(p.name for p in out.iterdir()) == []


def test_temporaries_of_a_killed_run_are_removed_by_the_next_run_and_nothing_else(model_pt, ptb_cache, tmp_path):
    import fcntl

    out = tmp_path / "out"
    argv = _analyze_argv(model_pt, ptb_cache, out)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_ANALYZE, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        proc.kill()  # SIGKILL: no handler runs
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    left = list(out.glob(".logp.npy.*.tmp"))
    assert len(left) == 1 and left[0].stat().st_size > 200 * 10_000 * 4
    # what the next run must not touch: other outputs' temporaries, look-alikes, and one a live writer holds
    others = [out / ".other.npy.abcd1234.tmp", out / ".logp.npy.keep", out / "logp.npy.abcd1234.tmp",
              out / ".logp.npy.abcd1234.tmp.bak", out / ".xlogp.npy.abcd1234.tmp"]  # fmt: skip
    for path in others:
        path.write_bytes(b"x")
    live = out / ".rank.json.live0000.tmp"
    live.write_bytes(b"{")
    with open(live, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert subprocess.run([sys.executable, "-m", "softmax_bottleneck", *argv], env=env, capture_output=True,
                              text=True, timeout=300).returncode == 0  # fmt: skip
    assert not left[0].exists()
    assert all(p.exists() for p in others) and live.exists()
    assert {"logp.npy", "rank.json", "spectrum.csv"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["analyze-lm", "--model", "m", "--text", "t", "--out-json", "j", "--rows", "0"],
         "python -m softmax_bottleneck analyze-lm: error: argument --rows: expected full or a positive number of rows"),
        (["plan", "--gpus", "4", "--bogus"],
         "python -m softmax_bottleneck plan: error: unrecognized arguments: --bogus (options: python -m "
         "softmax_bottleneck plan --help)"),
        (["rank"], "python -m softmax_bottleneck rank: error: the following arguments are required"),
    ],
)  # fmt: skip
def test_a_bad_option_fails_in_one_line_naming_the_commands_help(capsys, argv, said):
    """Before: argparse's whole usage block (10 lines for analyze-lm), then the error."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(said), err


def test_no_analysis_nor_summary_writes_over_a_file_it_reads(model_pt, ptb_cache, tmp_path, monkeypatch, capsys):
    """Before, `analyze --out-json resources/data/ptb/test.txt` (no --data: the default folder) replaced the corpus text
    it had read, and wordsim, qualitative and summarize wrote over their own model.pt or metrics.json, read-only or
    not. Each is now refused in one line before any work, and every file stays as it was."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "resources" / "data" / "ptb"
    data.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (data / f"{split}.txt").write_text(f"the {split} text\n")
    model = tmp_path / "model.pt"
    model.write_bytes(model_pt.read_bytes())
    metrics = tmp_path / "metrics.json"
    metrics.write_text('{"test_ppl": 100.0}\n')
    bench = _benchmarks(tmp_path / "ws")
    first_benchmark = sorted(bench.iterdir())[0]
    kept = {path: path.read_bytes() for path in [model, metrics, *data.iterdir(), *bench.iterdir()]}
    corpus = ["--corpus-cache", str(ptb_cache), "--device", "cpu"]
    cases = [
        ["analyze", "--checkpoint", str(model), *corpus, "--out-json", "resources/data/ptb/test.txt"],
        ["analyze", "--checkpoint", str(model), *corpus, "--out-json", "r.json", "--out-spectrum", str(model)],
        ["qualitative", "--checkpoint", str(model), *corpus, "--out", "resources/data/ptb/valid.txt"],
        ["qualitative", "--checkpoint", str(model), *corpus, "--out", str(model)],
        ["wordsim", "--checkpoint", str(model), "--benchmarks", str(bench), "--own-benchmarks", "--out", str(model)],
        ["wordsim", "--checkpoint", str(model), "--benchmarks", str(bench), "--own-benchmarks", "--out",
         str(first_benchmark)],
        ["summarize", "--kind", "runs", "--out", str(metrics), "--record", "experiment=main,dataset=ptb,variant=ss,"
         f"schedule=et,seed=141,seed_kind=authors,metrics={metrics}"],
    ]  # fmt: skip
    for argv in cases:
        capsys.readouterr()
        try:
            code = cli.main(argv)
        except SystemExit as stop:  # as the interpreter would, print a command's one-line exit
            code = stop.code if isinstance(stop.code, int) else print(stop.code, file=sys.stderr) or 1
        assert code != 0, argv
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "cannot write (it is an input of this command" in lines[0], (argv, err)
        assert lines[0].startswith(f"{argv[0]}: ") and "Traceback" not in err
    assert {path: path.read_bytes() for path in kept} == kept
    assert not (tmp_path / "r.json").exists()
