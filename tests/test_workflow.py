"""Tests of the Snakemake workflow (Snakefile, workflow/, config/), driven through the snakemake CLI.

* the paper config's dry run plans the expected training jobs and every table/figure target, and
  a single target plans only the runs its summary needs;
* run identity: every run folder carries the hash of its resolved hyper-parameters, seed and data
  (checked against an independent computation), the paper and small configs share no run folder
  and write their summaries, tables and figures under their own roots;
* a bad or incomplete config fails at parse time, before any job, in one line naming file and key;
* ``snakemake --lint`` and ``snakefmt --check`` are clean;
* (slow) the small scale, stopped part-way (a training killed, then Ctrl-C), says in ``status`` which runs are
  finished, interrupted and not started, and ``preview`` renders tables from the finished ones; run again, it ends,
  every report file parses, the claims page says "not comparable at this scale" everywhere, ``status`` says finished
  everywhere and ``preview`` has the final tables' (and claims') numbers; then,
  on its results, the rerun policy: the paper config still plans every training job, a whitespace
  edit of the train rule and a figure-code edit retrain nothing, ``-F``/``-R train`` keep the models.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import data_dir, needs_data

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import CORPUS_DIRS, FILES
from softmax_bottleneck.report import claims, costs, figures, preview, tables
from softmax_bottleneck.report.claims import page as claims_page
from softmax_bottleneck.report.tables.render import latex_text
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.config_file import ONE_START_KEYS
from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import STATES, study_status
from softmax_bottleneck.study.wait_for_run import OUTPUTS
from softmax_bottleneck.training.run_files import read_progress

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PAPER_CONFIG = ROOT / "config" / "config.yaml"
SMALL_CONFIG = ROOT / "config" / "small.yaml"
GPU_SMOKE_CONFIG = ROOT / "config" / "gpu-smoke.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MIRROR = data_dir()  # the data folder (tests/conftest.py)

#: training jobs of the paper config (the README states this number)
PAPER_TRAIN_JOBS = 283
SMALL_TRAIN_JOBS = 51


def snakemake(workdir: Path, *args: str, configfile: Path = PAPER_CONFIG, timeout: float = 300):
    """Run snakemake on the repository's Snakefile in ``workdir`` (a clean working directory)."""
    # --configfile and --quiet take several values: targets go first, --configfile before --directory
    cmd = [*SNAKEMAKE, *args, "-s", str(ROOT / "Snakefile"), "--configfile", str(configfile)]
    cmd += ["--directory", str(workdir)]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)


def planned_jobs(result) -> dict[str, int]:
    """Job counts of ``snakemake -n --quiet rules`` (the "job stats" table)."""
    assert result.returncode == 0, result.stdout + result.stderr
    counts: dict[str, int] = {}
    for line in (result.stdout + result.stderr).splitlines():
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if match and match.group(1) not in ("total", "count"):
            counts[match.group(1)] = int(match.group(2))
    return counts


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------- config
def test_schema_keeps_no_list_of_variants_and_seeds_match_the_presets():
    schema = load(SCHEMA)
    # variants are checked against the registry (plug-in layers too), never against a copy
    assert "enum" not in schema["$defs"]["variant"]
    config = load(PAPER_CONFIG)
    for dataset in presets.DATASETS:
        for family, variant in (("softmax", "softmax"), ("mixture", "mos")):
            assert config["seeds"]["authors"][dataset][family] == presets.resolve(dataset, variant)["seed"]


def test_config_readme_documents_every_builtin_hyperparameter():
    readme = (ROOT / "config" / "README.md").read_text()
    from softmax_bottleneck.models.output_layers import output_layers

    builtin = {k for spec in output_layers().values() if spec.builtin for k in spec.hyperparameters}
    keys = (set(presets.base_hyperparameters()) | builtin) - {"seed"}  # a plug-in's keys are its own docs' business
    missing = sorted(k for k in keys if f"`{k}`" not in readme)
    assert not missing, f"config/README.md does not explain {missing}"


#: keys the shipped files leave out: a user's own additions to the paper's study (config/README.md explains them), and
#: the answers a user gives one start on the command line
USER_KEYS = {"sweeps", *ONE_START_KEYS}


def test_shipped_configs_are_complete():
    """Every key the schema knows is set in both shipped files (a user copies one of them), but a user's own
    sweeps."""
    schema = load(SCHEMA)
    for path in (PAPER_CONFIG, SMALL_CONFIG, GPU_SMOKE_CONFIG):
        config = load(path)
        assert set(schema["required"]) <= set(config), path
        assert set(schema["properties"]) - USER_KEYS == set(config), path


def test_random_seeds_are_recorded_as_drawn():
    np = pytest.importorskip("numpy")
    drawn = np.random.default_rng(2021).integers(1, 2**31 - 1, size=10).tolist()
    assert load(PAPER_CONFIG)["seeds"]["random"] == drawn
    assert load(SMALL_CONFIG)["seeds"]["random"] == drawn[:1]


def test_readme_explains_every_key():
    readme = (ROOT / "config" / "README.md").read_text()
    schema = load(SCHEMA)
    names = set()

    def walk(node):
        if isinstance(node, dict):
            names.update((node.get("properties") or {}).keys())
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    missing = sorted(n for n in names if f"`{n}`" not in readme)
    assert not missing, f"config/README.md does not explain {missing}"


# --------------------------------------------------------------------------------------------- following the study
#: what a `snakemake` of the small scale writes in .snakemake/locks/ while it runs (one of its outputs suffices)
PLAN_OUTPUT = "results/small/plan/training_jobs.csv"


@pytest.mark.slow
def test_following_a_running_study_never_removes_its_snakemake_lock(tmp_path):
    """Snakemake removes every lock of the folder when a run that locked it ends. Before, `snakemake status` (or
    progress, preview) beside a running study removed the study's lock: a second `snakemake` of the study was no
    longer refused. The reading targets now run with --nolock: the lock stays, the second `snakemake` is refused."""
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text(f"{PLAN_OUTPUT}\n")  # the running study's lock, as Snakemake writes it
    for target in ("status", "progress", "preview"):
        result = snakemake(tmp_path, target, "--cores", "1", configfile=SMALL_CONFIG)
        assert result.returncode == 0, (target, (result.stdout + result.stderr)[-3000:])
        assert (locks / "0.output.lock").read_text() == f"{PLAN_OUTPUT}\n", target
        if target == "status":
            assert f"{SMALL_TRAIN_JOBS} training jobs: {SMALL_TRAIN_JOBS} not started." in result.stdout
    assert (tmp_path / "reports" / "small" / "preview" / "progress.html").is_file()
    second = snakemake(tmp_path, "training_plan", "--cores", "1", configfile=SMALL_CONFIG)
    assert second.returncode == 1 and "holds the lock of a Snakemake" in second.stdout + second.stderr
    assert not (tmp_path / PLAN_OUTPUT).exists()


