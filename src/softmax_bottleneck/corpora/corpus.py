"""Corpora exactly as the paper's code (AWD-LSTM's ``data.py``) reads them, checked against the study's checksums.

* Tokenisation: every line is split on whitespace and one ``<eos>`` is appended, blank lines
  included; no other processing.
* One dictionary over train, then valid, then test, ids in order of first appearance.
* Batching: :func:`batchify` drops the remainder and lays the stream out as ``[T, B]``;
  :func:`get_batch` returns inputs rows ``i … i+L−1`` and targets rows ``i+1 … i+L`` with
  ``L = min(seq_len, T − 1 − i)``.

Integrity: :func:`read_corpus` hashes the bytes it tokenises (SHA-256 per split, kept in
:attr:`Corpus.sources`); given ``dataset`` it compares them with the published files'
(:func:`softmax_bottleneck.corpora.download.corpus_checksums`) before tokenising. The tensor cache
(:func:`save_corpus`, readable with ``torch.load(weights_only=True)``) stores those checksums, and
:func:`load_corpus` compares them with the text files beside it whenever they are there. The cache also carries the
SHA-256 of its own content (``content_sha256``: the ids' bytes, the vocabulary and the text checksums), checked on
every load, so a cache whose ids or words changed after it was written (a flipped bit, an edit) is refused in one
line even where no text file is there to compare it with. A cache of an older format (1, 2: no such checksum) is
never used: :func:`load_corpus` rebuilds it from the text files when they are there (a cache is cheap), else
refuses it. :func:`load_corpus`
also holds every corpus that claims to be PTB or WikiText-2 (by its ``dataset``, its folder's name or its
vocabulary size, :func:`claimed_dataset`) to the published files, so that edited data never trains or is
analysed as the study's. Every mismatch raises :class:`CorpusError` with one line naming the file and both
checksums.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from softmax_bottleneck.atomic import atomic_torch_save
from softmax_bottleneck.corpora.datasets import DATASETS, SPLITS
from softmax_bottleneck.corpora.download import CORPUS_DIRS, corpus_checksums
from softmax_bottleneck.corpora.integrity import LOAD_ERRORS, check_seal, describe_load_error, load_tensors, seal

log = logging.getLogger(__name__)

EOS = "<eos>"
#: dataset name used throughout the study -> folder name of its files (the same dict as ``download.CORPUS_DIRS``)
DATASET_DIRS = CORPUS_DIRS
#: 2: the cache records the SHA-256 of the text files it was built from (format 1 did not); 3: and the SHA-256 of its
#: own content (``content_sha256``)
CACHE_FORMAT = 3
OLD_CACHE_FORMATS = (1, 2)


class CorpusError(ValueError):
    """A data file or corpus cache that must not be used; the one-line message names the file and what to do."""


class WrongDataset(CorpusError):
    """Intact study data of the other dataset (PTB given where WikiText-2 is needed, or the reverse).

    ``found`` is the dataset the data is, ``needed`` the one asked for; the data itself is fine, so the message says
    which mix-up it is instead of advising to delete or restore anything.
    """

    def __init__(self, message: str, found: str, needed: str):
        super().__init__(message)
        self.found, self.needed = found, needed


def published_dataset(sources: dict[str, str]) -> str | None:
    """The study dataset whose published files ``sources`` (``{split: SHA-256}``) are, else None."""
    for dataset in DATASET_DIRS:
        if all(sources.get(split) == sha for split, sha in corpus_checksums(dataset).items()):
            return dataset
    return None


def _wrong_dataset(origin, sources: dict[str, str], dataset: str) -> WrongDataset | None:
    found = published_dataset(sources)
    if found is None or found == dataset:
        return None
    return WrongDataset(
        f"{origin}: the published {found} corpus, not {dataset} (it is intact: keep it); give the {dataset} data "
        f"({DATASET_DIRS[dataset]}) instead",
        found,
        dataset,
    )


class OldCorpusCache(CorpusError):
    """A cache of an older format, without the checksum of its content: rebuilt from the text files, never used."""


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
    #: SHA-256 of the text file each split was read from (``{}`` for a corpus built in memory)
    sources: dict[str, str] = field(default_factory=dict)

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
            dict(self.sources),
        )


def _head(stream: torch.Tensor, n, key: str) -> torch.Tensor:
    if n is None:
        return stream
    if int(n) < 2:
        raise ValueError(f"{key} must be at least 2 tokens, got {n}")
    return stream[: int(n)]


def _tokenize(data: bytes, path: Path | str = "<memory>") -> list[list[str]]:
    """Split every line on whitespace and append ``<eos>`` (the reference's ``data.py``).

    :class:`CorpusError` names ``path`` and the first byte that is not UTF-8.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); a corpus file must be UTF-8"
        ) from None
    # newline="" keeps "\r" inside lines, exactly like the reference's open(); the corpora have none.
    return [line.split() + [EOS] for line in io.StringIO(text, newline="")]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mismatch(path: Path, got: str, expected: str, what: str, todo: str) -> CorpusError:
    return CorpusError(f"{path}: SHA-256 {got} differs from {expected}, {what}; {todo}")


