"""Output layers (spec §4): the model variants of the study, and their registry.

``build_output_layer(name, vocab_size, nemb, nhidlast, hp)`` builds one of :data:`OUTPUT_LAYERS`
(``softmax, ss, gss, lms_plif, lms_plif_frozen, mos, moc``); ``extra_parameter_count`` gives the number of
parameters the layer adds on top of the tied embedding (spec §3.1). Contract: ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .gss import GeneralizedSigSoftmax
from .mixtures import MixtureOfContexts, MixtureOfSoftmaxes
from .plif import PLIF, FrozenPLIF
from .sigsoftmax import SigSoftmax
from .softmax import OutputLayer, Softmax

__all__ = [
    "OUTPUT_LAYERS",
    "OUTPUT_LAYER_CLASSES",
    "FrozenPLIF",
    "GeneralizedSigSoftmax",
    "MixtureOfContexts",
    "MixtureOfSoftmaxes",
    "OutputLayer",
    "PLIF",
    "SigSoftmax",
    "Softmax",
    "build_output_layer",
    "extra_parameter_count",
]

OUTPUT_LAYER_CLASSES: dict[str, type[OutputLayer]] = {
    "softmax": Softmax,
    "ss": SigSoftmax,
    "gss": GeneralizedSigSoftmax,
    "lms_plif": PLIF,
    "lms_plif_frozen": FrozenPLIF,
    "mos": MixtureOfSoftmaxes,
    "moc": MixtureOfContexts,
}

#: valid output-layer names, in the order of the paper
OUTPUT_LAYERS: tuple[str, ...] = tuple(OUTPUT_LAYER_CLASSES)

# hyper-parameters each layer reads (others in ``hp`` are ignored); defaults are the paper's values
_HP_DEFAULTS: dict[str, dict[str, Any]] = {
    "softmax": {},
    "ss": {},
    "gss": {"gss_c": 0.0, "gss_k": 2.0},
    "lms_plif": {"plif_knots": 100_000, "plif_t": 20.0, "plif_init_std": 1.0, "plif_lr": 0.02},
    "lms_plif_frozen": {"plif_knots": 100_000, "plif_t": 20.0, "plif_init_std": 1.0, "plif_lr": 0.02},
    "mos": {"n_experts": 15, "dropoutl": 0.29},
    "moc": {"n_experts": 15, "dropoutl": 0.29},
}


def _check_name(name: str) -> str:
    if name not in OUTPUT_LAYER_CLASSES:
        raise ValueError(f"unknown output layer {name!r}; valid names: {', '.join(OUTPUT_LAYERS)}")
    return name


def _layer_hp(name: str, hp: Mapping[str, Any] | None) -> dict[str, Any]:
    """The hyper-parameters of ``name`` taken from ``hp`` (``None`` values fall back to the defaults)."""
    hp = hp or {}
    return {key: (hp[key] if hp.get(key) is not None else default) for key, default in _HP_DEFAULTS[name].items()}


def build_output_layer(
    name: str, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None
) -> OutputLayer:
    """Build the output layer ``name`` (one of :data:`OUTPUT_LAYERS`); ``hp`` may be a whole preset dict.

    Keys read: ``gss_c, gss_k`` (gss); ``plif_knots, plif_t, plif_init_std, plif_lr`` (lms_plif*);
    ``n_experts, dropoutl`` (mos, moc). Missing or ``None`` keys take the paper's defaults. PLIF draws its
    slopes from torch's global RNG, so seed before building.
    """
    name = _check_name(name)
    return OUTPUT_LAYER_CLASSES[name](int(vocab_size), int(nemb), int(nhidlast), **_layer_hp(name, hp))


def extra_parameter_count(
    name: str, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None
) -> int:
    """Parameters the output layer adds beyond the tied weight (spec §3.1), trainable or not.

    ``V`` (output bias) ``+ K_knots`` (lms_plif, lms_plif_frozen) ``+ d'·K + d'·K·d + K·d`` (mos, moc).
    """
    name = _check_name(name)
    layer_hp = _layer_hp(name, hp)
    count = int(vocab_size)
    if name in ("lms_plif", "lms_plif_frozen"):
        count += int(layer_hp["plif_knots"])
    elif name in ("mos", "moc"):
        k, d, dl = int(layer_hp["n_experts"]), int(nemb), int(nhidlast)
        count += dl * k + dl * k * d + k * d
    return count
