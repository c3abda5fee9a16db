"""A workflow configuration checked as a whole before any job (``config/README.md`` explains every key).

:func:`read` and :func:`load` (from :mod:`softmax_bottleneck.study.config_file`) read a configuration as a hostile
file may be; :func:`check` validates a complete configuration against the workflow's JSON schema
(``data/config.schema.yaml``, which ``workflow/schemas/`` links to), then checks what the
schema cannot express: seeds, variant names against the output-layer registry, variant × dataset, sweep datasets,
every override's hyper-parameter name, type and range as the presets declare them, a variant's (family's) overrides
only of keys it owns, every run's overrides resolving together (named by their blocks), and that every variant of an
experiment owns every key its sweep sets (a key the variant's resolved hyper-parameters lack, or that resolving
overrules, would train the same model several times under names that lie), and the same of every ``sweeps`` entry
(a sweep of one variant's own hyper-parameters; its name, variant, datasets and grid). Every failure is a
:class:`ConfigError` whose text starts with the key path at fault.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import jsonschema

from softmax_bottleneck import presets
from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.models.output_layers import output_layer
from softmax_bottleneck.study.config_file import (  # noqa: F401  (the configuration's reading, re-exported)
    DEFAULT_CONFIG,
    TRAIN_CHANGED_RUNS,
    ConfigError,
    add_config_option,
    blamed_source,
    command_options,
    config_files,
    describe_files,
    load,
    merge,
    read,
    read_schema,
    snakemake_options,
    typed_overrides,
)
from softmax_bottleneck.study.runs import RUN_EXPERIMENTS, Study, StudyError, model_overrides, output_roots, same_value

#: names of the configuration's other summaries, tables and figures, which a sweep's name cannot take
BUILTIN_NAMES = {
    **{name: "the experiment" for name in RUN_EXPERIMENTS},
    **{name: "the analysis" for name in ("analysis", "spectra", "wordsim", "top5", "robustness")},
    "language_models": "the language models' table",
}
#: the names of the paper's tables and figures (``table2``, ``sm_table12``, ``figure2_pearson``; the report's registry)
PAPER_ITEM_NAME = re.compile(r"^(sm_)?(table|figure)\d+(_[a-z0-9_]+)?$")


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
        hint = YTE_HINT if not path and "__use_yte__" in unknown else HINTS.get(path, "")
        return f"{path or '(top level)'}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}{hint}"
    if "propertyNames" in error.relative_schema_path:
        return f"{path}/{error.instance}: not a valid name ({error.message})"
    return f"{path or '(top level)'}: {error.message}"


#: what an unknown key under a path may have been meant as
HINTS = {"experiments": " (the paper's experiments; a sweep of your own goes under sweeps:, config/README.md)"}
#: a YTE template (``__use_yte__: true``): Snakemake evaluates its Python expressions while it loads the file, before
#: the workflow and this package see it
YTE_HINT = (
    " (a YTE template: Snakemake has already run its Python expressions while loading it; this workflow's "
    "configurations are plain YAML; docs/trust-model.md, 'Configs are code')"
)


def validate_schema(config: dict, schema: dict) -> None:
    """The JSON schema, the first error named by its key path (and how many more there are)."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(schema_error_text(errors[0]) + more, key_path=tuple(errors[0].absolute_path))


def check_hyperparameters(
    where: str, values: dict | None, sweep: bool = False, allowed: list[str] | None = None
) -> None:
    """Override keys and values (lists of values for a sweep) against the presets' declarations (plug-ins too);
    ``allowed``: the keys an unknown one is told it may be (default: ``describe`` lists them)."""
    declared = presets.hyperparameter_schema()
    for key, value in (values or {}).items():
        path = (*where.split("/"), key)  # where the value is: --config's, or a file's (blamed_source)
        if key == "seed":
            raise ConfigError(f"{where}: seed cannot be set here; seeds come from seeds:", key_path=path)
        if key not in declared:
            known = f"allowed: {', '.join(allowed)}" if allowed else "python -m softmax_bottleneck describe lists them"
            raise ConfigError(f"{where}: unknown hyper-parameter {key!r} ({known})", key_path=path)
        for item in value if sweep else [value]:
            try:
                jsonschema.validate(item, declared[key])
            except jsonschema.ValidationError as err:
                raise ConfigError(f"{where}/{key}: {err.message}", key_path=path) from None


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


