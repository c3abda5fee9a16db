"""The resumable training state: progress counters, RNG states, the run's fingerprint, ``.resume/state.pt``.

A run killed at any point resumes from its last saved state and ends bit-identical (on CPU) to an
uninterrupted run: the state holds the weights, the best weights so far, the optimizer (with the ASGD
averages), the hidden states of the accumulation chunks, the python/numpy/torch RNG states and every
counter of :class:`Progress`.
The fingerprint ties a state to one configuration and corpus; a state of another run is never resumed.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck.atomic import atomic_torch_save
from softmax_bottleneck.corpora.corpus import Corpus

RESUME_FORMAT = 2  # 2: weights-only loadable (RNG states as tensors/lists), best weights inside
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


def run_fingerprint(dataset: str, variant: str, hp: dict, corpus: Corpus) -> str:
    """Identity of a run; a resume state of another run (changed config or data) is never resumed."""
    blob = json.dumps({"dataset": dataset, "variant": variant, "hp": hp}, sort_keys=True)
    blob += corpus.dictionary.sha256() + str(tuple(len(s) for s in (corpus.train, corpus.valid, corpus.test)))
    return hashlib.sha256(blob.encode()).hexdigest()


def save_resume(path: Path, *, fingerprint: str, progress: Progress, model, optimizer, hidden, best) -> None:
    """Write the whole training state atomically to ``path`` (``best``: the best weights so far, or None)."""
    hidden = [[(h.cpu(), c.cpu()) for h, c in chunk] for chunk in hidden]
    atomic_torch_save(
        {
            "format": RESUME_FORMAT,
            "fingerprint": fingerprint,
            "progress": asdict(progress),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "hidden": hidden,
            "rng": rng_state(),
            "best": best,
        },
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
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, plain text, a pickle with code in it, ...
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise ResumeError(f"{path}: not a readable resume state ({reason}); {_restart_hint(path)}") from None
    if not isinstance(blob, dict) or not RESUME_KEYS <= set(blob):
        raise ResumeError(f"{path}: not a resume state of this package; {_restart_hint(path)}")
    if blob["format"] != RESUME_FORMAT:
        raise ResumeError(
            f"{path}: resume state format {blob['format']!r}, this version reads {RESUME_FORMAT}; finish the run "
            f"with the version that started it, or {_restart_hint(path)}"
        )
    return blob