def _fetch_hint(dataset: str, split: str) -> str:
    return f"restore it with: python -m softmax_bottleneck fetch {DATASET_DIRS[dataset]}/{split}.txt"


def claimed_dataset(data_dir: str | os.PathLike | None = None, vocab_size: int | None = None) -> str | None:
    """The study dataset a corpus claims to be: by its folder's name (``ptb``, ``wikitext-2`` or ``wt2``), else by
    its vocabulary size (10,000 or 33,278 words, the only sizes a PTB or WT2 model accepts); ``None`` for neither."""
    if data_dir is not None:
        name = Path(data_dir).name
        for dataset, folder in DATASET_DIRS.items():
            if name in (dataset, folder):
                return dataset
    if vocab_size is not None:
        for dataset, facts in DATASETS.items():
            if vocab_size == facts.vocab_size:
                return dataset
    return None


def check_published(sources: dict[str, str], dataset: str, data_dir: Path, why: str = "") -> None:
    """Each split's SHA-256 in ``sources`` must be that of the study's published file of ``dataset``.

    :class:`CorpusError` names the first file that differs (in ``data_dir``), both checksums, and how to restore it;
    ``why`` says why the files are taken for ``dataset`` (e.g. its vocabulary size).
    """
    wrong = _wrong_dataset(data_dir, sources, dataset)
    if wrong is not None:
        raise wrong
    for split, sha in corpus_checksums(dataset).items():
        if sources.get(split) != sha:
            raise _mismatch(data_dir / f"{split}.txt", sources.get(split), sha,
                            f"the published {dataset} {split}.txt{why}", _fetch_hint(dataset, split))  # fmt: skip


def read_corpus(data_dir: str | os.PathLike, dataset: str | None = None) -> Corpus:
    """Read ``train.txt``, ``valid.txt`` and ``test.txt`` from ``data_dir`` (each line split on whitespace, plus
    ``<eos>``).

    With ``dataset`` (``"ptb"``/``"wt2"``) each file must be the study's (:func:`check_published`), checked before
    anything is tokenised, or :class:`CorpusError` names the file and both checksums.
    """
    data_dir = Path(data_dir)
    missing = [s for s in SPLITS if not (data_dir / f"{s}.txt").is_file()]
    if missing:
        raise FileNotFoundError(f"{data_dir}: missing {', '.join(f'{s}.txt' for s in missing)}")
    raw = {split: (data_dir / f"{split}.txt").read_bytes() for split in SPLITS}
    sources = {split: _sha256(data) for split, data in raw.items()}
    if dataset is not None:
        check_published(sources, dataset, data_dir)
    dictionary = Dictionary()
    streams = {}
    for split in SPLITS:
        path = data_dir / f"{split}.txt"
        ids = [dictionary.add(word) for line in _tokenize(raw.pop(split), path) for word in line]
        if not ids:
            raise CorpusError(f"{path}: empty file, no tokens to read; restore the file (nothing was cached)")
        streams[split] = torch.tensor(ids, dtype=torch.int64)
    return Corpus(dictionary, streams["train"], streams["valid"], streams["test"], sources)