def _trained(config: dict) -> list[tuple[str, str, str]]:
    """Every (variant, dataset, schedule) the configuration's experiments and sweeps train, once each, in order (a
    dataset the variant lacks is left to :func:`check_sweeps`)."""
    triples = {
        (variant, dataset, schedule): None
        for experiment in config["experiments"].values()
        for variant in experiment["variants"]
        for dataset in experiment["datasets"]
        for schedule in experiment["schedules"]
    }
    for sweep in (config.get("sweeps") or {}).values():
        triples.update({(sweep["variant"], dataset, sweep["schedule"]): None for dataset in sweep["datasets"]})
    return [triple for triple in triples if triple[1] in presets.variant_datasets(triple[0])]


def check_model_overrides(config: dict) -> None:
    """``model_overrides``: each block's keys and values as the presets declare them; a variant's block sets only
    keys that variant owns (:func:`owned_keys`), a family's only keys some variant of the family owns (another
    layer's key would be dropped: the override would change nothing); every variant, dataset and schedule the study
    trains resolves with the blocks that apply to it (the error names those blocks, e.g. ``batch_size`` not a
    multiple of ``small_batch_size``)."""
    overrides = config["model_overrides"]
    check_hyperparameters("model_overrides/all", overrides.get("all"))
    for where in ("datasets", "families", "variants"):
        for sub, values in (overrides.get(where) or {}).items():
            check_hyperparameters(f"model_overrides/{where}/{sub}", values)
    blocks = {
        f"variants/{variant}": (f"variant {variant!r} does not own", [variant])
        for variant in overrides.get("variants") or {}
    }
    for family in overrides.get("families") or {}:
        variants = [variant for variant in presets.variants() if presets.family(variant) == family]
        blocks[f"families/{family}"] = (f"no variant of family {family!r} owns", variants)
    for where, (who, variants) in blocks.items():
        owned = {key for variant in variants for key in owned_keys(variant)}
        for key in [key for key in _block(overrides, where) if key not in owned]:
            raise ConfigError(
                f"model_overrides/{where}/{key}: {who} {key} (another layer's key is dropped), so this override "
                "would change no model; set it in the block of a variant that owns it"
            )
    for variant, dataset, schedule in _trained(config):
        family = presets.family(variant)
        applying = ["all", f"datasets/{dataset}", f"families/{family}", f"variants/{variant}"]
        try:
            presets.resolve(dataset, variant, schedule, model_overrides(config, dataset, variant))
        except ValueError as err:
            named = " + ".join(where for where in applying if _block(overrides, where)) or "none"
            raise ConfigError(f"model_overrides ({named}): {variant} on {dataset} ({schedule}): {err}") from None


def _block(overrides: dict, where: str) -> dict:
    """The ``model_overrides`` block at ``where`` (``all``, ``datasets/ptb``, ...; empty when absent)."""
    block = overrides
    for key in where.split("/"):
        block = (block or {}).get(key)
    return block or {}


def check_rank_rows(config: dict) -> None:
    """``analysis/rank_rows`` as a number: at most the rows of the largest test split (T − 1); more would analyse the
    whole split under another name (``rank-<N>.json``), an analysis of every model a second time."""
    from softmax_bottleneck.corpora.datasets import DATASETS

    rows = config["analysis"]["rank_rows"]
    most = {d.display: d.split_tokens[2] - 1 for d in DATASETS.values()}
    if isinstance(rows, int) and rows > max(most.values()):
        sizes = ", ".join(f"{label} {n:,}" for label, n in most.items())
        raise ConfigError(f"analysis/rank_rows: {rows:,} is more rows than any test set has ({sizes}): `full` "
                          "analyses the whole test set", key_path=("analysis", "rank_rows"))  # fmt: skip


