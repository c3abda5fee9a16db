# Shared by the stage files: the configuration (checked before any job), the study's runs, paths,
# and each stage's input functions and resources. The study itself (which runs exist, how they are
# named, their plan) is the package's softmax_bottleneck.study; this file turns it into paths.

import os
import re
import shlex
import sys
from pathlib import Path

# Rules and the DAG run the package of THIS checkout (src/ beside the Snakefile), whichever Python
# environment runs them; `python` in the shell commands is the interpreter that runs Snakemake (with
# --sdm conda, the rule environment's; profiles/default lets PYTHONPATH through).
PACKAGE_SRC = str(
    Path(workflow.current_basedir.get_path_or_uri(secret_free=True)).parents[1] / "src"
)
sys.path.insert(0, PACKAGE_SRC)
# An installed package other than this checkout's (the logger plug-in imports it first) is imported again from src/.
for _name in [m for m in sys.modules if m.split(".")[0] == "softmax_bottleneck"]:
    _file = os.path.realpath(getattr(sys.modules[_name], "__file__", None) or "")
    if not _file.startswith(os.path.realpath(PACKAGE_SRC) + os.sep):
        del sys.modules[_name]
os.environ.update(
    PATH=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    ),
    PYTHONPATH=os.pathsep.join(
        p for p in [PACKAGE_SRC, os.environ.get("PYTHONPATH", "")] if p
    ),
)

# The targets that only read the study (workflow/rules/progress.smk) run without Snakemake's directory lock, which
# Snakemake removes, the study's too, when a run ends: the command line naming only them is run again at once with
# --nolock, before Snakemake reads the rest (softmax_bottleneck.cluster.lock_free).
from softmax_bottleneck.cluster import lock_free
from softmax_bottleneck.cluster.container import bind_for_jobs
from softmax_bottleneck.cluster.container import check_image as check_container_image
from softmax_bottleneck.cluster import snakemake_run

# what Snakemake's own objects tell (softmax_bottleneck.cluster.snakemake_run): this is the controller, not a job's
# Snakemake; the --configfile files given
CONTROLLER = snakemake_run.is_controller(workflow)
GIVEN_CONFIGFILES = snakemake_run.given_configfiles(workflow)

READING_TARGETS = ("status", "progress", "preview")
if CONTROLLER:
    lock_free.rerun_without_lock(READING_TARGETS)
    # where another run's lock holds files of this one, one line saying why and what to do (never --unlock while
    # a Snakemake runs here) instead of Snakemake's, which invites --unlock (a dry run's too, logged as an error)
    lock_free.explain_locks()
    # a run of jobs (--nolock too) or an --unlock beside a running Snakemake stops at once: Snakemake would remove
    # or lift the running one's lock (or run its jobs beside it), and the study could then be started twice
    lock_free.refuse_beside_another(reading=READING_TARGETS)

from softmax_bottleneck import presets
from softmax_bottleneck.analysis.rank import exact_auto_fits
from softmax_bottleneck.corpora.datasets import (
    CORPUS_CACHE,
    DATA_ROOT,
    SPLITS,
    WORDSIM_FOLDER,
)
from softmax_bottleneck.corpora.download import CORPUS_DIRS, WORDSIM_BENCHMARKS
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.report.sources import rendering_sources
from softmax_bottleneck.study.summary_records import record_files, summary_records
from softmax_bottleneck.study.runs import (
    RUN_DIR,
    RUN_EXPERIMENTS,
    RUN_PATH,
    SWEEP_PREFIX,
    TRAIN_LOG,
    Study,
    StudyError,
    output_roots,
)

# --------------------------------------------------------------------------------------------- configuration
# With --configfile FILE [FILE ...] those files (then --config) are the whole configuration, nothing merged underneath;
# the package's bounded reader (study.config.load) reads and types them, and its result replaces Snakemake's reading
# of them (config/README.md, "How a configuration is read").
DEFAULT_CONFIG = study_config.DEFAULT_CONFIG
# relative to the working directory where below it, else absolute
CONFIG_FILES = [
    p if not p.startswith("..") else str(Path(p).resolve())
    for p in map(os.path.relpath, GIVEN_CONFIGFILES)
] or [DEFAULT_CONFIG]
CONFIG_VALUES = snakemake_run.given_config(workflow)
# `snakemake status|progress|preview` without --configfile follow the study the workflow last started in this folder,
# as `python -m softmax_bottleneck status` does (its record, softmax_bottleneck.cluster.workflow_run), saying so in one line;
# the paper's configuration where none is recorded. --config values go on top of the recorded ones.
FOLLOWED = None
if not GIVEN_CONFIGFILES and lock_free.reading_targets(sys.argv[1:], READING_TARGETS):
    FOLLOWED = study_config.recorded_study()
    if FOLLOWED is not None:
        CONFIG_FILES = [os.path.relpath(p) for p in FOLLOWED[0]]
        CONFIG_VALUES = {**FOLLOWED[1], **CONFIG_VALUES}
        if CONTROLLER:
            what = "/".join(lock_free.reading_targets(sys.argv[1:], READING_TARGETS))
            print(
                study_config.following_line(what, FOLLOWED, "--configfile FILE"),
                file=sys.stderr,
            )
