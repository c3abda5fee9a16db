# Shared by all rule files (config validation, the list of training runs, corpus paths).
# Pure Python only (no rules here). Input functions and params used by one rule file live beside it,
# in workflow/rules/helpers/<stage>.smk.

import itertools
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from snakemake.utils import validate

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS, WORDSIM_BENCHMARKS

validate(config, schema="../schemas/config.schema.yaml")

# `python` in the shell commands is the interpreter that runs Snakemake (e.g. .venv/bin/python when
# it is started as .venv/bin/snakemake without activating the venv); with --sdm conda, activating a
# rule's environment puts that environment's python first instead.
os.environ.update(
    PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
)


# --------------------------------------------------------------------------------------------- constants
DATASETS = list(presets.DATASETS)
SPLITS = ["train", "valid", "test"]
#: names of the run-summary experiments (spec §1) -> their results/summary/<name>.csv
RUN_EXPERIMENTS = [
    "main",
    "frozen",
    "ntet",
    "gss_grid",
    "mos_k",
    "mos_dropoutl",
    "fair",
]
#: short names of swept hyper-parameters in the run identity (e.g. c-1.0_k2.25, K10)
SHORT_NAMES = {"gss_c": "c", "gss_k": "k", "n_experts": "K"}
SWEEP_ORDER = ["gss_c", "gss_k", "n_experts", "dropoutl"]
#: the run folder, which *is* the run identity: dataset × variant × schedule × seed × overrides
RUN_DIR = "results/runs/{dataset}/{variant}/{schedule}/seed{seed}/{tag}"
RUN_LOG = "{dataset}/{variant}/{schedule}/seed{seed}/{tag}"


class ConfigError(ValueError):
    """A config value the schema cannot check (the message names the key)."""


# --------------------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Run:
    dataset: str
    variant: str
    schedule: str
    seed: int
    seed_kind: str  # authors | random
    tag: str  # canonical string of the experiment overrides that differ from the preset
    overrides: tuple = ()  # ((key, value), ...) of the experiment, canonical order

    @property
    def wildcards(self) -> dict:
        return dict(
            dataset=self.dataset,
            variant=self.variant,
            schedule=self.schedule,
            seed=self.seed,
            tag=self.tag,
        )

    @property
    def dir(self) -> str:
        return RUN_DIR.format(**self.wildcards)


def variant_family(variant):
    """``softmax`` or ``mixture`` (the presets' family: it decides the authors' seed)."""
    return presets.family(variant)


def model_overrides(variant):
    """Config ``model_overrides`` for one variant: ``all``, then its family, then the variant."""
    block = config.get("model_overrides") or {}
    merged = dict(block.get("all") or {})
    merged.update((block.get("families") or {}).get(variant_family(variant)) or {})
    merged.update((block.get("variants") or {}).get(variant) or {})
    return merged


def format_value(value):
    """Canonical text of a hyper-parameter value (run identity and ``--set``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def same_value(a, b):
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)


def differing_overrides(dataset, variant, schedule, overrides):
    """The experiment overrides whose value differs from the effective preset, in canonical order.

    The effective preset is the package preset plus the config's ``model_overrides``, so the GSS
    grid point equal to the preset (c, k) and the K = 15 / dropoutl = 0.29 MoS runs are the very
    runs of E1/E2 and are trained once.
    """
    base = presets.resolve(dataset, variant, schedule, model_overrides(variant))
    return tuple(
        (key, value) for key, value in overrides if not same_value(base.get(key), value)
    )


def run_tag(overrides):
    """Identity string of a run's differing overrides: ``default``, ``c-1.0_k2.25``, ``K10``, ..."""
    parts = [
        f"{SHORT_NAMES.get(key, key)}{format_value(value)}" for key, value in overrides
    ]
    return "_".join(parts) or "default"


def seeds_for(dataset, variant, which):
    """[(seed, seed_kind)] for ``which`` in authors | random | all."""
    authors = int(config["seeds"]["authors"][dataset][variant_family(variant)])
    random = [int(s) for s in config["seeds"]["random"]]
    out = []
    if which in ("authors", "all"):
        out.append((authors, "authors"))
    if which in ("random", "all"):
        out.extend((s, "random") for s in random)
    return out


def sweep_points(experiment, dataset):
    """Cartesian product of the experiment's sweep for one dataset: [((key, value), ...)]."""
    sweep = (experiment.get("sweep") or {}).get(dataset) or {}
    keys = sorted(
        sweep,
        key=lambda k: (
            SWEEP_ORDER.index(k) if k in SWEEP_ORDER else len(SWEEP_ORDER),
            k,
        ),
    )
    return [
        tuple(zip(keys, values))
        for values in itertools.product(*(sweep[k] for k in keys))
    ]


