"""Corpora exactly as the reference reads them (spec §2).

* Tokenisation (§2.2): every line is split on whitespace and one ``<eos>`` is appended, blank lines
  included; no other processing.
* One dictionary over train, then valid, then test, ids in order of first appearance.
* Batching (§2.3): :func:`batchify` drops the remainder and lays the stream out as ``[T, B]``;
  :func:`get_batch` returns inputs rows ``i … i+L−1`` and targets rows ``i+1 … i+L`` with
  ``L = min(seq_len, T − 1 − i)``.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from softmax_bottleneck.atomic import atomic_torch_save

log = logging.getLogger(__name__)

EOS = "<eos>"
SPLITS = ("train", "valid", "test")
#: dataset name used throughout the study -> folder name of its files
DATASET_DIRS = {"ptb": "ptb", "wt2": "wikitext-2"}
CACHE_FORMAT = 1


@dataclass
class Dictionary:
    """Word ↔ id mapping, ids assigned in order of first appearance."""

    idx2word: list[str] = field(default_factory=list)
    word2idx: dict[str, int] = field(default_factory=dict)

    def add(self, word: str) -> int:
        idx = self.word2idx.get(word)
        if idx is None:
            idx = self.word2idx[word] = len(self.idx2word)
            self.idx2word.append(word)
        return idx

    def __len__(self) -> int:
        return len(self.idx2word)

    def sha256(self) -> str:
        """Fingerprint of the vocabulary (order included), to match checkpoints with corpora."""
        return vocab_sha256(self.idx2word)


def vocab_sha256(words: list[str]) -> str:
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


@dataclass
class Corpus:
    """The three splits as 1-D ``int64`` id streams plus their shared dictionary."""

    dictionary: Dictionary
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.dictionary)

    def limited(self, train_tokens=None, valid_tokens=None, test_tokens=None) -> Corpus:
        """The same corpus with each split cut to its first N tokens (small-scale runs).

        The dictionary is kept whole, so models keep the full vocabulary (10,000 / 33,278).
        """
        return Corpus(
            self.dictionary,
            _head(self.train, train_tokens, "train_tokens"),
            _head(self.valid, valid_tokens, "valid_tokens"),
            _head(self.test, test_tokens, "test_tokens"),
        )


def _head(stream: torch.Tensor, n, key: str) -> torch.Tensor:
    if n is None:
        return stream
    if int(n) < 2:
        raise ValueError(f"{key} must be at least 2 tokens, got {n}")
    return stream[: int(n)]


def tokenize_lines(path: Path) -> list[list[str]]:
    """Split every line of ``path`` on whitespace and append ``<eos>`` (spec §2.2)."""
    with open(path, encoding="utf-8", newline="") as handle:
        # newline="" keeps "\r" inside lines, exactly like the reference's open(); the corpora have none.
        return [line.split() + [EOS] for line in handle]


def read_corpus(data_dir: str | os.PathLike) -> Corpus:
    """Read ``train.txt``, ``valid.txt`` and ``test.txt`` from ``data_dir`` (spec §2.2)."""
    data_dir = Path(data_dir)
    missing = [s for s in SPLITS if not (data_dir / f"{s}.txt").is_file()]
    if missing:
        raise FileNotFoundError(f"{data_dir}: missing {', '.join(f'{s}.txt' for s in missing)}")
    dictionary = Dictionary()
    streams = {}
    for split in SPLITS:
        lines = tokenize_lines(data_dir / f"{split}.txt")
        ids = [dictionary.add(word) for line in lines for word in line]
        streams[split] = torch.tensor(ids, dtype=torch.int64)
    return Corpus(dictionary, streams["train"], streams["valid"], streams["test"])


def save_corpus(corpus: Corpus, path: str | os.PathLike) -> None:
    """Cache a corpus as a plain tensor file (written atomically)."""
    atomic_torch_save(
        {
            "format": CACHE_FORMAT,
            "vocab": corpus.dictionary.idx2word,
            "train": corpus.train,
            "valid": corpus.valid,
            "test": corpus.test,
        },
        path,
    )


def load_cached_corpus(path: str | os.PathLike) -> Corpus:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if blob.get("format") != CACHE_FORMAT:
        raise ValueError(f"{path}: not a corpus cache of format {CACHE_FORMAT}")
    dictionary = Dictionary()
    for word in blob["vocab"]:
        dictionary.add(word)
    return Corpus(dictionary, blob["train"], blob["valid"], blob["test"])


def load_corpus(data_dir: str | os.PathLike | None = None, cache: str | os.PathLike | None = None) -> Corpus:
    """Load a corpus from its cache when it exists, else read the text files (and write the cache)."""
    if cache is not None and Path(cache).is_file():
        log.info("corpus: loading cache %s", cache)
        return load_cached_corpus(cache)
    if data_dir is None:
        raise ValueError("load_corpus needs data_dir when the cache does not exist")
    log.info("corpus: reading %s", data_dir)
    corpus = read_corpus(data_dir)
    if cache is not None:
        save_corpus(corpus, cache)
    return corpus


def batchify(data: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Lay a 1-D stream out as ``[T, B]`` columns, dropping the remainder (spec §2.3)."""
    if batch_size < 1:
        raise ValueError(f"batch size must be positive, got {batch_size}")
    nbatch = data.size(0) // batch_size
    if nbatch < 2:
        raise ValueError(f"a stream of {data.size(0)} tokens is too short for batch size {batch_size}")
    return data[: nbatch * batch_size].view(batch_size, -1).t().contiguous()


def get_batch(source: torch.Tensor, i: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``source[i:i+L]`` and targets ``source[i+1:i+1+L]``, ``L = min(seq_len, T−1−i)``."""
    length = min(seq_len, len(source) - 1 - i)
    return source[i : i + length], source[i + 1 : i + 1 + length]
