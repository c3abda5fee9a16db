"""Every file a later step trusts is verifiable alone, and every failure is one line that says what to do.

* ``model.pt``, ``.resume/state.pt`` and the corpus cache carry the SHA-256 of their own content: one flipped bit
  in a weight or an id, rotated ids, swapped words are refused in one line naming the file (torch itself does not
  check the archive's CRCs);
* files of older formats without that checksum are never used silently;
* wrong numbers that look right, unsafe lock files, full disks, read-only folders, absurd sizes: one line, nothing
  partial left.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY, tiny_corpus

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.corpus import CorpusError, load_corpus, read_corpus
from softmax_bottleneck.corpora.integrity import CONTENT_KEY
from softmax_bottleneck.training.checkpoint import CheckpointError, load_model
from softmax_bottleneck.training.state import ResumeError
from softmax_bottleneck.training.trainer import Trainer

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def _cli(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", *map(str, args)], capture_output=True,
                          text=True, env=ENV, **kwargs)  # fmt: skip


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def _strict_json(path: Path):
    def refuse(constant):
        raise ValueError(f"{path}: {constant} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


# --------------------------------------------------------------------------- bytes inside a torch archive
def _entries(path: Path) -> dict[str, tuple[int, int]]:
    """Name -> (offset of its data in the file, size) of each (stored, uncompressed) entry of a torch zip archive."""
    out = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as handle:
        for info in archive.infolist():
            handle.seek(info.header_offset)
            header = handle.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            out[info.filename] = (info.header_offset + 30 + name_len + extra_len, info.file_size)
    return out


def _flip_bit_in_largest_tensor(path: Path, bit: int = 0) -> None:
    """Flip one bit in the middle of the largest tensor stored in ``path`` (a weight, for a model or a state)."""
    name, (offset, size) = max(((n, e) for n, e in _entries(path).items() if "/data/" in n), key=lambda x: x[1][1])
    data = bytearray(path.read_bytes())
    data[offset + size // 2] ^= 1 << bit
    path.write_bytes(bytes(data))


# --------------------------------------------------------------------------- item: the resume state
def _trainer(out, **overrides):
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 2, **overrides})
    return Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out, checkpoint_seconds=0)


def _real_state(out) -> Path:
    trainer = _trainer(out)
    trainer._train_epoch(1, type("S", (), {"signum": None})())
    trainer._save_state()
    return out / ".resume" / "state.pt"


def test_a_resume_state_with_one_flipped_bit_is_refused_not_resumed(tmp_path):
    state = _real_state(tmp_path)
    _flip_bit_in_largest_tensor(state)
    torch.load(state, weights_only=True)  # torch reads it without a complaint
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path).fit()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{state}: damaged resume state")
    assert f"delete {state.parent} to restart" in message
    assert state.exists() and not (tmp_path / "model.pt").exists()


def test_an_old_resume_state_without_checksum_is_refused_with_what_to_do(tmp_path):
    state = _real_state(tmp_path)
    blob = torch.load(state, weights_only=True)
    blob.pop("content_sha256")
    torch.save({**blob, "format": 2}, state)
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path).fit()
    message = str(err.value)
    assert message.startswith(f"{state}: resume state format 2 (written before resume states carried")
    assert "finish the run with the version that started it" in message and f"delete {state.parent}" in message


def test_an_intact_state_still_resumes(tmp_path):
    _real_state(tmp_path)
    assert _trainer(tmp_path).fit()["epochs_run"] == 2


# --------------------------------------------------------------------------- item: model.pt
@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    hp = presets.resolve("ptb", "softmax", "et", {**TINY, "epochs": 1})
    Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=out).fit()
    return out


def test_a_lone_model_with_one_flipped_bit_is_refused(tmp_path, run):
    lone = tmp_path / "model.pt"
    shutil.copy(run / "model.pt", lone)
    _flip_bit_in_largest_tensor(lone)
    torch.load(lone, weights_only=True)  # torch reads it without a complaint
    with pytest.raises(CheckpointError) as err:
        load_model(lone)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{lone}: its content has SHA-256")
    assert "restore it from a good copy or retrain the run" in message


@pytest.mark.parametrize("planted", ["a nest that shares itself", "an expanded view"])
def test_a_small_file_that_unfolds_into_a_huge_content_is_refused_at_once(tmp_path, planted):
    """Before, a 1.7 KB model.pt holding a list that holds itself twice, 61 deep, hung every command that checks its
    checksum (2^61 objects to hash), and a stride-0 tensor was written out in full (6.4 GB for 40,000²)."""
    nest: list = []
    for _ in range(61):
        nest = [nest, nest]
    content = nest if planted.startswith("a nest") else torch.zeros(1).expand(40_000, 40_000)
    lone = tmp_path / "model.pt"
    torch.save({"format": 2, CONTENT_KEY: "0" * 64, "payload": content}, lone)
    assert lone.stat().st_size < 10_000
    started = time.monotonic()
    with pytest.raises(CheckpointError) as err:
        load_model(lone)
    assert time.monotonic() - started < 30 and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{lone}: content that cannot be checksummed (") and planted in str(err.value)


def test_the_wordsim_command_refuses_a_lone_flipped_model(tmp_path, run, tiny_word_sim):
    lone = tmp_path / "model.pt"
    shutil.copy(run / "model.pt", lone)
    _flip_bit_in_largest_tensor(lone)
    out = tmp_path / "wordsim.csv"
    result = _cli("wordsim", "--checkpoint", lone, "--benchmarks", tiny_word_sim, "--own-benchmarks", "--out", out)
    assert result.returncode == 2 and str(lone) in _one_line(result) and "content" in _one_line(result)
    assert not out.exists()


def _as_format_1(src: Path, dst: Path) -> None:
    blob = torch.load(src, weights_only=True)
    blob.pop("content_sha256")
    with open(dst, "wb") as handle:
        torch.save({**blob, "format": 1}, handle)


def test_an_old_model_verifies_through_its_metrics_json_else_is_refused(tmp_path, run):
    folder = tmp_path / "run"
    folder.mkdir()
    _as_format_1(run / "model.pt", folder / "model.pt")
    with pytest.raises(CheckpointError) as err:
        load_model(folder / "model.pt")
    message = str(err.value)
    assert message.startswith(f"{folder / 'model.pt'}: a format-1 model") and "beside its metrics.json" in message
    metrics = _strict_json(run / "metrics.json")
    import hashlib

    metrics["model_sha256"] = hashlib.sha256((folder / "model.pt").read_bytes()).hexdigest()
    (folder / "metrics.json").write_text(json.dumps(metrics))
    model, meta = load_model(folder / "model.pt")  # a finished run of an older version stays usable
    assert meta["format"] == 1 and "content_sha256" not in meta


def test_identical_runs_still_write_byte_identical_models(tmp_path):
    for name in ("a", "b"):
        _trainer(tmp_path / name, epochs=1).fit()
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "model.pt").read_bytes()
    blob = torch.load(tmp_path / "a" / "model.pt", weights_only=True)
    assert blob["format"] == 2 and len(blob["content_sha256"]) == 64


# --------------------------------------------------------------------------- item: the corpus cache
def _text_corpus(folder: Path, tokens: int = 1500) -> Path:
    gen = torch.Generator().manual_seed(0)
    folder.mkdir(parents=True)
    for split, n in (("train", tokens), ("valid", 300), ("test", 300)):
        ids = torch.randint(40, (n,), generator=gen).tolist()
        lines = [" ".join(f"w{i}" for i in ids[k : k + 15]) for k in range(0, n, 15)]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return folder


def _rotate_ids(cache: Path) -> None:
    blob = torch.load(cache, weights_only=True)
    blob["train"][:200] = torch.roll(blob["train"][:200], 1)  # the recorded text checksums are kept
    with open(cache, "wb") as handle:
        torch.save(blob, handle)


def _flip_one_id_bit(cache: Path) -> None:
    blob = torch.load(cache, weights_only=True)
    offset, _ = next(e for n, e in _entries(cache).items() if n.endswith(f"/data/{_storage_key(cache, 'train')}"))
    k = int(torch.nonzero(blob["train"] % 2 == 0)[0])  # an even id: +1 stays in range
    data = bytearray(cache.read_bytes())
    data[offset + 8 * k] ^= 1  # little-endian int64: the lowest bit of id k
    cache.write_bytes(bytes(data))
    assert int(torch.load(cache, weights_only=True)["train"][k]) == int(blob["train"][k]) + 1


def _storage_key(cache: Path, split: str) -> str:
    """The archive entry holding ``split``'s ids: the storage whose size is that split's."""
    blob = torch.load(cache, weights_only=True)
    size = blob[split].numel() * 8
    sizes = {n.rsplit("/", 1)[1]: e[1] for n, e in _entries(cache).items() if "/data/" in n}
    return next(key for key, s in sizes.items() if s == size)


def _swap_two_words(cache: Path) -> None:
    blob = torch.load(cache, weights_only=True)
    blob["vocab"][3], blob["vocab"][4] = blob["vocab"][4], blob["vocab"][3]
    with open(cache, "wb") as handle:
        torch.save(blob, handle)


TAMPERING = {"rotated ids": _rotate_ids, "one flipped bit": _flip_one_id_bit, "two words swapped": _swap_two_words}


@pytest.mark.parametrize("tamper", sorted(TAMPERING))
@pytest.mark.parametrize("with_text", [True, False], ids=["text-beside", "cache-alone"])
def test_a_tampered_corpus_cache_is_refused(tmp_path, tamper, with_text):
    data = _text_corpus(tmp_path / "d")
    cache = tmp_path / "c.pt"
    good = load_corpus(data, cache)
    TAMPERING[tamper](cache)
    with pytest.raises(CorpusError) as err:
        load_corpus(data if with_text else None, cache)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{cache}: damaged corpus cache")
    assert "delete it, it is rebuilt from the data" in message
    cache.unlink()
    again = load_corpus(data, cache)
    assert again.dictionary.idx2word == good.dictionary.idx2word and torch.equal(again.train, good.train)


def test_train_refuses_a_tampered_ptb_cache(tmp_path, ptb_cache, shared_data):
    cache = tmp_path / "ptb.pt"
    shutil.copy(ptb_cache, cache)
    _rotate_ids(cache)
    out = tmp_path / "run"
    sets = [a for kv in ("epochs=1", "train_tokens=2000", "valid_tokens=300", "test_tokens=300", "nhid=16",
                         "nemb=8", "batch_size=4", "small_batch_size=2") for a in ("--set", kv)]  # fmt: skip
    result = _cli("train", "--dataset", "ptb", "--variant", "softmax", "--out", out, "--data", shared_data / "ptb",
                  "--corpus-cache", cache, "--device", "cpu", *sets, timeout=600)  # fmt: skip
    line = _one_line(result)
    assert line.startswith(f"train: {cache}: damaged corpus cache") and not (out / "model.pt").exists()


def test_an_empty_corpus_leaves_no_cache_behind(tmp_path):
    data = _text_corpus(tmp_path / "d")
    (data / "valid.txt").write_text("")
    cache = tmp_path / "c.pt"
    with pytest.raises(CorpusError) as err:
        load_corpus(data, cache)
    assert str(err.value).startswith(f"{data / 'valid.txt'}: empty file") and not cache.exists()
    assert list(tmp_path.iterdir()) == [data]


def test_a_non_utf8_data_file_is_named(tmp_path):
    data = _text_corpus(tmp_path / "d")
    (data / "train.txt").write_bytes(b"w1 w2\n\xff\xfe w3\n")
    with pytest.raises(CorpusError) as err:
        read_corpus(data)
    assert str(err.value).startswith(f"{data / 'train.txt'}: not UTF-8 text (byte 0xff at offset 6)")


# --------------------------------------------------------------------------- item: one line, nothing partial left
TINY_SETS = ["nemb=8", "nhid=16", "nhidlast=8", "batch_size=4", "small_batch_size=2", "bptt=10", "epochs=1",
             "train_tokens=2000", "valid_tokens=300", "test_tokens=300", "log_interval=10"]  # fmt: skip


def _train_cli(out, cache, *extra, **kwargs) -> subprocess.CompletedProcess:
    sets = [a for kv in TINY_SETS for a in ("--set", kv)]
    return _cli("train", "--dataset", "ptb", "--variant", "softmax", "--out", out, "--corpus-cache", cache,
                "--device", "cpu", *sets, *extra, timeout=600, **kwargs)  # fmt: skip


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.endswith(".tmp") or "partial" in p.name
    )


def _file_size_limit(limit: int):
    def apply():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_during_training_is_one_line_and_leaves_nothing_partial(tmp_path, ptb_cache):
    """torch.save says only "RuntimeError: ... unexpected pos" when a write fails: the file-size limit stands in
    for a full disk (the same failed write, without filling a real one)."""
    out = tmp_path / "run"
    result = _train_cli(out, ptb_cache, "--checkpoint-seconds", "0", preexec_fn=_file_size_limit(100_000))
    line = _one_line(result)
    state = out / ".resume" / "state.pt"
    assert line.startswith(f"train: {state}: cannot write (the disk is full or the file exceeds a size limit")
    assert "rerun the same command to resume" in line
    assert not state.exists() and not (out / "model.pt").exists() and _leftovers(out) == []


def test_a_failed_finish_leaves_no_partial_final_set_and_keeps_the_state(tmp_path, monkeypatch):
    from softmax_bottleneck import atomic

    trainer = _trainer(tmp_path, epochs=1)
    real = atomic.atomic_torch_save

    def full_disk_for_models(obj, path):
        if Path(path).name == "model.pt":
            with atomic.atomic_path(path) as tmp:
                tmp.write_bytes(b"PK half a model")
                raise atomic.WriteError(path, "no space left on the device (disk or quota full)")
        return real(obj, path)

    monkeypatch.setattr("softmax_bottleneck.training.checkpoint.atomic_torch_save", full_disk_for_models)
    trainer._save_state()  # a state to fall back on
    with pytest.raises(OSError, match=r"model.pt: cannot write \(no space left"):
        trainer.fit()
    assert _leftovers(tmp_path) == [] and not (tmp_path / ".resume" / "final").exists()
    assert (tmp_path / ".resume" / "state.pt").is_file() and not (tmp_path / "model.pt").exists()
    monkeypatch.undo()
    assert _trainer(tmp_path, epochs=1).fit()["epochs_run"] == 1  # resumes and finishes


@pytest.mark.parametrize("settings", [["nhid=1e9"], ["nemb=1000000000", "nhidlast=1000000000"]])
def test_an_absurd_size_is_refused_before_allocating(tmp_path, ptb_cache, settings):
    out = tmp_path / "run"
    line = _one_line(_train_cli(out, ptb_cache, *[a for kv in settings for a in ("--set", kv)]))
    key = settings[0].split("=")[0]
    assert line.startswith("train: the model (") and f"{key}=1000000000" in line and "more than the" in line
    assert not (out / "model.pt").exists() and not (out / ".resume").exists()


def test_a_file_where_the_run_folder_is_expected_is_one_line(tmp_path, ptb_cache):
    blocker = tmp_path / "results"
    blocker.write_text("not a folder\n")
    for out in (blocker, blocker / "run"):
        line = _one_line(_train_cli(out, ptb_cache))
        assert line.startswith("train: ") and str(blocker) in line and "where a folder is expected" in line
    assert blocker.read_text() == "not a folder\n"


def test_non_utf8_training_data_is_named(tmp_path):
    data = _text_corpus(tmp_path / "d")
    (data / "valid.txt").write_bytes("w1 w2 caf\u00e9\n".encode("latin-1"))
    line = _one_line(_cli("train", "--dataset", "ptb", "--variant", "softmax", "--out", tmp_path / "run", "--data",
                          data, "--device", "cpu", timeout=300))  # fmt: skip
    assert line.startswith(f"train: {data / 'valid.txt'}: not UTF-8 text")


def test_a_state_with_a_wrongly_typed_counter_is_one_line(tmp_path):
    from softmax_bottleneck.corpora.integrity import seal

    state = _real_state(tmp_path)
    blob = torch.load(state, weights_only=True)
    blob["progress"]["epoch"] = "x"
    with open(state, "wb") as handle:
        torch.save(seal(blob), handle)  # a well-formed file whose content is wrong
    with pytest.raises(ResumeError) as err:
        _trainer(tmp_path).fit()
    message = str(err.value)
    assert message.startswith(f"{state}: damaged resume state (progress.epoch = 'x' has the wrong type)")
    assert "\n" not in message and not (tmp_path / "model.pt").exists()


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nobody can write: chmod where that binds (not root), else a read-only tmpfs (root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.getuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True
    ).returncode:
        pytest.skip("running as root without the right to mount a read-only file system")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_read_only_run_folder_is_one_line(read_only_folder, ptb_cache):
    line = _one_line(_train_cli(read_only_folder, ptb_cache))
    assert line.startswith("train: ") and str(read_only_folder) in line
    assert "read-only file system" in line or "permission denied" in line


def test_a_read_only_output_folder_of_wordsim_is_one_line(read_only_folder, run, tiny_word_sim):
    out = read_only_folder / "wordsim.csv"
    result = _cli(
        "wordsim", "--checkpoint", run / "model.pt", "--benchmarks", tiny_word_sim, "--own-benchmarks", "--out", out
    )
    line = _one_line(result)
    assert result.returncode == 2 and line.startswith(f"wordsim: error: {out}: cannot write") and not out.exists()


def test_huge_regularisation_finishes_with_finite_numbers_or_stops_as_diverged(tmp_path, ptb_cache):
    """No JSON the project writes holds NaN or Infinity (a strict parser reads every one)."""
    for setting in ("alpha=1e30", "emb_noise=1e30"):
        out = tmp_path / setting.split("=")[0]
        result = _train_cli(out, ptb_cache, "--set", setting)
        if result.returncode == 0:
            metrics = _strict_json(out / "metrics.json")
            assert all(isinstance(v, int | float) for v in (metrics["train_ppl"], metrics["test_ppl"]))
        else:
            assert _one_line(result).startswith("train: training diverged") and not (out / "metrics.json").exists()


# --------------------------------------------------------------------------- item: the right blame
def test_analyze_of_a_wt2_model_with_ptb_data_names_the_mix_up_not_the_cache(tmp_path, ptb_cache, shared_data, capsys):
    from softmax_bottleneck import cli

    hp = presets.resolve("wt2", "softmax", "et", {**TINY, "epochs": 1})
    Trainer(dataset="wt2", variant="softmax", hp=hp, corpus=tiny_corpus(), out_dir=tmp_path / "wt2").fit()
    model = tmp_path / "wt2" / "model.pt"
    before = ptb_cache.read_bytes()
    for data in (["--data", shared_data / "ptb", "--corpus-cache", ptb_cache], ["--data", shared_data / "ptb"]):
        argv = ["analyze", "--checkpoint", model, *data, "--out-json", tmp_path / "rank.json", "--device", "cpu"]
        assert cli.main([str(a) for a in argv]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"analyze: error: {model}: a wt2 model, but ") and "holds the ptb corpus" in lines[0]
        assert "delete" not in lines[0] and "restore" not in lines[0]
    assert ptb_cache.read_bytes() == before and not (tmp_path / "rank.json").exists()


# --------------------------------------------------------------------------- one run identity
def test_a_folder_named_for_another_run_is_refused_before_training(tmp_path, ptb_cache):
    """A run folder's name carries the first 8 digits of the run's identity hash (the fingerprint the trainer
    records): training other hyper-parameters into it is refused in one line, nothing written."""
    from softmax_bottleneck.corpora.corpus import load_corpus
    from softmax_bottleneck.training.state import run_fingerprint

    hp = presets.resolve("ptb", "softmax", "et", presets.parse_overrides(TINY_SETS))
    fingerprint = run_fingerprint(hp, load_corpus(None, ptb_cache))
    wrong = tmp_path / f"default-{'0' * 8 if fingerprint[:8] != '0' * 8 else '1' * 8}"
    line = _one_line(_train_cli(wrong, ptb_cache))
    assert f"its name claims run identity {wrong.name[-8:]}" in line and fingerprint[:8] in line
    assert not wrong.exists() or not any(p.name != ".lock" for p in wrong.iterdir())
    right = tmp_path / f"default-{fingerprint[:8]}"
    assert _train_cli(right, ptb_cache).returncode == 0
    assert _strict_json(right / "metrics.json")["run_fingerprint"] == fingerprint
    # the same run under another name beside it (a tag an older version wrote "k2" where it now writes "k2.0") is
    # not trained again: refused in one line naming it, nothing written (before: trained twice, same hash, two folders)
    again = tmp_path / f"other_tag-{fingerprint[:8]}"
    line = _one_line(_train_cli(again, ptb_cache))
    assert line.startswith(f"train: {right} holds this same run (identity {fingerprint[:8]}) under another name")
    assert "it holds the trained model, which the workflow uses on its next start (nothing is trained)" in line
    assert not again.exists() or not any(p.name != ".lock" for p in again.iterdir())
