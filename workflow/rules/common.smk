# Helpers of the workflow: config validation, the list of training runs, input functions.
# Pure Python only (no rules here); the rule files call these functions by name.

import itertools
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from snakemake.utils import validate

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS, WORDSIM_BENCHMARKS
from softmax_bottleneck.report import costs
from softmax_bottleneck.report import figures as paper_figures
from softmax_bottleneck.report import tables as paper_tables

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


# --------------------------------------------------------------------------------------------- tables and figures
TABLE_REQUIRES = dict(paper_tables.REQUIRES)
FIGURE_REQUIRES = dict(paper_figures.REQUIRES)
TABLES = list(TABLE_REQUIRES)
FIGURES = list(FIGURE_REQUIRES)


def summary_files(names):
    return [f"results/summary/{name}" for name in names]


def table_outputs(name):
    return [f"reports/tables/{name}.csv", f"reports/tables/{name}.md"]


def figure_outputs(name):
    return [f"reports/figures/{name}.pdf", f"reports/figures/{name}.png"]


def all_reports():
    out = [path for name in TABLES for path in table_outputs(name)]
    out += [path for name in FIGURES for path in figure_outputs(name)]
    return out


# --------------------------------------------------------------------------------------------- input functions
def corpus_dir(dataset):
    return f"resources/data/{CORPUS_DIRS[dataset]}"


def corpus_files(wildcards):
    return [f"{corpus_dir(wildcards.dataset)}/{split}.txt" for split in SPLITS]


def corpus_data_dir(wildcards):
    return corpus_dir(wildcards.dataset)


def wordsim_files(wildcards):
    return [f"resources/data/word-sim/{name}.txt" for name in WORDSIM_BENCHMARKS]


def train_job(wildcards):
    return TRAIN_JOBS[RUN_DIR.format(**wildcards)]


def train_sets(wildcards):
    """``--set key=value`` arguments of one training job (model overrides + experiment overrides)."""
    overrides = run_overrides(train_job(wildcards))
    return " ".join(
        f"--set {shlex.quote(f'{k}={format_value(v)}')}"
        for k, v in sorted(overrides.items())
    )


def train_gpu_hours(run):
    """Projected V100 GPU-hours of one run: the paper's seconds per epoch (§11.4) × epochs."""
    hp = presets.resolve(run.dataset, run.variant, run.schedule, run_overrides(run))
    seconds, _ = costs.seconds_per_epoch(run.dataset, run.variant)
    return hp["epochs"] * seconds / 3600.0


def train_runtime(wildcards, attempt):
    """Minutes for one attempt: 1.5 × the paper's V100 time (at least 10), growing with the attempt.

    A killed or timed-out job resumes from its checkpoint (``results/runs/.../.resume``) on retry.
    """
    return max(
        10, math.ceil(1.5 * 60 * train_gpu_hours(train_job(wildcards)) * attempt)
    )


def train_mem_mb(wildcards, attempt):
    return (8000 if wildcards.dataset == "ptb" else 16000) * attempt


def rank_rows(wildcards):
    return str(config["analysis"]["rank_rows"])


def run_file(run, name):
    return f"{run.dir}/{name}"


def record_arg(**fields):
    """One ``--record key=value,...`` argument of ``softmax_bottleneck summarize``."""
    text = ",".join(f"{key}={value}" for key, value in fields.items())
    return f"--record {shlex.quote(text)}"


def summary_records(wildcards):
    """``--record`` arguments of a run summary: one per run of the experiment."""
    return " ".join(
        record_arg(
            experiment=wildcards.experiment,
            dataset=run.dataset,
            variant=run.variant,
            schedule=run.schedule,
            seed=run.seed,
            seed_kind=run.seed_kind,
            metrics=run_file(run, "metrics.json"),
            rank=run_file(run, "rank.json"),
        )
        for run in RUNS_BY_EXPERIMENT[wildcards.experiment]
    )


def summary_inputs(wildcards):
    runs = RUNS_BY_EXPERIMENT[wildcards.experiment]
    return [run_file(r, name) for r in runs for name in ("metrics.json", "rank.json")]


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


