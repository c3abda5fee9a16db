"""A finished training is never lost: outputs deleted after it finished (Snakemake removes the outputs of a job
that failed, e.g. one killed by a time limit right after training) are restored from ``.resume/final/`` on the
rerun, verified, and nothing is retrained."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import atomic, presets
from softmax_bottleneck.training import state as kept_set
from softmax_bottleneck.training import trainer as loop
from softmax_bottleneck.training.state import FinalSetError
from softmax_bottleneck.training.trainer import RunFinished, Trainer

OUTPUTS = ("model.pt", "metrics.json", "curve.csv")


def _trainer(out, **overrides):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 2, **overrides})
    return Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out, checkpoint_seconds=0)


def _snapshot(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def _forbid_training(monkeypatch):
    """From now on any training step fails the test (a restore must not train)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a training step ran")

    monkeypatch.setattr(loop, "train_batch", refuse)


def _finished(out, *deleted, **overrides):
    """Finish a tiny run in ``out``, then delete ``deleted`` of its outputs; returns the original bytes."""
    _trainer(out, **overrides).fit()
    original = _snapshot(out)
    for name in deleted:
        (out / name).unlink()
    return original


def test_deleted_outputs_are_restored_byte_identical_and_nothing_retrained(tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    original = _finished(out, *OUTPUTS)
    _forbid_training(monkeypatch)
    with caplog.at_level(logging.INFO, logger="softmax_bottleneck.train"):
        metrics = _trainer(out).fit()
    assert _snapshot(out) == original
    assert metrics == json.loads(original["metrics.json"])
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith(f"restored the finished run from {out / '.resume' / 'final'}")
    assert messages[0].endswith("nothing retrained")
    assert sorted(p.name for p in out.iterdir()) == sorted([".resume", *OUTPUTS])  # no lock, no state left
    assert all((out / name).samefile(out / ".resume" / "final" / name) for name in OUTPUTS)


@pytest.mark.parametrize("deleted", [("model.pt",), ("metrics.json",), ("curve.csv", "model.pt")])
def test_some_deleted_outputs_are_restored(tmp_path, monkeypatch, deleted):
    out = tmp_path / "run"
    original = _finished(out, *deleted)
    _forbid_training(monkeypatch)
    _trainer(out).fit()
    assert _snapshot(out) == original


def test_a_finished_run_with_all_outputs_is_still_never_trained_over(tmp_path, monkeypatch, caplog):
    """E.g. Snakemake re-runs a job whose finish it did not record: the outputs equal the kept set, exit 0."""
    out = tmp_path / "run"
    original = _finished(out)
    _forbid_training(monkeypatch)
    with caplog.at_level(logging.INFO):
        metrics = _trainer(out).fit()
    assert metrics == json.loads((out / "metrics.json").read_text())
    assert _snapshot(out) == original
    assert "already holds this finished run" in caplog.text and "restored" not in caplog.text


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    _rewrite(path, bytes(data))


def _rewrite(path, data: bytes):
    os.unlink(path)  # a new file: the hard-linked name elsewhere keeps the old content
    path.write_bytes(data)


DAMAGE = {
    "model.pt flipped": ("model.pt", _flip, "differs from model_sha256"),
    "model.pt missing": ("model.pt", os.unlink, "missing from the kept finished run"),
    "model.pt truncated": ("model.pt", lambda p: _rewrite(p, p.read_bytes()[:999]), "differs from model_sha256"),
    "curve.csv edited": ("curve.csv", _flip, "differs from curve_sha256"),
    "metrics.json not JSON": ("metrics.json", lambda p: _rewrite(p, b"{"), "not a readable metrics file"),
    "metrics.json a list": ("metrics.json", lambda p: _rewrite(p, b"[]"), "not a metrics file"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_kept_run_is_refused_naming_the_file(tmp_path, monkeypatch, case):
    out = tmp_path / "run"
    _finished(out, *OUTPUTS)
    name, damage, expected = DAMAGE[case]
    final = out / ".resume" / "final"
    damage(final / name)
    kept = {p.name: p.read_bytes() for p in final.iterdir()}
    _forbid_training(monkeypatch)
    with pytest.raises(FinalSetError) as err:
        _trainer(out).fit()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{final / name}: ") and expected in message
    assert "nothing was restored, trained or deleted" in message
    assert not any((out / n).exists() for n in OUTPUTS)
    assert {p.name: p.read_bytes() for p in final.iterdir()} == kept  # never deleted or changed


def test_the_kept_run_of_another_configuration_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _finished(out, *OUTPUTS)
    _forbid_training(monkeypatch)
    final = out / ".resume" / "final"
    with pytest.raises(FinalSetError) as err:
        _trainer(out, lr=5.0).fit()
    assert str(err.value).startswith(f"{final / 'metrics.json'}: the kept finished run (ptb/softmax/et/")
    assert "of another configuration or corpus" in str(err.value)
    assert not (out / "model.pt").exists() and (final / "model.pt").is_file()


def test_a_foreign_model_under_a_matching_fingerprint_is_refused(tmp_path, monkeypatch):
    """Defence in depth: a kept set whose metrics.json claims this run but holds another run's model."""
    out, other = tmp_path / "run", tmp_path / "other"
    _finished(out, *OUTPUTS)
    _finished(other, lr=5.0)
    final = out / ".resume" / "final"
    metrics = json.loads((other / "metrics.json").read_text())
    metrics["run_fingerprint"] = json.loads((final / "metrics.json").read_text())["run_fingerprint"]
    for name in ("model.pt", "curve.csv"):
        _rewrite(final / name, (other / name).read_bytes())
    _rewrite(final / "metrics.json", json.dumps(metrics).encode())
    _forbid_training(monkeypatch)
    with pytest.raises(FinalSetError, match=f"^{final / 'model.pt'}: a model of another configuration"):
        _trainer(out).fit()


def test_an_output_that_differs_from_the_kept_run_is_never_replaced(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _finished(out, "model.pt", "metrics.json")
    _rewrite(out / "curve.csv", b"epoch\n")
    _forbid_training(monkeypatch)
    with pytest.raises(FinalSetError, match=f"^{out / 'curve.csv'}: differs from the kept finished run's"):
        _trainer(out).fit()
    assert (out / "curve.csv").read_bytes() == b"epoch\n" and not (out / "model.pt").exists()


def test_a_stray_output_without_a_finished_run_is_refused_before_training(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "model.pt").write_bytes(b"someone's model")
    _forbid_training(monkeypatch)
    with pytest.raises(RunFinished, match=f"^{out / 'model.pt'}: there without a finished run"):
        _trainer(out).fit()
    assert (out / "model.pt").read_bytes() == b"someone's model"


class Killed(BaseException):
    """Stands for SIGKILL at one point of the finish."""


def test_killed_while_publishing_the_outputs_the_rerun_restores(tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    _finished(reference)
    out = tmp_path / "run"
    real_link = kept_set.atomic_link

    def link_then_die(src, dst):
        if dst.name == "metrics.json":
            raise Killed
        return real_link(src, dst)

    monkeypatch.setattr(kept_set, "atomic_link", link_then_die)
    with pytest.raises(Killed):
        _trainer(out).fit()
    assert (out / "curve.csv").exists() and not (out / "metrics.json").exists()
    monkeypatch.setattr(kept_set, "atomic_link", real_link)
    _forbid_training(monkeypatch)
    _trainer(out).fit()
    assert all((out / name).samefile(out / ".resume" / "final" / name) for name in OUTPUTS)
    assert _comparable(out) == _comparable(reference)


def test_killed_before_the_kept_set_is_committed_the_rerun_resumes(tmp_path, monkeypatch, caplog):
    reference = tmp_path / "reference"
    _finished(reference)
    out = tmp_path / "run"

    def die(staging, final):
        raise Killed

    monkeypatch.setattr(loop, "commit_final", die)
    with pytest.raises(Killed):
        _trainer(out).fit()
    # an exception removes the staging folder; a SIGKILL would leave it, and the next finish removes it
    assert not (out / ".resume" / "final.partial").exists() and not (out / "metrics.json").exists()
    assert not (out / ".resume" / "final").exists() and (out / ".resume" / "state.pt").is_file()
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="softmax_bottleneck.train"):
        _trainer(out).fit()
    assert any(r.getMessage().startswith("resumed from") for r in caplog.records)
    assert [p.name for p in (out / ".resume").iterdir()] == ["final"]
    assert _comparable(out) == _comparable(reference)


def _comparable(out):
    """The run's outputs without what differs between two identical runs (timings, environment, the files' hashes:
    ``torch.save`` names its archive after the temporary file)."""
    metrics = json.loads((out / "metrics.json").read_text())
    drop = {"seconds_per_epoch", "environment", "versions", "model_sha256", "curve_sha256"}
    curve = [line.rsplit(",", 2)[0] for line in (out / "curve.csv").read_text().splitlines()]  # no seconds
    weights = torch.load(out / "model.pt", weights_only=True)["state_dict"]
    return {k: v for k, v in metrics.items() if k not in drop}, curve, {k: v.tolist() for k, v in weights.items()}


def test_atomic_link_copies_where_hard_links_are_impossible(tmp_path, monkeypatch):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"weights")
    dst.write_bytes(b"old")

    def no_link(a, b):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(atomic.os, "link", no_link)
    assert atomic.atomic_link(src, dst) == "copy"
    assert dst.read_bytes() == b"weights" and not dst.samefile(src)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "src"]  # no temporary left
    monkeypatch.undo()
    assert atomic.atomic_link(src, dst) == "link" and dst.samefile(src)


# --------------------------------------------------------------------------- the same through the CLI
def _cli(out, cache):
    settings = ["nemb=8", "nhid=16", "batch_size=4", "small_batch_size=2", "bptt=10", "epochs=1",
                "train_tokens=2000", "valid_tokens=500", "test_tokens=500"]  # fmt: skip
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train", "--dataset", "ptb", "--variant", "softmax",
           "--out", str(out), "--corpus-cache", str(cache), "--device", "cpu"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd + [a for s in settings for a in ("--set", s)], capture_output=True, text=True, env=env)


def test_cli_restores_with_exit_0_and_one_line_then_refuses_a_tampered_model(tmp_path, ptb_cache):
    out = tmp_path / "run"
    assert _cli(out, ptb_cache).returncode == 0
    original = _snapshot(out)
    for name in OUTPUTS:
        (out / name).unlink()
    result = _cli(out, ptb_cache)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "softmax_bottleneck.train" in line]  # not the corpus's
    assert len(lines) == 1 and "restored the finished run from" in lines[0] and "nothing retrained" in lines[0]
    assert "epoch" not in result.stderr
    assert _snapshot(out) == original
    final = out / ".resume" / "final"
    for name in OUTPUTS:
        (out / name).unlink()
    _flip(final / "model.pt")
    result = _cli(out, ptb_cache)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    *before, last = result.stderr.strip().splitlines()
    assert all(" INFO " in line for line in before)  # the corpus's progress lines
    assert last.startswith(f"train: {final / 'model.pt'}: SHA-256 ") and "nothing was restored" in last
    assert not (out / "model.pt").exists()


