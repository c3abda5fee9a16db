"""A workflow configuration file read as a hostile file may be, several merged, and ``--config`` values typed.

:func:`read` reads one YAML (or JSON) file within bounds that a file of up to 1 MB cannot get past (size, UTF-8, safe
YAML, aliases, nesting, keys given twice), each failure a :class:`ConfigError` naming the file and the line;
:func:`load` merges several files in order as Snakemake merges ``--configfile A B`` and puts the ``--config`` values on
top, typed as the schema says (:func:`typed_overrides`). The workflow (``workflow/rules/common.smk``), ``plan`` and
``costs`` read a configuration through :func:`load`; :mod:`softmax_bottleneck.study.config` checks it.
"""

from __future__ import annotations

import re
import shlex
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from softmax_bottleneck import presets, readback

SCHEMA = "data/config.schema.yaml"
#: the key that trains the runs an edit gave a new identity where finished ones stand (softmax_bottleneck.study.
#: changed_runs): an answer for one start, never repeated, so left out of the workflow's record and of every command
#: built from a start's ``--config`` values (:func:`later_values`)
TRAIN_CHANGED_RUNS = "train_changed_runs"
ONE_START_KEYS = frozenset({TRAIN_CHANGED_RUNS})


class ConfigError(ValueError):
    """A configuration that cannot be used; ``source`` (file, line) where known, the message names the key
    (``key_path``, where known: the keys down to the bad value)."""

    def __init__(self, message: str, source: str | None = None, key_path: tuple = ()):
        super().__init__(message)
        self.source, self.key_path = source, tuple(key_path)


def blamed_source(err: ConfigError, files: str, overrides: dict | None) -> str:
    """Where ``err``'s bad value comes from: its own ``source``, else ``--config`` where the command line's values
    (``overrides``) set its key, else the configuration ``files``."""
    if err.source:
        return err.source
    value = overrides or {}
    for key in err.key_path:
        if not isinstance(value, dict) or key not in value:
            return files
        value = value[key]
    return "--config" if err.key_path else files


#: the largest configuration file read (config/config.yaml is 10 KB)
MAX_CONFIG_BYTES = 2**20
#: the most nodes that YAML aliases (``*name``) may add to a configuration when expanded; a "billion laughs" file of a
#: few lines adds billions (the shipped configurations use no alias)
MAX_ALIAS_NODES = 10_000
#: the deepest nesting of a configuration (the schema's is 6)
MAX_CONFIG_DEPTH = 64


class _ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """Safe YAML that reads a number with an exponent as YAML 1.2 does: ``1e-3`` and ``1.5e3`` are floats (YAML 1.1,
    PyYAML's, needs ``1.0e-3`` and reads ``1e-3`` as the text '1e-3', which a learning rate then fails on)."""


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def read(path: str | Path) -> dict:
    """A YAML (or JSON) config file as a dict, read as a hostile file may be: a regular file (a link to one too; a
    FIFO or a device is named, never waited on or read forever: :func:`softmax_bottleneck.readback.read_bytes`), at
    most :data:`MAX_CONFIG_BYTES`, UTF-8, safe YAML (no Python objects), aliases adding at most
    :data:`MAX_ALIAS_NODES` nodes, no recursive alias, nesting at most :data:`MAX_CONFIG_DEPTH` deep, no key twice in
    one mapping, keys at the top level. Each failure is a :class:`ConfigError` whose ``source`` names the file and the
    line."""
    try:
        raw = readback.read_bytes(path, MAX_CONFIG_BYTES, follow_links=True, what="configuration")
    except FileNotFoundError:
        raise ConfigError(
            "not found (run from the repository root, or name the configuration: snakemake --configfile FILE; "
            "plan, costs, status and preview --config FILE)",
            str(path),
        ) from None
    except readback.TooLarge as err:
        raise ConfigError(
            f"{err.size:,} bytes, over the {MAX_CONFIG_BYTES:,} a configuration may have (config/config.yaml has "
            "10 KB): not a configuration",
            str(path),
        ) from None
    except readback.ReadbackError as err:
        raise ConfigError(f"cannot be read: {err.reason}", str(path)) from None
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
    loader = _ConfigLoader(text)
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
    """The configuration the workflow uses: every file of ``paths`` (:func:`read`; none may set a key of
    :data:`ONE_START_KEYS`) merged in order, then the command line's ``--config`` values (``overrides``, typed as the
    schema says: :func:`typed_overrides`)."""
    config: dict = {}
    for path in paths:
        text = read(path)
        for key in ONE_START_KEYS & set(text):
            raise ConfigError(f"{key}: an answer for one start, given on the command line (--config {key}=true), "
                              "never in a file, where it would answer every start", str(path), (key,))  # fmt: skip
        merge(config, text)
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
        readings = _readings(value)
        for candidate in readings:
            if leaf and accepts(leaf, candidate):
                return candidate
        return readings[0]  # none fits: as a file would give it, so that check() says what is wrong with it there

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
        read = yaml.load(value, Loader=_ConfigLoader)  # as in a file: 1e-3 is a float
    except yaml.YAMLError:
        read = value
    if read is None or isinstance(read, bool | int | float):
        readings.append(read)
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


