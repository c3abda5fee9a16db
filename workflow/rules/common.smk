# Shared by all rule files (the configuration, the training runs and their identity, paths).
# Pure Python only (no rules here). Input functions and params used by one rule file live beside it,
# in workflow/rules/helpers/<stage>.smk.

import functools
import hashlib
import itertools
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Rules and the DAG run the package of THIS checkout (src/ beside the Snakefile), whichever Python
# environment runs them: the venv's editable install points there anyway, and with --sdm conda the
# environment holds only the dependencies (profiles/default lets PYTHONPATH through).
PACKAGE_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, PACKAGE_SRC)
# `python` in the shell commands is the interpreter that runs Snakemake (e.g. .venv/bin/python when
# it is started as .venv/bin/snakemake without activating the venv); with --sdm conda, activating a
# rule's environment puts that environment's python first instead.
os.environ.update(
    PATH=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    ),
    PYTHONPATH=os.pathsep.join(
        p for p in [PACKAGE_SRC, os.environ.get("PYTHONPATH", "")] if p
    ),
)

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS, FILES, WORDSIM_BENCHMARKS


include: "helpers/config.smk"


# --------------------------------------------------------------------------------------------- constants
DATASETS = list(presets.DATASETS)
SPLITS = ["train", "valid", "test"]
#: names of the run-summary experiments (paper §4-5, SM) -> their <results>/summary/<name>.csv
RUN_EXPERIMENTS = [
    "main",
    "frozen",
    "ntet",
    "gss_grid",
    "mos_k",
    "mos_dropoutl",
    "fair",
]
#: short names of swept hyper-parameters in a run's name (e.g. c-1.0_k2.25, K10)
SHORT_NAMES = {"gss_c": "c", "gss_k": "k", "n_experts": "K"}
SWEEP_ORDER = ["gss_c", "gss_k", "n_experts", "dropoutl"]
#: a run folder: dataset × variant × schedule × seed × <swept values>-<hash of everything that
#: determines the run> (shared by every configuration that asks for the same run)
RUN_DIR = "results/runs/{dataset}/{variant}/{schedule}/seed{seed}/{runid}"
RUN_LOG = "{dataset}/{variant}/{schedule}/seed{seed}/{runid}"
#: hex digits of the run hash in the folder name
HASH_LENGTH = 8

#: this configuration's own outputs (summaries, plan, tables, figures, their logs): the paper's
#: configuration (output_subdir: null) writes results/summary/ and reports/tables/; another one
#: (e.g. config/small.yaml, output_subdir: small) results/small/summary/ and reports/small/tables/
OUTPUT_SUBDIR = config["output_subdir"]
RESULTS = f"results/{OUTPUT_SUBDIR}" if OUTPUT_SUBDIR else "results"
REPORTS = f"reports/{OUTPUT_SUBDIR}" if OUTPUT_SUBDIR else "reports"
LOGS = f"logs/{OUTPUT_SUBDIR}" if OUTPUT_SUBDIR else "logs"


# --------------------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Run:
    dataset: str
    variant: str
    schedule: str
    seed: int
    seed_kind: str  # authors | random
    overrides: (
        tuple
    ) = ()  # ((key, value), ...) of the experiment that differ from the preset

    @property
    def tag(self) -> str:
        return run_tag(self.overrides)

    @property
    def runid(self) -> str:
        """``<tag>-<hash>``: readable swept values, then the hash of the run's full identity."""
        return f"{self.tag}-{run_hash(self)}"

    @property
    def wildcards(self) -> dict:
        return dict(
            dataset=self.dataset,
            variant=self.variant,
            schedule=self.schedule,
            seed=self.seed,
            runid=self.runid,
        )

    @property
    def dir(self) -> str:
        return RUN_DIR.format(**self.wildcards)


def run_identity(run):
    """Everything that determines a trained model: the fully resolved hyper-parameters (presets +
    ``model_overrides`` + the experiment's overrides, as the trainer resolves them), the seed, and
    the SHA-256 of the corpus files it reads."""
    hp = resolved_hyperparameters(run)
    hp["seed"] = run.seed
    data = {
        split: FILES[f"{CORPUS_DIRS[run.dataset]}/{split}.txt"].sha256
        for split in SPLITS
    }
    return {"hyperparameters": hp, "data": data}


