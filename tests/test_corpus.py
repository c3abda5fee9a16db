"""Spec §2: corpora read exactly as the reference does."""

from __future__ import annotations

import torch

from softmax_bottleneck.corpora.corpus import EOS, batchify, get_batch, load_corpus, read_corpus


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
