"""Checkpoints and atomic file writes (spec §7).

Every file the package writes goes through a temporary file in the same folder followed by
``os.replace``, so a crash never leaves a half-written output. ``model.pt`` is a plain dict of
tensors and builtins (``torch.load(weights_only=True)`` reads it), never a pickled module.
"""

from __future__ import annotations

import os

import torch

from softmax_bottleneck.atomic import atomic_torch_save
from softmax_bottleneck.corpora.corpus import vocab_sha256

MODEL_FORMAT = 1


def model_blob(model, *, dataset: str, variant: str, hyperparameters: dict, vocab: list[str]) -> dict:
    return {
        "format": MODEL_FORMAT,
        "dataset": dataset,
        "variant": variant,
        "hyperparameters": dict(hyperparameters),
        "vocab": list(vocab),
        "vocab_sha256": vocab_sha256(list(vocab)),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
    }


def save_model(model, path, **meta) -> None:
    """Write ``model.pt``: weights plus everything needed to rebuild and check the model."""
    atomic_torch_save(model_blob(model, **meta), path)


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", corpus=None):
    """Rebuild a trained model from ``model.pt``; returns ``(model, meta)`` with the model in eval mode.

    When ``corpus`` is given, the checkpoint's vocabulary must be the corpus's, or a ``ValueError``
    names both sizes.
    """
    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not a softmax_bottleneck model checkpoint (format {MODEL_FORMAT})")
    if corpus is not None and blob["vocab_sha256"] != corpus.dictionary.sha256():
        raise ValueError(
            f"{path}: checkpoint vocabulary ({len(blob['vocab'])} words, dataset {blob['dataset']!r}) "
            f"does not match the corpus vocabulary ({corpus.vocab_size} words)"
        )
    model = AWDLSTM(len(blob["vocab"]), blob["hyperparameters"])
    model.load_state_dict(blob["state_dict"])
    model.to(device).eval()
    meta = {k: v for k, v in blob.items() if k != "state_dict"}
    return model, meta