# --------------------------------------------------------------------------- the same under Snakemake
SNAKEFILE = """
rule train:
    output:  # the flags of workflow/rules/train.smk
        model=protected(update("run/model.pt")),
        metrics=protected(update("run/metrics.json")),
        curve=protected(update("run/curve.csv")),
    shell:
        "if [ -e {{output.model}} ]; then echo refusing >&2; exit 1; fi; "
        "{python} -m softmax_bottleneck train --dataset ptb --variant softmax --out run --device cpu "
        "--corpus-cache {cache} {sets} >> train.log 2>&1; "
        "if [ ! -e killed_once ]; then touch killed_once; exit 143; fi"  # killed right after training, once
"""


@pytest.mark.slow
def test_snakemake_retry_of_a_job_killed_after_training_restores_instead_of_retraining(tmp_path, ptb_cache):
    """Snakemake removes the outputs of the failed attempt; the retry restores them and trains nothing."""
    settings = ["nemb=8", "nhid=16", "batch_size=4", "small_batch_size=2", "bptt=10", "epochs=1",
                "train_tokens=2000", "valid_tokens=500", "test_tokens=500"]  # fmt: skip
    sets = " ".join(f"--set {s}" for s in settings)
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(python=sys.executable, cache=ptb_cache, sets=sets))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    snakemake = [sys.executable, "-m", "snakemake", "-c1", "--retries", "1"]
    result = subprocess.run(snakemake, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Removing output files of failed job train" in result.stdout + result.stderr
    log = (tmp_path / "train.log").read_text()
    assert log.count("training ptb/softmax") == 1 and log.count("restored the finished run from") == 1, log
    final = tmp_path / "run" / ".resume" / "final"
    assert all((tmp_path / "run" / name).samefile(final / name) for name in OUTPUTS)