@pytest.mark.parametrize(
    ("argv", "lock_free"),
    [
        (["status"], True),
        (["status", "preview", "--configfile", "a.yaml", "b.yaml"], True),
        (["--configfile", "config/small.yaml", "--cores", "2", "progress"], True),
        (["-n", "preview"], True),  # a dry run locks nothing either: --nolock changes nothing there
        (["status", "table2"], False),  # a target that builds: Snakemake's lock, as typed
        ([], False),
        (["--configfile", "status"], False),  # a file named status, not the target
        (["--nolock", "status"], False),  # already without the lock
        (["--unlock", "status"], False),
        (["status", "--no-such-option"], False),  # Snakemake refuses it itself
    ],
)
def test_only_a_command_line_of_reading_targets_runs_without_the_lock(argv, lock_free):
    from softmax_bottleneck.cluster.lock_free import reading_only, snakemake_program

    assert reading_only(argv, ("status", "progress", "preview")) is lock_free
    assert snakemake_program("/venv/bin/snakemake") and snakemake_program("/lib/python3.11/snakemake/__main__.py")
    assert not snakemake_program("/venv/bin/pytest")


# --------------------------------------------------------------------------------------------- dry runs
def test_paper_dry_run_plans_every_job(tmp_path):
    counts = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules"))
    assert counts["train"] == PAPER_TRAIN_JOBS
    assert counts["analyze"] == PAPER_TRAIN_JOBS  # log-P + rank of every trained model
    assert counts["wordsim"] == 12 and counts["qualitative"] == 8
    assert counts["fetch_corpus"] == 2 and counts["fetch_wordsim"] == 13
    for name in [*tables.REQUIRES, *figures.REQUIRES]:
        assert counts.get(name) == 1, f"{name} is not planned"
    assert counts["summarize_runs"] == 7
    assert counts["robustness"] == 1
    assert counts["claims"] == 1  # the claims page, part of every run


@pytest.mark.parametrize(
    ("target", "train_jobs", "absent"),
    [
        ("figure2", 72 + 36, ["qualitative", "wordsim", "table2"]),  # E4 grid only
        ("table3", 22, ["figure2"]),  # E7: LMS-PLIF† × 11 seeds × 2 datasets
        ("reports/tables/table5.md", 20, ["wordsim"]),  # E10: 2 models × 10 random seeds
        ("figure1", 0, ["fetch_corpus"]),  # an illustration: nothing to train or download
    ],
)
def test_single_target_builds_only_what_it_needs(tmp_path, target, train_jobs, absent):
    counts = planned_jobs(snakemake(tmp_path, target, "-n", "--quiet", "rules"))
    assert counts.get("train", 0) == train_jobs
    for rule in absent:
        assert rule not in counts


def test_small_dry_run(tmp_path):
    """... and a finished run that an older source of its output layer trained is named at parse time (before, only
    `python -m softmax_bottleneck plan` said so), never retrained."""
    from softmax_bottleneck.models.output_layers.registry import layer_source
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study

    run = next(r for r in Study(study_config.check(study_config.read(SMALL_CONFIG))).jobs.values())
    older = {**layer_source(run.variant), "source_sha256": "0" * 64}
    (tmp_path / run.dir).mkdir(parents=True)
    (tmp_path / run.file("metrics.json")).write_text(json.dumps({"environment": {"software": {"output_layer": older}}}))
    result = snakemake(tmp_path, "-n", "--quiet", "rules", configfile=SMALL_CONFIG)
    counts = planned_jobs(result)
    assert counts["train"] == SMALL_TRAIN_JOBS
    assert f"note: {run.dir}: trained with an older source of {run.variant} (kept, never retrained" in result.stderr


def test_gpu_smoke_dry_run_plans_every_table_and_figure_in_run_folders_of_its_own(tmp_path):
    """config/gpu-smoke.yaml: the whole DAG with paper-size models (a dry run plans; CUDA is not needed for it)."""
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study

    smoke = Study(study_config.check(study_config.read(GPU_SMOKE_CONFIG)))
    assert not set(smoke.jobs) & set(Study(study_config.check(study_config.read(PAPER_CONFIG))).jobs)
    for run in smoke.jobs.values():  # the presets' model sizes, two short epochs
        paper = presets.resolve(run.dataset, run.variant, run.schedule)
        assert all(run.hyperparameters[k] == paper[k] for k in ("nemb", "nhid", "nhidlast", "nlayers", "dropout"))
        assert run.hyperparameters["epochs"] == 2 and run.hyperparameters["train_tokens"] <= 105_000
    counts = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules", configfile=GPU_SMOKE_CONFIG))
    assert counts["train"] == counts["analyze"] == len(smoke.jobs) == 46
    assert counts["qualitative"] == 8 and counts["robustness"] == 1
    for name in [*tables.REQUIRES, *figures.REQUIRES]:
        assert counts.get(name) == 1, f"{name} is not planned"


def test_plan_prints_and_lists_the_training_jobs(tmp_path):
    result = snakemake(tmp_path, "plan")  # no --cores: profiles/default sets them
    assert result.returncode == 0, result.stderr
    assert f"{PAPER_TRAIN_JOBS} training jobs" in result.stdout  # the summary reaches the terminal
    plan = pd.read_csv(tmp_path / "results" / "plan" / "training_jobs.csv")
    assert len(plan) == PAPER_TRAIN_JOBS and plan["run"].is_unique
    # the paper's V100 epoch times × epochs (Table 2): E1 alone is ≈ 2,900 GPU-hours
    main = plan[plan["experiments"].str.split().map(lambda e: "main" in e)]
    assert 2800 < main["gpu_hours"].sum() < 3000
    shared = plan[plan["experiments"].str.contains("gss_grid") & plan["experiments"].str.contains("main")]
    assert set(shared["tag"]) == {"default"} and len(shared) == 2  # the grid's preset points are E1's runs
    again = snakemake(tmp_path, "plan")  # printed again although the CSV is up to date
    assert again.returncode == 0 and f"{PAPER_TRAIN_JOBS} training jobs" in again.stdout


