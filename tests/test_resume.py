"""A resume state is only ever read as tensors and plain data; a bad one fails in one line naming the file."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch
from conftest import REPO, TINY, tiny_corpus
from test_training import PPL_KEYS

from softmax_bottleneck import presets
from softmax_bottleneck.training.state import ResumeError
from softmax_bottleneck.training.trainer import Trainer


class Planted:
    """Unpickling this object would create the file ``marker`` (any code could run instead)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _trainer(out):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 2})
    return Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out, checkpoint_seconds=0)


def _real_state(out):
    trainer = _trainer(out)
    trainer._train_epoch(1, type("S", (), {"signum": None})())
    trainer._save_state()
    return out / ".resume" / "state.pt"


@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_a_planted_pickle_is_never_run(tmp_path, writer):
    state = tmp_path / "run" / ".resume" / "state.pt"
    state.parent.mkdir(parents=True)
    marker = tmp_path / "owned"
    payload = {"format": 2, "progress": Planted(marker)}
    if writer == "torch.save":
        torch.save(payload, state)
    else:
        state.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path / "run").fit()
    assert not marker.exists()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{state}: not a readable resume state")
    assert f"delete {state.parent}" in message


def test_the_state_is_weights_only_loadable(tmp_path):
    blob = torch.load(_real_state(tmp_path), weights_only=True)
    assert blob["format"] == 3 and blob["progress"]["batch"] > 0


@pytest.mark.parametrize("damage", ["truncated", "empty", "text", "foreign dict", "old format"])
def test_a_damaged_state_fails_in_one_line(tmp_path, damage):
    state = _real_state(tmp_path)
    data = state.read_bytes()
    if damage == "truncated":
        state.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        state.write_bytes(b"")
    elif damage == "text":
        state.write_text("hello\n")
    elif damage == "foreign dict":
        torch.save({"weights": torch.zeros(3)}, state)
    else:
        blob = torch.load(state, weights_only=True)
        torch.save({**blob, "format": 1}, state)
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path).fit()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{state}: ") and "delete" in message
    assert state.exists()  # nothing is deleted behind the user's back


def test_the_cli_prints_one_line_for_a_truncated_state(tmp_path, ptb_cache):
    out = tmp_path / "run"
    (out / ".resume").mkdir(parents=True)
    (out / ".resume" / "state.pt").write_bytes(b"PK\x03\x04 truncated")
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train", "--dataset", "ptb", "--variant", "softmax",
           "--out", str(out), "--corpus-cache", str(ptb_cache), "--device", "cpu",
           "--set", "train_tokens=2000", "--set", "valid_tokens=500", "--set", "test_tokens=500"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"train: {out / '.resume' / 'state.pt'}: not a readable resume state")


def test_a_state_of_another_configuration_is_refused_and_kept(tmp_path):
    """Days of another run's progress are never discarded: the state is refused in one line and left as it is."""
    state = _real_state(tmp_path)
    before = state.read_bytes()
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 2, "lr": 10.0})
    other = Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path,
                    checkpoint_seconds=0)  # fmt: skip
    with pytest.raises(ResumeError) as err:
        other.fit()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{state}: the resume state of another configuration")
    assert f"delete {state} to start this run" in message
    assert state.read_bytes() == before
    assert not (tmp_path / "model.pt").exists() and not (tmp_path / "metrics.json").exists()
    _trainer(tmp_path).fit()  # its own configuration still resumes from it and finishes
    assert (tmp_path / "metrics.json").is_file() and not state.exists()


def _forge(state, change) -> None:
    """Edit a real resume state and seal it again, as a forger would (the seal detects damage, not intent)."""
    from softmax_bottleneck.corpora.integrity import seal

    blob = torch.load(state, weights_only=True)
    change(blob)
    torch.save(seal(blob), state)


FORGERIES = {
    "no hidden states": (lambda b: b.update(hidden=[]), "hidden states of shapes [] where this run has"),
    "hidden states of another size": (
        lambda b: b.update(hidden=[[(h[:, :, :3], c) for h, c in chunk] for chunk in b["hidden"]]),
        "hidden states of shapes",
    ),
    "best weights of another model": (
        lambda b: b.update(best={"encoder.weight": torch.zeros(3, 3)}),
        "best weights that are not this model's",
    ),
    "an epoch beyond the run's": (lambda b: b["progress"].update(epoch=60), "progress.epoch = 60 is impossible"),
    "a position beyond the data": (
        lambda b: b["progress"].update(position=10**9),
        "progress.position = 1000000000 is impossible",
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_resealed_state_this_run_cannot_have_fails_in_one_line(tmp_path, forgery):
    """Before, such states gave tracebacks (an IndexError, an LSTM's size error, load_state_dict after an epoch), or
    finished a 2-epoch run at epoch 60 with a metrics.json that every later summary refused."""
    change, named = FORGERIES[forgery]
    state = _real_state(tmp_path)
    _forge(state, change)
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path).fit()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{state}: damaged resume state ({named}"), message
    assert state.exists() and not (tmp_path / "metrics.json").exists()


def test_a_run_stopped_in_the_last_batch_of_an_epoch_resumes_and_ends_as_an_uninterrupted_one(tmp_path, monkeypatch):
    """AWD-LSTM's loop moves the position by the drawn ``seq_len`` (``i += seq_len``), so an epoch's last batch takes it
    past the end of the data by up to ``bptt + max_seq_len_delta - 3`` rows. A signal in that batch saves the state
    there; resuming it failed as a damaged state (``progress.position = 811 is impossible for this run (within [0,
    800])``), the run's progress lost. Now it resumes, and the run ends bit-identical to one never stopped."""
    import signal

    from softmax_bottleneck.training.trainer import Preempted

    original = Trainer.batch_done

    def signalled_in_the_last_batch(self, epoch, seq_len, stop):
        if epoch == 1 and self.progress.position + seq_len > self.train_data.size(0):
            stop.signum = signal.SIGINT
        return original(self, epoch, seq_len, stop)

    def trainer(out, seed):
        hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 2, "seed": seed})
        return Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out,
                       checkpoint_seconds=3600)  # fmt: skip

    with monkeypatch.context() as patched:
        patched.setattr(Trainer, "batch_done", signalled_in_the_last_batch)
        for seed in range(1, 40):
            out = tmp_path / f"seed{seed}"
            try:
                trainer(out, seed).fit()
            except Preempted:
                break
        else:
            pytest.fail("no seed's first epoch ended past the end of the data")
    state = torch.load(out / ".resume" / "state.pt", weights_only=True)
    rows = trainer(tmp_path / "rows", seed).train_data.size(0)
    assert state["progress"]["epoch"] == 0 and state["progress"]["position"] > rows
    resumed = trainer(out, seed).fit()
    straight = trainer(tmp_path / "straight", seed).fit()
    assert [resumed[k] for k in PPL_KEYS] == [straight[k] for k in PPL_KEYS]
    model = torch.load(out / "model.pt", weights_only=True)["state_dict"]
    reference = torch.load(tmp_path / "straight" / "model.pt", weights_only=True)["state_dict"]
    assert model.keys() == reference.keys() and all(torch.equal(model[k], reference[k]) for k in reference)
