"""The registry of output layers: ONE registration per layer, from which every list of the study is derived.

A layer registers itself with :func:`register_output_layer` (a class decorator)::

    @register_output_layer(
        "taylor", display="Taylor", family="softmax",
        hyperparameters={"taylor_order": Hyperparameter(2, int, "order of the Taylor expansion")},
        color="#bcbd22", cost_proxy="softmax",
    )
    class TaylorSoftmax(OutputLayer): ...

The registration holds the layer's name (the variant name used in configs, run folders and summaries), its
display name (tables, figures), its *family* (``softmax`` or ``mixture``: whose base-network hyper-parameters
and authors' seed it uses, paper SM Table 6), its own hyper-parameters with defaults and types, and optionally
a plot colour and a *cost proxy* (the variant whose reported V100 time stands in for its own). The number of
parameters the layer adds to the base network is the class's :meth:`OutputLayer.extra_parameter_count`, the
only source of #Param besides the base network.

Layers outside this package register through the entry-point group :data:`ENTRY_POINT_GROUP`
(``softmax_bottleneck.output_layers``): each entry point names a module or class whose import registers
the layer. Built-in layers come first, in the paper's order; plug-ins follow, sorted by name.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import OutputLayer

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "Hyperparameter",
    "OutputLayerSpec",
    "RegistryError",
    "output_layer",
    "output_layers",
    "register_output_layer",
]

ENTRY_POINT_GROUP = "softmax_bottleneck.output_layers"
#: base-network families (paper SM Table 6): "softmax" = AWD-LSTM sizes, "mixture" = MoS sizes
FAMILIES = ("softmax", "mixture")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TYPES = (float, int, bool, str)


class RegistryError(ValueError):
    """A registration or a plug-in is invalid (the message names the layer or the entry point)."""


@dataclass(frozen=True)
class Hyperparameter:
    """One hyper-parameter of an output layer: default value, type (float, int, bool or str) and a help line."""

    default: Any
    type: type = float
    help: str = ""

    def __post_init__(self):
        if self.type not in _TYPES:
            raise RegistryError(f"hyper-parameter type must be one of float, int, bool, str; got {self.type!r}")

    def coerce(self, value, key: str):
        """``value`` as this hyper-parameter's type (an int given for a float becomes a float); else ValueError."""
        if value is None:
            return self.default
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            raise ValueError(f"{key} must be of type {self.type.__name__}, got {value!r}")
        return value


@dataclass(frozen=True)
class OutputLayerSpec:
    """Everything the study knows about one output layer (see the module docstring)."""

    name: str
    cls: type
    display: str
    family: str
    hyperparameters: Mapping[str, Hyperparameter] = field(default_factory=dict)
    color: str | None = None
    cost_proxy: str | None = None
    softmax_equivalent: bool = False
    builtin: bool = False

    def layer_hp(self, hp: Mapping[str, Any] | None) -> dict[str, Any]:
        """The layer's own hyper-parameters taken from ``hp`` (a whole preset may be passed), defaults filled in."""
        hp = hp or {}
        return {key: spec.coerce(hp.get(key), key) for key, spec in self.hyperparameters.items()}

    def build(self, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None) -> OutputLayer:
        return self.cls(int(vocab_size), int(nemb), int(nhidlast), **self.layer_hp(hp))

    def extra_parameter_count(
        self, vocab_size: int, nemb: int, nhidlast: int, hp: Mapping[str, Any] | None = None
    ) -> int:
        """Parameters the layer adds to the base network (tied weight excluded), trainable or not."""
        return int(self.cls.extra_parameter_count(int(vocab_size), int(nemb), int(nhidlast), **self.layer_hp(hp)))


_REGISTRY: dict[str, OutputLayerSpec] = {}
_PLUGINS_LOADED = False


def register_output_layer(
    name: str,
    *,
    display: str,
    family: str,
    hyperparameters: Mapping[str, Hyperparameter] | None = None,
    color: str | None = None,
    cost_proxy: str | None = None,
    softmax_equivalent: bool = False,
) -> Callable[[type], type]:
    """Class decorator: register an :class:`OutputLayer` subclass under ``name`` (see the module docstring).

    ``softmax_equivalent=True`` declares that the layer's output is the plain softmax of its logits (only the
    Softmax layer itself); the conformance check rejects any other layer whose output equals it.
    """

    def decorate(cls: type) -> type:
        where = f"output layer {name!r} ({cls.__module__}.{cls.__qualname__})"
        if not isinstance(name, str) or not _NAME.match(name):
            raise RegistryError(f"{where}: the name must match {_NAME.pattern}")
        if not (isinstance(cls, type) and issubclass(cls, OutputLayer)):
            raise RegistryError(f"{where}: must be a subclass of softmax_bottleneck.models.output_layers.OutputLayer")
        if family not in FAMILIES:
            raise RegistryError(f"{where}: family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if not display or not isinstance(display, str):
            raise RegistryError(f"{where}: needs a display name")
        hps = dict(hyperparameters or {})
        for key, spec in hps.items():
            if not isinstance(spec, Hyperparameter) or not _NAME.match(key):
                raise RegistryError(f"{where}: hyper-parameter {key!r} must be a Hyperparameter with a lower-case name")
        previous = _REGISTRY.get(name)
        if previous is not None and previous.cls is not cls:
            raise RegistryError(
                f"{where}: the name is already registered by {previous.cls.__module__}.{previous.cls.__qualname__}"
            )
        _REGISTRY[name] = OutputLayerSpec(
            name=name,
            cls=cls,
            display=display,
            family=family,
            hyperparameters=hps,
            color=color,
            cost_proxy=cost_proxy,
            softmax_equivalent=bool(softmax_equivalent),
            builtin=cls.__module__.startswith("softmax_bottleneck."),
        )
        cls.registered_name = name
        return cls

    return decorate


def _load_plugins() -> None:
    """Import every entry point of :data:`ENTRY_POINT_GROUP` once (each import registers its layer)."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            loaded = entry.load()
        except Exception as err:  # a broken plug-in must name itself, not crash somewhere later
            raise RegistryError(
                f"entry point {entry.name!r} = {entry.value!r} ({ENTRY_POINT_GROUP}) failed to import: "
                f"{type(err).__name__}: {err}"
            ) from err
        if isinstance(loaded, type) and getattr(loaded, "registered_name", None) is None:
            raise RegistryError(
                f"entry point {entry.name!r} = {entry.value!r} names a class that is not registered; "
                "decorate it with @register_output_layer(...)"
            )


def output_layers() -> dict[str, OutputLayerSpec]:
    """Every registered output layer: built-ins in the paper's order, then plug-ins sorted by name."""
    from . import builtin  # noqa: F401  (registers the paper's layers, in the paper's order)

    _load_plugins()
    builtins = [spec for spec in _REGISTRY.values() if spec.builtin]
    plugins = sorted((spec for spec in _REGISTRY.values() if not spec.builtin), key=lambda s: s.name)
    return {spec.name: spec for spec in builtins + plugins}


def output_layer(name: str) -> OutputLayerSpec:
    """The registration of ``name``; ValueError naming the registered layers otherwise."""
    layers = output_layers()
    if name not in layers:
        raise ValueError(f"unknown output layer {name!r}; registered: {', '.join(layers)}")
    return layers[name]
