"""A workflow configuration checked as a whole before any job (``config/README.md`` explains every key).

:func:`read` reads one YAML file (syntax errors name the file and line); :func:`check` validates a complete
configuration against the workflow's JSON schema (``data/config.schema.yaml``, which ``workflow/schemas/`` links to),
then checks what the
schema cannot express: seeds, variant names against the output-layer registry, variant × dataset, sweep datasets,
every override's hyper-parameter name, type and range as the presets declare them, and that every variant of an
experiment owns every key its sweep sets (a key the variant's resolved hyper-parameters lack, or that resolving
overrules, would train the same model several times under names that lie), and the same of every ``sweeps`` entry
(a sweep of one variant's own hyper-parameters; its name, variant, datasets and grid). Every failure is a
:class:`ConfigError` whose text starts with the key path at fault.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from softmax_bottleneck import presets
from softmax_bottleneck.models.output_layers import output_layer
from softmax_bottleneck.study.runs import RUN_EXPERIMENTS, model_overrides, same_value

SCHEMA = "data/config.schema.yaml"
#: names of the configuration's other summaries, tables and figures, which a sweep's name cannot take
BUILTIN_NAMES = {
    **{name: "the experiment" for name in RUN_EXPERIMENTS},
    **{name: "the analysis" for name in ("analysis", "spectra", "wordsim", "top5", "robustness")},
    "language_models": "the language models' table",
}
#: the names of the paper's tables and figures (``table2``, ``sm_table12``, ``figure2_pearson``; the report's registry)
PAPER_ITEM_NAME = re.compile(r"^(sm_)?(table|figure)\d+(_[a-z0-9_]+)?$")


class ConfigError(ValueError):
    """A configuration that cannot be used; ``source`` (file, line) where known, the message names the key."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(message)
        self.source = source