#: run-folder tags of both shipped configs -> the experiment's overrides they stand for
TAG_OVERRIDES = {
    "default": {},
    "K3": {"n_experts": 3},
    "dropoutl0.0": {"dropoutl": 0.0},
    "dropoutl0.29": {"dropoutl": 0.29},
    "c0.0_k3.0": {"gss_c": 0.0, "gss_k": 3.0},
}


def expected_run_hash(row, config) -> str:
    """The run hash recomputed from config/README.md's definition: SHA-256 of the canonical JSON of
    the resolved hyper-parameters (+ seed) and the corpus files' SHA-256, first 8 hex digits."""
    overrides_cfg = config["model_overrides"]
    overrides = dict(overrides_cfg.get("all") or {})
    overrides.update((overrides_cfg.get("datasets") or {}).get(row["dataset"]) or {})
    overrides.update((overrides_cfg.get("families") or {}).get(presets.family(row["variant"])) or {})
    overrides.update((overrides_cfg.get("variants") or {}).get(row["variant"]) or {})
    overrides.update(TAG_OVERRIDES[row["tag"]])
    hp = presets.resolve(row["dataset"], row["variant"], row["schedule"], overrides)
    hp["seed"] = int(row["seed"])
    data = {s: FILES[f"{CORPUS_DIRS[row['dataset']]}/{s}.txt"].sha256 for s in ("train", "valid", "test")}
    text = json.dumps({"hyperparameters": hp, "data": data}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_run_folders_carry_the_hash_of_everything_that_determines_the_run(tmp_path):
    """Paper and small configs: the hash in each run folder matches an independent computation, the
    two configs share no run folder, and each writes its plan under its own root."""
    plans = {}
    for name, path in (("paper", PAPER_CONFIG), ("small", SMALL_CONFIG)):
        result = snakemake(tmp_path, "training_plan", configfile=path)
        assert result.returncode == 0, result.stderr[-3000:]
        root = tmp_path / "results" / ("plan" if name == "paper" else "small/plan")
        plans[name] = pd.read_csv(root / "training_jobs.csv")
    assert len(plans["paper"]) == PAPER_TRAIN_JOBS and len(plans["small"]) == SMALL_TRAIN_JOBS
    assert not set(plans["paper"]["run"]) & set(plans["small"]["run"])
    seen = set()
    for name, path in (("paper", PAPER_CONFIG), ("small", SMALL_CONFIG)):
        config = load(path)
        sample = plans[name][plans[name]["tag"].isin(list(TAG_OVERRIDES))]
        seen |= set(sample["tag"])
        assert {"default", "K3"} <= set(sample["tag"]) and set(sample["dataset"]) == {"ptb", "wt2"}, name
        for row in sample.to_dict("records"):
            assert row["run"].endswith(f"/{row['tag']}-{expected_run_hash(row, config)}"), row["run"]
    assert seen == set(TAG_OVERRIDES)


def test_train_rule_sets_no_retries():
    """A rule's own retries would override the SLURM profile's; the profiles decide."""
    text = (ROOT / "workflow" / "rules" / "train.smk").read_text()
    rule = text[text.index("rule train:") : text.index("rule training_plan:")]
    assert "retries" not in rule
    assert "retries" not in (yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text()))


def test_train_memory_stops_growing_after_attempt_2():
    """The SLURM profile gives a long training up to 31 attempts (time limits, pre-emption): its memory
    doubles once (an out-of-memory retry) and then stays, instead of growing 31-fold."""
    from softmax_bottleneck.study.plan import train_memory_mb

    for dataset, first in (("ptb", 8000), ("wt2", 16000)):  # README: 8 GB PTB, 16 GB WT2
        got = [train_memory_mb(dataset, attempt) for attempt in (1, 2, 3, 31)]
        assert got == [first, 2 * first, 2 * first, 2 * first], (dataset, got)
    text = (ROOT / "workflow" / "rules" / "train.smk").read_text()
    assert "mem_mb=lambda wildcards, attempt: train_memory_mb(wildcards.dataset, attempt)" in text


def test_every_rule_says_what_it_does(tmp_path):
    """``snakemake --list-rules`` prints a description beside every rule."""
    result = snakemake(tmp_path, "--list-rules")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("Using ")]
    names = {line.split(" ", 1)[0] for line in lines}
    assert {"train", "analyze", "plan", "table2", "figure7", "sm_figure5", "all"} <= names, names
    bare = [line for line in lines if not re.fullmatch(r"\w+ \(.{10,}\)", line)]
    assert not bare, bare
    described = dict(line[:-1].split(" (", 1) for line in lines)
    assert described["table2"].startswith("Table 2") and described["sm_figure5"].startswith("SM Figure 5")


BANNER = "small scale — pipeline check, not the paper"


def test_report_banner_marks_tables_and_figures_and_reruns_only_them(tmp_path):
    """``report_banner`` reaches ``--banner`` of every table and figure (small scale: set; paper: none),
    and changing it re-renders those items and nothing else."""
    assert load(SMALL_CONFIG)["report_banner"] == BANNER and load(PAPER_CONFIG)["report_banner"] is None
    # Figure 1 reads no summary: render it for real, then change the banner
    made = snakemake(tmp_path, "figure1", "--cores", "1", "--printshellcmds", configfile=SMALL_CONFIG)
    assert made.returncode == 0, made.stderr[-3000:]
    assert f"--banner '{BANNER}'" in made.stdout + made.stderr
    assert (tmp_path / "reports" / "small" / "figures" / "figure1.png").is_file()
    same = snakemake(tmp_path, "figure1", "-n", configfile=SMALL_CONFIG)
    assert "Nothing to be done" in same.stdout + same.stderr, same.stdout[-3000:]
    changed = snakemake(tmp_path, "figure1", "-n", "--quiet", "rules", "--config", "report_banner=another mark",
                        configfile=SMALL_CONFIG)  # fmt: skip
    assert planned_jobs(changed) == {"figure1": 1}
    # every table and figure passes it; the paper's configuration passes none (a fresh folder: plan all)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    small = snakemake(fresh, "-n", "--printshellcmds", configfile=SMALL_CONFIG)
    paper = snakemake(fresh, "-n", "--printshellcmds")
    for result, count in ((small, len(tables.REQUIRES) + len(figures.REQUIRES)), (paper, 0)):
        assert result.returncode == 0, result.stderr[-3000:]
        commands = [line for line in result.stdout.splitlines() if " softmax_bottleneck table " in line
                    or " softmax_bottleneck figure " in line]  # fmt: skip
        assert len(commands) == len(tables.REQUIRES) + len(figures.REQUIRES)
        assert sum(f"--banner '{BANNER}'" in line for line in commands) == count
        assert sum("--banner" in line for line in commands) == count