def read_schema() -> dict:
    """The configuration's JSON schema, the package's ``data/config.schema.yaml``."""
    return yaml.safe_load(resources.files("softmax_bottleneck").joinpath(SCHEMA).read_text(encoding="utf-8"))


#: the configuration a command reads without ``--config`` (and the workflow without ``--configfile``)
DEFAULT_CONFIG = "config/config.yaml"


def add_config_option(parser, what: str, *, follows: bool = False) -> None:
    """``--config FILE`` (repeatable) of a command that reads a workflow configuration (``follows``: by default the
    one the workflow last started in the folder, :func:`softmax_bottleneck.study.config.follow_recorded`)."""
    default = f"the study the workflow last started in this folder, else {DEFAULT_CONFIG}" if follows else None
    default = default or DEFAULT_CONFIG
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help=f"workflow config {what} (default: {default}); given several times, the files are merged in "
        "order as snakemake --configfile A B merges them",
    )


def config_files(args) -> list[str]:
    """The files of ``--config`` (:func:`add_config_option`), in order; the default when none is given."""
    return list(args.config or [DEFAULT_CONFIG])


def snakemake_options(args) -> str:
    """:func:`command_options` of a command's ``--config`` files, the values of the study it follows
    (``args.config_values``: the workflow's ``--config``, recorded at its start) and its ``--directory``."""
    return command_options(args.config or [], getattr(args, "config_values", None), getattr(args, "directory", "."))


def later_values(values: dict) -> dict:
    """The ``--config`` values that hold beyond the start they were given to: all but :data:`ONE_START_KEYS`."""
    return {key: value for key, value in values.items() if key not in ONE_START_KEYS}


def command_options(files, values: dict | None, directory) -> str:
    """``--configfile A B --config 'KEY=VALUE' ... --directory DIR``: configuration files and ``--config`` values as
    ``snakemake`` takes them, so that a command built with them names the same runs (no ``--configfile`` for the
    default configuration; none of :data:`ONE_START_KEYS`), run from anywhere: the files by absolute path (Snakemake
    reads them before it changes to ``--directory``) and the study's folder."""
    paths = [str(Path(path).resolve()) for path in files]
    words = [f"--configfile {' '.join(shlex.quote(path) for path in paths)}"] if paths else []
    values = later_values(values or {})
    if values:
        typed = typed_overrides(values)  # written as a file gives them: {lr: 2.0}, not {lr: '2.0'}
        words.append("--config " + " ".join(shlex.quote(f"{key}={_command_line_value(v)}") for key, v in typed.items()))
    words.append(f"--directory {shlex.quote(str(Path(directory).resolve()))}")
    return " ".join(words)


def _command_line_value(value) -> str:
    """``value`` as ``--config KEY=VALUE`` writes it: a mapping or list in YAML's flow style, null as ``null``."""
    if isinstance(value, dict | list):
        return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    return "null" if value is None else str(value)


def describe_files(paths) -> str:
    """``A + B``: the files of a merged configuration, for messages."""
    return " + ".join(str(p) for p in paths)