def save_corpus(corpus: Corpus, path: str | os.PathLike) -> None:
    """Cache a corpus as a plain tensor file (written atomically) with the SHA-256 of its source files and of its own
    content."""
    atomic_torch_save(
        seal(
            {
                "format": CACHE_FORMAT,
                "vocab": list(corpus.dictionary.idx2word),
                "train": corpus.train,
                "valid": corpus.valid,
                "test": corpus.test,
                "sha256": dict(corpus.sources),
            }
        ),
        path,
    )


def _check_blob(blob, path) -> None:
    """Shape of a cache (the format, a list of words, three 1-D int64 streams of ids in range, checksums), then the
    checksum of its content."""
    keys = {"format", "vocab", *SPLITS}
    if not isinstance(blob, dict) or not keys <= set(blob) or blob["format"] not in (*OLD_CACHE_FORMATS, CACHE_FORMAT):
        raise CorpusError(f"{path}: not a corpus cache (format {CACHE_FORMAT}); delete it, it is rebuilt from the data")
    vocab = blob["vocab"]
    if not isinstance(vocab, list) or not vocab or not all(isinstance(w, str) for w in vocab):
        raise CorpusError(f"{path}: corpus cache without a vocabulary; delete it, it is rebuilt from the data")
    for split in SPLITS:
        t = blob.get(split)
        ok = isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.ndim == 1 and t.numel() > 0
        if not ok or int(t.min()) < 0 or int(t.max()) >= len(vocab):
            raise CorpusError(
                f"{path}: corrupt {split} stream in the corpus cache; delete it, it is rebuilt from the data"
            )
    sums = blob.get("sha256", {})
    if not isinstance(sums, dict) or not all(isinstance(sums.get(s, ""), str) for s in SPLITS):
        raise CorpusError(f"{path}: corrupt checksums in the corpus cache; delete it, it is rebuilt from the data")
    if blob["format"] in OLD_CACHE_FORMATS:
        raise OldCorpusCache(
            f"{path}: old corpus cache (format {blob['format']}) without the checksum of its content, never used; "
            "delete it, it is rebuilt from the data"
        )
    problem = check_seal(blob)
    if problem is not None:
        raise CorpusError(f"{path}: damaged corpus cache: {problem}; delete it, it is rebuilt from the data")