#: the largest configuration file read (config/config.yaml is 10 KB)
MAX_CONFIG_BYTES = 2**20
#: the most nodes that YAML aliases (``*name``) may add to a configuration when expanded; a "billion laughs" file of a
#: few lines adds billions (the shipped configurations use no alias)
MAX_ALIAS_NODES = 10_000
#: the deepest nesting of a configuration (the schema's is 6)
MAX_CONFIG_DEPTH = 64
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def read(path: str | Path) -> dict:
    """A YAML (or JSON) config file as a dict, read as a hostile file may be: at most :data:`MAX_CONFIG_BYTES`,
    UTF-8, safe YAML (no Python objects), aliases adding at most :data:`MAX_ALIAS_NODES` nodes, no recursive alias,
    nesting at most :data:`MAX_CONFIG_DEPTH` deep, no key twice in one mapping, keys at the top level. Each failure
    is a :class:`ConfigError` whose ``source`` names the file and the line."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{size:,} bytes, over the {MAX_CONFIG_BYTES:,} a configuration may have (config/config.yaml has "
                "10 KB): not a configuration",
                str(path),
            )
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError("not found (run from the repository root, or pass --configfile FILE)", str(path)) from None
    except OSError as err:
        raise ConfigError(f"cannot be read ({err.strerror or err})", str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[err.start]:02x}): save the file as UTF-8", f"{path}, line {line}"
        ) from None
    data = _load_yaml(text, path)
    if data is None:
        raise ConfigError("the file is empty (a configuration sets every key, see config/README.md)", str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"expected keys at the top level, got a {type(data).__name__}", f"{path}, line 1")
    return data


def _load_yaml(text: str, path):
    """The YAML document ``text``, its node graph checked (:func:`_check_nodes`) before anything is built."""
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, path)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(err.problem or err).split())
        raise ConfigError(f"YAML syntax error: {problem}", f"{path}{where}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"YAML error: {' '.join(str(err).split())}", str(path)) from None
    except RecursionError:  # the pure-Python composer, where libyaml (which stops at 1,000 levels) is missing
        raise ConfigError(f"nested over {MAX_CONFIG_DEPTH} levels deep", str(path)) from None
    finally:
        loader.dispose()


def _line(node) -> str:
    return f"line {node.start_mark.line + 1}"


def _check_nodes(root, path) -> None:
    """The composed YAML graph (an alias is the anchored node itself, met again): no recursive alias, no key twice in
    a mapping, nesting at most :data:`MAX_CONFIG_DEPTH` (aliases expanded too), and the document once every alias is
    expanded at most :data:`MAX_ALIAS_NODES` nodes larger than its distinct nodes. Linear in the distinct nodes
    (sizes and heights memoised)."""
    size: dict[int, int] = {}  # id(node) -> nodes once expanded
    height: dict[int, int] = {}  # id(node) -> levels once expanded
    uses: dict[int, int] = {}  # id(node) -> times the graph reaches it
    nodes: dict[int, yaml.Node] = {}
    on_path: set[int] = set()
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            height[key] = 1 + max((height[id(child)] for child in _children(node)), default=0)
            continue
        uses[key] = uses.get(key, 0) + 1
        if key in on_path:
            raise ConfigError("a recursive alias (an anchor used inside itself)", f"{path}, {_line(node)}")
        if key in size:
            continue
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError(f"nested over {MAX_CONFIG_DEPTH} levels deep", f"{path}, {_line(node)}")
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                    if (key_node.tag, key_node.value) in seen:
                        raise ConfigError(
                            f"key {key_node.value!r} is given twice in one mapping (YAML would keep the last "
                            f"silently; the first is on line {seen[(key_node.tag, key_node.value)]})",
                            f"{path}, {_line(key_node)}",
                        )
                    seen[(key_node.tag, key_node.value)] = key_node.start_mark.line + 1
        nodes[key] = node
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))
    if height[id(root)] > MAX_CONFIG_DEPTH:  # deeper through aliases than written
        node = root
        for _ in range(MAX_CONFIG_DEPTH):
            node = max(_children(node), key=lambda child: height[id(child)])
        raise ConfigError(f"nested over {MAX_CONFIG_DEPTH} levels deep once its aliases are expanded",
                          f"{path}, {_line(node)}")  # fmt: skip
    added = size[id(root)] - len(size)
    if added > MAX_ALIAS_NODES:
        worst = max((k for k in uses if uses[k] > 1), key=lambda k: (uses[k] - 1) * size[k])
        raise ConfigError(
            f"YAML aliases expand the configuration by {added:,} values (at most {MAX_ALIAS_NODES:,}; the anchor "
            f'here alone is {size[worst]:,} values once expanded): a "billion laughs" file? Write the values out',
            f"{path}, {_line(nodes[worst])}",
        )


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def merge(base: dict, update: dict) -> dict:
    """``update`` merged into ``base`` (in place, returned) as Snakemake merges several ``--configfile`` and then
    ``--config``: a mapping into a mapping key by key, recursively; anything else (a list too) replaces."""
    for key, value in update.items():
        if isinstance(value, dict):
            below = base.get(key)
            base[key] = merge(below if isinstance(below, dict) else {}, value)
        else:
            base[key] = value
    return base


def load(paths, overrides: dict | None = None, schema: dict | None = None) -> dict:
    """The configuration the workflow uses: every file of ``paths`` (:func:`read`) merged in order, then the
    command line's ``--config`` values (``overrides``, typed as the schema says: :func:`typed_overrides`)."""
    config: dict = {}
    for path in paths:
        merge(config, read(path))
    if overrides:
        merge(config, typed_overrides(overrides, schema or read_schema()))
    return config