def spectra_inputs(wildcards):
    return [run_file(r, "spectrum.csv") for r in model_set("spectra")]


def spectra_records(wildcards):
    return " ".join(
        record_arg(
            dataset=r.dataset, variant=r.variant, csv=run_file(r, "spectrum.csv")
        )
        for r in model_set("spectra")
    )


def wordsim_inputs(wildcards):
    return [run_file(r, "wordsim.csv") for r in model_set("wordsim")]


def wordsim_records(wildcards):
    return " ".join(
        record_arg(dataset=r.dataset, variant=r.variant, csv=run_file(r, "wordsim.csv"))
        for r in model_set("wordsim")
    )


def top5_inputs(wildcards):
    return [run_file(r, "top5.csv") for r in top5_models().values()]


def top5_records(wildcards):
    return " ".join(
        record_arg(model=name, csv=run_file(r, "top5.csv"))
        for name, r in top5_models().items()
    )


def robustness_model():
    r = config["analysis"]["robustness"]
    return reference_run(r["dataset"], r["variant"], r["schedule"])


def robustness_checkpoint(wildcards):
    return run_file(robustness_model(), "model.pt")


def robustness_data_dir(wildcards):
    return corpus_dir(robustness_model().dataset)


def robustness_corpus(wildcards):
    return [f"{corpus_dir(robustness_model().dataset)}/{split}.txt" for split in SPLITS]


def robustness_corpus_cache(wildcards):
    return f"resources/corpus/{robustness_model().dataset}.pt"


def mirror_arg(wildcards):
    mirror = config.get("data_mirror")
    return f"--mirror {shlex.quote(str(mirror))}" if mirror else ""


def training_plan():
    """Every training job with its experiments and projected cost (``snakemake plan``)."""
    members = {}
    for name, runs in RUNS_BY_EXPERIMENT.items():
        for run in runs:
            members.setdefault(run.dir, []).append(name)
    for run in analysis_models():
        if "analysis" not in members.setdefault(run.dir, []):
            members[run.dir].append("analysis")
    rows = []
    for path, run in TRAIN_JOBS.items():
        seconds, time_of = costs.seconds_per_epoch(run.dataset, run.variant)
        hp = presets.resolve(run.dataset, run.variant, run.schedule, run_overrides(run))
        rows.append(
            dict(
                run=path,
                experiments=" ".join(members[path]),
                dataset=run.dataset,
                variant=run.variant,
                schedule=run.schedule,
                seed=run.seed,
                seed_kind=run.seed_kind,
                tag=run.tag,
                epochs=hp["epochs"],
                v100_s_per_epoch=seconds,
                gpu_hours=round(train_gpu_hours(run), 4),
            )
        )
    return rows


def corpus_fetch_paths(wildcards):
    return " ".join(f"{wildcards.corpus}/{split}.txt" for split in SPLITS)


def analyze_mem_mb(wildcards, attempt):
    """Host memory of the log-P → rank step (streamed; the exact SVD holds a float64 Gram or matrix)."""
    return (24000 if wildcards.dataset == "ptb" else 32000) * attempt


def analyze_threads(wildcards):
    """CPU threads of the log-P → rank step: 1 for a few hundred rows, 8 for the paper's matrices.

    The log-P pass runs on the GPU; the threads serve the CPU side of the float64 SVD/Gram.
    """
    rows = config["analysis"]["rank_rows"]
    return 1 if isinstance(rows, int) and rows <= 5000 else 8


def report_category(name):
    return "Supplementary material" if name.startswith("sm_") else "Paper"


def report_labels(name):
    kind, _, number = name.partition("_") if name.startswith("sm_") else ("", "", name)
    item = number if kind else name
    title = (
        item.replace("table", "Table ").replace("figure", "Figure ").replace("_", " ")
    )
    return {"item": ("SM " if kind else "") + title}


# --------------------------------------------------------------------------------------------- the study
check_config()
RUNS_BY_EXPERIMENT, TRAIN_JOBS = all_runs()
TAGS = sorted({run.tag for run in TRAIN_JOBS.values()})