def run_hash(run):
    """First hex digits of the SHA-256 of the canonical JSON of :func:`run_identity`."""
    text = json.dumps(run_identity(run), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def resolved_hyperparameters(run):
    return dict(
        _resolve(
            run.dataset,
            run.variant,
            run.schedule,
            tuple(sorted(run_overrides(run).items())),
        )
    )


@functools.cache
def _resolve(dataset, variant, schedule, overrides):
    return presets.resolve(dataset, variant, schedule, dict(overrides))


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


def run_overrides(run):
    """Every ``--set`` of a run: the config's ``model_overrides``, then the experiment's sweep point."""
    overrides = model_overrides(run.variant)
    overrides.update(dict(run.overrides))
    return overrides


def format_value(value):
    """Canonical text of a hyper-parameter value (run name and ``--set``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return repr(float(value))


def same_value(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)


def differing_overrides(dataset, variant, schedule, overrides):
    """The experiment overrides whose value differs from the effective preset, in canonical order.

    The effective preset is the package preset plus the config's ``model_overrides``, so the GSS
    grid point equal to the preset (c, k) and the K = 15 / dropoutl = 0.29 MoS runs are the very
    runs of E1/E2 and are trained once.
    """
    base = _resolve(
        dataset, variant, schedule, tuple(sorted(model_overrides(variant).items()))
    )
    return tuple(
        (key, value) for key, value in overrides if not same_value(base.get(key), value)
    )


def run_tag(overrides):
    """Readable part of a run's name: ``default``, ``c-1.0_k2.25``, ``K10``, ..."""
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
                        runs.append(Run(dataset, variant, schedule, seed, kind, point))
    return runs


def reference_run(dataset, variant, schedule):
    """The authors'-seed, preset-hyper-parameter run behind spectra, word similarity and top-5."""
    seed, kind = seeds_for(dataset, variant, "authors")[0]
    return Run(dataset, variant, schedule, seed, kind)


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


def analysis_models():
    """Reference models of the analyses (spectra, word similarity, top-5, robustness)."""
    models = model_set("spectra") + model_set("wordsim") + list(top5_models().values())
    models.append(robustness_model())
    return models


def all_runs():
    """{experiment: [Run]} and the de-duplicated training jobs (run folder -> Run).

    Every run's hyper-parameters are resolved here: a bad combination fails before any job.
    """
    by_experiment = {}
    for name in RUN_EXPERIMENTS:
        try:
            by_experiment[name] = experiment_runs(name)
        except ValueError as err:
            config_failure(f"experiments/{name}: {err}")
    jobs = {}
    for run in [*itertools.chain(*by_experiment.values()), *analysis_models()]:
        try:
            jobs.setdefault(run.dir, run)
        except ValueError as err:
            config_failure(
                f"{run.dataset} {run.variant} {run.schedule} {run.tag}: {err}"
            )
    return by_experiment, jobs


# --------------------------------------------------------------------------------------------- shared paths
def corpus_dir(dataset):
    return f"resources/data/{CORPUS_DIRS[dataset]}"


def corpus_files(wildcards):
    return [f"{corpus_dir(wildcards.dataset)}/{split}.txt" for split in SPLITS]


def corpus_data_dir(wildcards):
    return corpus_dir(wildcards.dataset)


# The data a trained model reads are part of its hash (their pinned SHA-256, checked when fetched),
# so a re-fetched copy with a new modification time never retrains or re-analyses it: ancient().
def ancient_corpus(wildcards):
    return ancient(corpus_files(wildcards))


def ancient_corpus_cache(wildcards):
    return ancient(f"resources/corpus/{wildcards.dataset}.pt")


def run_file(run, name):
    return f"{run.dir}/{name}"


def rank_rows():
    """``analysis/rank_rows`` as it appears in file names: reference, full or a number."""
    return str(config["analysis"]["rank_rows"])


#: modules under report/ that no summary, table or figure uses (the cost report): editing them renders nothing
NOT_RENDERING_CODE = {"report/costs.py", "report/bench_speeds.py"}


def rendering_code(wildcards=None):
    """The package's rendering code, the statistics the tables quote and the paper's reported numbers
    (``report/`` but the cost report, ``analysis/stats.py``, ``data/reported/``), globbed when the DAG
    is built: an edit re-renders the summaries, tables and figures, nothing upstream.
    """
    package = Path(presets.__file__).parent
    files = [
        *(package / "report").rglob("*.py"),
        package / "analysis" / "stats.py",
        *(package / "data" / "reported").glob("*"),
    ]
    return sorted(
        str(p)
        for p in files
        if "__pycache__" not in p.parts
        and p.relative_to(package).as_posix() not in NOT_RENDERING_CODE
    )


# --------------------------------------------------------------------------------------------- the study
RUNS_BY_EXPERIMENT, TRAIN_JOBS = all_runs()
RUNIDS = sorted({run.runid for run in TRAIN_JOBS.values()})
