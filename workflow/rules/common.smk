# Shared by the rule files: the configuration (checked before any job), the study's runs, paths.
# The study itself (which runs exist, how they are named, their plan) is the package's
# softmax_bottleneck.study; this file only turns it into paths and input functions.

import os
import re
import shlex
import sys
from pathlib import Path

# Rules and the DAG run the package of THIS checkout (src/ beside the Snakefile), whichever Python
# environment runs them; `python` in the shell commands is the interpreter that runs Snakemake (with
# --sdm conda, the rule environment's; profiles/default lets PYTHONPATH through).
PACKAGE_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, PACKAGE_SRC)
os.environ.update(
    PATH=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    ),
    PYTHONPATH=os.pathsep.join(
        p for p in [PACKAGE_SRC, os.environ.get("PYTHONPATH", "")] if p
    ),
)

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS, WORDSIM_BENCHMARKS
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import (
    RUN_DIR,
    RUN_EXPERIMENTS,
    SPLITS,
    Study,
    StudyError,
)

# --------------------------------------------------------------------------------------------- configuration
# With --configfile FILE [FILE ...] those files (then --config) are the whole configuration: nothing is
# merged underneath, so a key missing from a user's file fails instead of taking the paper's value.
DEFAULT_CONFIG = "config/config.yaml"
CONFIG_FILES = [os.path.relpath(p) for p in workflow.overwrite_configfiles] or [
    DEFAULT_CONFIG
]
CONFIG_SOURCE = " + ".join(
    p if not p.startswith("..") else str(Path(p).resolve()) for p in CONFIG_FILES
)


def config_failure(err):
    """Stop before any job with one line: ``<file(s)>: <key path>: <what is wrong>``."""
    raise SystemExit(f"{getattr(err, 'source', None) or CONFIG_SOURCE}: {err}")


if not workflow.overwrite_configfiles:
    try:
        study_config.read(DEFAULT_CONFIG)
    except study_config.ConfigError as err:
        config_failure(err)

    configfile: DEFAULT_CONFIG


try:
    study_config.check(config)
    STUDY = Study(config)
    TRAIN_JOBS = STUDY.jobs
except (study_config.ConfigError, StudyError) as err:
    config_failure(err)

# --------------------------------------------------------------------------------------------- paths
DATASETS = list(presets.DATASETS)
RUN_LOG = "{dataset}/{variant}/{schedule}/seed{seed}/{runid}"
RUNIDS = sorted({run.runid for run in TRAIN_JOBS.values()})
# This configuration's own outputs: results/summary/, reports/tables/ for the paper's configuration
# (output_subdir: null), results/<subdir>/summary/, reports/<subdir>/tables/ for another one.
OUTPUT_SUBDIR = config["output_subdir"]
RESULTS, REPORTS, LOGS = (
    f"{root}/{OUTPUT_SUBDIR}" if OUTPUT_SUBDIR else root
    for root in ("results", "reports", "logs")
)


def corpus_dir(dataset):
    return f"resources/data/{CORPUS_DIRS[dataset]}"


def corpus_data_dir(wildcards):
    return corpus_dir(wildcards.dataset)


def corpus_files(wildcards):
    return [f"{corpus_dir(wildcards.dataset)}/{split}.txt" for split in SPLITS]


# A trained model's data are part of its hash (pinned SHA-256, checked when fetched), so a re-fetched
# copy with a new modification time never retrains or re-analyses it: ancient().
def ancient_corpus(wildcards):
    return ancient(corpus_files(wildcards))


def ancient_corpus_cache(wildcards):
    return ancient(f"resources/corpus/{wildcards.dataset}.pt")


#: modules of report/ that no summary, table or figure uses (the cost report): editing them renders nothing
NOT_RENDERING_CODE = {"report/costs.py", "report/bench_speeds.py", "report/language_models.py"}


def rendering_code(wildcards=None):
    """The rendering code (report/ but the cost report, analysis/stats.py, data/reported/), globbed when
    the DAG is built: an edit re-renders the summaries, tables and figures, nothing upstream.
    """
    package = Path(presets.__file__).parent
    files = [*(package / "report").rglob("*.py"), package / "analysis" / "stats.py"]
    files += (package / "data" / "reported").glob("*")
    return sorted(
        str(p)
        for p in files
        if "__pycache__" not in p.parts
        and p.relative_to(package).as_posix() not in NOT_RENDERING_CODE
    )
