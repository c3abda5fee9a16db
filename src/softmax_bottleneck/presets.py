"""Hyper-parameter presets (spec §5, §10.4) and the paper's parameter count (spec §3.1).

The presets are data (``data/presets.yaml``); this module resolves one of them for a dataset,
variant and schedule, applies ``key=value`` overrides, and counts parameters::

    P = V·d (tied) + V (bias) + Σ_layers [4·o·(i+o) + 8·o] + K_knots (PLIF) + [d'·K + d'·K·d + K·d] (MoS/MoC)
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import yaml

DATASETS = ("ptb", "wt2")
#: vocabulary sizes including <eos> (spec §2.2)
VOCAB_SIZES = {"ptb": 10_000, "wt2": 33_278}
SCHEDULES = ("et", "nt")
MIXTURE_LAYERS = ("mos", "moc")


@cache
def _presets() -> dict:
    text = resources.files("softmax_bottleneck").joinpath("data/presets.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def variants() -> tuple[str, ...]:
    return tuple(_presets()["variants"])


def defaults() -> dict:
    return dict(_presets()["defaults"])


def variant_datasets(variant: str) -> tuple[str, ...]:
    return tuple(_variant(variant).get("datasets", DATASETS))


def family(variant: str) -> str:
    """The preset family of a variant (``softmax`` or ``mixture``): it decides the authors' seed (§5)."""
    return _variant(variant)["family"]


def _variant(variant: str) -> dict:
    table = _presets()["variants"]
    if variant not in table:
        raise ValueError(f"unknown variant {variant!r}; valid variants: {', '.join(table)}")
    return table[variant]


def known_keys() -> set[str]:
    keys = set(defaults()) | {"output_layer", "schedule"}
    for family in _presets()["families"].values():
        for block in family.values():
            keys |= set(block)
    return keys


def resolve(dataset: str, variant: str, schedule: str = "et", overrides: dict | None = None) -> dict:
    """The full hyper-parameter dict of one run.

    ``schedule`` ``et`` keeps ``switch_epoch`` (ASGD after epoch E); ``nt`` sets it to −1 so the
    non-monotone trigger decides (spec §6.3). Overrides win over everything, except that for
    non-mixture output layers d' is tied to d as in the reference (spec §3).
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; valid datasets: {', '.join(DATASETS)}")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid schedules: {', '.join(SCHEDULES)}")
    spec = _variant(variant)
    if dataset not in variant_datasets(variant):
        raise ValueError(f"variant {variant!r} is defined for {', '.join(variant_datasets(variant))} only")
    hp = defaults()
    hp.update(_presets()["families"][spec["family"]][dataset])
    hp.update(spec.get(dataset, {}))
    hp["output_layer"] = spec["output_layer"]
    hp["schedule"] = schedule
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - known_keys())
    if unknown:
        raise ValueError(f"unknown hyper-parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known_keys()))}")
    hp.update(overrides)
    if hp["output_layer"] not in MIXTURE_LAYERS:
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
    if hp["output_layer"] == "gss" and (hp["gss_c"] is None or hp["gss_k"] is None):
        raise ValueError("gss needs gss_c and gss_k")
    if hp["output_layer"] in MIXTURE_LAYERS and (not hp["n_experts"] or hp["dropoutl"] is None):
        raise ValueError(f"{hp['output_layer']} needs n_experts and dropoutl")


def parse_value(text: str):
    """``key=value`` values are YAML scalars: ``3`` int, ``0.5`` float, ``null``, ``true``, ``abc``."""
    value = yaml.safe_load(text)
    if isinstance(value, (dict, list)):
        raise ValueError(f"value {text!r} must be a scalar")
    return value


@cache
def float_keys() -> frozenset[str]:
    """Keys that hold a float somewhere in the presets (an int given for them becomes a float)."""
    blocks = [defaults()]
    blocks += [block for family in _presets()["families"].values() for block in family.values()]
    blocks += [v.get(ds, {}) for v in _presets()["variants"].values() for ds in DATASETS]
    return frozenset(k for block in blocks for k, v in block.items() if isinstance(v, float))


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
    """The paper's #Param (spec §3.1), counting frozen PLIF slopes too."""
    d, h, dl = hp["nemb"], hp["nhid"], hp["nhidlast"]
    sizes = [d] + [h] * (hp["nlayers"] - 1) + [dl]
    total = vocab_size * d + vocab_size
    total += sum(lstm_parameters(i, o) for i, o in zip(sizes[:-1], sizes[1:], strict=True))
    if hp["output_layer"] in ("lms_plif", "lms_plif_frozen"):
        total += hp["plif_knots"]
    if hp["output_layer"] in MIXTURE_LAYERS:
        k = hp["n_experts"]
        total += dl * k + dl * k * d + k * d
    return total


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
        raise AssertionError(f"built model has {built} parameters, the §3.1 formula {formula}")
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
