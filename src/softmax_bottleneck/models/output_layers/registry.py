"""The registry of output layers: ONE registration per layer, from which every list of the study is derived.

A layer registers itself with :func:`register_output_layer` (a class decorator)::

    @register_output_layer(
        "taylor", display="Taylor", family="softmax",
        hyperparameters={"taylor_order": Hyperparameter(2, int, "order of the Taylor expansion")},
        color="#17a589", cost_proxy="softmax",
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
the layer; several layers of one module each belong to the entry point that names their class. Built-in layers come
first, in the paper's order; plug-ins follow, sorted by name.

A name belongs to one variant only: a plug-in cannot take the name of a built-in layer, of another plug-in or of a
variant of ``presets.yaml`` (E10's ``mos_fair``, ``softmax_fair``, ``softmax_fair_large``), a name is registered
once (the same class registered twice, or two entry points that name one layer, are refused too), its
hyper-parameters cannot be named like the base network's (``lr``, ``nemb``, ...) nor like another layer's declared
otherwise (default, type or range: a configuration's value is checked against one declaration), its display name
must be a label every table, figure and configuration takes (:data:`DISPLAY`) that no other variant has (case
ignored), and its colour must be at least :data:`~.colours.MIN_DELTA_E` (CIEDE2000) away from every other variant's;
such a registration is refused in one line naming who holds the name, the label or the colour. A plug-in that fails
to load (an import error, a refused registration) is *broken*: whatever it registered before failing is withdrawn,
it is left out of :func:`output_layers`, :func:`broken_plugins` gives its one-line reason, and only what names it
fails (:func:`output_layer`), so configurations and commands that never name it keep working. A broken plug-in that
claims a name another variant keeps (a plug-in ``ss``) is said in one warning line whenever the plug-ins load
(:func:`plugin_warnings`), since naming it gets that other variant. A name that two plug-ins register is withdrawn
from both: which code would train under it is not for the order of installation to decide.

:func:`layer_source` says which code a layer is: its module, distribution, version and the SHA-256 of its
module file (recorded with every trained run).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from softmax_bottleneck.corpora.integrity import file_sha256

from . import colours
from .base import OutputLayer
from .errors import RegistryError, one_line
from .hyperparameters import Hyperparameter

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "Hyperparameter",
    "OutputLayerSpec",
    "NameTaken",
    "RegistryError",
    "broken_plugins",
    "layer_source",
    "output_layer",
    "output_layers",
    "plugin_warnings",
    "register_output_layer",
    "reserved_names",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "softmax_bottleneck.output_layers"
#: base-network families (paper SM Table 6): "softmax" = AWD-LSTM sizes, "mixture" = MoS sizes
FAMILIES = ("softmax", "mixture")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: a display name: a label of tables, figures and legends, and a top-5 model's key in a configuration (with ``*``
#: for NT-ASGD: ``analysis/top5/models`` of ``data/config.schema.yaml`` takes this pattern with ``*``)
DISPLAY = re.compile(r"^[A-Za-z][A-Za-z0-9_+†‡-]*$")


class NameTaken(RegistryError):
    """A registration refused because its name is registered already; ``holder`` is the registration that has it."""

    def __init__(self, message: str, name: str, holder: OutputLayerSpec):
        super().__init__(message, name)
        self.holder = holder


class DeclaredOtherwise(RegistryError):
    """A registration refused because ``holder``, registered already, declares its hyper-parameter ``key``
    otherwise."""

    def __init__(self, message: str, name: str, holder: OutputLayerSpec, key: str):
        super().__init__(message, name)
        self.holder, self.key = holder, key


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
#: entry-point name -> one-line reason, for plug-ins that failed to load
_BROKEN: dict[str, str] = {}
#: registered name -> the entry point that loaded it
_ORIGINS: dict[str, importlib.metadata.EntryPoint] = {}
#: registered names whose own entry point (the one naming their class) has loaded
_NAMED: set[str] = set()
#: one line per broken plug-in that claims a name another variant holds (logged once, when the plug-ins load)
_WARNINGS: list[str] = []
#: keys every run has besides the base network's (set by the variant and the schedule)
_FIXED_KEYS = ("output_layer", "schedule")


@functools.cache
def presets_data() -> dict:
    """``data/presets.yaml`` as parsed data, read once: by :mod:`softmax_bottleneck.presets`, which imports this
    registry, and here for the names and colours no layer may take."""
    text = resources.files("softmax_bottleneck").joinpath("data/presets.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.cache
def reserved_names() -> tuple[dict[str, str], frozenset[str]]:
    """``({variant: who holds it}, base hyper-parameter names)`` of ``presets.yaml``: names no layer may take.

    The variants are those of ``presets.yaml`` that are not output layers of their own (they name an
    ``output_layer``); the base names are its declared hyper-parameters, its defaults, its family keys and the
    keys set by the variant and the schedule.
    """
    data = presets_data()
    variants = {
        name: f"presets.yaml's variant {name!r} ({block.get('display', name)}, output layer {block['output_layer']!r})"
        for name, block in (data.get("variants") or {}).items()
        if isinstance(block, dict) and "output_layer" in block
    }
    base = set(data.get("hyperparameters") or {}) | set(data.get("defaults") or {}) | set(_FIXED_KEYS)
    for family in (data.get("families") or {}).values():
        for block in family.values():
            base |= set(block)
    return variants, frozenset(base)


def _class_name(spec: OutputLayerSpec) -> str:
    return f"{spec.cls.__module__}.{spec.cls.__qualname__}"


def _declared(spec: Hyperparameter) -> Hyperparameter:
    """``spec`` without its help line: what two layers sharing a hyper-parameter's name must declare alike."""
    return dataclasses.replace(spec, help="")


