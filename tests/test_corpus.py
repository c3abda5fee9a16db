"""Corpora read exactly as the reference does (paper §4, SM §1), and checked against the published files."""

from __future__ import annotations

import collections
import logging
import pickle
import runpy
import shutil
import types
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY

from softmax_bottleneck.corpora import download
from softmax_bottleneck.corpora.corpus import (
    CACHE_FORMAT,
    EOS,
    CorpusError,
    batchify,
    get_batch,
    load_corpus,
    read_corpus,
)


def test_ptb_counts(shared_data, ptb_cache):
    corpus = load_corpus(cache=ptb_cache)
    assert corpus.vocab_size == 10_000
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (929_589, 73_760, 82_430)
    # one <eos> per line: PTB test has 3,761 lines
    assert int((corpus.test == corpus.dictionary.word2idx[EOS]).sum()) == 3_761


def test_wikitext2_counts_and_cache_roundtrip(shared_data, tmp_path):
    cache = tmp_path / "wt2.pt"
    corpus = load_corpus(shared_data / "wikitext-2", cache)
    assert corpus.vocab_size == 33_278
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (2_088_628, 217_646, 245_569)
    cached = load_corpus(cache=cache)
    assert cached.dictionary.idx2word == corpus.dictionary.idx2word
    assert torch.equal(cached.test, corpus.test)


def test_blank_lines_get_eos_and_ids_follow_first_appearance(tmp_path):
    (tmp_path / "train.txt").write_text(" a b \n \n b c \n")
    (tmp_path / "valid.txt").write_text(" d a \n")
    (tmp_path / "test.txt").write_text("\n")
    corpus = read_corpus(tmp_path)
    assert corpus.dictionary.idx2word == ["a", "b", EOS, "c", "d"]
    assert corpus.train.tolist() == [0, 1, 2, 2, 1, 3, 2]
    assert corpus.valid.tolist() == [4, 0, 2]
    assert corpus.test.tolist() == [2]


def test_batchify_and_get_batch():
    data = torch.arange(23)
    batched = batchify(data, 4)  # 5 rows, the last 3 tokens dropped
    assert batched.shape == (5, 4)
    assert batched[:, 1].tolist() == [5, 6, 7, 8, 9]  # each column is a contiguous stream
    x, y = get_batch(batched, 0, 3)
    assert torch.equal(x, batched[0:3]) and torch.equal(y, batched[1:4])
    x, y = get_batch(batched, 3, 70)  # L = min(seq_len, T-1-i) = 1
    assert x.shape[0] == 1 and torch.equal(y, batched[4:5])


def test_limited_keeps_vocabulary(tmp_path):
    (tmp_path / "train.txt").write_text(" a b c d e f \n")
    (tmp_path / "valid.txt").write_text(" a \n")
    (tmp_path / "test.txt").write_text(" b \n")
    corpus = read_corpus(tmp_path).limited(train_tokens=3)
    assert corpus.train.tolist() == [0, 1, 2] and corpus.vocab_size == 7


