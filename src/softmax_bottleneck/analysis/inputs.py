"""The files an analysis command reads (a trained model's ``model.pt``, a ``.npy`` matrix, the corpus), checked.

Every problem a user can cause (missing, empty, truncated or foreign file; a checkpoint of another vocabulary)
raises :class:`InputError` with one line that names the file and the problem; :func:`report` prints it and gives
the exit status. Only the load itself is guarded: errors of the computation that follows are not rewritten.
Nothing is ever unpickled: ``torch.load(weights_only=True)`` (inside ``training.checkpoint.load_model``) and
``numpy.load(allow_pickle=False)``.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import write_error
from softmax_bottleneck.corpora.corpus import DATASET_DIRS, SPLITS, CorpusError, WrongDataset, load_corpus
from softmax_bottleneck.corpora.datasets import DATA_ROOT
from softmax_bottleneck.corpora.integrity import LOAD_ERRORS, describe_load_error

#: exit status of a command stopped by a bad input (argparse uses the same)
INPUT_ERROR_EXIT = 2


class InputError(ValueError):
    """A file that cannot be analysed (the one-line message names the file and the problem)."""


def report(prog: str, err: BaseException) -> int:
    """Print ``prog: error: <one line>`` to stderr; return :data:`INPUT_ERROR_EXIT`."""
    print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
    return INPUT_ERROR_EXIT


def resolve_device(name: str) -> str:
    """:func:`softmax_bottleneck.training.environment.resolve_device`, its error as an :class:`InputError`."""
    from softmax_bottleneck.training.environment import resolve_device as resolve

    try:
        device = resolve(name)
    except ValueError as err:
        raise InputError(str(err)) from None
    if device.type not in ("cpu", "cuda"):  # the streamed SVDs run on these two
        raise InputError(f"--device {name}: {device.type} is not supported; use auto, cpu, cuda or cuda:N")
    return str(device)


def _existing_file(path: Path) -> None:
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a file")
    why = readback.not_a_file(path)
    if why:
        raise InputError(f"{path}: {why}")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file")


def load_matrix(path: str | os.PathLike) -> np.ndarray:
    """Open a 2-D floating-point ``.npy`` read-only (memory-mapped, never unpickled)."""
    path = Path(path)
    _existing_file(path)
    with open(path, "rb") as handle:
        magic = handle.read(6)
    if magic[:4] == b"PK\x03\x04":
        raise InputError(f"{path}: a zip archive (.npz, or a torch file), not a .npy array")
    if magic != b"\x93NUMPY":
        raise InputError(f"{path}: not a .npy file (no NumPy header)")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except LOAD_ERRORS as exc:
        reason = describe_load_error(exc)
        if "Python objects" in str(exc):
            reason = "holds Python objects (dtype object), not numbers"
        raise InputError(f"{path}: unreadable .npy file: {reason}") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path}: not a .npy file holding one array")
    if arr.ndim != 2:
        raise InputError(f"{path}: expected a 2-D matrix, got {arr.ndim}-D array of shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise InputError(f"{path}: expected a floating-point matrix, got dtype {arr.dtype}")
    if arr.dtype.itemsize < 4:  # Press' rank counts what lies above float32's rounding: half precision's is far above
        eps = np.finfo(arr.dtype).eps
        raise InputError(f"{path}: a {arr.dtype} matrix: its rounding (ε = {eps:.1e}) lies far above Press' float32 "
                         "tolerance, so its rank would count the noise; save the rows in float32")  # fmt: skip
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{path}: empty matrix of shape {arr.shape}")
    return arr


def _checkpoint_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, RuntimeError) and "state_dict" in text:
        detail = text if len(text) <= 200 else text[:199] + "…"
        return f"its weights do not fit the model its hyper-parameters describe ({detail})"
    if isinstance(exc, KeyError):
        return f"missing entry {exc}"
    return describe_load_error(exc)


def load_checkpoint(path: str | os.PathLike, device="cpu"):
    """``training.checkpoint.load_model(path, device)`` → ``(model, meta)``, every failure one :class:`InputError`.

    Checked first: the file exists, is not empty and is a zip archive (what ``torch.save`` writes), so a text
    file, a bare pickle or a truncated checkpoint is named as such rather than as an unpickler's ``KeyError``.
    """
    from softmax_bottleneck.training.checkpoint import load_model

    path = Path(path)
    _existing_file(path)
    if not zipfile.is_zipfile(path):
        raise InputError(f"{path}: not a model checkpoint (truncated, or not a file written by torch.save)")
    try:
        model, meta = load_model(path, device)
    except LOAD_ERRORS as exc:
        message = " ".join(str(exc).split())
        if message.startswith(str(path)):  # load_model's own one-line message names the file already
            raise InputError(message) from None
        raise InputError(f"{path}: not a usable model checkpoint: {_checkpoint_reason(exc)}") from None
    if meta.get("dataset") not in DATASET_DIRS or not isinstance(meta.get("vocab"), list | tuple):
        raise InputError(f"{path}: checkpoint without a known dataset and vocabulary")
    _check_finite(model, path)
    return model, meta


def _check_finite(model, path: Path) -> None:
    """Every floating-point weight and buffer must be finite (a diverged run's NaN would poison the log-P matrix)."""
    import torch

    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise InputError(
                f"{path}: {bad} NaN or infinite value(s) in the weights {name}; the run diverged or the file is "
                "damaged: retrain it, or use another checkpoint"
            )


def model_and_corpus_files(args) -> list:
    """The files :func:`model_and_corpus` may read for ``args``, which none of the command's outputs may replace: the
    checkpoint, the corpus cache (None where not given), and the texts of ``--data``, else of every dataset's default
    folder (``resources/data/<dataset>``: the model's dataset is not known yet)."""
    folders = [Path(args.data)] if args.data else [Path(DATA_ROOT) / name for name in DATASET_DIRS.values()]
    return [args.checkpoint, args.corpus_cache, *(folder / f"{split}.txt" for folder in folders for split in SPLITS)]


def model_and_corpus(args, dataset: str | None = None):
    """What ``analyze`` and ``qualitative`` run on: the device of ``args.device`` in full float32 (no TF32, as the
    paper's V100s), then :func:`checkpoint_and_corpus` of ``args.checkpoint``, ``args.data``, ``args.corpus_cache``."""
    from softmax_bottleneck.training.environment import configure_precision

    device = resolve_device(args.device)
    configure_precision(tf32=False)
    return checkpoint_and_corpus(args.checkpoint, device, args.data, args.corpus_cache, dataset)


def checkpoint_and_corpus(path: str | os.PathLike, device, data_dir=None, cache=None, dataset: str | None = None):
    """The model of ``path`` and its dataset's corpus: ``(model, meta, corpus)``.

    ``dataset`` (optional): the dataset the command needs; a model of another one is refused before any data is
    read. The corpus is read from ``data_dir`` (default ``resources/data/<dataset>``) or its ``cache``, checked
    against the study's published files (:func:`softmax_bottleneck.corpora.corpus.load_corpus`), and must have the
    checkpoint's vocabulary.
    """
    model, meta = load_checkpoint(path, device)
    if dataset is not None and meta["dataset"] != dataset:
        raise InputError(f"{path}: a {meta['dataset']} model; this analysis needs a {dataset} model")
    dataset = meta["dataset"]
    data_dir = Path(data_dir) if data_dir else Path("resources/data") / DATASET_DIRS[dataset]
    if cache is None and not data_dir.is_dir():
        raise InputError(f"{data_dir}: no such data folder for the {dataset} model {path}; pass --data")
    try:
        corpus = load_corpus(data_dir, cache, dataset=dataset)
    except WrongDataset as err:  # the data is fine, the pair is not: name the mix-up, advise no deletion
        raise InputError(
            f"{path}: a {dataset} model, but {cache or data_dir} holds the {err.found} corpus; give the {dataset} "
            f"data (--data resources/data/{DATASET_DIRS[dataset]}, or its corpus cache) to analyse it"
        ) from None
    except (CorpusError, FileNotFoundError) as err:
        raise InputError(str(err)) from None
    except OSError as err:  # the corpus cache could not be written (full disk, read-only folder, ...)
        raise InputError(write_error(cache, err)) from None
    if meta.get("vocab_sha256") != corpus.dictionary.sha256():
        raise InputError(
            f"{path}: checkpoint vocabulary ({len(meta['vocab'])} words, dataset {dataset}) does not match the "
            f"corpus {cache or data_dir} ({corpus.vocab_size} words)"
        )
    return model, meta, corpus
