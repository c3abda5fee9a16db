"""A run's identity: everything that determines a trained model, and its hash.

``{"hyperparameters": <every resolved hyper-parameter, the seed included>, "data": {split: SHA-256 of the text
file}}``, hashed as the SHA-256 of its canonical JSON (sorted keys, no spaces). The workflow names a run folder
``{tag}-{first 8 hex digits}`` (:mod:`softmax_bottleneck.study.runs`); the trainer records the whole hash as the
run's fingerprint in ``metrics.json`` and in its resume state, and never resumes or restores a run of another
identity. One recipe for both, so a folder's name and what was trained in it cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

#: hex digits of the identity hash in a run folder's name
FOLDER_HASH_LENGTH = 8
_FOLDER = re.compile(rf"^[A-Za-z0-9_.+-]+-([0-9a-f]{{{FOLDER_HASH_LENGTH}}})$")


def run_identity(hyperparameters: dict, data_sha256: dict[str, str]) -> dict:
    """The identity of a run from its resolved hyper-parameters (seed included) and its data files' SHA-256."""
    return {"hyperparameters": dict(hyperparameters), "data": dict(data_sha256)}


def identity_hash(identity: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of a run identity."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def folder_hash(name: str) -> str | None:
    """The identity hash a run folder's name claims (``default-c4191f44`` → ``c4191f44``), else None."""
    match = _FOLDER.match(name)
    return match.group(1) if match else None


def twin_folders(folder: Path) -> list[Path]:
    """The folders beside ``folder`` whose names claim its identity hash and that hold anything: the same run under
    another name (a tag written another way, by an older version or a hand), which must not be trained again."""
    claimed = folder_hash(folder.name)
    if not claimed or not folder.parent.is_dir():
        return []
    return sorted(
        other
        for other in folder.parent.iterdir()
        if other.name != folder.name and folder_hash(other.name) == claimed and other.is_dir() and any(other.iterdir())
    )


def training_held(folder: Path) -> tuple[bool, bool]:
    """How much of a run's training ``folder`` holds, to compare two folders of one run: (a trained model, in place or
    kept for restoring; a resume state)."""
    model = (folder / "model.pt").exists() or (folder / ".resume" / "final").exists()
    return model, (folder / ".resume").exists()


def twin_refusal(folder: Path, twin: Path) -> str:
    """Why ``folder`` is not trained in while ``twin`` holds its identity, and what to do, in one line."""
    model, resume = training_held(twin)
    if model:
        todo = "it holds the trained model, which the workflow uses on its next start (nothing is trained)"
    elif resume:
        todo = "it holds the training so far, which the workflow resumes there on its next start"
    elif (twin / ".lock").exists() and len(list(twin.iterdir())) == 1:
        todo = "it holds only a job's lock: a job may be starting this run there; if none is, remove it, then rerun"
    else:
        todo = "it holds neither a model nor a resume state: remove it (or rename it to this folder's name), then rerun"
    return (
        f"{twin} holds this same run (identity {folder_hash(twin.name)}) under another name, and a model is trained "
        f"once: {todo}; with train --out, give that folder"
    )