#: where a hyper-parameter's value sits in a configuration, as a key path (``*``: any key; ``#``: a list index), and
#: the index of the hyper-parameter's name in that path
HYPERPARAMETER_PLACES = [
    (("model_overrides", "all", "*"), 2),
    (("model_overrides", "datasets", "*", "*"), 3),
    (("model_overrides", "families", "*", "*"), 3),
    (("model_overrides", "variants", "*", "*"), 3),
    (("experiments", "*", "sweep", "*", "*", "#"), 4),
    (("sweeps", "*", "grid", "*", "#"), 3),
]


def typed_overrides(overrides: dict, schema: dict | None = None) -> dict:
    """``--config`` values typed as the schema (and the presets, for a hyper-parameter) say.

    Snakemake types a top-level ``--config KEY=VALUE`` by trying int, float, ``True``/``False``, then reads the rest
    with YAML's base loader, which keeps every nested scalar a string: ``model_overrides='{all: {lr: 2.0}}'`` arrives
    as ``{"all": {"lr": "2.0"}}``, and ``allow_cpu_training=false`` as the (true) string ``"false"``. Here each string
    is read as YAML reads it in a file (``2.0``, ``false``, ``null``, ``1e-3``) where the schema accepts that reading,
    else kept as written; a number Snakemake made of a value the schema wants as text (``report_banner=2021``) becomes
    its text again. Anything neither accepts is left for :func:`check` to name.
    """
    schema = schema or read_schema()
    validator = jsonschema.Draft202012Validator(schema)
    declared = presets.hyperparameter_schema()

    def accepts(schemas, value) -> bool:
        return any(validator.evolve(schema=sub).is_valid(value) for sub in schemas)

    def walk(value, where: tuple, schemas: list):
        if isinstance(value, dict):
            return {k: walk(v, (*where, k), _child_schemas(schemas, k, schema)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*where, i), _child_schemas(schemas, i, schema)) for i, v in enumerate(value)]
        name = _hyperparameter(where)
        leaf = [declared[name]] if name in declared else schemas
        for candidate in _readings(value):
            if leaf and accepts(leaf, candidate):
                return candidate
        return value

    return walk(overrides, (), [schema])


def _hyperparameter(where: tuple) -> str | None:
    """The hyper-parameter whose value sits at key path ``where`` (:data:`HYPERPARAMETER_PLACES`), or None."""
    for pattern, name_at in HYPERPARAMETER_PLACES:
        if len(where) == len(pattern) and all(
            p == "*" and isinstance(w, str) or p == "#" and isinstance(w, int) or p == w
            for p, w in zip(pattern, where, strict=True)
        ):
            return where[name_at]
    return None


def _readings(value) -> list:
    """What a command-line value may mean, in order: a string as YAML reads it in a file, then as written; a number
    or boolean as Snakemake typed it, then as text."""
    if not isinstance(value, str):
        return [value, str(value)] if isinstance(value, int | float) and not isinstance(value, bool) else [value]
    readings = []
    try:
        read = yaml.safe_load(value)
    except yaml.YAMLError:
        read = value
    if read is None or isinstance(read, bool | int | float):
        readings.append(read)
    try:
        readings.append(float(value))  # YAML 1.1 reads 1e-3 as a string
    except ValueError:
        pass
    return [*readings, value]


