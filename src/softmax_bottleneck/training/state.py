"""The resumable training state: progress counters, RNG states, the run's fingerprint, ``.resume/state.pt``.

A run killed at any point resumes from its last saved state and ends bit-identical (on CPU) to an
uninterrupted run: the state holds the weights, the best weights so far, the optimizer (with the ASGD
averages), the hidden states of the accumulation chunks, the python/numpy/torch RNG states and every
counter of :class:`Progress`.
The fingerprint ties a state to one configuration and corpus; a state of another run is never resumed.
The state carries the SHA-256 of its own content (``content_sha256``, :func:`softmax_bottleneck.corpora.integrity.seal`:
every tensor's bytes and every counter), checked before anything in it is used: a state with one flipped bit is
refused in one line (delete it to restart), never resumed. A state of format 2 (written before states carried
that checksum) is refused the same way: finish the run with the version that started it, or restart it.

The kept final set ``.resume/final/``: a finished run's ``model.pt``, ``curve.csv`` and ``metrics.json``
are written there first (one folder rename commits all three), then given their declared names as hard
links. Snakemake removes the declared outputs of a job that failed ("they might be corrupted"), e.g. one
killed by a time limit right after training finished; the next attempt finds the kept set, verifies it
(:func:`verify_final`) and restores it (:func:`publish_final`) instead of training again.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import math
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_link, atomic_torch_save, fsync_dir
from softmax_bottleneck.corpora.corpus import Corpus
from softmax_bottleneck.corpora.integrity import (
    CONTENT_KEY,
    check_seal,
    describe_load_error,
    file_sha256,
    load_tensors,
    seal,
)
from softmax_bottleneck.training.checkpoint import CheckpointError, read_checkpoint
from softmax_bottleneck.training.identity import identity_hash, run_identity

#: 2: weights-only loadable (RNG states as tensors/lists), best weights inside; 3: with the checksum of its content
RESUME_FORMAT = 3
RESUME_KEYS = {"format", "fingerprint", "progress", "model", "optimizer", "hidden", "rng", "best"}


@dataclass
class Progress:
    """Everything besides tensors that a resumed run needs to continue exactly."""

    epoch: int = 0  # last completed epoch
    position: int = 0  # row of the batchified train data where the current epoch continues
    batch: int = 0  # batches done in the current epoch
    phase: str = "sgd"
    best_val_loss: float = math.inf
    best_epoch: int = 0
    switch_epoch: int | None = None
    val_history: list = field(default_factory=list)  # SGD-phase validation losses (NT rule)
    curve: list = field(default_factory=list)
    interval_loss: float = 0.0  # summed batch losses of the open logging interval
    interval_means: list = field(default_factory=list)  # means of the intervals logged this epoch
    epoch_seconds: float = 0.0  # time spent so far in the current epoch (across attempts)


#: the types of each :class:`Progress` field, checked when a state is resumed
_PROGRESS_TYPES = {
    "epoch": int, "position": int, "batch": int, "phase": str, "best_val_loss": (int, float), "best_epoch": int,
    "switch_epoch": (int, type(None)), "val_history": list, "curve": list, "interval_loss": (int, float),
    "interval_means": list, "epoch_seconds": (int, float),
}  # fmt: skip


def check_progress(progress: Progress, epochs: int | None = None, rows: int | None = None,
                   longest: int = 0) -> None:  # fmt: skip
    """``TypeError`` naming the first field of ``progress`` whose value has the wrong type (e.g. ``epoch = 'x'``);
    ``ValueError`` naming one this run cannot have: an epoch beyond its ``epochs``, a best or switch epoch after the
    last done, a data position beyond its ``rows`` of batchified training data by more than an epoch's last batch of
    at most ``longest`` rows takes it (AWD-LSTM's ``i += seq_len`` from a row before ``rows - 2``: up to ``rows - 3 +
    longest``)."""
    for name, types in _PROGRESS_TYPES.items():
        value = getattr(progress, name)
        if isinstance(value, bool) or not isinstance(value, types):
            raise TypeError(f"progress.{name} = {value!r} has the wrong type")
    if progress.phase not in ("sgd", "asgd"):
        raise TypeError(f"progress.phase = {progress.phase!r} is neither sgd nor asgd")
    bounds = {"epoch": (0, epochs), "best_epoch": (0, progress.epoch), "switch_epoch": (1, progress.epoch),
              "position": (0, None if rows is None else max(rows, rows - 3 + longest)), "batch": (0, rows)}  # fmt: skip
    for name, (low, high) in bounds.items():
        value = getattr(progress, name)
        if value is not None and not (low <= value and (high is None or value <= high)):
            raise ValueError(f"progress.{name} = {value} is impossible for this run (within [{low}, {high}])")


def check_resumed_tensors(state: dict, fresh_hidden: list, weights: dict) -> None:
    """``ValueError`` where a resume state's hidden states are not of the shapes of the run's own (``fresh_hidden``,
    as a fresh start makes them) or its best weights not of the model's names and shapes (``weights``): a state
    resealed by hand must fail here, in one line, not as a traceback epochs later."""
    shapes = [[(tuple(h.shape), tuple(c.shape)) for h, c in chunk] for chunk in state["hidden"]]
    expected = [[(tuple(h.shape), tuple(c.shape)) for h, c in chunk] for chunk in fresh_hidden]
    if shapes != expected:
        raise ValueError(f"hidden states of shapes {shapes} where this run has {expected}")
    best = state["best"]
    if best is not None and {k: tuple(v.shape) for k, v in best.items()} != {
        k: tuple(v.shape) for k, v in weights.items()
    }:
        raise ValueError("best weights that are not this model's (their names or shapes differ)")


def seed_everything(seed: int) -> None:
    """Python, numpy, torch CPU and CUDA seeds; deterministic cuDNN (as the KIT's ``init_random``)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def rng_state() -> dict:
    """python/numpy/torch (and CUDA) generator states as tensors and plain lists (``weights_only`` loadable)."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def run_fingerprint(hp: dict, corpus: Corpus) -> str:
    """The run's identity hash (:mod:`.identity`: its resolved hyper-parameters with the seed, its data files'
    SHA-256), whose first 8 digits name its folder; a resume state or kept run of another identity is never used."""
    return identity_hash(run_identity(hp, corpus.sources))


def legacy_fingerprint(dataset: str, variant: str, hp: dict, corpus: Corpus) -> str:
    """The fingerprint that versions before the unified run identity recorded (their kept finished runs stay
    restorable)."""
    blob = json.dumps({"dataset": dataset, "variant": variant, "hp": hp}, sort_keys=True)
    blob += corpus.dictionary.sha256() + str(tuple(len(s) for s in (corpus.train, corpus.valid, corpus.test)))
    return hashlib.sha256(blob.encode()).hexdigest()


def save_resume(path: Path, *, fingerprint: str, progress: Progress, model, optimizer, hidden, best) -> None:
    """Write the whole training state atomically to ``path`` (``best``: the best weights so far, or None)."""
    hidden = [[(h.cpu(), c.cpu()) for h, c in chunk] for chunk in hidden]
    atomic_torch_save(
        seal(
            {
                "format": RESUME_FORMAT,
                "fingerprint": fingerprint,
                "progress": asdict(progress),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "hidden": hidden,
                "rng": rng_state(),
                "best": best,
            }
        ),
        path,
    )


class ResumeError(ValueError):
    """A resume state that cannot be used; the message names the file and what to do."""


def _restart_hint(path: Path) -> str:
    return f"delete {path.parent} to restart this run from scratch (its progress is lost)"


def load_resume(path: Path) -> dict:
    """Read a state written by :func:`save_resume`, never unpickling anything but tensors and plain data.

    Raises :class:`ResumeError` (one line) for a truncated, corrupt or foreign file and for another format.
    """
    try:
        blob = load_tensors(path)
    except Exception as err:  # truncated zip, plain text, a pickle with code in it, ...
        why = describe_load_error(err, path)
        raise ResumeError(f"{path}: not a readable resume state ({why}); {_restart_hint(path)}") from None
    if not isinstance(blob, dict) or not RESUME_KEYS <= set(blob):
        raise ResumeError(f"{path}: not a resume state of this package; {_restart_hint(path)}")
    if blob["format"] != RESUME_FORMAT:
        why = " (written before resume states carried their own checksum)" if blob["format"] == 2 else ""
        raise ResumeError(
            f"{path}: resume state format {blob['format']!r}{why}, this version reads {RESUME_FORMAT}; finish the "
            f"run with the version that started it, or {_restart_hint(path)}"
        )
    problem = check_seal(blob)
    if problem is not None:
        raise ResumeError(f"{path}: damaged resume state: {problem}; {_restart_hint(path)}")
    blob.pop(CONTENT_KEY)
    return blob


# --------------------------------------------------------------------------- the kept final set
FINAL_DIR = "final"
#: the declared outputs in the order they are published: ``model.pt`` last, because the workflow takes a
#: run folder with a ``model.pt`` for trained (the train rule's guard, the plan), so it sees all or nothing
PUBLISH_ORDER = ("curve.csv", "metrics.json", "model.pt")


def make_read_only(run_dir: Path) -> None:
    """Make the finished run's outputs (:data:`PUBLISH_ORDER`) read-only, as the workflow's ``protected()`` does:
    done by the training itself, a training whose job Snakemake lost (its shell killed) ends protected too."""
    for name in PUBLISH_ORDER:
        path = Path(run_dir) / name
        path.chmod(path.stat().st_mode & ~0o222)


class FinalSetError(ValueError):
    """A kept final set that cannot be used; one line naming the file. Nothing is restored, trained or deleted."""


def _refusal(message: str, final: Path) -> FinalSetError:
    return FinalSetError(
        f"{message}; nothing was restored, trained or deleted: check {final} (a finished training), then "
        f"delete it to train this run again, or use another --out"
    )


def _refuse(path: Path, problem: str, final: Path) -> FinalSetError:
    return _refusal(f"{path}: {problem}", final)


def commit_final(staging: Path, final: Path) -> None:
    """Make the complete outputs in ``staging`` the kept final set ``final``: one rename, all or nothing."""
    if final.exists():
        raise _refuse(final, "a kept finished run is already there, it is never overwritten", final)
    fsync_dir(staging)
    os.rename(staging, final)
    fsync_dir(final.parent)


def verify_final(
    final: Path, *, fingerprint: str | tuple[str, ...], dataset: str, variant: str, hp: dict, vocab_sha256: str
) -> dict:
    """The metrics of the kept final set after checking that it is whole and this run's, else :class:`FinalSetError`.

    Checks: the three files exist; ``metrics.json`` is JSON whose ``run_fingerprint`` is this run's;
    ``curve.csv`` and ``model.pt`` have the SHA-256s it records; ``model.pt`` is a readable model of this
    dataset, variant, hyper-parameters and vocabulary (weights-only load after the SHA-256 check).
    """
    for name in PUBLISH_ORDER:
        if not (final / name).is_file():
            raise _refuse(final / name, "missing from the kept finished run", final)
    metrics_path = final / "metrics.json"
    try:
        metrics = readback.load_json(metrics_path, expect=None)
    except readback.ReadbackError as err:
        raise _refuse(metrics_path, f"not a readable metrics file ({err.reason})", final) from None
    if not isinstance(metrics, dict):
        raise _refuse(metrics_path, "not a metrics file of this package", final)
    try:
        readback.check_metrics(metrics, metrics_path)
    except readback.ReadbackError as err:
        raise _refusal(str(err), final) from None
    accepted = (fingerprint,) if isinstance(fingerprint, str) else tuple(fingerprint)
    if metrics.get("run_fingerprint") not in accepted:
        what = "/".join(str(metrics.get(k)) for k in ("dataset", "variant", "schedule", "seed"))
        raise _refuse(metrics_path, f"the kept finished run ({what}) is of another configuration or corpus", final)
    sha = metrics.get("model_sha256")
    if not (isinstance(sha, str) and len(sha) == 64):
        raise _refuse(metrics_path, "records no model_sha256, so the kept model cannot be verified", final)
    curve = final / "curve.csv"
    if file_sha256(curve) != metrics.get("curve_sha256"):
        raise _refuse(curve, f"SHA-256 differs from curve_sha256 recorded in {metrics_path}", final)
    try:
        readback.check_curve(readback.read_csv(curve), curve, metrics.get("epochs_run"))
    except readback.ReadbackError as err:
        raise _refusal(str(err), final) from None
    try:
        blob = read_checkpoint(final / "model.pt")  # checks model_sha256 of the metrics.json beside it first
    except CheckpointError as err:
        raise _refusal(str(err), final) from None
    if (blob["dataset"], blob["variant"], blob["hyperparameters"], blob["vocab_sha256"]) != (
        dataset, variant, hp, vocab_sha256,
    ):  # fmt: skip
        raise _refuse(final / "model.pt", "a model of another configuration or vocabulary than its metrics.json", final)
    return metrics


def publish_final(final: Path, out_dir: Path) -> list[str]:
    """Give the kept final set its declared names in ``out_dir`` (hard links, atomically); returns those it made.

    A declared output that is already there must be the kept file's exact copy, else :class:`FinalSetError`
    names it (it is never replaced).
    """
    for name in PUBLISH_ORDER:
        target = out_dir / name
        if target.exists() and not (os.path.samefile(target, final / name) or filecmp.cmp(target, final / name, False)):
            raise _refuse(target, f"differs from the kept finished run's {final / name}", final)
    made = []
    for name in PUBLISH_ORDER:
        if not (out_dir / name).exists():
            atomic_link(final / name, out_dir / name)
            made.append(name)
    fsync_dir(out_dir)
    return made
