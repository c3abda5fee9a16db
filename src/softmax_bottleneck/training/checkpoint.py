"""The trained model file ``model.pt``: written once at the end of training, verified whenever it is read.

``model.pt`` is a plain dict of tensors and builtins (``torch.load(weights_only=True)`` reads it),
never a pickled module: ``{"format", "dataset", "variant", "hyperparameters", "vocab",
"vocab_sha256", "state_dict", "content_sha256"}``. Two checks, so that a changed, truncated or swapped file fails
with one line (:class:`CheckpointError`) instead of giving other numbers:

* ``content_sha256`` (format 2): the SHA-256 of everything else in the file, the weights' bytes included
  (:func:`softmax_bottleneck.corpora.integrity.seal`); the file alone is verifiable. It is a function of the
  content only, so identical runs still write byte-identical files.
* the file's SHA-256 is recorded as ``model_sha256`` in the run's ``metrics.json``; :func:`load_model` checks it
  before unpickling anything whenever that ``metrics.json`` is beside the file.

A format-1 file (written before the file carried its own checksum) is read only when the ``metrics.json`` beside it
records its SHA-256 (finished runs stay usable); alone it is refused in one line: put it back beside its run's
``metrics.json``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_torch_save
from softmax_bottleneck.corpora.corpus import vocab_sha256
from softmax_bottleneck.corpora.integrity import (
    CONTENT_KEY,
    check_seal,
    describe_load_error,
    file_sha256,
    load_tensors,
    seal,
)

#: 2: the file carries the SHA-256 of its own content (``content_sha256``); 1: verifiable only through metrics.json
MODEL_FORMAT = 2
READABLE_FORMATS = (1, MODEL_FORMAT)
MODEL_KEYS = {"format", "dataset", "variant", "hyperparameters", "vocab", "vocab_sha256", "state_dict"}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message is one line naming the file and the problem."""