def check_semantics(config: dict) -> None:
    """What the schema cannot express; each error names the offending key."""
    check_rank_rows(config)
    random = config["seeds"]["random"]
    for dataset, by_family in config["seeds"]["authors"].items():
        clash = set(by_family.values()) & set(random)
        if clash:
            raise ConfigError(f"seeds/random: {sorted(clash)} is also an authors' seed of {dataset}")
    known = presets.variants()
    broken = presets.broken_plugins()
    for where, variant in _variant_keys(config):
        if variant in broken and variant not in known:  # a preset's name stays the preset's (E10's mos_fair)
            raise ConfigError(f"{where}: variant {variant!r} is a broken plug-in: {broken[variant]}")
        if variant not in known:
            raise ConfigError(f"{where}: unknown variant {variant!r}; known: {', '.join(known)} (a plug-in layer "
                              "is known where its package is installed: check-layer --list)")  # fmt: skip
    for name, experiment in config["experiments"].items():
        for variant in experiment["variants"]:
            check_variant_datasets(f"experiments/{name}", variant, experiment["datasets"])
        for dataset, sweep in (experiment.get("sweep") or {}).items():
            if dataset not in experiment["datasets"]:
                raise ConfigError(
                    f"experiments/{name}/sweep/{dataset}: {dataset} is not in experiments/{name}/datasets"
                )
            check_hyperparameters(f"experiments/{name}/sweep/{dataset}", sweep, sweep=True)
    check_model_overrides(config)
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


def recorded_study(directory=".") -> tuple[list[str], dict, float] | None:
    """``(files, --config values, start)`` of the study the workflow last started in ``directory``: the newest record
    of a configuration's logs folder (``logs/``, ``logs/<output_subdir>/``;
    :mod:`softmax_bottleneck.cluster.workflow_run`), its files relative to ``directory``; None where it started none."""
    logs = Path(directory) / output_roots({})[2]
    found = workflow_run.latest([logs / workflow_run.RECORD, *sorted(logs.glob(f"*/{workflow_run.RECORD}"))])
    if found is None:
        return None
    config = found[1]["config"]
    files = [f if Path(f).is_absolute() else str(Path(directory) / f) for f in config["files"]]
    return files, config["values"], found[1]["started"]


def follow_recorded(args, command: str) -> None:
    """Without ``--config``: the configuration of the study the workflow last started in the command's folder
    (``args.directory``, :func:`recorded_study`) becomes its ``--config``, said in one line; nothing where none is
    recorded (the default configuration then)."""
    if args.config:
        return
    recorded = recorded_study(getattr(args, "directory", "."))
    if recorded is None:
        return
    args.config, args.config_values = recorded[0], recorded[1]
    logging.info("%s", following_line(command, recorded, "--config FILE"))


def following_line(command: str, recorded: tuple[list[str], dict, float], option: str) -> str:
    """``status: config/small.yaml, the study the workflow started in this folder at 2026-11-27 12:20 (--config FILE
    names another)``: what a command without a configuration follows (:func:`recorded_study`)."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(recorded[2]))
    files = describe_files(recorded[0])
    return f"{command}: {files}, the study the workflow started in this folder at {when} ({option} names another)"


def load_study(args, command: str, *, follow: bool = False) -> tuple[Study | None, str]:
    """``(study, source)``: the study of the ``--config`` files of a command's ``args`` (:func:`add_config_option`;
    ``follow``: without them, the study last started in the folder, :func:`follow_recorded`), checked, with every run
    expanded (each in the folder it was trained in, under ``args.directory``, else the working directory), and the
    files as messages name them (:func:`describe_files`). A configuration that is refused, or whose
    runs cannot be expanded, is logged in one line, ``<command>: <file>: <why>``, and the study is None."""
    if follow:
        follow_recorded(args, command)
    files = config_files(args)
    source = describe_files(files)
    try:
        study = Study(check(load(files, getattr(args, "config_values", None))), root=getattr(args, "directory", "."))
        study.jobs  # noqa: B018  (expands every run: a bad configuration fails here, in one line)
    except (ConfigError, StudyError) as err:
        logging.error("%s: %s: %s", command, getattr(err, "source", None) or source, err)
        return None, source
    return study, source
