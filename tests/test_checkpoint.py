"""``model.pt``: its SHA-256 is recorded in ``metrics.json``; every bad checkpoint fails in one line naming it."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import warnings

import pytest
import torch
from conftest import TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.integrity import seal
from softmax_bottleneck.training.checkpoint import CheckpointError, load_model
from softmax_bottleneck.training.trainer import Trainer


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 1})
    Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out).fit()
    return out


def test_metrics_record_the_sha256_of_model_pt(run):
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["model_sha256"] == hashlib.sha256((run / "model.pt").read_bytes()).hexdigest()
    model, meta = load_model(run / "model.pt", corpus=tiny_corpus())
    assert meta["variant"] == "softmax" and not model.training


class Planted:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class PlantedCommand:
    """A pickled call of a blocked module's function (torch names it "unsupported GLOBAL posix.system")."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _flip_two_bytes(path):
    data = bytearray(path.read_bytes())
    for offset in (len(data) // 2, len(data) // 2 + 7):
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


CASES = {
    "missing": (lambda p, m: p.unlink(), "no such checkpoint file"),
    "empty": (lambda p, m: p.write_bytes(b""), "empty file"),
    "truncated": (lambda p, m: p.write_bytes(p.read_bytes()[:1000]), "not a readable weights-only torch file"),
    "text": (lambda p, m: p.write_text("not a model\n"), "not a readable weights-only torch file"),
    "planted pickle": (lambda p, m: p.write_bytes(pickle.dumps(Planted(m), protocol=2)), "holds pickled Python"),
    # before, this said "not a file torch.save wrote (unreadable)": torch spells a blocked module's GLOBAL otherwise
    "planted command in a torch archive": (
        lambda p, m: torch.save({"format": 5, "payload": PlantedCommand(m)}, p),
        "holds pickled Python",
    ),
    "bare pickle, protocol 4": (lambda p, m: p.write_bytes(pickle.dumps({"w": 1}, protocol=4)), "a bare pickle"),
    "foreign dict": (lambda p, m: torch.save({"weights": torch.zeros(2)}, p), "not a softmax_bottleneck model"),
    "wrong format": (lambda p, m: torch.save({**torch.load(p, weights_only=True), "format": 7}, p), "format 7"),
    "misfit weights": (  # a well-formed file (its checksum recomputed) whose weights do not fit
        lambda p, m: torch.save(
            seal({**(b := torch.load(p, weights_only=True)), "hyperparameters": {**b["hyperparameters"], "nhid": 32}}),
            p,
        ),  # fmt: skip
        "weights do not fit the model its hyper-parameters describe (shape of ",
    ),
    # before, these three said "weights do not fit the recorded hyper-parameters (Error(s) in loading state_dict for
    # AWDLSTM:)", cut at its first line, or blamed the weights of a layer only not installed
    "extra tensor": (
        lambda p, m: _reseal(p, lambda b: b["state_dict"].update({"output_layer.w": torch.zeros(2)})),
        "(unexpected output_layer.w): the model this code builds has other tensors",
    ),  # fmt: skip
    "missing tensor": (
        lambda p, m: _reseal(p, lambda b: b["state_dict"].pop("output_layer.bias")),
        "(missing output_layer.bias): the model this code builds has other tensors",
    ),  # fmt: skip
    "dataset not a name": (  # before: analyze, wordsim and qualitative ended in "TypeError: unhashable type: 'list'"
        lambda p, m: _reseal(p, lambda b: b.update(dataset=["ptb"])),
        "malformed model checkpoint (dataset = ['ptb'], not a name)",
    ),
    "variant not a name": (  # before: accepted, and written into the rank JSON as "variant": 5
        lambda p, m: _reseal(p, lambda b: b.update(variant=5)),
        "malformed model checkpoint (variant = 5, not a name)",
    ),
    "layer not here": (
        lambda p, m: _reseal(p, lambda b: b["hyperparameters"].update(output_layer="powsm")),
        "cannot build the model its hyper-parameters describe (unknown output layer",
    ),  # fmt: skip
}


def _reseal(path, change):
    """``change`` the checkpoint ``path`` and save it sealed anew (its content checksum recomputed)."""
    blob = torch.load(path, weights_only=True)
    change(blob)
    torch.save(seal(blob), path)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("with_metrics", [False, True], ids=["alone", "with-metrics"])
def test_every_bad_checkpoint_fails_in_one_line(tmp_path, run, case, with_metrics):
    damage, expected = CASES[case]
    path = tmp_path / "model.pt"
    shutil.copy(run / "model.pt", path)
    damage(path, tmp_path / "owned")
    if with_metrics:  # a record that matches the damaged file: the checks after the SHA-256 still catch it
        metrics = json.loads((run / "metrics.json").read_text())
        if path.exists():
            metrics["model_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(CheckpointError) as err, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        load_model(path)
    assert not warned, "torch's warnings are not the message"  # before: a bare pickle printed two lines of them
    message = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in message
    assert message.startswith(f"{path}: ") and expected in message
    assert not (tmp_path / "owned").exists()


def test_two_flipped_bytes_are_caught_by_the_recorded_sha256(tmp_path, run):
    for name in ("model.pt", "metrics.json"):
        shutil.copy(run / name, tmp_path / name)
    _flip_two_bytes(tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="differs from model_sha256"):
        load_model(tmp_path / "model.pt")


def test_a_broken_metrics_file_is_named(tmp_path, run):
    shutil.copy(run / "model.pt", tmp_path / "model.pt")
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"metrics.json: not a readable metrics file"):
        load_model(tmp_path / "model.pt")


def test_the_wrong_corpus_is_named(run):
    with pytest.raises(CheckpointError, match="does not match the corpus vocabulary"):
        load_model(run / "model.pt", corpus=tiny_corpus(vocab=13))