def _resolved(schemas: list, root: dict) -> list:
    """``schemas`` with each ``$ref`` (into ``#/$defs``) followed and each ``oneOf``/``anyOf``/``allOf`` opened."""
    out, todo = [], list(schemas)
    while todo:
        sub = todo.pop(0)
        if not isinstance(sub, dict):
            continue
        if "$ref" in sub:
            target = root
            for part in sub["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            todo.append(target)
            continue
        out.append(sub)
        for combinator in ("oneOf", "anyOf", "allOf"):
            todo.extend(sub.get(combinator, []))
    return out


def _child_schemas(schemas: list, key, root: dict) -> list:
    """The schemas of member ``key`` (a string: an object's key; an integer: a list's index) of a value of
    ``schemas``."""
    children = []
    for sub in _resolved(schemas, root):
        if isinstance(key, int):
            if isinstance(sub.get("items"), dict):
                children.append(sub["items"])
            continue
        if key in sub.get("properties", {}):
            children.append(sub["properties"][key])
            continue
        patterns = [s for p, s in sub.get("patternProperties", {}).items() if re.search(p, key)]
        children.extend(patterns)
        if not patterns and isinstance(sub.get("additionalProperties"), dict):
            children.append(sub["additionalProperties"])
    return _resolved(children, root)


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
        hint = HINTS.get(path, "")
        return f"{path or '(top level)'}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}{hint}"
    if "propertyNames" in error.relative_schema_path:
        return f"{path}/{error.instance}: not a valid name ({error.message})"
    return f"{path or '(top level)'}: {error.message}"


#: what an unknown key under a path may have been meant as
HINTS = {"experiments": " (the paper's experiments; a sweep of your own goes under sweeps:, config/README.md)"}


def validate_schema(config: dict, schema: dict) -> None:
    """The JSON schema, the first error named by its key path (and how many more there are)."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(schema_error_text(errors[0]) + more)


def check_hyperparameters(
    where: str, values: dict | None, sweep: bool = False, allowed: list[str] | None = None
) -> None:
    """Override keys and values (lists of values for a sweep) against the presets' declarations (plug-ins too);
    ``allowed``: the keys an unknown one is told it may be (default: ``describe`` lists them)."""
    declared = presets.hyperparameter_schema()
    for key, value in (values or {}).items():
        if key == "seed":
            raise ConfigError(f"{where}: seed cannot be set here; seeds come from seeds:")
        if key not in declared:
            known = f"allowed: {', '.join(allowed)}" if allowed else "python -m softmax_bottleneck describe lists them"
            raise ConfigError(f"{where}: unknown hyper-parameter {key!r} ({known})")
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
    keys += [(f"sweeps/{name}/variant", sweep["variant"]) for name, sweep in (config.get("sweeps") or {}).items()]
    return keys


def check_owned(where: str, dataset: str, variant: str, schedule: str, sets: dict, grid: dict, hint: str) -> None:
    """``variant`` owns every key of ``grid`` (key -> values) on ``dataset`` under ``schedule``, at every value.

    A key the variant's resolved hyper-parameters do not contain (another layer's, e.g. ``gss_c`` for a plug-in)
    is dropped by :func:`~softmax_bottleneck.presets.resolve`; a value that resolving overrules (``switch_epoch``
    under NT) never reaches the model. Either way every point would be the same model under another name:
    ConfigError ``<where>/<key>: ...`` naming the variant and the key, then ``hint``.
    """
    try:
        base = presets.resolve(dataset, variant, schedule, sets)
    except ValueError as err:
        raise ConfigError(f"{where}: {variant} on {dataset} ({schedule}): {err}") from None
    for key, values in grid.items():
        if key not in base:
            raise ConfigError(
                f"{where}/{key}: variant {variant!r} does not own {key} (its resolved hyper-parameters have none): "
                f"every point would train the same {variant} model; {hint.format(key=key)}"
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


def check_sweep_ownership(config: dict, name: str) -> None:
    """Every variant of experiment ``name`` owns every key its sweep sets, at every value (:func:`check_owned`)."""
    experiment = config["experiments"][name]
    for dataset, sweep in (experiment.get("sweep") or {}).items():
        for variant in experiment["variants"]:
            if dataset not in presets.variant_datasets(variant):
                continue
            for schedule in experiment["schedules"]:
                check_owned(f"experiments/{name}/sweep/{dataset}", dataset, variant, schedule,
                            model_overrides(config, dataset, variant), sweep,
                            "sweep {key} in an experiment of the variants that own it")  # fmt: skip


def reserved_name(name: str) -> str | None:
    """Who holds ``name`` among the configuration's built-in summaries, tables and figures (None if free)."""
    if name in BUILTIN_NAMES:
        return f"{BUILTIN_NAMES[name]} {name!r}"
    if PAPER_ITEM_NAME.match(name):
        return "the paper's tables and figures (table2, sm_table12, figure7, ...)"
    return None


