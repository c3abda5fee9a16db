"""Output layers (paper §3): the model variants of the study, one registration each.

:mod:`.registry` holds the registrations (:func:`register_output_layer`, :func:`output_layers`); every list of
layers in the package and the workflow (presets, config checks, costs, display names, colours, tables, figures)
is derived from it. :mod:`.base` states the contract (``forward``: the full log-probabilities; ``nll``: the
loss path). ``build_output_layer(name, vocab_size, nemb, nhidlast,
hp)`` builds one; ``extra_parameter_count`` gives the parameters it adds to the base network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import builtin  # noqa: F401  (first: registers the paper's layers in the paper's order)
from .base import OutputLayer, SoftmaxOfScores
from .gss import GeneralizedSigSoftmax
from .mixtures import MixtureOfContexts, MixtureOfSoftmaxes
from .plif import PLIF, FrozenPLIF
from .registry import (
    ENTRY_POINT_GROUP,
    Hyperparameter,
    OutputLayerSpec,
    RegistryError,
    output_layer,
    output_layers,
    register_output_layer,
)
from .sigsoftmax import SigSoftmax
from .softmax import Softmax

__all__ = [
    "ENTRY_POINT_GROUP",
    "FrozenPLIF",
    "GeneralizedSigSoftmax",
    "Hyperparameter",
    "MixtureOfContexts",
    "MixtureOfSoftmaxes",
    "OutputLayer",
    "OutputLayerSpec",
    "PLIF",
    "RegistryError",
    "SigSoftmax",
    "Softmax",
    "SoftmaxOfScores",
    "build_output_layer",
    "extra_parameter_count",
    "output_layer",
    "output_layers",
    "register_output_layer",
]


def build_output_layer(
    name: str, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None
) -> OutputLayer:
    """Build the registered output layer ``name``; ``hp`` may be a whole preset (missing/None keys: defaults).

    Layers that draw random initial values (PLIF's slopes) use torch's global RNG, so seed before building.
    """
    return output_layer(name).build(vocab_size, nemb, nhidlast, hp)


def extra_parameter_count(
    name: str, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None
) -> int:
    """Parameters the output layer ``name`` adds to the base network (tied weight excluded), trainable or not."""
    return output_layer(name).extra_parameter_count(vocab_size, nemb, nhidlast, hp)
