"""Hyper-parameter presets (paper §4, SM Tables 6 and 9) and the paper's parameter count (Table 2 #Param).

The presets are data (``data/presets.yaml``); this module resolves one of them for a dataset, variant and
schedule, applies ``key=value`` overrides, and counts parameters::

    P = V·d (tied embedding) + Σ_layers [4·o·(i+o) + 8·o] + extra(output layer)

where ``extra`` is the output layer's registered :meth:`~.models.output_layers.OutputLayer.extra_parameter_count`
(the bias V, plus the PLIF knots or the MoS/MoC projections).

The variants are every registered output layer (:func:`~.models.output_layers.output_layers`: the paper's, then
any installed plug-in), each under its own name, plus the variants of ``presets.yaml`` that are not output layers
of their own (E10's MoS†, Softmax†, Softmax‡). :func:`variant_info` gives each one's display name, family,
colour and cost proxy: every list of variants in the study is derived from here.

Every hyper-parameter has a declared type and range: the base network's in ``presets.yaml``
(``hyperparameters:``), each output layer's in its registration. :func:`resolve` checks every value of a run
(preset, workflow override, ``--set``) against them, and :func:`parse_overrides` parses ``--set KEY=VALUE`` text
by the declared type (never as YAML: ``lr=1e-3`` is the float 0.001), so a bad key or value fails before any work
with one message naming the key.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cache

from softmax_bottleneck.corpora.datasets import DATASETS as CORPORA
from softmax_bottleneck.models.output_layers.registry import (
    Hyperparameter,
    RegistryError,
    broken_plugins,
    output_layer,
    output_layers,
    presets_data,
)

DATASETS = tuple(CORPORA)
#: vocabulary sizes including <eos> (paper §4; SM §1)
VOCAB_SIZES = {name: d.vocab_size for name, d in CORPORA.items()}
SCHEDULES = ("et", "nt")


@dataclass(frozen=True)
class VariantInfo:
    """What the study shows of one variant: its output layer, family, datasets, display name, colour, cost proxy.

    ``paper`` is true for the variants of the paper (built-in layers and E10's variants), false for plug-ins.
    ``cost_proxy`` is the variant whose reported V100 time stands in for this one's (None: none declared).
    """

    name: str
    output_layer: str
    family: str
    datasets: tuple[str, ...]
    display: str
    color: str | None
    cost_proxy: str | None
    paper: bool


def _registry_key() -> tuple:
    """Identifies the registry's current content: derived tables are cached per content, so a layer registered
    later (a plug-in, or a class decorated in a notebook) is never missing from them."""
    return tuple((name, spec.cls) for name, spec in output_layers().items())


def _variant_table() -> dict[str, VariantInfo]:
    return _variant_table_for(_registry_key())


@cache
def _variant_table_for(_key: tuple) -> dict[str, VariantInfo]:
    blocks = presets_data()["variants"]
    table: dict[str, VariantInfo] = {}
    layers = output_layers()
    base = base_hyperparameters()
    for spec in layers.values():
        where = f"output layer {spec.name!r} ({spec.cls.__module__}.{spec.cls.__qualname__})"
        clash = sorted(set(spec.hyperparameters) & (set(base) | {"output_layer", "schedule"}))
        if clash:
            raise RegistryError(
                f"{where}: hyper-parameter name(s) {', '.join(clash)} belong to the base network; rename them "
                f"(e.g. {spec.name}_{clash[0]})"
            )
        block = blocks.get(spec.name) or {}
        if not spec.builtin and "output_layer" in block:
            raise RegistryError(
                f"{where}: the name is already taken by presets.yaml's variant {spec.name!r} "
                f"({block.get('display', spec.name)}, output layer {block['output_layer']!r}); choose another name"
            )
    for spec in layers.values():
        if not spec.builtin:
            continue
        table[spec.name] = _layer_variant(spec, blocks.get(spec.name, {}))
    for name, block in blocks.items():
        if name in layers:
            continue
        if "output_layer" not in block or "family" not in block:
            raise ValueError(f"presets.yaml: variant {name!r} is no registered output layer and names no output_layer")
        layer = output_layer(block["output_layer"])
        table[name] = VariantInfo(
            name=name,
            output_layer=layer.name,
            family=block["family"],
            datasets=tuple(block.get("datasets", DATASETS)),
            display=block.get("display", name),
            color=block.get("color"),
            cost_proxy=block.get("cost_proxy", layer.name),
            paper=True,
        )
    for spec in layers.values():
        if not spec.builtin:
            table[spec.name] = _layer_variant(spec, blocks.get(spec.name, {}))
    return table


def _layer_variant(spec, block: dict) -> VariantInfo:
    return VariantInfo(
        name=spec.name,
        output_layer=spec.name,
        family=spec.family,
        datasets=tuple(block.get("datasets", DATASETS)),
        display=spec.display,
        color=spec.color,
        cost_proxy=spec.cost_proxy,
        paper=spec.builtin,
    )


def variants() -> tuple[str, ...]:
    """Every variant: the paper's layers in the paper's order, E10's variants, then plug-in layers by name."""
    return tuple(_variant_table())


def variant_info(variant: str) -> VariantInfo:
    """The variant ``variant``; RegistryError with its reason for a broken plug-in, ValueError for an unknown name."""
    table = _variant_table()
    if variant not in table:
        broken = broken_plugins()
        if variant in broken:
            raise RegistryError(broken[variant])
        raise ValueError(f"unknown variant {variant!r}; valid variants: {', '.join(table)} (a plug-in layer is "
                         "known where its package is installed: check-layer --list)")  # fmt: skip
    return table[variant]


def display_name(variant: str) -> str:
    """The variant's name in tables and figures (``lms_plif_frozen`` → ``LMS-PLIF†``)."""
    return variant_info(variant).display


def defaults() -> dict:
    return dict(presets_data()["defaults"])


def variant_datasets(variant: str) -> tuple[str, ...]:
    return variant_info(variant).datasets


def family(variant: str) -> str:
    """The preset family of a variant (``softmax`` or ``mixture``): it decides the authors' seed (SM Table 6)."""
    return variant_info(variant).family


def _variant_block(variant: str, dataset: str) -> dict:
    return dict((presets_data()["variants"].get(variant) or {}).get(dataset) or {})


@cache
def base_hyperparameters() -> dict[str, Hyperparameter]:
    """Type, range and help of every base-network hyper-parameter (``presets.yaml``, ``hyperparameters:``).

    A key of ``defaults`` that is not declared there takes the type of its default value, with no range.
    """
    types = {"int": int, "float": float, "bool": bool, "str": str}
    values = defaults()
    out: dict[str, Hyperparameter] = {}
    for key, decl in presets_data()["hyperparameters"].items():
        decl = dict(decl)
        kind = types[decl.pop("type")]
        out[key] = Hyperparameter(values.get(key), kind, **decl)
    for key, value in values.items():
        if key not in out:
            out[key] = Hyperparameter(value, type(value) if type(value) in types.values() else str, nullable=True)
    return out


def layer_keys() -> frozenset[str]:
    """Every hyper-parameter that some registered output layer declares."""
    return frozenset(key for spec in output_layers().values() for key in spec.hyperparameters)


def hyperparameters() -> dict[str, Hyperparameter]:
    """Every hyper-parameter a run may set: the base network's, then each output layer's (first registration wins)."""
    out = dict(base_hyperparameters())
    for spec in output_layers().values():
        for key, decl in spec.hyperparameters.items():
            out.setdefault(key, decl)
    return out


def known_keys() -> set[str]:
    """The keys ``--set`` and the workflow's ``model_overrides`` accept."""
    return set(hyperparameters())


def float_keys() -> frozenset[str]:
    """Keys declared as floats (an int given for one becomes a float)."""
    return frozenset(key for key, decl in hyperparameters().items() if decl.type is float)


def hyperparameter_schema() -> dict[str, dict]:
    """``{key: JSON Schema}`` of every hyper-parameter (for validating a workflow config's overrides)."""
    return {key: decl.json_schema() for key, decl in hyperparameters().items()}


#: keys set by the variant and the schedule, never by an override
FIXED_KEYS = {"output_layer": "the output layer is the variant's (choose --variant)", "schedule": "use --schedule"}


def _unknown_key(key: str) -> ValueError:
    if key in FIXED_KEYS:
        return ValueError(f"{key} cannot be overridden: {FIXED_KEYS[key]}")
    close = difflib.get_close_matches(key, sorted(known_keys()), n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(sorted(known_keys()))}"
    return ValueError(f"unknown hyper-parameter {key!r}{hint}")


def resolve(dataset: str, variant: str, schedule: str = "et", overrides: dict | None = None) -> dict:
    """The full hyper-parameter dict of one run, every value checked against its declared type and range.

    ``schedule`` ``et`` keeps ``switch_epoch`` (ASGD after epoch E); ``nt`` sets it to −1 so the
    non-monotone trigger decides (paper §4). Overrides win over everything, except that for layers that
    apply the tied weight to the context directly d' is tied to d, as in the reference. The output layer's own
    hyper-parameters appear with their registered defaults; hyper-parameters of other layers are dropped.
    Raises ValueError naming the first bad key.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; valid datasets: {', '.join(DATASETS)}")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid schedules: {', '.join(SCHEDULES)}")
    info = variant_info(variant)
    if dataset not in info.datasets:
        raise ValueError(f"variant {variant!r} is defined for {', '.join(info.datasets)} only")
    layer = output_layer(info.output_layer)
    overrides = dict(overrides or {})
    for key, value in overrides.items():
        if key not in known_keys():
            raise _unknown_key(key)
        if value is None and key in layer.hyperparameters and not layer.hyperparameters[key].nullable:
            raise ValueError(_null_text(key, f"{key}=null"))
    hp = defaults()
    hp.update(presets_data()["families"][info.family][dataset])
    hp.update(_variant_block(variant, dataset))
    hp["output_layer"] = layer.name
    hp["schedule"] = schedule
    hp.update(overrides)
    for key in layer_keys() - set(layer.hyperparameters):
        hp.pop(key, None)
    base = base_hyperparameters()
    for key, value in hp.items():
        if key in base:
            hp[key] = base[key].check(value, key)
        elif key not in layer.hyperparameters and key not in FIXED_KEYS:
            raise ValueError(f"presets.yaml: {variant}/{dataset}: undeclared hyper-parameter {key!r}")
    hp.update(layer.layer_hp(hp))
    if not layer.cls.projects_context:
        if "nhidlast" in overrides and overrides["nhidlast"] != hp["nemb"]:
            raise ValueError(f"nhidlast must equal nemb for output layer {hp['output_layer']!r}")
        hp["nhidlast"] = hp["nemb"]
    if schedule == "nt":
        hp["switch_epoch"] = -1
    if hp["batch_size"] % hp["small_batch_size"]:
        raise ValueError(
            f"batch_size {hp['batch_size']} is not a multiple of small_batch_size {hp['small_batch_size']}"
        )
    return hp


def _null_text(key: str, item) -> str:
    if key in layer_keys():
        return (f"{key} cannot be null (got {item!r}): null would not mean the preset's value; omit {key} to keep "
                "the preset's value, or give a value")  # fmt: skip
    return f"{key} cannot be null, got {item!r}"


def parse_overrides(items: list[str] | None) -> dict:
    """Parse ``["gss_c=-1", "lr=1e-3"]`` into typed values, checked against the declared types and ranges.

    ValueError naming the item for a malformed item, an unknown key, a value of the wrong type or out of range,
    or null for a key that has no null. An output layer's key cannot be null either: "the registration default"
    would silently replace a preset's value (GSS's c = −1.5 on PTB); omit the key to keep the preset's value.
    """
    declared = hyperparameters()
    out: dict = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key not in declared:
            raise _unknown_key(key)
        value = declared[key].parse(text, key)
        if value is None and not declared[key].nullable:
            raise ValueError(_null_text(key, item))
        out[key] = value
    return out


def lstm_parameters(n_in: int, n_out: int) -> int:
    """One single-layer LSTM: 4·o·(i+o) weights and two bias vectors of 4·o."""
    return 4 * n_out * (n_in + n_out) + 8 * n_out


def parameter_count(hp: dict, vocab_size: int) -> int:
    """The paper's #Param (Table 2): tied embedding, the LSTMs, and the output layer's registered extra count."""
    d, h, dl = hp["nemb"], hp["nhid"], hp["nhidlast"]
    sizes = [d] + [h] * (hp["nlayers"] - 1) + [dl]
    total = vocab_size * d
    total += sum(lstm_parameters(i, o) for i, o in zip(sizes[:-1], sizes[1:], strict=True))
    return total + output_layer(hp["output_layer"]).extra_parameter_count(vocab_size, d, dl, hp)


def built_parameter_counts(hp: dict, vocab_size: int) -> tuple[int, int]:
    """(all, trainable) parameters of the model actually built, on the meta device (no memory)."""
    import torch

    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    with torch.device("meta"):
        model = AWDLSTM(vocab_size, hp)
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def not_owned(variant: str, overrides: dict | None) -> list[str]:
    """The keys of ``overrides`` that ``variant`` does not have: another output layer's hyper-parameters, which
    :func:`resolve` drops (a workflow's ``model_overrides/all`` may set them for the layers that own them)."""
    layer = output_layer(variant_info(variant).output_layer)
    own = set(base_hyperparameters()) | set(layer.hyperparameters)
    return [key for key in overrides or {} if key not in own]


def not_owned_note(variant: str, overrides: dict | None) -> str | None:
    """``--set n_experts: ...``: the keys :func:`not_owned` finds, in one line; None when there are none."""
    keys = not_owned(variant, overrides)
    if not keys:
        return None
    layer = output_layer(variant_info(variant).output_layer)
    own = ", ".join(sorted(layer.hyperparameters)) or "none"
    return (
        f"--set {', '.join(keys)}: variant {variant!r} has no such hyper-parameter (another output layer's; "
        f"{layer.name}'s own: {own}), so it changes nothing"
    )


def describe(dataset: str, variant: str, schedule: str = "et", overrides: dict | None = None) -> dict:
    hp = resolve(dataset, variant, schedule, overrides)
    vocab = VOCAB_SIZES[dataset]
    built, trainable = built_parameter_counts(hp, vocab)
    formula = parameter_count(hp, vocab)
    if built != formula:
        spec = output_layer(hp["output_layer"])
        raise ValueError(
            f"output layer {spec.name!r}: the built model has {built} parameters but the #Param formula gives "
            f"{formula}: {spec.cls.__qualname__}.extra_parameter_count must count every parameter the layer owns "
            f"(check-layer {spec.name} names the difference)"
        )
    return {
        "dataset": dataset,
        "variant": variant,
        "vocab_size": vocab,
        "parameters": formula,
        "trainable_parameters": trainable,
        "hyperparameters": hp,
    }


def add_cli(parser) -> None:
    try:
        names = ", ".join(variants())
    except RegistryError as err:  # a broken plug-in: one line naming its entry point
        raise SystemExit(f"{parser.prog}: {err}") from None
    parser.add_argument("--dataset", required=True, choices=DATASETS, help="ptb or wt2")
    parser.add_argument("--variant", required=True, help=f"one of: {names}")
    parser.add_argument("--schedule", default="et", choices=SCHEDULES, help="ET-ASGD or NT-ASGD (paper §4)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one hyper-parameter, parsed by its declared type and checked against its range (repeatable)",
    )


def run_cli(args) -> int:
    try:
        overrides = parse_overrides(args.overrides)
        foreign = not_owned_note(args.variant, overrides)
        if foreign:
            raise ValueError(foreign)
        info = describe(args.dataset, args.variant, args.schedule, overrides)
    except ValueError as err:
        raise SystemExit(f"describe: {err}") from None
    except Exception as err:  # a crash in an output layer's own code (building it, counting its parameters)
        raise SystemExit(f"describe: {args.variant}: {type(err).__name__}: {err}") from None
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0