def owned_keys(variant: str) -> list[str]:
    """The keys a sweep of ``variant`` may set: its layer's own, then the base network's, each sorted."""
    own = sorted(output_layer(presets.variant_info(variant).output_layer).hyperparameters)
    return [*own, *sorted(key for key in presets.base_hyperparameters() if key != "seed")]


def check_variant_datasets(where: str, variant: str, datasets) -> None:
    """``variant`` is defined for every dataset of ``datasets`` (the error names the first that is not)."""
    for dataset in datasets:
        if dataset not in presets.variant_datasets(variant):
            raise ConfigError(
                f"{where}: variant {variant!r} is not defined for dataset {dataset} (only "
                f"{', '.join(presets.variant_datasets(variant))})"
            )


def check_sweeps(config: dict) -> None:
    """Each ``sweeps`` entry: a free name, the variant's datasets, a grid of keys the variant owns, each value
    checked like an override and given once (the variant itself is checked with every other variant)."""
    for name, sweep in (config.get("sweeps") or {}).items():
        where, variant = f"sweeps/{name}", sweep["variant"]
        holder = reserved_name(name)
        if holder:
            raise ConfigError(f"{where}: the name is taken by {holder}; choose another name")
        check_variant_datasets(f"{where}/datasets", variant, sweep["datasets"])
        grid = sweep["grid"]
        check_hyperparameters(f"{where}/grid", grid, sweep=True, allowed=owned_keys(variant))
        declared = presets.hyperparameters()
        for key, values in grid.items():
            typed = [declared[key].check(value, key) if value is not None else None for value in values]
            for i, value in enumerate(typed):
                if any(same_value(value, other) for other in typed[:i]):
                    raise ConfigError(f"{where}/grid/{key}: {values[i]!r} is given twice")
        for dataset in sweep["datasets"]:
            sets = model_overrides(config, dataset, variant)
            check_owned(f"{where}/grid", dataset, variant, sweep["schedule"], sets, grid,
                        "sweep {key} with a variant that owns it")  # fmt: skip


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
            check_variant_datasets(f"experiments/{name}", variant, experiment["datasets"])
        for dataset, sweep in (experiment.get("sweep") or {}).items():
            if dataset not in experiment["datasets"]:
                raise ConfigError(
                    f"experiments/{name}/sweep/{dataset}: {dataset} is not in experiments/{name}/datasets"
                )
            check_hyperparameters(f"experiments/{name}/sweep/{dataset}", sweep, sweep=True)
    overrides = config["model_overrides"]
    check_hyperparameters("model_overrides/all", overrides.get("all"))
    for where in ("datasets", "families", "variants"):
        for sub, values in (overrides.get(where) or {}).items():
            check_hyperparameters(f"model_overrides/{where}/{sub}", values)
    for name in config["experiments"]:
        check_sweep_ownership(config, name)
    check_sweeps(config)


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


#: the configuration a command reads without ``--config`` (and the workflow without ``--configfile``)
DEFAULT_CONFIG = "config/config.yaml"


def add_config_option(parser, what: str) -> None:
    """``--config FILE`` (repeatable) of a command that reads a workflow configuration."""
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help=f"workflow config {what} (default: {DEFAULT_CONFIG}); given several times, the files are merged in "
        "order as snakemake --configfile A B merges them",
    )


def config_files(args) -> list[str]:
    """The files of ``--config`` (:func:`add_config_option`), in order; the default when none is given."""
    return list(args.config or [DEFAULT_CONFIG])


def describe_files(paths) -> str:
    """``A + B``: the files of a merged configuration, for messages."""
    return " + ".join(str(p) for p in paths)
