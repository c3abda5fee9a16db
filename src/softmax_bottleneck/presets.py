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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from softmax_bottleneck.models.output_layers.registry import output_layer, output_layers

DATASETS = ("ptb", "wt2")
#: vocabulary sizes including <eos> (paper §4; SM §1)
VOCAB_SIZES = {"ptb": 10_000, "wt2": 33_278}
SCHEDULES = ("et", "nt")


@cache
def _presets() -> dict:
    text = resources.files("softmax_bottleneck").joinpath("data/presets.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


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


@cache
def _variant_table() -> dict[str, VariantInfo]:
    blocks = _presets()["variants"]
    table: dict[str, VariantInfo] = {}
    layers = output_layers()
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
    table = _variant_table()
    if variant not in table:
        raise ValueError(f"unknown variant {variant!r}; valid variants: {', '.join(table)}")
    return table[variant]


def display_name(variant: str) -> str:
    """The variant's name in tables and figures (``lms_plif_frozen`` → ``LMS-PLIF†``)."""
    return variant_info(variant).display


def defaults() -> dict:
    return dict(_presets()["defaults"])


def variant_datasets(variant: str) -> tuple[str, ...]:
    return variant_info(variant).datasets


def family(variant: str) -> str:
    """The preset family of a variant (``softmax`` or ``mixture``): it decides the authors' seed (SM Table 6)."""
    return variant_info(variant).family


def _variant_block(variant: str, dataset: str) -> dict:
    return dict((_presets()["variants"].get(variant) or {}).get(dataset) or {})


@cache
def layer_keys() -> frozenset[str]:
    """Every hyper-parameter that some registered output layer declares."""
    return frozenset(key for spec in output_layers().values() for key in spec.hyperparameters)


def known_keys() -> set[str]:
    keys = set(defaults()) | {"output_layer", "schedule"} | set(layer_keys())
    for fam in _presets()["families"].values():
        for block in fam.values():
            keys |= set(block)
    for name in variants():
        for dataset in DATASETS:
            keys |= set(_variant_block(name, dataset))
    return keys


def resolve(dataset: str, variant: str, schedule: str = "et", overrides: dict | None = None) -> dict:
    """The full hyper-parameter dict of one run.

    ``schedule`` ``et`` keeps ``switch_epoch`` (ASGD after epoch E); ``nt`` sets it to −1 so the
    non-monotone trigger decides (paper §4). Overrides win over everything, except that for layers that
    apply the tied weight to the context directly d' is tied to d, as in the reference. The output layer's own
    hyper-parameters appear with their registered defaults; hyper-parameters of other layers are dropped.
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
    unknown = sorted(set(overrides) - known_keys())
    if unknown:
        raise ValueError(f"unknown hyper-parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known_keys()))}")
    hp = defaults()
    hp.update(_presets()["families"][info.family][dataset])
    hp.update(_variant_block(variant, dataset))
    hp["output_layer"] = layer.name
    hp["schedule"] = schedule
    hp.update(overrides)
    for key in layer_keys() - set(layer.hyperparameters):
        hp.pop(key, None)
    hp.update(layer.layer_hp(hp))
    if not layer.cls.projects_context:
        if "nhidlast" in overrides and overrides["nhidlast"] != hp["nemb"]:
            raise ValueError(f"nhidlast must equal nemb for output layer {hp['output_layer']!r}")
        hp["nhidlast"] = hp["nemb"]
    if schedule == "nt":
        hp["switch_epoch"] = -1
    _check(hp)
    return hp


def _check(hp: dict) -> None:
    for key in ("nemb", "nhid", "nhidlast", "nlayers", "batch_size", "small_batch_size", "bptt", "epochs"):
        if not isinstance(hp[key], int) or hp[key] < 1:
            raise ValueError(f"{key} must be a positive integer, got {hp[key]!r}")
    if hp["batch_size"] % hp["small_batch_size"]:
        raise ValueError(
            f"batch_size {hp['batch_size']} is not a multiple of small_batch_size {hp['small_batch_size']}"
        )
    for key in ("dropoute", "dropouti", "dropouth", "dropout", "wdrop"):
        if not 0 <= hp[key] < 1:
            raise ValueError(f"{key} must lie in [0, 1), got {hp[key]!r}")


def parse_value(text: str):
    """``key=value`` values are YAML scalars: ``3`` int, ``0.5`` float, ``null``, ``true``, ``abc``."""
    value = yaml.safe_load(text)
    if isinstance(value, (dict, list)):
        raise ValueError(f"value {text!r} must be a scalar")
    return value


@cache
def float_keys() -> frozenset[str]:
    """Keys that hold a float somewhere in the presets or in a layer's registration (an int becomes a float)."""
    blocks = [defaults()]
    blocks += [block for fam in _presets()["families"].values() for block in fam.values()]
    blocks += [_variant_block(v, ds) for v in variants() for ds in DATASETS]
    keys = {k for block in blocks for k, v in block.items() if isinstance(v, float)}
    keys |= {k for spec in output_layers().values() for k, h in spec.hyperparameters.items() if h.type is float}
    return frozenset(keys)


def parse_overrides(items: list[str] | None) -> dict:
    """Parse ``["gss_c=-1", "epochs=3"]`` into a dict, coercing ints given for float keys."""
    out: dict = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {item!r}")
        value = parse_value(text)
        if key in float_keys() and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out[key.strip()] = value
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


def describe(dataset: str, variant: str, schedule: str = "et", overrides: dict | None = None) -> dict:
    hp = resolve(dataset, variant, schedule, overrides)
    vocab = VOCAB_SIZES[dataset]
    built, trainable = built_parameter_counts(hp, vocab)
    formula = parameter_count(hp, vocab)
    if built != formula:
        raise AssertionError(f"built model has {built} parameters, the #Param formula {formula}")
    return {
        "dataset": dataset,
        "variant": variant,
        "vocab_size": vocab,
        "parameters": formula,
        "trainable_parameters": trainable,
        "hyperparameters": hp,
    }


def add_cli(parser) -> None:
    parser.add_argument("--dataset", required=True, choices=DATASETS)
    parser.add_argument("--variant", required=True, help=f"one of: {', '.join(variants())}")
    parser.add_argument("--schedule", default="et", choices=SCHEDULES)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run_cli(args) -> int:
    try:
        info = describe(args.dataset, args.variant, args.schedule, parse_overrides(args.overrides))
    except ValueError as err:
        raise SystemExit(f"describe: {err}") from None
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0
