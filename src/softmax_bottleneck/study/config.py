"""A workflow configuration checked as a whole before any job (``config/README.md`` explains every key).

:func:`read` reads one YAML file (syntax errors name the file and line); :func:`check` validates a complete
configuration against the workflow's JSON schema (``data/config.schema.yaml``, which ``workflow/schemas/`` links to),
then checks what the
schema cannot express: seeds, variant names against the output-layer registry, variant × dataset, sweep datasets,
every override's hyper-parameter name, type and range as the presets declare them, and that every variant of an
experiment owns every key its sweep sets (a key the variant's resolved hyper-parameters lack, or that resolving
overrules, would train the same model several times under names that lie). Every failure is a
:class:`ConfigError` whose text starts with the key path at fault.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from softmax_bottleneck import presets
from softmax_bottleneck.study.runs import same_value

SCHEMA = "data/config.schema.yaml"


class ConfigError(ValueError):
    """A configuration that cannot be used; ``source`` (file, line) where known, the message names the key."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(message)
        self.source = source


def read(path: str | Path) -> dict:
    """A YAML config file as a dict; a missing file, a syntax error or a non-mapping names the file (and line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("not found (run from the repository root, or pass --configfile FILE)", str(path)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot be read ({err})", str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"YAML syntax error: {err.problem or err}", f"{path}{where}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"YAML error: {err}", str(path)) from None
    if data is None:
        raise ConfigError("the file is empty (a configuration sets every key, see config/README.md)", str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"expected keys at the top level, got a {type(data).__name__}", f"{path}, line 1")
    return data


def schema_error_text(error: jsonschema.ValidationError) -> str:
    """One jsonschema error as ``key/path: what is wrong``."""
    path = "/".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        keys = ", ".join(f"{path}/{k}" if path else k for k in missing)
        return f"missing key {keys} (every key must be set in the file itself; config/README.md explains each)"
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = sorted(error.schema.get("properties", {}))
        return f"{path or '(top level)'}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}"
    return f"{path or '(top level)'}: {error.message}"


def validate_schema(config: dict, schema: dict) -> None:
    """The JSON schema, the first error named by its key path (and how many more there are)."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(schema_error_text(errors[0]) + more)


def check_hyperparameters(where: str, values: dict | None, sweep: bool = False) -> None:
    """Override keys and values (lists of values for a sweep) against the presets' declarations (plug-ins too)."""
    declared = presets.hyperparameter_schema()
    for key, value in (values or {}).items():
        if key == "seed":
            raise ConfigError(f"{where}: seed cannot be set here; seeds come from seeds:")
        if key not in declared:
            raise ConfigError(
                f"{where}: unknown hyper-parameter {key!r} (python -m softmax_bottleneck describe lists them)"
            )
        for item in value if sweep else [value]:
            try:
                jsonschema.validate(item, declared[key])
            except jsonschema.ValidationError as err:
                raise ConfigError(f"{where}/{key}: {err.message}") from None


def _variant_keys(config: dict) -> list[tuple[str, str]]:
    """Every place the configuration names a variant, as ``(key path, variant)``."""
    analysis = config["analysis"]
    keys = [(f"experiments/{name}/variants", v) for name, e in config["experiments"].items() for v in e["variants"]]
    keys += [(f"analysis/{k}/variants", v) for k in ("spectra", "wordsim") for v in analysis[k]["variants"]]
    keys += [(f"analysis/top5/models/{n}/variant", m["variant"]) for n, m in analysis["top5"]["models"].items()]
    keys.append(("analysis/robustness/variant", analysis["robustness"]["variant"]))
    keys += [("model_overrides/variants", v) for v in (config["model_overrides"].get("variants") or {})]
    return keys


def model_overrides(config: dict, variant: str) -> dict:
    """``model_overrides`` of one variant: ``all``, then its family, then the variant (later wins)."""
    block = config.get("model_overrides") or {}
    merged = dict(block.get("all") or {})
    merged.update((block.get("families") or {}).get(presets.family(variant)) or {})
    merged.update((block.get("variants") or {}).get(variant) or {})
    return merged