def model_blob(model, *, dataset: str, variant: str, hyperparameters: dict, vocab: list[str]) -> dict:
    return seal(
        {
            "format": MODEL_FORMAT,
            "dataset": dataset,
            "variant": variant,
            "hyperparameters": dict(hyperparameters),
            "vocab": list(vocab),
            "vocab_sha256": vocab_sha256(list(vocab)),
            "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        }
    )


def save_model(model, path, **meta) -> str:
    """Write ``model.pt``: weights plus everything needed to rebuild and check the model; returns its SHA-256."""
    atomic_torch_save(model_blob(model, **meta), path)
    return file_sha256(path)


def recorded_sha256(path: Path) -> str | None:
    """``model_sha256`` from the ``metrics.json`` beside ``path``; None when there is none (older runs)."""
    metrics = path.parent / "metrics.json"
    if not metrics.is_file():
        return None
    try:
        recorded = readback.load_json(metrics).get("model_sha256")
    except readback.ReadbackError as err:
        raise CheckpointError(
            f"{metrics}: not a readable metrics file ({err.reason}), so {path} cannot be verified"
        ) from None
    if recorded is not None and not (isinstance(recorded, str) and len(recorded) == 64):
        raise CheckpointError(f"{metrics}: model_sha256 is not a SHA-256 ({recorded!r}), so {path} cannot be verified")
    return recorded


def read_checkpoint(path: str | os.PathLike) -> dict:
    """The verified dict of a ``model.pt`` (SHA-256 against ``metrics.json`` first, then a weights-only load)."""
    path = Path(path)
    why = readback.not_a_file(path)
    if why:
        raise CheckpointError(f"{path}: {why.replace('no such file', 'no such checkpoint file')}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: empty file, not a checkpoint")
    expected = recorded_sha256(path)
    if expected is not None:
        actual = file_sha256(path)
        if actual != expected:
            raise CheckpointError(
                f"{path}: SHA-256 {actual[:16]}… differs from model_sha256 {expected[:16]}… recorded in "
                f"{path.parent / 'metrics.json'}; the file changed after training (damaged copy?)"
            )
    try:
        blob = load_tensors(path)
    except Exception as err:  # truncated zip, text, a pickle with code in it, ...
        why = describe_load_error(err, path)
        raise CheckpointError(f"{path}: not a readable weights-only torch file ({why})") from None
    if not isinstance(blob, dict) or "format" not in blob:
        raise CheckpointError(f"{path}: not a softmax_bottleneck model checkpoint")
    if blob["format"] not in READABLE_FORMATS:
        raise CheckpointError(f"{path}: checkpoint format {blob['format']!r}, this version reads {MODEL_FORMAT}")
    if blob["format"] == MODEL_FORMAT:
        problem = check_seal(blob)
        if problem is not None:
            raise CheckpointError(
                f"{path}: {problem}; the file changed after it was written (damaged copy?): restore it from a "
                "good copy or retrain the run"
            )
    elif expected is None:
        raise CheckpointError(
            f"{path}: a format-1 model (written before model files carried their own checksum) with no metrics.json "
            "beside it recording its model_sha256, so it cannot be verified; put it back in its run folder beside "
            "its metrics.json"
        )
    blob = {k: v for k, v in blob.items() if k != CONTENT_KEY}
    missing = sorted(MODEL_KEYS - set(blob))
    if missing or not isinstance(blob["state_dict"], dict) or not isinstance(blob["hyperparameters"], dict):
        what = ", ".join(missing) or "types"
        raise CheckpointError(f"{path}: incomplete model checkpoint (missing or malformed: {what})")
    for key in ("dataset", "variant", "vocab_sha256"):  # sealed is not well-formed: a hand-made file may be either
        if not isinstance(blob[key], str) or not blob[key]:
            raise CheckpointError(f"{path}: malformed model checkpoint ({key} = {blob[key]!r}, not a name)")
    if not isinstance(blob["vocab"], list) or vocab_sha256(blob["vocab"]) != blob["vocab_sha256"]:
        raise CheckpointError(f"{path}: the checkpoint's vocabulary does not match its own vocab_sha256")
    return blob


def state_mismatch(expected: dict, given: dict) -> str | None:
    """How the tensors ``given`` (a checkpoint's ``state_dict``) differ from those of the model ``expected``: the
    names missing, the names unexpected, the shapes unlike (at most three of each named); None when they fit."""

    def few(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    missing = [name for name in expected if name not in given]
    unexpected = [name for name in given if name not in expected]
    shapes = [
        f"{name} {tuple(given[name].shape)} for {tuple(expected[name].shape)}"
        for name in expected
        if name in given and tuple(getattr(given[name], "shape", ())) != tuple(expected[name].shape)
    ]
    parts = [f"{what} {few(names)}" for what, names in
             (("missing", missing), ("unexpected", unexpected), ("shape of", shapes)) if names]  # fmt: skip
    return "; ".join(parts) or None


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", corpus=None):
    """Rebuild a trained model from ``model.pt``; returns ``(model, meta)`` with the model in eval mode.

    Every problem with the file raises :class:`CheckpointError` (a ``ValueError``) with a one-line
    message: missing, empty, truncated, not a torch file, foreign content, another format, a SHA-256
    that differs from the run's ``metrics.json``, weights that do not fit the recorded hyper-parameters,
    or (when ``corpus`` is given) a vocabulary other than the corpus's.
    """
    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    blob = read_checkpoint(path)
    if corpus is not None and blob["vocab_sha256"] != corpus.dictionary.sha256():
        raise CheckpointError(
            f"{path}: checkpoint vocabulary ({len(blob['vocab'])} words, dataset {blob['dataset']!r}) "
            f"does not match the corpus vocabulary ({corpus.vocab_size} words)"
        )
    try:
        model = AWDLSTM(len(blob["vocab"]), blob["hyperparameters"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:  # e.g. a plug-in layer not installed here
        why = readback.error_line(err)
        raise CheckpointError(f"{path}: cannot build the model its hyper-parameters describe ({why})") from None
    unlike = state_mismatch(model.state_dict(), blob["state_dict"])
    if unlike:
        raise CheckpointError(
            f"{path}: weights do not fit the model its hyper-parameters describe ({unlike}): the model this code "
            "builds has other tensors (was the output layer's code changed since it was trained, or does the layer "
            "add a tensor in its forward pass?)"
        )
    try:
        model.load_state_dict(blob["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        why = readback.error_line(err)
        raise CheckpointError(f"{path}: weights do not fit the recorded hyper-parameters ({why})") from None
    model.to(device).eval()
    meta = {k: v for k, v in blob.items() if k != "state_dict"}
    return model, meta