# ---------------------------------------------------------------------------------------------------------------
# integrity of the data and of the cache
# ---------------------------------------------------------------------------------------------------------------


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _copy_split_files(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        shutil.copyfile(src / f"{split}.txt", dst / f"{split}.txt")
    return dst


def _tiny_files(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text(" a b c \n b c a \n")
    (folder / "valid.txt").write_text(" a b \n")
    (folder / "test.txt").write_text(" c a \n")
    return folder


def test_line_splitting_is_that_of_open_with_newline_empty(tmp_path):
    """Tokens are hashed and split from the same bytes; lines split exactly like ``open(newline="")``."""
    f = tmp_path / "train.txt"
    f.write_bytes(" a b\r\n c\rd \x0c e\u2028f \n\n g".encode())
    (tmp_path / "valid.txt").write_text("a\n")
    (tmp_path / "test.txt").write_text("a\n")
    with open(f, encoding="utf-8", newline="") as handle:
        expected = [word for line in handle for word in line.split() + [EOS]]
    corpus = read_corpus(tmp_path)
    assert [corpus.dictionary.idx2word[i] for i in corpus.train] == expected
    assert expected.count(EOS) == 5  # after "\r\n", "\r", "\n", "\n" and the last line; U+2028 and "\x0c" end none


@pytest.mark.parametrize("dataset,folder", [("ptb", "ptb"), ("wt2", "wikitext-2")])
def test_published_files_pass_and_their_checksums_are_recorded(shared_data, dataset, folder):
    corpus = read_corpus(shared_data / folder, dataset=dataset)
    assert corpus.sources == {s: _sha(shared_data / folder / f"{s}.txt") for s in ("train", "valid", "test")}
    assert corpus.sources == download.corpus_checksums(dataset)


def test_edited_data_file_fails_naming_the_file_and_both_checksums(shared_data, tmp_path):
    data = _copy_split_files(shared_data / "ptb", tmp_path / "ptb")
    with open(data / "train.txt", "a") as handle:
        handle.write(" one more line \n")
    with pytest.raises(CorpusError) as err:
        read_corpus(data, dataset="ptb")
    message = str(err.value)
    assert "\n" not in message and str(data / "train.txt") in message
    assert _sha(data / "train.txt") in message and download.FILES["ptb/train.txt"].sha256 in message
    with pytest.raises(CorpusError, match="train.txt"):
        load_corpus(data, tmp_path / "cache.pt", dataset="ptb")
    assert not (tmp_path / "cache.pt").exists()  # nothing cached from unverified data


def test_cache_records_checksums_and_loads_with_weights_only(tmp_path):
    data = _tiny_files(tmp_path / "d")
    cache = tmp_path / "c.pt"
    corpus = load_corpus(data, cache)
    blob = torch.load(cache, map_location="cpu", weights_only=True)
    assert blob["sha256"] == {s: _sha(data / f"{s}.txt") for s in ("train", "valid", "test")}
    again = load_corpus(data, cache)  # verified against the files beside it
    assert again.sources == corpus.sources and torch.equal(again.train, corpus.train)
    assert load_corpus(None, cache).dictionary.idx2word == corpus.dictionary.idx2word  # no files: trusted


def test_cache_of_other_data_fails_before_use(tmp_path):
    data = _tiny_files(tmp_path / "d")
    cache = tmp_path / "c.pt"
    load_corpus(data, cache)
    before = _sha(data / "valid.txt")
    (data / "valid.txt").write_text(" b a \n")  # same vocabulary and length: only the checksum tells
    with pytest.raises(CorpusError) as err:
        load_corpus(data, cache)
    message = str(err.value)
    assert "\n" not in message and str(data / "valid.txt") in message and str(cache) in message
    assert before in message and _sha(data / "valid.txt") in message


def test_cache_of_unpublished_data_is_refused_for_a_study_dataset(tmp_path):
    data = _tiny_files(tmp_path / "d")
    cache = tmp_path / "c.pt"
    load_corpus(data, cache)
    with pytest.raises(CorpusError, match=rf"{cache}: train split has SHA-256 .* published ptb train.txt"):
        load_corpus(data, cache, dataset="ptb")


@pytest.mark.parametrize(
    "content,reason",
    [
        (b"", "empty or truncated"),
        (b"hello\nworld\n", "not a PyTorch tensor file"),
        (pickle.dumps(collections.Counter("abc")), "a bare pickle of Python objects"),
        ("truncated", "truncated or corrupt"),
        ("model", "not a corpus cache"),
        ("bad-ids", "corrupt test stream"),
    ],
    ids=["empty", "text", "pickle", "truncated", "checkpoint", "ids-out-of-range"],
)
def test_bad_cache_is_one_line_naming_it(tmp_path, content, reason):
    data = _tiny_files(tmp_path / "d")
    cache = tmp_path / "c.pt"
    load_corpus(data, cache)
    if content == "truncated":
        content = cache.read_bytes()[:200]
    elif content == "model":
        torch.save({"format": 1, "state_dict": {"w": torch.ones(2)}}, cache)
        content = cache.read_bytes()
    elif content == "bad-ids":
        blob = torch.load(cache, weights_only=True)
        blob["test"] = torch.tensor([0, 99])
        torch.save(blob, cache)
        content = cache.read_bytes()
    cache.write_bytes(content)
    with pytest.raises(CorpusError) as err:
        load_corpus(data, cache)
    assert str(err.value).startswith(f"{cache}: ") and reason in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("fmt", [1, 2])
def test_an_old_cache_is_rebuilt_from_the_text_files_never_used(tmp_path, fmt):
    """A cache without the checksum of its content (formats 1, 2) is rebuilt from the text files beside it."""
    data = _tiny_files(tmp_path / "d")
    corpus = read_corpus(data)
    cache = tmp_path / "old.pt"
    rotated = torch.roll(corpus.train, 1)  # what an old cache could hold without anyone noticing
    extra = {"sha256": dict(corpus.sources)} if fmt == 2 else {}
    torch.save({"format": fmt, "vocab": corpus.dictionary.idx2word, "train": rotated, "valid": corpus.valid,
                "test": corpus.test, **extra}, cache)  # fmt: skip
    again = load_corpus(data, cache)
    assert torch.equal(again.train, corpus.train) and again.sources == corpus.sources
    assert torch.load(cache, weights_only=True)["format"] == CACHE_FORMAT  # rebuilt in place
    assert torch.equal(load_corpus(None, cache).train, corpus.train)


def _run_corpus_cache_script(data: Path, dataset: str, out: Path, log: Path):
    script = REPO / "workflow" / "scripts" / "corpus_cache.py"
    smk = types.SimpleNamespace(
        params=types.SimpleNamespace(data=str(data)), wildcards=types.SimpleNamespace(dataset=dataset),
        output=[str(out)], log=[str(log)],
    )  # fmt: skip
    runpy.run_path(str(script), init_globals={"snakemake": smk})


def test_corpus_cache_rule_refuses_edited_data_in_one_line(shared_data, tmp_path):
    data = _copy_split_files(shared_data / "ptb", tmp_path / "ptb")
    out, log = tmp_path / "corpus" / "ptb.pt", tmp_path / "cache.log"
    text = (data / "test.txt").read_text()
    (data / "test.txt").write_text(text.replace(" the ", " a ", 1))  # same size, other bytes
    with pytest.raises(SystemExit) as err:
        _run_corpus_cache_script(data, "ptb", out, log)
    message = str(err.value.code)
    assert message.startswith(f"corpus_cache: {data / 'test.txt'}: SHA-256 ") and "\n" not in message
    assert download.FILES["ptb/test.txt"].sha256 in message and _sha(data / "test.txt") in message
    assert not out.exists()
    (data / "test.txt").write_text(text)
    _run_corpus_cache_script(data, "ptb", out, log)
    assert torch.load(out, weights_only=True)["sha256"] == download.corpus_checksums("ptb")
    logging.getLogger().handlers.clear()  # the script configured the root logger for its log file


def test_train_command_stops_on_edited_data_before_training(tmp_path):
    from softmax_bottleneck.cli import main as cli_main

    data = _tiny_files(tmp_path / "d")
    cache = tmp_path / "c.pt"
    load_corpus(data, cache)
    (data / "train.txt").write_text(" a b c \n b c b \n")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as err:
        cli_main(["train", "--dataset", "ptb", "--variant", "softmax", "--out", str(out), "--data", str(data),
                  "--corpus-cache", str(cache), "--device", "cpu"])  # fmt: skip
    message = str(err.value.code)
    assert str(data / "train.txt") in message and str(cache) in message and "\n" not in message
    assert not (out / "model.pt").exists()


# ---------------------------------------------------------------------------------------------------------------
# a corpus that claims to be PTB or WT2 (by name or vocabulary size) must be the published one
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def edited_ptb(shared_data, tmp_path_factory) -> Path:
    """PTB with one word of test.txt replaced by another PTB word: same 10,000-word vocabulary, other bytes."""
    data = _copy_split_files(shared_data / "ptb", tmp_path_factory.mktemp("edited") / "mydata")
    text = (data / "test.txt").read_text()
    (data / "test.txt").write_text(text.replace(" the ", " a ", 1))
    return data


def test_edited_study_data_is_refused_without_a_dataset_argument(edited_ptb, tmp_path):
    """The call of ``train`` and ``bench``, ``load_corpus(data_dir, cache)``: the vocabulary size says it is PTB."""
    cache = tmp_path / "c.pt"
    with pytest.raises(CorpusError) as err:
        load_corpus(edited_ptb, cache)
    message = str(err.value)
    assert message.startswith(f"{edited_ptb / 'test.txt'}: SHA-256 {_sha(edited_ptb / 'test.txt')}")
    assert download.FILES["ptb/test.txt"].sha256 in message and "10,000 words is taken for ptb" in message
    assert "\n" not in message and not cache.exists()  # nothing cached from unverified data


def test_a_cache_of_edited_study_data_is_refused(edited_ptb, tmp_path):
    from softmax_bottleneck.corpora.corpus import save_corpus

    cache = tmp_path / "c.pt"
    save_corpus(read_corpus(edited_ptb), cache)  # a cache someone built from edited files
    with pytest.raises(CorpusError, match=rf"^{cache}: test split has SHA-256 .* the published ptb test.txt"):
        load_corpus(cache=cache)


def test_toy_data_in_a_folder_named_like_a_study_dataset_is_refused(tmp_path):
    data = _tiny_files(tmp_path / "wikitext-2")
    with pytest.raises(CorpusError, match=rf"^{data / 'train.txt'}: SHA-256 .* the published wt2 train.txt"):
        load_corpus(data, tmp_path / "c.pt")
    assert not (tmp_path / "c.pt").exists()
    assert load_corpus(_tiny_files(tmp_path / "toy")).vocab_size == 4  # neither name nor size: a toy corpus


def test_train_and_bench_stop_on_edited_study_data(edited_ptb, tmp_path):
    from softmax_bottleneck.cli import main as cli_main
    from softmax_bottleneck.training.bench import bench_corpus

    out = tmp_path / "run"
    tiny = {**TINY, "epochs": 1, "train_tokens": 2000, "valid_tokens": 300, "test_tokens": 300}  # were it to train
    sets = [arg for key, value in tiny.items() for arg in ("--set", f"{key}={value}")]
    with pytest.raises(SystemExit) as err:
        cli_main(["train", "--dataset", "ptb", "--variant", "softmax", "--out", str(out), "--data", str(edited_ptb),
                  "--device", "cpu", *sets])  # fmt: skip
    assert str(edited_ptb / "test.txt") in str(err.value.code) and not (out / "model.pt").exists()
    with pytest.raises(CorpusError, match="published ptb test.txt"):
        bench_corpus("ptb", edited_ptb, None)


def test_format_1_cache_of_a_study_dataset_needs_its_text_files(shared_data, ptb_cache, tmp_path):
    """A format-1 cache records no checksums: never used; rebuilt where the text files are, else refused."""
    blob = torch.load(ptb_cache, map_location="cpu", weights_only=True)
    old = tmp_path / "old.pt"
    torch.save({"format": 1, **{k: blob[k] for k in ("vocab", "train", "valid", "test")}}, old)
    for dataset in (None, "ptb"):
        with pytest.raises(CorpusError, match=rf"^{old}: old corpus cache \(format 1\).*no text files to rebuild it"):
            load_corpus(tmp_path / "nowhere", old, dataset=dataset)
    corpus = load_corpus(shared_data / "ptb", old, dataset="ptb")  # rebuilt from the published files
    assert corpus.sources == download.corpus_checksums("ptb")


def test_a_directory_as_cache_is_refused_in_one_line(tmp_path):
    data = _tiny_files(tmp_path / "d")
    (tmp_path / "c.pt").mkdir()
    with pytest.raises(CorpusError, match=rf"^{tmp_path / 'c.pt'}: the corpus cache is a directory"):
        load_corpus(data, tmp_path / "c.pt")