def test_each_table_rule_writes_the_html_page(tmp_path):
    """NAME.html (the paper's layout) is an output of each table rule, beside the CSV and Markdown; the
    slow test checks that ``snakemake --report`` shows it."""
    targets = ["reports/tables/table2.html", "reports/tables/sm_table17.html"]
    result = snakemake(tmp_path, *targets, "-n", "--quiet", "rules")
    counts = planned_jobs(result)
    assert counts.get("table2") == 1 and counts.get("sm_table17") == 1, counts


@needs_data
def test_a_change_of_data_mirror_fetches_nothing_again(tmp_path):
    """The data are verified by their pinned SHA-256 whatever their source: PTB fetched from a mirror (the
    README's small-scale command) is not fetched again by the paper's configuration (data_mirror: null), and
    the paper's plan keeps every training job (a re-fetch used to hide the PTB trainings from the plan)."""
    fetched = snakemake(tmp_path, "resources/data/ptb/train.txt", "--cores", "1", "--config",
                        f"data_mirror={MIRROR}", configfile=SMALL_CONFIG)  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    assert f"data mirror: {MIRROR}" in (tmp_path / "logs" / "fetch_corpus" / "ptb.log").read_text()
    counts = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules"))
    assert counts["train"] == PAPER_TRAIN_JOBS and counts["fetch_corpus"] == 1, counts  # WT2 only


