# The configuration: loaded from ONE place, complete as it stands, validated before any job.
#
# * With --configfile FILE [FILE ...], those files (merged in order, then --config KEY=VALUE) are
#   the whole configuration: config/config.yaml is NOT merged underneath, so a key missing from a
#   user's file fails here instead of being filled silently with the paper's value.
# * Without --configfile, config/config.yaml (relative to the working directory) is read.
# Every failure is one line naming the file(s) and the key (config/README.md explains each key).

import jsonschema
import yaml

from softmax_bottleneck import presets

DEFAULT_CONFIG = "config/config.yaml"
SCHEMA_FILE = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"


def shown_path(path):
    """A config path as the user typed it: relative to the working directory when inside it."""
    text = os.path.relpath(path)
    return text if not text.startswith("..") else str(path)


CONFIG_FILES = [shown_path(p) for p in workflow.overwrite_configfiles] or [
    DEFAULT_CONFIG
]
CONFIG_SOURCE = " + ".join(CONFIG_FILES)


def config_failure(message, source=None):
    """Stop before any job with one line: ``<file(s)>: <message>`` (no traceback)."""
    raise SystemExit(f"{source or CONFIG_SOURCE}: {message}")


def read_config_file(path):
    """A YAML config file as a dict; syntax errors and empty files name the file and the line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        config_failure(
            "not found (run from the repository root, or pass --configfile FILE)", path
        )
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        config_failure(f"YAML syntax error: {err.problem or err}", f"{path}{where}")
    if data is None:
        config_failure(
            "the file is empty (a configuration sets every key, see config/README.md)",
            path,
        )
    if not isinstance(data, dict):
        config_failure(
            f"expected keys at the top level, got a {type(data).__name__}",
            f"{path}, line 1",
        )
    return data


if not workflow.overwrite_configfiles:
    read_config_file(DEFAULT_CONFIG)

    configfile: DEFAULT_CONFIG


def schema_error_text(error):
    """One jsonschema error as ``key/path: what is wrong``."""
    path = "/".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        keys = ", ".join(f"{path}/{k}" if path else k for k in missing)
        return f"missing key {keys} (every key must be set in the file itself; config/README.md explains each)"
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"{path or '(top level)'}: unknown key(s) {unknown}"
    return f"{path or '(top level)'}: {error.message}"


def validate_config():
    """The schema (workflow/schemas/config.schema.yaml), every error named by its key path."""
    schema = yaml.safe_load(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(
        validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]
    )
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        config_failure(schema_error_text(errors[0]) + more)
    config.setdefault("data_mirror", None)


def check_hyperparameters(where, values, sweep=False):
    """Override keys and values (lists of values for a sweep) against the presets' declarations.

    The presets declare the base network's keys and every registered output layer's (plug-ins too).
    """
    declared = presets.hyperparameter_schema()
    for key, value in (values or {}).items():
        if key == "seed":
            config_failure(f"{where}: seed cannot be set here; seeds come from seeds:")
        if key not in declared:
            config_failure(
                f"{where}: unknown hyper-parameter {key!r} (python -m softmax_bottleneck describe lists them)"
            )
        for item in value if sweep else [value]:
            try:
                jsonschema.validate(item, declared[key])
            except jsonschema.ValidationError as err:
                config_failure(f"{where}/{key}: {err.message}")


def check_config():
    """Checks the schema cannot express; each error names the offending key."""
    known = set(presets.variants())
    random = config["seeds"]["random"]
    for dataset, by_family in config["seeds"]["authors"].items():
        clash = set(by_family.values()) & set(random)
        if clash:
            config_failure(
                f"seeds/random: {sorted(clash)} is also an authors' seed of {dataset}"
            )
    variant_keys = [
        (f"experiments/{name}/variants", v)
        for name, e in config["experiments"].items()
        for v in e["variants"]
    ]
    variant_keys += [
        (f"analysis/{k}/variants", v)
        for k in ("spectra", "wordsim")
        for v in config["analysis"][k]["variants"]
    ]
    variant_keys += [
        (f"analysis/top5/models/{n}/variant", m["variant"])
        for n, m in config["analysis"]["top5"]["models"].items()
    ]
    variant_keys.append(
        ("analysis/robustness/variant", config["analysis"]["robustness"]["variant"])
    )
    variant_keys += [
        ("model_overrides/variants", v)
        for v in (config["model_overrides"].get("variants") or {})
    ]
    for where, variant in variant_keys:
        if variant not in known:
            config_failure(
                f"{where}: unknown variant {variant!r}; known: {', '.join(presets.variants())}"
            )
    for name, experiment in config["experiments"].items():
        for variant in experiment["variants"]:
            for dataset in experiment["datasets"]:
                if dataset not in presets.variant_datasets(variant):
                    config_failure(
                        f"experiments/{name}: variant {variant!r} is not defined for dataset {dataset}"
                    )
        for dataset, sweep in (experiment.get("sweep") or {}).items():
            if dataset not in experiment["datasets"]:
                config_failure(
                    f"experiments/{name}/sweep/{dataset}: {dataset} is not in experiments/{name}/datasets"
                )
            check_hyperparameters(
                f"experiments/{name}/sweep/{dataset}", sweep, sweep=True
            )
    overrides = config["model_overrides"]
    check_hyperparameters("model_overrides/all", overrides.get("all"))
    for where in ("families", "variants"):
        for sub, values in (overrides.get(where) or {}).items():
            check_hyperparameters(f"model_overrides/{where}/{sub}", values)


validate_config()
check_config()