CONFIG_SOURCE = " + ".join(CONFIG_FILES)
#: the configuration is named (--configfile), or followed from the study last started here, not the default one
CONFIG_NAMED = bool(GIVEN_CONFIGFILES) or FOLLOWED is not None


def config_failure(err):
    """Stop before any job with one line: ``<file(s)>: <key path>: <what is wrong>``."""
    raise SystemExit(
        f"{study_config.blamed_source(err, CONFIG_SOURCE, CONFIG_VALUES)}: {err}"
    )


try:
    PACKAGE_CONFIG = study_config.load(CONFIG_FILES, CONFIG_VALUES)
except study_config.ConfigError as err:
    config_failure(err)

if not GIVEN_CONFIGFILES and FOLLOWED is None:

    configfile: DEFAULT_CONFIG


config.clear()
config.update(PACKAGE_CONFIG)
try:
    study_config.check(config)
    STUDY = Study(config, root=".")  # each run in the folder it was trained in
    TRAIN_JOBS = STUDY.jobs
except (study_config.ConfigError, StudyError) as err:
    config_failure(err)

# --------------------------------------------------------------------------------------------- paths
DATASETS = list(presets.DATASETS)
RUN_LOG = RUN_PATH
RUNIDS = sorted({run.runid for run in TRAIN_JOBS.values()})
# This configuration's own outputs: results/summary/, reports/tables/ for the paper's configuration
# (output_subdir: null), results/<subdir>/summary/, reports/<subdir>/tables/ for another one.
OUTPUT_SUBDIR = config["output_subdir"]
RESULTS, REPORTS, LOGS = output_roots(config)


def corpus_dir(dataset):
    return f"{DATA_ROOT}/{CORPUS_DIRS[dataset]}"


def corpus_data_dir(wildcards):
    return corpus_dir(wildcards.dataset)


def corpus_files(wildcards):
    return [f"{corpus_dir(wildcards.dataset)}/{split}.txt" for split in SPLITS]


# A trained model's data are part of its hash (pinned SHA-256, checked when fetched), so a re-fetched
# copy with a new modification time never retrains or re-analyses it: ancient().
def ancient_corpus(wildcards):
    return ancient(corpus_files(wildcards))


def ancient_corpus_cache(wildcards):
    return ancient(CORPUS_CACHE.format(dataset=wildcards.dataset))


def rendering_code(wildcards=None):
    """The code and paper numbers behind the summaries, tables, figures and claims page (the renderers and what they
    import: softmax_bottleneck.report.sources), found when the DAG is built: an edit re-renders them, nothing upstream.
    """
    return rendering_sources()


# --------------------------------------------------------------------------------------------- training jobs (workflow/rules/train.smk)
from softmax_bottleneck.models.output_layers.provenance import current_tag
from softmax_bottleneck.models.output_layers.registry import layer_source
from softmax_bottleneck.study.plan import (
    gpu_hours,
    plan_markdown,
    plan_rows,
    plan_table,
    proxy_notes,
    proxy_priced,
    stale_runs,
    train_memory_mb,
    train_runtime_minutes,
)


def start_workflow_run():
    """Before any job (onstart): the checks of the whole run, each stopping it in one line, then this run's record
    (its configuration, every job with its planned seconds) for the terminal's time left (softmax_bottleneck.study.
    workflow_start.start)."""
    from softmax_bottleneck.study import workflow_start

    local, slots = snakemake_run.job_slots(workflow)
    workflow_start.start(
        STUDY,
        snakemake_run.jobs_to_run(workflow),
        LOGS,
        files=CONFIG_FILES,
        values=CONFIG_VALUES,
        named=CONFIG_NAMED,
        cpu_checked=local and not config.get("allow_cpu_training"),
        slots=slots,
        train_changed=bool(config.get(study_config.TRAIN_CHANGED_RUNS)),
    )


def end_workflow_run(ok):
    """At the run's end (onsuccess, onerror): marked finished or failed beside its record, so that `status` does not
    show it as running (softmax_bottleneck.cluster.workflow_run.mark_ended)."""
    from softmax_bottleneck.cluster import workflow_run

    workflow_run.mark_ended(ok)


def retry_options(wildcards):
    """`snakemake <target>` again for this configuration (the retry command `status` prints): its files, also where
    the study followed is the one last started in this folder (FOLLOWED), its --config values and the folder; made
    only for the jobs that print it (workflow/rules/progress.smk)."""
    files = CONFIG_FILES if CONFIG_NAMED else []
    return study_config.command_options(files, CONFIG_VALUES, os.getcwd())


def finished_runs():
    """Run folders of the plan whose model is already trained."""
    return {path for path in TRAIN_JOBS if os.path.exists(f"{path}/model.pt")}