# --------------------------------------------------------------------------------------------- bad configs
BAD_CONFIGS = {
    "unknown variant": (
        {"experiments": {"main": {"variants": ["softmax", "transformer"]}}},
        ["transformer", "variants"],
    ),
    "negative epochs": ({"model_overrides": {"all": {"epochs": -3}}}, ["epochs", "-3"]),
    "seeds not integers": ({"seeds": {"random": [12, "thirteen", 1.5]}}, ["random", "thirteen"]),
    "float seed": ({"seeds": {"random": [12, 1.5]}}, ["random", "1.5"]),
    "seed in overrides": ({"model_overrides": {"all": {"seed": 3}}}, ["seed", "model_overrides"]),
    "unknown hyper-parameter": ({"model_overrides": {"families": {"softmax": {"nhidden": 3}}}}, ["nhidden"]),
    "unknown experiment": ({"experiments": {"extra": {}}}, ["extra"]),
    "unknown schedule": ({"experiments": {"ntet": {"schedules": ["nt", "cosine"]}}}, ["cosine", "schedules"]),
    "variant not defined for the dataset": (
        {"experiments": {"fair": {"datasets": ["wt2"]}}},
        ["experiments/fair", "wt2"],
    ),
    "sweep of a dataset not trained": (
        {"experiments": {"fair": {"sweep": {"wt2": {"dropouti": [0.3]}}}}},
        ["experiments/fair/sweep/wt2"],
    ),
    "dropout out of range": (
        {"experiments": {"mos_dropoutl": {"sweep": {"ptb": {"dropoutl": [0.29, 1.5]}}}}},
        ["dropoutl", "1.5"],
    ),
    "duplicate random seeds": ({"seeds": {"random": [5, 5]}}, ["random"]),
    "rank rows": ({"analysis": {"rank_rows": "all"}}, ["rank_rows"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_fails_before_any_job_naming_the_key(tmp_path, case):
    patch, needles = BAD_CONFIGS[case]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(patch))
    work = tmp_path / "work"
    work.mkdir()
    # the paper config, then the bad patch merged over it; a real (not dry) run of a cheap target
    cmd = [*SNAKEMAKE, "plan", "-s", str(ROOT / "Snakefile"), "--cores", "1"]
    cmd += ["--configfile", str(PAPER_CONFIG), str(bad), "--directory", str(work)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=work)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for needle in needles:
        assert needle in output, f"{needle!r} not in:\n{output[-3000:]}"
    assert "Job stats" not in output and not (work / "results").exists()


@pytest.mark.parametrize("key", ["seeds/random", "analysis", "analysis/rank_rows"])
def test_incomplete_config_fails_naming_the_key_and_the_file(tmp_path, key):
    """A --configfile is the whole config: nothing is filled in from config/config.yaml (a
    small.yaml without seeds/random once planned 177 paper-seeded training jobs instead of its own)."""
    config = load(SMALL_CONFIG)
    *parents, last = key.split("/")
    node = config
    for part in parents:
        node = node[part]
    del node[last]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "plan", configfile=path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert f"mine.yaml: missing key {key} " in output, output[-3000:]
    assert "Traceback" not in output and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("seeds:\n  random: [1, 2\nexperiments: {}\n", "config/config.yaml, line 3, column "),
        ("", "config/config.yaml: the file is empty"),
        ("- a\n- b\n", "config/config.yaml, line 1: expected keys at the top level"),
    ],
)
def test_default_config_syntax_errors_name_the_file_and_the_line(tmp_path, text, needle):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(text)
    cmd = [*SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and needle in output, output[-3000:]
    assert "Traceback" not in output


# --------------------------------------------------------------------------------------------- style
def test_snakemake_lint_is_clean():
    result = snakemake(ROOT, "--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_is_clean():
    snakefmt = shutil.which("snakefmt", path=str(BIN)) or shutil.which("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt is not installed")
    files = [str(ROOT / "Snakefile"), *map(str, sorted((ROOT / "workflow").rglob("*.smk")))]
    result = subprocess.run([snakefmt, "--check", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_report_item_has_a_caption():
    """Each table and figure registers the paragraph the HTML report shows (workflow/report/item.rst renders it)."""
    assert (ROOT / "workflow" / "report" / "item.rst").is_file()
    for name, item in [*tables.TABLES.items(), *figures.FIGURES.items()]:
        assert item.report.strip() and name in item.report_caption, name


# --------------------------------------------------------------------------------------------- end to end
def check_reports(workdir: Path, subdir: str) -> None:
    """Every table (CSV + Markdown) and figure (PDF + PNG) of a config exists and parses."""
    reports, results = workdir / "reports" / subdir, workdir / "results" / subdir
    for name in tables.REQUIRES:
        frame = pd.read_csv(reports / "tables" / f"{name}.csv")
        assert len(frame.columns) > 0, name
        md = (reports / "tables" / f"{name}.md").read_text()
        assert md.strip(), name
    for name in figures.REQUIRES:
        pdf = (reports / "figures" / f"{name}.pdf").read_bytes()
        png = (reports / "figures" / f"{name}.png").read_bytes()
        assert pdf.startswith(b"%PDF-") and len(pdf) > 1000, name
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000, name
    for summary in (results / "summary").glob("*.csv"):
        assert len(pd.read_csv(summary)) > 0, summary


UPSTREAM_RULES = ("train", "analyze", "wordsim", "qualitative", "robustness_logp", "robustness")
SMALL = "--configfile config/small.yaml --config data_mirror=../shared/data"


#: the most lines a fresh small-scale run may print in the terminal (Snakemake's own job blocks: 3,091)
QUIET_LINES = 600


def assert_quiet(*outputs: str) -> None:
    """The small scale's terminal output (stdout + stderr of the README's command, one text per invocation: a run
    stopped part-way and the run that finishes it) is quiet: at most :data:`QUIET_LINES` lines in all, one per job
    start (no input lists or reasons, no scheduler lines, outside the error block of a job that failed), and the
    progress line (softmax_bottleneck.cluster.terminal): estimating at the first job of each invocation, a time left
    once a training has finished, everything done at the end."""
    lines = [line for output in outputs for line in output.splitlines()]
    assert len(lines) <= QUIET_LINES, f"{len(lines)} lines; the last ones:\n" + "\n".join(lines[-40:])
    shown, in_error = [], False  # an error block (the training killed part-way) is shown in full, indented
    for line in lines:
        in_error = line.startswith("Error in rule") or (in_error and line.startswith("    "))
        if not in_error:
            shown.append(line)
    noisy = [line for line in shown if line.startswith(("    input: ", "    reason: ", "Select jobs to execute"))]
    noisy += [line for line in shown if re.fullmatch(r"(\d+) of (?!\1 )\d+ steps \(\d+%\) done", line)]  # not the last
    assert not noisy, noisy[:5]
    for output in outputs:  # one line per job start, each job once
        starts = [line for line in output.splitlines() if re.fullmatch(r"\[\d\d:\d\d:\d\d\] job \d+: \w+.*", line)]
        assert starts and len(starts) == len({line.split(": ", 1)[0].split("] ", 1)[1] for line in starts})
    stamp = re.compile(r"\[\d\d:\d\d:\d\d\] (?=trainings: )")  # progress lines carry their time too

    def progress_lines(output: str) -> list[str]:
        return [stamp.sub("", line, count=1) for line in output.splitlines() if stamp.match(line)]

    for output in outputs:  # each invocation counts its own trainings and jobs, as Snakemake counts its steps
        progress = progress_lines(output)
        assert progress[0].startswith("trainings: 0 of ") and progress[0].endswith(
            "; time left: estimating until the first training has finished"
        ), progress[:3]
        assert any(line.endswith(" left (every job still to run, at this run's pace)") for line in progress), progress
    final = progress_lines(outputs[-1])[-1]
    assert re.fullmatch(r"trainings: (\d+) of \1 done, jobs: (\d+) of \2", final), final


def trained_once(repo: Path, run: Path, *, solo: bool = True) -> bool:
    """Whether ``run``'s own training log says it trained once, from its start to its end: one start line and one done
    line, both naming the run where its fused group wrote them (``variant/schedule/seed N: ...``), or, where ``solo``,
    the start line naming it as its solo job writes it (``training dataset/variant schedule=... seed=N on ...``)."""
    dataset, variant, schedule, seed, _ = run.parts
    seed = seed.removeprefix("seed")
    fused, alone = f"{variant}/{schedule}/seed {seed}", f"training {dataset}/{variant} schedule={schedule} seed={seed} "
    lines = (repo / "logs" / "train" / f"{run}.log").read_text().splitlines()
    started = [line for line in lines if ": training " in line]
    done = [line for line in lines if ": done: " in line]
    if not len(started) == len(done) == 1:
        return False
    if fused in started[0] and fused in done[0]:
        return True
    return solo and alone in started[0] and ": done: train ppl" in done[0]


def fused_unrecorded(repo: Path, runs: set[Path]) -> set[Path]:
    """The ``runs`` whose own training log says they trained once in a fused group, from their start to their end:
    trained by a group's job that was stopped after they were done and before it wrote its record."""
    return {run for run in runs if trained_once(repo, run, solo=False)}


@pytest.mark.long
@pytest.mark.slow
@needs_data
def test_small_scale_end_to_end(tmp_path):
    """The README's small-scale command, as written, in a scratch copy of the repository: stopped part-way
    (`status`, `preview` then), run again to its end; then the README commands that need its results, and the
    rerun policy on them."""
    from test_readme import MIRROR_OPTION, SMALL_SCALE, run_in, run_small_scale_commands, scratch_repo

    repo = scratch_repo(tmp_path)
    killed = stop_part_way(repo, f"{SMALL_SCALE} {MIRROR_OPTION}")
    check_status_part_way(repo, killed)
    check_following_without_a_configuration(repo, run_in)
    check_preview_part_way(repo)
    result = run_in(repo, f"{SMALL_SCALE} {MIRROR_OPTION}", timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    assert_quiet((repo.parent / "stopped-part-way.log").read_text(), result.stdout + result.stderr)
    check_reports(repo, "small")
    check_claims(repo)
    check_the_phenomenon(repo)
    # every training ran once: in its own job, with its benchmark, or in its fused group's last job (the group's
    # record names it, or, where Ctrl-C stopped that job after its runs were done and before it wrote the record, the
    # run's own log says it trained once, fused, to the end). A training that finished as Ctrl-C reached it (its
    # benchmark written or not, Snakemake's record of it lost) was found finished by await_training, which trained
    # nothing: its own log says it trained once. The E12 log-P slice was temporary.
    models = sorted(p for p in (repo / "results" / "runs").rglob("model.pt") if ".resume" not in p.parts)
    assert len(models) == SMALL_TRAIN_JOBS
    benchmarked = {p.relative_to(repo / "benchmarks" / "train").with_suffix("") for p in
                   (repo / "benchmarks" / "train").rglob("*.tsv")}  # fmt: skip
    awaited = {p.relative_to(repo / "logs" / "await_training").with_suffix("") for p in
               (repo / "logs" / "await_training").rglob("*.log")
               if "finished by the process that trained it" in p.read_text()}  # fmt: skip
    fused = [Path(run["run"]).relative_to("results/runs") for record in (repo / "results" / "fused").glob("*.json")
             for run in json.loads(record.read_text())["runs"]]  # fmt: skip
    assert len(fused) >= 20 and len(set(fused)) == len(fused), fused  # config/small.yaml's fusion
    runs = {m.parent.relative_to(repo / "results" / "runs") for m in models}
    assert awaited <= runs and all(trained_once(repo, run) for run in awaited), sorted(awaited)
    ways = (benchmarked, set(fused), fused_unrecorded(repo, runs - benchmarked - awaited - set(fused)))
    assert sum(map(len, ways)) == len(set.union(*ways)), (len(benchmarked), sorted(benchmarked & set(fused)))
    assert set.union(*ways) | awaited == runs, (sorted(awaited), len(benchmarked))
    # a fused run's files are read-only as a solo run's, its own training log holds only its lines
    for run in fused[:3]:
        assert not any((repo / "results" / "runs" / run / name).stat().st_mode & 0o222 for name in OUTPUTS), run
        lines = (repo / "logs" / "train" / f"{run}.log").read_text().splitlines()
        _, variant, schedule, seed, _ = run.parts
        label = f"{variant}/{schedule}/seed {seed.removeprefix('seed')}"  # the run's label in the group's lines
        assert lines and all(label in line for line in lines), (label, lines[:3])
    assert not list((repo / "results" / "runs").rglob("logp.npy"))
    assert not list((repo / "results" / "runs").rglob("state.pt"))  # the finished outputs are kept in .resume/final
    config = yaml.safe_load(SMALL_CONFIG.read_text())
    for model in models:  # each ran its dataset's epochs (model_overrides: all, then datasets)
        dataset = model.relative_to(repo / "results" / "runs").parts[0]
        epochs = config["model_overrides"]["datasets"].get(dataset, {}).get("epochs")
        epochs = epochs or config["model_overrides"]["all"]["epochs"]
        assert json.loads((model.parent / "metrics.json").read_text())["epochs_run"] == epochs, model
    # nothing of the small scale stands in for the paper's outputs
    assert not (repo / "reports" / "tables").exists() and not (repo / "results" / "summary").exists()
    # nothing left to do
    again = run_in(repo, f"snakemake -n {SMALL}")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    check_status_and_preview_at_the_end(repo, run_in)
    # the README's commands on these results (report, costs, logs); the report bundles every item
    run_small_scale_commands(repo)
    check_html_report(repo / "reports" / "small" / "report.zip")
    check_rerun_policy(repo, models, run_in)


#: training runs finished before the small scale is stopped part-way
FINISHED_BEFORE_STOP = 10


def stop_part_way(repo: Path, command: str) -> str:
    """Start ``command`` (the small scale); once :data:`FINISHED_BEFORE_STOP` runs are trained, kill a training in
    the middle of its epochs (SIGKILL, as an out-of-memory kill would), then press Ctrl-C (SIGINT to Snakemake and
    its jobs). Returns the killed run's folder."""
    from test_readme import activated, user_shell

    with open(repo.parent / "stopped-part-way.log", "w") as output:
        proc = subprocess.Popen(["bash", "-c", activated(command)], cwd=repo, env=user_shell(), stdout=output,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    runs, deadline = repo / "results" / "runs", time.monotonic() + 1200
    try:
        while (victim := training_mid_run(runs)) is None:
            assert proc.poll() is None, "the small scale ended before it could be stopped"
            assert time.monotonic() < deadline, "no training was stopped in time"
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=300) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return victim


def training_mid_run(runs: Path) -> str | None:
    """Once enough runs are trained: kill a training between its first and last epoch, return its folder."""
    if len([m for m in runs.rglob("metrics.json") if ".resume" not in m.parts]) < FINISHED_BEFORE_STOP:
        return None
    for path in runs.rglob(".resume/progress.json"):
        progress = read_progress(path)
        if progress and 1 <= progress["epoch"] < progress["epochs"] and not (progress["stopped"] or progress["error"]):
            try:
                os.kill(progress["pid"], signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                continue
            return str(path.parent.parent.relative_to(runs.parent.parent))
    return None


def small_study() -> Study:
    return Study(study_config.check(study_config.read(SMALL_CONFIG)))


def check_status_part_way(repo: Path, killed: str) -> None:
    """`status` names exactly the runs whose folders hold a finished run, those interrupted (a lock or a resume
    folder, nothing finished) and those never started; none is running or failed."""
    study = small_study()
    status = study_status(study, directory=repo)
    by_state = {state: {r.run for r in status.runs if r.state == state} for state in STATES}
    finished = {path for path in study.jobs if (repo / path / ".resume" / "final").is_dir()}
    touched = {path for path in study.jobs if any((repo / path / name).exists() for name in (".lock", ".resume"))}
    assert len(finished) >= FINISHED_BEFORE_STOP and killed in touched - finished
    assert by_state == {"finished": finished, "running": set(), "stalled": touched - finished, "failed": set(),
                        "unreadable": set(), "not started": set(study.jobs) - touched}, by_state  # fmt: skip
    note = next(r.note for r in status.runs if r.run == killed)
    assert "is gone" in note or "died of signal 9" in note, note  # the trainer's own process, or its supervisor's log


def check_following_without_a_configuration(repo: Path, run_in) -> None:
    """The README's `snakemake status` and `python -m softmax_bottleneck status`, without a configuration, follow the
    study the workflow started in the folder (the small scale); so does `snakemake preview`, saying where it wrote."""
    for command in ("snakemake status", "python -m softmax_bottleneck status"):
        result = run_in(repo, command)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        assert "Status of config/small.yaml at " in result.stdout
        assert f"{SMALL_TRAIN_JOBS} training jobs" in result.stdout
        assert "config/small.yaml, the study the workflow started in this folder at " in result.stdout + result.stderr
    followed = run_in(repo, "snakemake preview")
    output = followed.stdout + followed.stderr
    assert followed.returncode == 0, output[-3000:]
    assert "preview: config/small.yaml, the study the workflow started in this folder at " in output
    assert "provisional tables and figures under reports/small/preview/" in output, output[-3000:]


def check_preview_part_way(repo: Path) -> None:
    """`preview` renders every table (the figures: at the end), each saying how many of its runs are in."""
    outcome = preview.render_preview(small_study(), directory=repo, names=set(tables.TABLES))
    assert set(outcome) == set(tables.TABLES)
    folder = repo / "reports" / "small" / "preview" / "tables"
    partial = []
    for name in tables.TABLES:
        text = (folder / f"{name}.md").read_text()
        models = ("sm_table2", "sm_table3", "figure4_wins", "sm_table14", "sm_table15", "sm_table16")  # analyses'
        counted = "corpora" if name == "sm_table13" else "models" if name in models else "runs"
        assert text.startswith("**PROVISIONAL, ") and f" {counted} in — small scale" in text, name
        frame = pd.read_csv(folder / f"{name}.csv")
        if outcome[name] == "rendered" and frame["finished"].sum() > 0 and (frame["finished"] < frame["planned"]).any():
            partial.append(name)
    assert partial, outcome  # tables rendered from fewer runs than planned


def check_status_and_preview_at_the_end(repo: Path, run_in) -> None:
    """`snakemake status` says finished everywhere; `snakemake preview` has every final table's numbers, each row
    from all of its runs."""
    done = run_in(repo, f"snakemake status preview {SMALL}")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert f"{SMALL_TRAIN_JOBS} training jobs: {SMALL_TRAIN_JOBS} finished." in done.stdout
    for name in tables.TABLES:
        final = pd.read_csv(repo / "reports" / "small" / "tables" / f"{name}.csv")
        provisional = pd.read_csv(repo / "reports" / "small" / "preview" / "tables" / f"{name}.csv")
        assert (provisional["finished"] == provisional["planned"]).all(), name
        pd.testing.assert_frame_equal(provisional.drop(columns=["finished", "planned", "provisional"]), final)
    final = pd.read_csv(repo / "reports" / "small" / "claims.csv")
    provisional = pd.read_csv(repo / "reports" / "small" / "preview" / "claims.csv")
    counts = provisional["runs in"].str.fullmatch(r"(\d+) of \1") & (provisional["runs in"] != "0 of 0")
    assert counts.all(), provisional["runs in"]
    pd.testing.assert_frame_equal(provisional.drop(columns="runs in"), final)


def check_the_phenomenon(repo: Path) -> None:
    """The small scale's PTB models meet the study's phenomenon, so that the rank analyses run on non-trivial data:
    every PTB Softmax log-P matrix has Press' rank d + 1 or d + 2 (log P = HWᵀ + 1bᵀ − (log Z)1ᵀ, the paper's 401 and
    402), every PTB SS, GSS, LMS-PLIF and MoS one more. No Softmax or MoC matrix (both datasets, both schedules) goes
    above d + 2: MoC mixes contexts before one softmax. Figure 2's correlation over the GSS grid is defined on both
    datasets, and SM Table 2's models do not all predict the same top 5 at any of its contexts."""
    families = yaml.safe_load(SMALL_CONFIG.read_text())["model_overrides"]["families"]
    d = families["softmax"]["nemb"]
    assert families["mixture"]["nemb"] == d  # one bound for both families
    summary = repo / "results" / "small" / "summary"
    runs = pd.concat([pd.read_csv(summary / f"{name}.csv") for name in ("main", "ntet")])
    ptb = runs[(runs["dataset"] == "ptb") & (runs["schedule"] == "et")].set_index(["variant", "seed"])["press_rank"]
    assert set(ptb.index.get_level_values("variant")) == {"softmax", "ss", "gss", "lms_plif", "mos", "moc"}
    softmax = ptb.loc["softmax"]
    assert softmax.between(d + 1, d + 2).all(), softmax
    above = ptb.drop(index=["softmax", "moc"])
    assert (above > d + 2).all(), above
    bounded = runs[runs["variant"].isin(["softmax", "moc"])]
    assert len(bounded) >= 8 and (bounded["press_rank"] <= d + 2).all(), bounded
    pearson = pd.read_csv(repo / "reports" / "small" / "tables" / "figure2_pearson.csv")
    everything = pearson[pearson["subset"] == "all"].set_index("dataset")["r"]
    assert sorted(everything.index) == ["ptb", "wt2"] and everything.notna().all(), pearson
    top5 = pd.read_csv(summary / "top5.csv")
    top5["top"] = top5[[f"word_{i}" for i in range(1, 6)]].agg(" ".join, axis=1)
    lists = top5.groupby(["group", "number"])["top"].nunique()
    assert len(lists) and (lists > 1).all(), lists


def check_claims(repo: Path) -> None:
    """The claims page of the small scale: every claim with the small scale's numbers where it has them, and every
    verdict "not comparable at this scale" (tiny models, few epochs), under the small scale's banner."""
    table = pd.read_csv(repo / "reports" / "small" / "claims.csv")
    assert list(table["claim"]) == list(claims.CLAIMS)
    assert set(table["verdict"]) == {claims_page.NOT_COMPARABLE} and not table["comparable"].any()
    numbers = table.set_index("claim")["ours_value"]
    assert numbers[["figure2_all_ptb", "table2_mos_ptb", "mos_k_rank_ptb", "rank_ppl_ptb", "ntet_ptb"]].notna().all()
    for ext, mark in (("md", BANNER), ("html", BANNER), ("tex", latex_text(BANNER))):
        assert mark in (repo / "reports" / "small" / f"claims.{ext}").read_text(), ext


def check_html_report(path: Path) -> None:
    """The HTML report embeds every table as its HTML page in the paper's layout (with the small-scale
    banner) and every figure as its PNG; no table is shown as a raw CSV."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert any(name.endswith("/report.html") for name in names), names[:20]
        for name in tables.REQUIRES:
            pages = [n for n in names if n.endswith(f"/{name}.html")]
            assert len(pages) == 1, (name, pages)
            page = archive.read(pages[0]).decode()
            assert "<table" in page and BANNER in page, name
        for name in figures.REQUIRES:
            assert sum(n.endswith(f"/{name}.png") for n in names) == 1, name
        assert not [n for n in names if n.endswith(".csv")], "a table is embedded as CSV"
        pages = [n for n in names if n.endswith("/claims.html")]  # the claims page, the report's "Claims" section
        assert len(pages) == 1 and "not comparable at this scale" in archive.read(pages[0]).decode(), pages


def nothing_to_do(result) -> bool:
    return result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr


def check_rerun_policy(repo: Path, models: list[Path], run_in) -> None:
    """Run identity and rerun policy on the finished small scale (cheaper than a second small-scale run)."""
    # the paper config still plans every training job and renders every item (nothing from small runs)
    paper = planned_jobs(run_in(repo, "snakemake -n --quiet rules"))
    assert paper["train"] == PAPER_TRAIN_JOBS
    assert all(paper.get(name) == 1 for name in [*tables.REQUIRES, *figures.REQUIRES]), paper
    # an edit of the figure code (in the scratch copy's src/, which the rules run) re-renders the figures and
    # retrains / re-analyses nothing; a mere touch re-renders nothing (Snakemake compares small inputs'
    # checksums), and the original text, back in place, is up to date again
    figure_code = repo / Path(figures.__file__).relative_to(ROOT)
    original = figure_code.read_text()
    figure_code.touch()
    assert nothing_to_do(run_in(repo, f"snakemake -n {SMALL}"))
    figure_code.write_text(original + "\n# an edit\n")
    touched = planned_jobs(run_in(repo, f"snakemake -n --quiet rules {SMALL}"))
    figure_code.write_text(original)
    assert all(touched.get(name) == 1 for name in figures.REQUIRES), touched
    assert not set(UPSTREAM_RULES) & set(touched), touched
    assert nothing_to_do(run_in(repo, f"snakemake -n {SMALL}"))
    # the cost report's code is not rendering code: an edit of it re-renders nothing
    cost_code = repo / Path(costs.__file__).relative_to(ROOT)
    original = cost_code.read_text()
    cost_code.write_text(original + "\n# an edit\n")
    unrelated = run_in(repo, f"snakemake -n {SMALL}")
    cost_code.write_text(original)
    assert nothing_to_do(unrelated), unrelated.stdout[-3000:]
    # a new banner re-renders every table and figure, and nothing else (not even the summaries)
    rebanner = planned_jobs(run_in(repo, f"snakemake -n --quiet rules {SMALL} 'report_banner=another mark'"))
    assert set(rebanner) - {"all"} == {*tables.REQUIRES, *figures.REQUIRES, "claims"}, rebanner
    # -F and -R train keep a finished model: the workflow routes the finished run to await_training, a local no-op
    # that checks its files are this run's, and trains nothing; the model stays as it was and read-only (Snakemake
    # touches it, so only its date changes), and its analyses do not run again (the largest model: above
    # Snakemake's 1 MB checksum limit, only the date counts)
    model = max(models, key=lambda path: path.stat().st_size)
    assert model.stat().st_size > 1_000_000
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    target = model.relative_to(repo)
    # the training log is only appended to (never emptied by a job), the await rule's log is its job's own
    run_folder = model.parent.relative_to(repo / "results" / "runs")
    log = repo / "logs" / "train" / run_folder.parent / f"{run_folder.name}.log"
    awaited = repo / "logs" / "await_training" / run_folder.parent / f"{run_folder.name}.log"
    trainings = log.read_text().count("done: train ppl")
    for force in ("-F", "-R train"):
        forced = run_in(repo, f"snakemake {target} --cores 1 {force} {SMALL}")
        assert forced.returncode == 0, (forced.stdout + forced.stderr)[-3000:]
        assert "finished by the process that trained it" in awaited.read_text(), force
        assert log.read_text().count("done: train ppl") == trainings, force
        assert hashlib.sha256(model.read_bytes()).hexdigest() == digest
        assert not model.stat().st_mode & 0o222, oct(model.stat().st_mode)
    assert nothing_to_do(run_in(repo, f"snakemake -n {SMALL}"))
    # a whitespace edit of the train rule's command retrains nothing
    train = repo / "workflow" / "rules" / "train.smk"
    text = train.read_text()
    assert '"python -m softmax_bottleneck train ' in text
    train.write_text(text.replace('"python -m softmax_bottleneck train ', '"python  -m softmax_bottleneck train ', 1))
    edited = run_in(repo, f"snakemake -n {SMALL}")
    assert edited.returncode == 0 and "Nothing to be done" in edited.stdout + edited.stderr, edited.stdout[-3000:]
    # a run folder deleted to retrain it (docs/running.md): its summaries still stand, so a plain run does nothing;
    # with the summaries forced, that run alone is trained and analysed again
    shutil.rmtree(model.parent)
    assert nothing_to_do(run_in(repo, f"snakemake -n {SMALL}"))
    forced = run_in(repo, f"snakemake -n --quiet rules -R summarize_runs summarize_sweep summarize_for_item {SMALL}")
    forced = planned_jobs(forced)
    assert forced["train"] == 1 and forced["analyze"] == 1, forced


@pytest.mark.slow
@pytest.mark.parametrize("fusion", [[], ["fusion={runs_per_job: 8}"]], ids=["solo", "fused"])
def test_paper_scale_training_on_a_cpu_is_refused_before_any_job(tmp_path, fusion):
    """No CUDA device: `snakemake table3` (22 paper-scale runs) stops in one line before fetching anything; fused, a
    run counts once (its `train` job and its group's job both name it)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = snakemake(tmp_path, "table3", "--cores", "1", "--config", f"data_mirror={MIRROR}", *fusion)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if "paper-scale training runs" in line]
    assert len(lines) == 1 and "22 paper-scale training runs (464 projected V100 GPU-hours)" in lines[0]
    assert "--config allow_cpu_training=true" in lines[0] and "Traceback" not in output
    assert not (tmp_path / "resources").exists() and not (tmp_path / "results").exists()