def experiment_runs(name):
    """The runs of one experiment of ``config["experiments"]``, in config order."""
    experiment = config["experiments"][name]
    runs = []
    for dataset in experiment["datasets"]:
        for variant in experiment["variants"]:
            for schedule in experiment["schedules"]:
                for point in sweep_points(experiment, dataset):
                    point = differing_overrides(dataset, variant, schedule, point)
                    for seed, kind in seeds_for(dataset, variant, experiment["seeds"]):
                        runs.append(
                            Run(
                                dataset,
                                variant,
                                schedule,
                                seed,
                                kind,
                                run_tag(point),
                                point,
                            )
                        )
    return runs


def reference_run(dataset, variant, schedule):
    """The authors'-seed, preset-hyper-parameter run behind spectra, word similarity and top-5."""
    seed, kind = seeds_for(dataset, variant, "authors")[0]
    return Run(dataset, variant, schedule, seed, kind, "default")


def check_config():
    """Checks the schema cannot express; each error names the offending key."""
    known = set(presets.variants())
    random = config["seeds"]["random"]
    if len(set(random)) != len(random):
        raise ConfigError(f"seeds/random: seeds must be distinct, got {random}")
    for dataset, by_family in config["seeds"]["authors"].items():
        clash = set(by_family.values()) & set(random)
        if clash:
            raise ConfigError(
                f"seeds/random: {sorted(clash)} is also an authors' seed of {dataset}"
            )
    for name, experiment in config["experiments"].items():
        for variant in experiment["variants"]:
            if variant not in known:
                raise ConfigError(
                    f"experiments/{name}/variants: unknown variant {variant!r}; known: {sorted(known)}"
                )
            for dataset in experiment["datasets"]:
                if dataset not in presets.variant_datasets(variant):
                    raise ConfigError(
                        f"experiments/{name}: variant {variant!r} is not defined for dataset {dataset}"
                    )
        sweep = experiment.get("sweep") or {}
        for dataset in sweep:
            if dataset not in experiment["datasets"]:
                raise ConfigError(
                    f"experiments/{name}/sweep/{dataset}: {dataset} is not in experiments/{name}/datasets"
                )
    for where, block in (config.get("model_overrides") or {}).items():
        entries = (
            block.items() if where in ("families", "variants") else [(None, block)]
        )
        for sub, values in entries:
            if where == "variants" and sub not in known:
                raise ConfigError(
                    f"model_overrides/variants: unknown variant {sub!r}; known: {sorted(known)}"
                )
            unknown = set(values or {}) - presets.known_keys()
            if unknown:
                path = (
                    f"model_overrides/{where}/{sub}"
                    if sub
                    else f"model_overrides/{where}"
                )
                raise ConfigError(
                    f"{path}: unknown hyper-parameter(s) {sorted(unknown)}"
                )


def all_runs():
    """{experiment: [Run]} and the de-duplicated training jobs (run folder -> Run)."""
    by_experiment = {name: experiment_runs(name) for name in RUN_EXPERIMENTS}
    jobs = {}
    for runs in by_experiment.values():
        for run in runs:
            jobs.setdefault(run.dir, run)
    for run in analysis_models():
        jobs.setdefault(run.dir, run)
    # every run's hyper-parameters resolve: a bad combination fails here, before any job
    for run in jobs.values():
        try:
            presets.resolve(run.dataset, run.variant, run.schedule, run_overrides(run))
        except ValueError as err:
            raise ConfigError(f"run {run.dir}: {err}") from None
    return by_experiment, jobs


def run_overrides(run):
    overrides = model_overrides(run.variant)
    overrides.update(dict(run.overrides))
    return overrides


def analysis_models():
    """Reference models of the analyses (spectra, word similarity, top-5, robustness)."""
    models = model_set("spectra") + model_set("wordsim") + list(top5_models().values())
    models.append(robustness_model())
    return models


def model_set(key):
    """The reference models of ``analysis/<key>`` (spectra, wordsim)."""
    block = config["analysis"][key]
    return [
        reference_run(dataset, variant, block["schedule"])
        for dataset in block["datasets"]
        for variant in block["variants"]
    ]


def top5_models():
    return {
        name: reference_run("ptb", model["variant"], model["schedule"])
        for name, model in config["analysis"]["top5"]["models"].items()
    }


def robustness_model():
    r = config["analysis"]["robustness"]
    return reference_run(r["dataset"], r["variant"], r["schedule"])


# --------------------------------------------------------------------------------------------- shared paths
def corpus_dir(dataset):
    return f"resources/data/{CORPUS_DIRS[dataset]}"


def corpus_files(wildcards):
    return [f"{corpus_dir(wildcards.dataset)}/{split}.txt" for split in SPLITS]


def corpus_data_dir(wildcards):
    return corpus_dir(wildcards.dataset)


# --------------------------------------------------------------------------------------------- the study
check_config()
RUNS_BY_EXPERIMENT, TRAIN_JOBS = all_runs()
TAGS = sorted({run.tag for run in TRAIN_JOBS.values()})