def _holder(spec: OutputLayerSpec) -> str:
    kind = "the built-in layer" if spec.builtin else "the plug-in layer"
    return f"{kind} {spec.name!r} ({_class_name(spec)})"


def _rename_hint(name: str, key: str, other: OutputLayerSpec) -> str:
    """Which of layers ``name`` and ``other`` should rename ``key``, and to what: not the one whose name it starts
    with (``powsm_a`` is powsm's), never a built-in."""
    if key.startswith(f"{name}_") and not other.builtin:
        return f"rename it in {other.name!r} (e.g. {other.name}_{key.removeprefix(name + '_')})"
    return f"rename it in {name!r} (e.g. {name}_{key.removeprefix(other.name + '_')})"


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

        def refuse(why: str) -> RegistryError:
            return RegistryError(f"{where}: {why}", name if isinstance(name, str) else None)

        if not isinstance(name, str) or not _NAME.match(name):
            raise refuse(f"the name must match {_NAME.pattern}")
        if not (isinstance(cls, type) and issubclass(cls, OutputLayer)):
            raise refuse("must be a subclass of softmax_bottleneck.models.output_layers.OutputLayer")
        if family not in FAMILIES:
            raise refuse(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if not display or not isinstance(display, str):
            raise refuse("needs a display name")
        hps = dict(hyperparameters or {})
        for key, spec in hps.items():
            if not isinstance(spec, Hyperparameter) or not _NAME.match(key):
                raise refuse(f"hyper-parameter {key!r} must be a Hyperparameter with a lower-case name")
            if problem := spec.declaration_problem():
                raise refuse(f"hyper-parameter {key!r}: {problem}")
        reserved_variants, base_keys = reserved_names()
        clash = sorted(set(hps) & base_keys)
        if clash:
            raise refuse(
                f"hyper-parameter name(s) {', '.join(clash)} belong to the base network; rename them "
                f"(e.g. {name}_{clash[0]})"
            )
        for key, spec in hps.items():
            other = next((o for o in _REGISTRY.values() if key in o.hyperparameters and o.name != name), None)
            if other is not None and _declared(other.hyperparameters[key]) != _declared(spec):
                raise DeclaredOtherwise(
                    f"{where}: hyper-parameter {key!r} is declared otherwise by {_holder(other)}: one name, one "
                    f"declaration (a configuration's value is checked against one); {_rename_hint(name, key, other)}",
                    name, other, key,
                )  # fmt: skip
        previous = _REGISTRY.get(name)
        if previous is not None and previous.cls is cls:
            raise NameTaken(f"{where}: registered twice under the same name; register the class once", name, previous)
        if previous is not None:
            raise NameTaken(
                f"{where}: the name is already registered by {_holder(previous)}; choose another name", name, previous
            )
        if name in reserved_variants:
            raise refuse(f"the name is already taken by {reserved_variants[name]}; choose another name")
        _check_display(refuse, display)
        if color is not None:
            _check_colour(refuse, color)
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
        for key in (key for key, spec in hps.items() if spec.type is float and type(spec.default) is int):
            line = (
                f"{where}: hyper-parameter {key!r}, a float, has its default written {hps[key].default}: a run's "
                f"name holds the value as written, so writing {float(hps[key].default)} later trains its runs again"
            )
            _WARNINGS.append(line)
            log.warning("%s", line)
        cls.registered_name = name
        return cls

    return decorate


def _check_display(refuse: Callable[[str], RegistryError], display: str) -> None:
    """RegistryError unless ``display`` is a label every table, figure and configuration takes (:data:`DISPLAY`: a
    top-5 model's key is a display name, ``*`` added for NT-ASGD) and no other variant has (case ignored: two rows
    "SS" and "ss" in one table are not told apart either)."""
    if not DISPLAY.match(display):
        raise refuse(
            f"display {display!r} must be a letter then letters, digits, '_', '+', '-', '†' or '‡' (it labels the "
            "layer's rows, curves and legend entries, and keys its top-5 models in a configuration)"
        )
    taken = {spec.display.casefold(): (spec.display, _holder(spec)) for spec in _REGISTRY.values()}
    taken.update({label.casefold(): (label, holder) for label, holder in reserved_displays().items()})
    if display.casefold() in taken:
        label, holder = taken[display.casefold()]
        raise refuse(
            f"display {display!r} is already {label!r}, the label of {holder}: two rows of a table or two curves of a "
            "figure would carry one label; choose another display name"
        )


def _check_colour(refuse: Callable[[str], RegistryError], color) -> None:
    """RegistryError unless ``color`` is a colour at least :data:`~.colours.MIN_DELTA_E` (CIEDE2000) from every
    colour a variant has: the registered layers' and the variants of ``presets.yaml``."""
    try:
        colours.to_rgb(color)
    except (ValueError, TypeError) as err:
        raise refuse(f"color {err}") from None
    taken = {f"layer {spec.name!r} ({spec.display})": spec.color for spec in _REGISTRY.values() if spec.color}
    taken.update(reserved_colours())
    for holder, other in taken.items():
        distance = colours.delta_e(color, other)
        if distance < colours.MIN_DELTA_E:
            raise refuse(
                f"color {color!r} is too close to {other!r} of {holder} (CIEDE2000 ΔE = {distance:.1f} < "
                f"{colours.MIN_DELTA_E:g}: the two would look alike in the figures); choose a colour further from "
                "it (docs/adding-an-output-layer.md lists the colours in use), or omit color= to get a free one"
            )


@functools.cache
def reserved_displays() -> dict[str, str]:
    """``{display: "presets.yaml's variant 'mos_fair' (...)"}`` of the variants of ``presets.yaml`` that are not output
    layers of their own: labels no layer may take."""
    variants, _ = reserved_names()
    blocks = presets_data().get("variants") or {}
    return {blocks[name].get("display", name): holder for name, holder in variants.items()}


@functools.cache
def reserved_colours() -> dict[str, str]:
    """``{"presets.yaml's variant 'mos_fair'": colour}`` of the variants of ``presets.yaml`` that declare one."""
    blocks = presets_data().get("variants") or {}
    return {
        f"presets.yaml's variant {name!r} ({block.get('display', name)})": block["color"]
        for name, block in blocks.items()
        if isinstance(block, dict) and block.get("color")
    }


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _entry_text(entry: importlib.metadata.EntryPoint) -> str:
    """``entry point 'name' = 'module:attr'`` and the distribution that installed it, where known: what to uninstall
    (two distributions can install the same entry point)."""
    dist = getattr(entry, "dist", None)
    return f"entry point {entry.name!r} = {entry.value!r}" + (f" of {dist.name} {dist.version}" if dist else "")


def _load_plugins() -> None:
    """Import every entry point of :data:`ENTRY_POINT_GROUP` once (each import registers its layer).

    A plug-in that fails to load is recorded in :data:`_BROKEN` with its one-line reason, never raised here (only
    what names it fails), and what it registered before failing is withdrawn; every other entry point of its module
    is broken too, without a second import (which could succeed once the first had withdrawn a clashing plug-in).
    Each layer belongs to the entry point that names its class; a layer that another entry point's import registered
    (several layers in one module, one entry point each) is that one's until its own entry point is loaded. A layer
    that two entry points name, or that two plug-ins register, is withdrawn and both are broken. A broken plug-in
    that claims a name another variant holds (a shipped layer's ``ss``, E10's ``mos_fair``) is said in one warning
    line (:func:`plugin_warnings`): what names it gets the other variant, so it must not go unsaid.
    """
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    claims: dict[str, set[str]] = {}  # entry-point name -> the names it claims
    failed: dict[str, str] = {}  # module -> why its import failed: never imported again for another entry point
    for entry in _entry_points():
        before = dict(_REGISTRY)
        where = _entry_text(entry)
        claims[entry.name] = {entry.name}
        if entry.module in failed:  # a second import could succeed where the first withdrew another plug-in
            _BROKEN[entry.name] = f"{where} ({ENTRY_POINT_GROUP}): its module {entry.module} {failed[entry.module]}"
            continue
        try:
            loaded = entry.load()
        except Exception as err:  # a broken plug-in must name itself, not crash somewhere later
            added = [name for name, spec in _REGISTRY.items() if before.get(name) is not spec]
            _REGISTRY.clear()
            _REGISTRY.update(before)  # nothing of a plug-in that failed half-way stays registered
            if isinstance(err, RegistryError):
                reason = one_line(f"{where} ({ENTRY_POINT_GROUP}) is refused: {err}")
                claims[entry.name].add(err.name or entry.name)
            else:
                reason = one_line(f"{where} ({ENTRY_POINT_GROUP}) failed to import: {type(err).__name__}: {err}")
            _BROKEN[entry.name] = reason
            failed[entry.module] = f"failed to load for entry point {entry.name!r}: {reason.partition(': ')[2]}"
            for name in added:
                _BROKEN.setdefault(name, reason)
            holder = err.holder if isinstance(err, NameTaken) else None
            if holder is not None and not holder.builtin and err.name not in added and err.name in _REGISTRY:
                _withdraw(err.name, entry, one_line(f"{type(err).__name__}: {err}"))
            other = err.holder if isinstance(err, DeclaredOtherwise) else None
            if other is not None and not other.builtin and other.name not in added and other.name in _REGISTRY:
                _withdraw_declared(other, err, where)
            continue
        if isinstance(loaded, type) and loaded.__dict__.get("registered_name") is None:
            _BROKEN[entry.name] = (
                f"{where} names a class that is not registered; decorate it with @register_output_layer(...)"
            )
            continue
        own = loaded.registered_name if isinstance(loaded, type) else None
        for name in (name for name, spec in _REGISTRY.items() if before.get(name) is not spec):
            _ORIGINS[name] = entry  # registered by this import: this entry point's until its own one loads
        if own is None or own not in _REGISTRY:
            continue
        if own in _NAMED and _ORIGINS.get(own) is not entry:
            _withdraw(own, entry, f"{where} registers it too")
        else:
            _ORIGINS[own] = entry
            _NAMED.add(own)
    _warn_shadowed(claims)


def _warn_shadowed(claims: dict[str, set[str]]) -> None:
    """One warning line per broken plug-in that claims a name another variant holds (it is what that name means)."""
    reserved_variants, _ = reserved_names()
    for entry, names in claims.items():
        if entry not in _BROKEN:
            continue
        for name in sorted(names):
            if name in _REGISTRY:
                spec = _REGISTRY[name]
                holder = "the built-in layer" if spec.builtin else f"the plug-in layer {_class_name(spec)}"
            elif name in reserved_variants:
                holder = "presets.yaml's variant"
            else:
                continue
            line = f"{_BROKEN[entry]}; {name!r} keeps meaning {holder}, not this plug-in"
            _WARNINGS.append(line)
            log.warning("%s", line)
            break


def plugin_warnings() -> list[str]:
    """The warning lines of the plug-ins: one refused under a name another variant holds (:func:`_load_plugins`), a
    float's default written as an int."""
    _load_plugins()
    return list(_WARNINGS)


def _withdraw(name: str, entry: importlib.metadata.EntryPoint, why: str) -> None:
    """Take the plug-in layer ``name`` out of the registry: ``entry`` registers it as well as its first entry point."""
    first = _ORIGINS.get(name)
    spec = _REGISTRY.pop(name, None)
    holder = f"{spec.cls.__module__}.{spec.cls.__qualname__}" if spec else "?"
    origin = _entry_text(first) if first else f"the plug-in layer {holder}"
    reason = (
        f"output layer {name!r} is registered twice: by {origin} and again ({why}); which code trains under one name "
        "must not depend on the order of installation: uninstall one of them, or rename one layer"
    )
    for key in (name, entry.name, *([first.name] if first else [])):
        _BROKEN[key] = reason


def _withdraw_declared(holder: OutputLayerSpec, err: DeclaredOtherwise, where: str) -> None:
    """Take the plug-in layer ``holder`` out of the registry: the plug-in of ``where`` declares ``err.key`` otherwise
    (which of the two declarations checks a value must not depend on the order the plug-ins load in)."""
    _REGISTRY.pop(holder.name, None)
    first = _ORIGINS.get(holder.name)
    reason = (
        f"output layer {holder.name!r} ({_class_name(holder)}): hyper-parameter {err.key!r} is declared otherwise by "
        f"the plug-in layer {err.name!r} of {where}: which declaration checks a configuration's value must not depend "
        f"on the order of installation: {_rename_hint(err.name, err.key, holder)}, or uninstall one of them"
    )
    for key in (holder.name, *([first.name] if first else [])):
        _BROKEN[key] = reason


def broken_plugins() -> dict[str, str]:
    """``{entry-point name: one-line reason}`` of the plug-ins that failed to load (empty when all load); a layer
    name a broken plug-in registered (or that two plug-ins register) has its entry too."""
    _load_plugins()
    return dict(_BROKEN)


def output_layers() -> dict[str, OutputLayerSpec]:
    """Every registered output layer: built-ins in the paper's order, then plug-ins sorted by name."""
    _load_plugins()
    builtins = [spec for spec in _REGISTRY.values() if spec.builtin]
    plugins = sorted((spec for spec in _REGISTRY.values() if not spec.builtin), key=lambda s: s.name)
    return {spec.name: spec for spec in builtins + plugins}


def output_layer(name: str) -> OutputLayerSpec:
    """The registration of ``name``; RegistryError with its reason for a broken plug-in, ValueError naming the
    registered layers for an unknown name."""
    layers = output_layers()
    if name not in layers:
        if name in _BROKEN:
            raise RegistryError(_BROKEN[name])
        raise ValueError(f"unknown output layer {name!r}; registered: {', '.join(layers)}")
    return layers[name]


def _distribution_of(spec: OutputLayerSpec) -> tuple[str | None, str | None]:
    """``(distribution, version)`` of the code that defines ``spec``'s class (None, None where unknown)."""
    if spec.builtin:
        from softmax_bottleneck import __version__

        return "softmax-bottleneck", __version__
    entry = _ORIGINS.get(spec.name)
    dist = getattr(entry, "dist", None) if entry is not None else None
    if dist is not None:
        return dist.metadata["Name"], dist.version
    for dist_name in importlib.metadata.packages_distributions().get(spec.cls.__module__.split(".")[0]) or []:
        try:
            return dist_name, importlib.metadata.version(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


def layer_source(name: str) -> dict[str, Any]:
    """Which code the registered layer ``name`` is: ``{name, builtin, class, distribution, version, module_file,
    source_sha256}`` (the SHA-256 of the file of the module that defines its class; None where there is none, e.g.
    a class defined in a notebook). Recorded with every trained run and in ``check-layer --stamp``."""
    spec = output_layer(name)
    module = sys.modules.get(spec.cls.__module__)
    path = getattr(module, "__file__", None)
    distribution, version = _distribution_of(spec)
    return {
        "name": spec.name,
        "builtin": spec.builtin,
        "class": f"{spec.cls.__module__}.{spec.cls.__qualname__}",
        "distribution": distribution,
        "version": version,
        "module_file": str(path) if path else None,
        "source_sha256": file_sha256(path) if path and Path(path).is_file() else None,
    }
