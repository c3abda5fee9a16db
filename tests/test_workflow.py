"""Tests of the Snakemake workflow (Snakefile, workflow/, config/), driven through the snakemake CLI.

* the paper config's dry run plans the expected training jobs and every table/figure target, and
  a single target plans only the runs its summary needs;
* a bad config fails at parse time, before any job, naming the key;
* ``snakemake --lint`` and ``snakefmt --check`` are clean;
* (slow) the small scale runs end to end from the data mirror and every report file parses.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from softmax_bottleneck import presets
from softmax_bottleneck.report import figures, tables

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PAPER_CONFIG = ROOT / "config" / "config.yaml"
SMALL_CONFIG = ROOT / "config" / "small.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MIRROR = ROOT.parent / "shared" / "data"

#: training jobs of the paper config (the README states this number)
PAPER_TRAIN_JOBS = 283
SMALL_TRAIN_JOBS = 65


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


# --------------------------------------------------------------------------------------------- expected runs
def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), abs_tol=1e-12)


def expected_training_runs(config: dict) -> set[tuple]:
    """Unique (dataset, variant, schedule, seed, overrides-differing-from-preset) of a config.

    An independent reading of config/README.md's rules: experiments expand to datasets × variants ×
    schedules × sweep points × seeds; the analyses' reference models are authors'-seed preset runs;
    a swept value equal to the (preset + model_overrides) value is the preset run.
    """
    families = {"softmax": "softmax", "mixture": "mixture"}
    overrides_cfg = config.get("model_overrides") or {}

    def base_overrides(variant):
        family = presets.family(variant)
        merged = dict(overrides_cfg.get("all") or {})
        merged.update((overrides_cfg.get("families") or {}).get(families[family]) or {})
        merged.update((overrides_cfg.get("variants") or {}).get(variant) or {})
        return merged, family

    def seeds(dataset, variant, which):
        _, family = base_overrides(variant)
        authors = [config["seeds"]["authors"][dataset][family]]
        random = list(config["seeds"]["random"])
        return {"authors": authors, "random": random, "all": authors + random}[which]

    runs = set()
    for exp in config["experiments"].values():
        for dataset, variant, schedule in itertools.product(exp["datasets"], exp["variants"], exp["schedules"]):
            base = presets.resolve(dataset, variant, schedule, base_overrides(variant)[0])
            sweep = (exp.get("sweep") or {}).get(dataset) or {}
            keys = sorted(sweep)
            for values in itertools.product(*(sweep[k] for k in keys)):
                point = frozenset((k, float(v)) for k, v in zip(keys, values, strict=True) if not _same(base[k], v))
                for seed in seeds(dataset, variant, exp["seeds"]):
                    runs.add((dataset, variant, schedule, seed, point))
    analysis = config["analysis"]
    refs = [(d, v, analysis[k]["schedule"]) for k in ("spectra", "wordsim") for d in analysis[k]["datasets"]
            for v in analysis[k]["variants"]]  # fmt: skip
    refs += [("ptb", m["variant"], m["schedule"]) for m in analysis["top5"]["models"].values()]
    refs.append(
        (analysis["robustness"]["dataset"], analysis["robustness"]["variant"], analysis["robustness"]["schedule"])
    )
    for dataset, variant, schedule in refs:
        runs.add((dataset, variant, schedule, seeds(dataset, variant, "authors")[0], frozenset()))
    return runs


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------- config
def test_configs_expected_run_counts():
    assert len(expected_training_runs(load(PAPER_CONFIG))) == PAPER_TRAIN_JOBS
    assert len(expected_training_runs(load(SMALL_CONFIG))) == SMALL_TRAIN_JOBS


def test_schema_variants_and_seeds_match_the_presets():
    schema = load(SCHEMA)
    assert schema["$defs"]["variant"]["enum"] == list(presets.variants())
    config = load(PAPER_CONFIG)
    for dataset in presets.DATASETS:
        for family, variant in (("softmax", "softmax"), ("mixture", "mos")):
            assert config["seeds"]["authors"][dataset][family] == presets.resolve(dataset, variant)["seed"]
    hp_keys = set(schema["$defs"]["hyperparameters"]["properties"])
    assert hp_keys <= presets.known_keys(), hp_keys - presets.known_keys()
    assert "seed" not in hp_keys  # seeds come from `seeds:` only


def test_random_seeds_are_recorded_as_drawn():
    np = pytest.importorskip("numpy")
    drawn = np.random.default_rng(2021).integers(1, 2**31 - 1, size=10).tolist()
    assert load(PAPER_CONFIG)["seeds"]["random"] == drawn
    assert load(SMALL_CONFIG)["seeds"]["random"] == drawn[:2]


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
    counts = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules", configfile=SMALL_CONFIG))
    assert counts["train"] == SMALL_TRAIN_JOBS


def test_plan_target_lists_the_training_jobs(tmp_path):
    result = snakemake(tmp_path, "--cores", "1", "plan")
    assert result.returncode == 0, result.stderr
    plan = pd.read_csv(tmp_path / "results" / "plan" / "training_jobs.csv")
    assert len(plan) == PAPER_TRAIN_JOBS and plan["run"].is_unique
    # the paper's V100 epoch times × epochs (spec §11.4): E1 alone is ≈ 2,900 GPU-hours
    main = plan[plan["experiments"].str.split().map(lambda e: "main" in e)]
    assert 2800 < main["gpu_hours"].sum() < 3000
    shared = plan[plan["experiments"].str.contains("gss_grid") & plan["experiments"].str.contains("main")]
    assert set(shared["tag"]) == {"default"} and len(shared) == 2  # the grid's preset points are E1's runs


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
    for name in [*tables.REQUIRES, *figures.REQUIRES]:
        caption = ROOT / "workflow" / "report" / f"{name}.rst"
        assert caption.is_file() and caption.read_text().strip(), name


# --------------------------------------------------------------------------------------------- end to end
def check_reports(workdir: Path) -> None:
    """Every table (CSV + Markdown) and figure (PDF + PNG) exists and parses."""
    for name in tables.REQUIRES:
        csv = workdir / "reports" / "tables" / f"{name}.csv"
        frame = pd.read_csv(csv)
        assert len(frame.columns) > 0, csv
        md = (workdir / "reports" / "tables" / f"{name}.md").read_text()
        assert md.strip(), name
    for name in figures.REQUIRES:
        pdf = (workdir / "reports" / "figures" / f"{name}.pdf").read_bytes()
        png = (workdir / "reports" / "figures" / f"{name}.png").read_bytes()
        assert pdf.startswith(b"%PDF-") and len(pdf) > 1000, name
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000, name
    for summary in (workdir / "results" / "summary").glob("*.csv"):
        assert len(pd.read_csv(summary)) > 0, summary


@pytest.mark.slow
@pytest.mark.skipif(not (MIRROR / "SHA256SUMS").is_file(), reason="no ../shared/data mirror")
def test_small_scale_end_to_end(tmp_path):
    work = tmp_path / "small"
    work.mkdir()
    config = ["--config", f"data_mirror={MIRROR}"]
    result = snakemake(work, "--cores", "2", *config, configfile=SMALL_CONFIG, timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    check_reports(work)
    # every training job ran once, with its benchmark; the E12 log-P slice was temporary
    assert len(list((work / "results" / "runs").rglob("model.pt"))) == SMALL_TRAIN_JOBS
    assert len(list((work / "benchmarks" / "train").rglob("*.tsv"))) == SMALL_TRAIN_JOBS
    assert not (work / "results" / "analysis" / "robustness" / "logp.npy").exists()
    assert not list((work / "results" / "runs").rglob(".resume"))
    metrics = json.loads(next((work / "results" / "runs").rglob("metrics.json")).read_text())
    assert metrics["epochs_run"] == 3
    # nothing left to do
    again = snakemake(work, "-n", *config, configfile=SMALL_CONFIG)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # the HTML report bundles every table and figure
    report = snakemake(work, "--report", "reports/report.html", *config, configfile=SMALL_CONFIG)
    assert report.returncode == 0, report.stderr[-3000:]
    html = (work / "reports" / "report.html").read_text(errors="replace")
    assert len(html) > 10_000