# A finished run that an older source of its output layer trained is said at once (`snakemake -n` too), never
# retrained: its tables and figures carry the same note (report/layer_sources.py).
if CONTROLLER:
    for note in stale_runs(STUDY):
        print(
            f"note: {note} (kept, never retrained by itself: to retrain it, delete the run folder and run snakemake "
            "with your targets followed by -R summarize_runs summarize_sweep summarize_for_item, docs/running.md)",
            file=sys.stderr,
        )


# --------------------------------------------------------------------------------------------- analysis (workflow/rules/analysis.smk)
def record_arg(**fields):
    """One ``--record key=value,...`` argument of ``softmax_bottleneck summarize``."""
    text = ",".join(f"{key}={value}" for key, value in fields.items())
    return f"--record {shlex.quote(text)}"


# What each summary reads (softmax_bottleneck.study.summary_records, which the preview reads too): per summary file
# its records, given to `summarize` as --record arguments, and their files, the rule's inputs.
SUMMARY_RECORDS = summary_records(STUDY)


def records_of(summary):
    """The ``--record`` arguments of one summary file's records."""
    return " ".join(record_arg(**record) for _, record in SUMMARY_RECORDS[summary][1])


def files_of(summary):
    """The files one summary file's records name."""
    return [
        file
        for _, record in SUMMARY_RECORDS[summary][1]
        for file in record_files(record)
    ]


# The sweeps of the configuration (`sweeps:`, none when absent): one variant's own hyper-parameters over a grid;
# their runs are training jobs like every other (a point equal to the preset is the run E1/E2 train).
SWEEPS = STUDY.sweeps
#: the rule of each sweep's table and figure (workflow/rules/reports.smk), for rule `all`
SWEEP_RULES = [f"{SWEEP_PREFIX}{name}" for name in SWEEPS]


def sweep_columns(wildcards):
    """``--hyperparameter KEY`` of each swept key, in the configuration's order (the figure's x: the first)."""
    return " ".join(
        f"--hyperparameter {shlex.quote(key)}"
        for key in STUDY.sweep_keys(wildcards.sweep)
    )


def wordsim_files(wildcards):
    """The 13 benchmarks, ancient(): verified by their pinned SHA-256, a re-fetched copy re-scores nothing."""
    return ancient([f"{WORDSIM_FOLDER}/{name}.txt" for name in WORDSIM_BENCHMARKS])


#: the source of one output layer installed now (rule layer_source, workflow/rules/train.smk)
LAYER_SOURCE = "results/layer_sources/{layer}.txt"


def layer_source_files(summary):
    """The installed source of each output layer whose models a summary file's records show: inputs of that summary,
    so that a changed layer writes it again, then the tables and figures built from it, with the note that some
    results were trained with an older source (report/layer_sources.py); nothing upstream reruns.
    """
    layers = {
        presets.variant_info(run.variant).output_layer
        for run, _ in SUMMARY_RECORDS[summary][1]
    }
    return [LAYER_SOURCE.format(layer=layer) for layer in sorted(layers)]


def small_analysis(wildcards):
    """Whether the analysis's log-P matrix fits auto's exact SVD (float64, at most EXACT_AUTO_BYTES: 13,421 PTB rows,
    4,033 WT2 rows): about 2 GB with its SVD (analysis.rank.memory_needed), beside PyTorch and the model.
    """
    rows, columns = wildcards.rows, presets.VOCAB_SIZES[wildcards.dataset]
    return rows.isdigit() and exact_auto_fits(int(rows), columns)


def analyze_mem_mb(wildcards, attempt):
    """Host memory of the log-P → rank step: 8 GB for a matrix the exact SVD takes, else 24 GB (PTB) or 32 GB (WT2):
    the streamed float64 Gram and its eigenvalues (docs/rank-at-scale.md); more on a retry.
    """
    paper = 24000 if wildcards.dataset == "ptb" else 32000
    return (8000 if small_analysis(wildcards) else paper) * attempt


def analyze_threads(wildcards):
    """1 CPU thread for a few thousand rows, 8 for the paper's matrices (the float64 SVD/Gram runs on CPU)."""
    return 1 if wildcards.rows.isdigit() and int(wildcards.rows) <= 5000 else 8


# --------------------------------------------------------------------------------------------- data (workflow/rules/data.smk)
MIRROR_ENV = "SOFTMAX_BOTTLENECK_DATA_MIRROR"
DATA_MIRROR = str(config.get("data_mirror") or "")
# A job in the container image (`container_image`, `--sdm apptainer`) sees its working directory only (Snakemake binds
# it): the package's src/ and the data mirror are bound too, read-only, at their resolved paths (APPTAINER_BIND).
if config.get("container_image"):
    check_container_image(config["container_image"])
    DATA_MIRROR = bind_for_jobs(PACKAGE_SRC, DATA_MIRROR)
os.environ.update({MIRROR_ENV: DATA_MIRROR})


def corpus_fetch_paths(wildcards):
    return " ".join(f"{wildcards.corpus}/{split}.txt" for split in SPLITS)