def check_sweep_ownership(config: dict, name: str) -> None:
    """Every variant of experiment ``name`` owns every key its sweep sets, at every swept value.

    A key the variant's resolved hyper-parameters do not contain (another layer's, e.g. ``gss_c`` for a plug-in)
    is dropped by :func:`~softmax_bottleneck.presets.resolve`; a value that resolving overrules (``nhidlast`` of a
    softmax-family layer, ``switch_epoch`` under NT) never reaches the model. Either way every sweep point would be
    the same model under another name: ConfigError naming the variant and the key.
    """
    experiment = config["experiments"][name]
    for dataset, sweep in (experiment.get("sweep") or {}).items():
        for variant in experiment["variants"]:
            if dataset not in presets.variant_datasets(variant):
                continue
            sets = model_overrides(config, variant)
            for schedule in experiment["schedules"]:
                where = f"experiments/{name}/sweep/{dataset}"
                try:
                    base = presets.resolve(dataset, variant, schedule, sets)
                except ValueError as err:
                    raise ConfigError(f"experiments/{name}: {variant} on {dataset} ({schedule}): {err}") from None
                for key, values in sweep.items():
                    if key not in base:
                        raise ConfigError(
                            f"{where}/{key}: variant {variant!r} does not own {key} (its resolved hyper-parameters "
                            f"have none): every point would train the same {variant} model; sweep {key} in an "
                            "experiment of the variants that own it"
                        )
                    for value in values:
                        try:
                            got = presets.resolve(dataset, variant, schedule, {**sets, key: value})[key]
                        except ValueError as err:
                            raise ConfigError(f"{where}/{key}: {variant} ({schedule}) at {value!r}: {err}") from None
                        if not same_value(got, value):
                            raise ConfigError(
                                f"{where}/{key}: variant {variant!r} does not own {key} under schedule {schedule}: "
                                f"{key}={value!r} resolves to {got!r}, so the sweep would not change the model"
                            )


def check_semantics(config: dict) -> None:
    """What the schema cannot express; each error names the offending key."""
    random = config["seeds"]["random"]
    for dataset, by_family in config["seeds"]["authors"].items():
        clash = set(by_family.values()) & set(random)
        if clash:
            raise ConfigError(f"seeds/random: {sorted(clash)} is also an authors' seed of {dataset}")
    known = presets.variants()
    broken = presets.broken_plugins()
    for where, variant in _variant_keys(config):
        if variant in broken:
            raise ConfigError(f"{where}: variant {variant!r} is a broken plug-in: {broken[variant]}")
        if variant not in known:
            raise ConfigError(f"{where}: unknown variant {variant!r}; known: {', '.join(known)}")
    for name, experiment in config["experiments"].items():
        for variant in experiment["variants"]:
            for dataset in experiment["datasets"]:
                if dataset not in presets.variant_datasets(variant):
                    raise ConfigError(f"experiments/{name}: variant {variant!r} is not defined for dataset {dataset}")
        for dataset, sweep in (experiment.get("sweep") or {}).items():
            if dataset not in experiment["datasets"]:
                raise ConfigError(
                    f"experiments/{name}/sweep/{dataset}: {dataset} is not in experiments/{name}/datasets"
                )
            check_hyperparameters(f"experiments/{name}/sweep/{dataset}", sweep, sweep=True)
    overrides = config["model_overrides"]
    check_hyperparameters("model_overrides/all", overrides.get("all"))
    for where in ("families", "variants"):
        for sub, values in (overrides.get(where) or {}).items():
            check_hyperparameters(f"model_overrides/{where}/{sub}", values)
    for name in config["experiments"]:
        check_sweep_ownership(config, name)


def check(config: dict, schema: dict | None = None) -> dict:
    """The schema (default: the package's), then :func:`check_semantics`; returns ``config`` with ``data_mirror``
    defaulted to None."""
    validate_schema(config, schema or read_schema())
    check_semantics(config)
    config.setdefault("data_mirror", None)
    return config


def read_schema(path: str | Path | None = None) -> dict:
    """The configuration's JSON schema (default: the package's ``data/config.schema.yaml``)."""
    if path is None:
        return yaml.safe_load(resources.files("softmax_bottleneck").joinpath(SCHEMA).read_text(encoding="utf-8"))
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