def load_cached_corpus(path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Corpus:
    """Load a cache written by :func:`save_corpus`, verified against its own checksum and against the text files in
    ``data_dir`` when present.

    Raises :class:`CorpusError` (one line naming the file) for an unreadable, damaged or foreign cache, and for a
    cache built from other text files than those in ``data_dir`` (SHA-256 compared split by split);
    :class:`OldCorpusCache` for a cache of an older format (no checksum of its content).
    """
    try:
        blob = load_tensors(path)
    except LOAD_ERRORS as exc:
        raise CorpusError(f"{path}: unreadable corpus cache: {describe_load_error(exc, path)}") from None
    _check_blob(blob, path)
    dictionary = Dictionary()
    for word in blob["vocab"]:
        dictionary.add(word)
    if len(dictionary) != len(blob["vocab"]):
        raise CorpusError(f"{path}: corpus cache whose vocabulary lists a word twice; delete it, it is rebuilt")
    corpus = Corpus(dictionary, blob["train"], blob["valid"], blob["test"], dict(blob.get("sha256", {})))
    if data_dir is not None:
        _verify_cache_sources(corpus, Path(path), Path(data_dir))
    return corpus


def _verify_cache_sources(corpus: Corpus, path: Path, data_dir: Path) -> None:
    files = {s: data_dir / f"{s}.txt" for s in SPLITS if (data_dir / f"{s}.txt").is_file()}
    if not files:
        log.info("corpus: %s has no text files to check the cache %s against", data_dir, path)
        return
    for split, file in files.items():
        got, recorded = _sha256(file.read_bytes()), corpus.sources.get(split)
        if recorded is None:
            raise CorpusError(f"{path}: corpus cache records no checksum of {split}.txt; delete it, it is rebuilt")
        if got != recorded:
            raise _mismatch(file, got, recorded, f"the file corpus cache {path} was built from",
                            "restore it (python -m softmax_bottleneck fetch), as the cache holds it")  # fmt: skip


def verify_sources(corpus: Corpus, dataset: str, origin: str | os.PathLike) -> None:
    """The cached corpus ``origin`` must come from the study's files of ``dataset``."""
    if not corpus.sources:  # a cache built from a corpus made in memory: nothing to compare
        raise CorpusError(f"{origin}: corpus cache without the checksums of its text files, so it cannot be the "
                          f"published {dataset}; delete it and rebuild it from verified data")  # fmt: skip
    wrong = _wrong_dataset(origin, corpus.sources, dataset)
    if wrong is not None:
        raise wrong
    for split, sha in corpus_checksums(dataset).items():
        got = corpus.sources.get(split)
        if got != sha:
            raise CorpusError(f"{origin}: {split} split has SHA-256 {got}, the published {dataset} {split}.txt {sha}; "
                              "delete it and rebuild it from verified data")  # fmt: skip


def load_corpus(
    data_dir: str | os.PathLike | None = None, cache: str | os.PathLike | None = None, dataset: str | None = None
) -> Corpus:
    """Load a corpus from its cache when it exists, else read the text files (and write the cache).

    The cache is checked against the text files in ``data_dir`` when they exist. A corpus of a study dataset,
    ``dataset`` (``"ptb"``/``"wt2"``) or else the one it claims to be (:func:`claimed_dataset`: the folder's name,
    or the vocabulary size), must be made of the published files: the text files, or those the cache was built
    from; nothing is cached from other data. A corpus that claims neither (a toy corpus) is returned as read.
    """
    if cache is not None and Path(cache).is_dir():
        raise CorpusError(
            f"{cache}: the corpus cache is a directory; give a file path (the cache is written if absent)"
        )
    if cache is not None and os.path.lexists(cache) and not Path(cache).is_file():
        raise CorpusError(f"{cache}: the corpus cache is not a regular file (a device, FIFO, socket or broken link)")
    if cache is not None and Path(cache).is_file():
        log.info("corpus: loading cache %s", cache)
        try:
            corpus = load_cached_corpus(cache, data_dir)
        except OldCorpusCache as old:  # never used: rebuilt (cheap) when the text files are here
            if data_dir is None or not all((Path(data_dir) / f"{s}.txt").is_file() for s in SPLITS):
                raise CorpusError(f"{old}; no text files to rebuild it from here (pass the data folder)") from None
            log.warning(
                "corpus: %s is an old cache without the checksum of its content: rebuilt from %s", cache, data_dir
            )
        else:
            claimed = dataset or claimed_dataset(data_dir, corpus.vocab_size)
            if claimed is not None:
                verify_sources(corpus, claimed, cache)
            return corpus
    if data_dir is None:
        raise ValueError("load_corpus needs data_dir when the cache does not exist")
    log.info("corpus: reading %s", data_dir)
    by_name = dataset or claimed_dataset(data_dir)
    corpus = read_corpus(data_dir, by_name)  # checked before tokenising
    by_size = None if by_name else claimed_dataset(vocab_size=corpus.vocab_size)
    if by_size is not None:  # checked before anything is cached
        why = f" (a corpus of {corpus.vocab_size:,} words is taken for {by_size})"
        check_published(corpus.sources, by_size, Path(data_dir), why)
    if cache is not None:
        save_corpus(corpus, cache)
    return corpus


def batchify(data: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Lay a 1-D stream out as ``[T, B]`` columns, dropping the remainder (AWD-LSTM's ``batchify``)."""
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
