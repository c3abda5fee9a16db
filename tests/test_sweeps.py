"""Sweeps of one variant's own hyper-parameters from the configuration alone (``sweeps:``; config/README.md).

The configuration check (one line naming the key), the runs (named and shared like every other run), the summary,
the table and the figure, the workflow's rules, and (slow) the example plug-in's ``taylor_scale`` swept end to end
by Snakemake with nothing but a configuration file.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
import yaml
from conftest import needs_data
from test_figures import _outside_canvas, assert_shows_its_data
from test_plugin_example import MIRROR, install_example
from test_study import _distinct, plugin_layer  # noqa: F401  (a fixture: the plug-in layer "plug")

from softmax_bottleneck.report import figures, sweeps, tables
from softmax_bottleneck.report.summaries import RecordError, collect_sweep
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import plan_frame, plan_table
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "config" / "small.yaml"
#: seeds of a "seeds: all" experiment at the small scale: the authors' and the random ones
SMALL_SEEDS = 1 + len(yaml.safe_load(SMALL.read_text())["seeds"]["random"])


def small(**sweeps) -> dict:
    config = study_config.read(SMALL)
    config["sweeps"] = copy.deepcopy(sweeps)
    return config


def plug_sweep(**changes) -> dict:
    """A sweep of the plug-in layer's own key over two values, its default (1.0) included."""
    sweep = {
        "variant": "plug",
        "datasets": ["ptb"],
        "schedule": "et",
        "seeds": "all",
        "grid": {"plug_scale": [1.0, 2.0]},
    }
    sweep.update(changes)
    return sweep


# --------------------------------------------------------------------------------------------- the configuration
@pytest.mark.usefixtures("plugin_layer")
def test_a_sweep_of_a_plugins_own_key_is_accepted_and_expanded():
    study = Study(study_config.check(small(scale=plug_sweep())))
    runs = study.sweeps["scale"]
    assert len(runs) == 2 * SMALL_SEEDS  # grid points × seeds
    assert {run.tag for run in runs} == {"default", "plug_scale2.0"}
    assert all(run.hyperparameters["plug_scale"] == dict(run.overrides).get("plug_scale", 1.0) for run in runs)
    assert study.sweep_keys("scale") == ["plug_scale"]


@pytest.mark.parametrize("sweeps", [None, {}], ids=["absent", "empty"])
def test_no_sweeps_plans_exactly_the_shipped_plan(sweeps):
    config = study_config.read(SMALL)
    if sweeps is not None:
        config["sweeps"] = sweeps
    ours = plan_frame(Study(study_config.check(config)))
    shipped = plan_frame(Study(study_config.check(study_config.read(SMALL))))
    pd.testing.assert_frame_equal(ours, shipped)


def _refused(config) -> str:
    with pytest.raises(study_config.ConfigError) as info:
        study_config.check(config)
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("name", "sweep", "message"),
    [
        ("s", plug_sweep(variant="nope"), r"^sweeps/s/variant: unknown variant 'nope'; known: softmax, ss, "),
        ("s", plug_sweep(grid={"gss_c": [0.0, 1.0]}),
         r"^sweeps/s/grid/gss_c: variant 'plug' does not own gss_c \(its resolved hyper-parameters have none\)"),
        ("s", plug_sweep(grid={"scale": [1.0]}),
         r"^sweeps/s/grid: unknown hyper-parameter 'scale' \(allowed: plug_scale, alpha, batch_size, "),
        ("s", plug_sweep(grid={"plug_scale": ["big"]}), r"^sweeps/s/grid/plug_scale: 'big' is not of type 'number'$"),
        ("s", plug_sweep(grid={"plug_scale": [0]}),
         r"^sweeps/s/grid/plug_scale: 0 is less than or equal to the minimum of 0"),
        ("s", plug_sweep(grid={"plug_scale": []}), r"^sweeps/s/grid/plug_scale: \[\] should be non-empty$"),
        ("s", plug_sweep(grid={"plug_scale": [2, 2.0]}), r"^sweeps/s/grid/plug_scale: \[2, 2.0\] has non-unique"),
        ("s", plug_sweep(grid={"plug_scale": [1.0, 1.0 + 1e-14]}), r"^sweeps/s/grid/plug_scale: 1.00000000000001 is "
         r"given twice$"),
        ("s", plug_sweep(grid={}), r"^sweeps/s/grid: \{\} should be non-empty$"),
        ("s", plug_sweep(grid={"seed": [1, 2]}), r"^sweeps/s/grid: seed cannot be set here"),
        ("s", plug_sweep(schedule="nt", grid={"switch_epoch": [1, 2]}),
         r"^sweeps/s/grid/switch_epoch: variant 'plug' does not own switch_epoch under schedule nt"),
        ("s", plug_sweep(variant="mos_fair", datasets=["wt2"], grid={"n_experts": [2, 3]}),
         r"^sweeps/s/datasets: variant 'mos_fair' is not defined for dataset wt2 \(only ptb\)$"),
        ("s", {**plug_sweep(), "grids": {}},
         r"^sweeps/s: unknown key\(s\) \['grids'\]; allowed: datasets, grid, schedule, seeds, variant$"),
        ("s", {k: v for k, v in plug_sweep().items() if k != "seeds"}, r"^missing key sweeps/s/seeds "),
        ("main", plug_sweep(), r"^sweeps/main: the name is taken by the experiment 'main'; choose another name$"),
        ("spectra", plug_sweep(), r"^sweeps/spectra: the name is taken by the analysis 'spectra'"),
        ("Bad-Name", plug_sweep(), r"^sweeps/Bad-Name: not a valid name \('Bad-Name' does not match "),
    ],
    ids=["unknown-variant", "key-not-owned", "unknown-key", "bad-type", "out-of-range", "empty-list", "duplicate",
         "duplicate-within-1e-12", "empty-grid", "seed", "overruled-by-nt", "dataset-of-variant", "unknown-field",
         "missing-field", "clash-experiment", "clash-summary", "bad-name"],
)  # fmt: skip
@pytest.mark.usefixtures("plugin_layer")
def test_a_bad_sweep_is_refused_in_one_line_naming_the_key(name, sweep, message):
    text = _refused(small(**{name: sweep}))
    assert re.search(message, text), text


@pytest.mark.usefixtures("plugin_layer")
def test_no_sweep_may_take_the_name_of_a_table_or_figure():
    for name in [*tables.TABLES, *figures.FIGURES]:
        assert _refused(small(**{name: plug_sweep()})).startswith(f"sweeps/{name}: the name is taken by the paper's")


def test_an_unknown_experiment_lists_the_allowed_keys_and_points_to_sweeps():
    config = study_config.read(SMALL)
    config["experiments"]["ctemp_sweep"] = config["experiments"]["main"]
    assert _refused(config) == (
        "experiments: unknown key(s) ['ctemp_sweep']; allowed: fair, frozen, gss_grid, main, mos_dropoutl, mos_k, "
        "ntet (the paper's experiments; a sweep of your own goes under sweeps:, config/README.md)"
    )


# --------------------------------------------------------------------------------------------- the runs
@pytest.mark.usefixtures("plugin_layer")
def test_a_point_equal_to_the_default_is_the_main_run_trained_once():
    """The plug-in in E1 and swept over its own key: the default point's runs ARE E1's runs (same folders, one job
    each); only the other point adds jobs."""
    config = small(scale=plug_sweep())
    config["experiments"]["main"]["variants"].append("plug")
    before = study_config.read(SMALL)
    before["experiments"]["main"]["variants"].append("plug")
    plain = Study(study_config.check(before))
    study = Study(study_config.check(config))
    _distinct(study)
    main_plug = {run.dir for run in study.experiments["main"] if run.variant == "plug" and run.dataset == "ptb"}
    default = {run.dir for run in study.sweeps["scale"] if not run.overrides}
    assert len(default) == SMALL_SEEDS and default == main_plug
    assert len(study.jobs) == len(plain.jobs) + SMALL_SEEDS  # plug_scale = 2.0 × the seeds
    members = study.members()
    assert all(members[path][:2] == ["main", "sweep_scale"] for path in default)
    table = plan_table(study).set_index("experiment")
    assert table.loc["sweep_scale", "jobs"] == 2 * SMALL_SEEDS and table.loc["sweep_scale", "new jobs"] == SMALL_SEEDS
    frame = plan_frame(study)
    assert not frame["run"].duplicated().any()


def test_a_builtin_layers_key_can_be_swept_and_shares_the_gss_grid_runs():
    """GSS's c on PTB at the preset (-1.5) and 0.0, authors' seed: both points are runs of the GSS grid."""
    sweep = {
        "variant": "gss",
        "datasets": ["ptb"],
        "schedule": "et",
        "seeds": "authors",
        "grid": {"gss_c": [-1.5, 0.0]},
    }
    config = small(gssc=sweep)
    config["experiments"]["gss_grid"]["sweep"]["ptb"]["gss_k"] = [2.5]
    study = Study(study_config.check(config))
    grid = {run.dir for run in study.experiments["gss_grid"] if run.dataset == "ptb"}
    assert {run.dir for run in study.sweeps["gssc"]} == grid


# --------------------------------------------------------------------------------------------- summary, table, figure
def _fake_metrics(root: Path, i: int, *, dataset="ptb", seed=141, scale=1.0, test_ppl=100.0, **hp) -> dict:
    path = root / f"run{i}" / "metrics.json"
    path.parent.mkdir(parents=True)
    metrics = {"dataset": dataset, "variant": "taylor", "schedule": "et", "seed": seed,
               "hyperparameters": {"taylor_scale": scale, "switch_epoch": 2, **hp}, "parameters": 1000,
               "train_ppl": 200.0, "valid_ppl": test_ppl + 10, "test_ppl": test_ppl, "epochs_run": 3,
               "switch_epoch": 2, "seconds_per_epoch": 0.5}  # fmt: skip
    path.write_text(json.dumps(metrics))
    return {"experiment": "sweep_scale", "dataset": dataset, "variant": "taylor", "schedule": "et", "seed": str(seed),
            "seed_kind": "authors" if seed == 141 else "random", "metrics": str(path)}  # fmt: skip


def _summary(root: Path, keys=("taylor_scale",), ranks: bool = False, **extra) -> Path:
    """A sweep summary: 2 datasets × scales 0.5, 1, 2 × 2 seeds (test ppl 100 + 10·scale ± 1; with ``ranks``, Press'
    rank 1000·scale ± 10 in each run's rank.json)."""
    records = []
    for i, (dataset, scale, seed) in enumerate(itertools.product(("ptb", "wt2"), (0.5, 1.0, 2.0), (141, 7))):
        ppl = 100 + 10 * scale + (1 if seed == 7 else -1)
        records.append(_fake_metrics(root / "runs", i, dataset=dataset, seed=seed, scale=scale, test_ppl=ppl, **extra))
        if ranks:
            rank = Path(records[-1]["metrics"]).with_name("rank-300.json")
            rank.write_text(json.dumps({"press_rank": 1000 * scale + (10 if seed == 7 else -10), "effective_rank": {
                "1e-3": 10, "1e-4": 20, "1e-5": 30}}))  # fmt: skip
            records[-1]["rank"] = str(rank)
    frame = collect_sweep(records, list(keys))
    (root / "summary").mkdir(exist_ok=True)
    frame.to_csv(root / "summary" / "sweep_scale.csv", index=False)
    return root / "summary"


def test_the_summary_has_the_swept_keys_as_columns_in_order(tmp_path):
    records = [_fake_metrics(tmp_path, 0, tf32=True), _fake_metrics(tmp_path, 1, seed=7, scale=2.0, tf32=False)]
    frame = collect_sweep(records, ["taylor_scale", "tf32"])
    assert list(frame.columns[:9]) == ["experiment", "dataset", "variant", "schedule", "seed", "seed_kind",
                                       "taylor_scale", "tf32", "parameters"]  # fmt: skip
    assert frame["taylor_scale"].tolist() == [1.0, 2.0] and frame["tf32"].tolist() == [True, False]
    assert frame["press_rank"].isna().all()  # no rank record: empty rank columns
    assert sweeps.swept_keys(collect_sweep(records, ["switch_epoch"])) == ["switch_epoch"]  # a key, not a metric
    with pytest.raises(RecordError, match=r"hyperparameters has no dropouti"):
        collect_sweep(records, ["dropouti"])
    with pytest.raises(RecordError, match=r"--hyperparameter KEY"):
        collect_sweep(records, [])


def test_the_table_has_one_row_per_point_with_mean_and_sd_over_the_seeds(tmp_path):
    summary = _summary(tmp_path)
    out = tmp_path / "tables" / "sweep_scale"
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "sweep", "scale", "--summary-dir", str(summary),
                           "--out-table", str(out), "--banner", "small scale"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out.with_suffix(".csv"))
    assert len(table) == 6 and set(table["n_seeds"]) == {2}
    row = table[(table["dataset"] == "ptb") & (table["taylor_scale"] == 2.0)].iloc[0]
    assert row["test_ppl_mean"] == pytest.approx(120.0) and row["test_ppl_sd"] == pytest.approx(math.sqrt(2))
    assert row["valid_ppl_mean"] == pytest.approx(130.0)
    md = out.with_suffix(".md").read_text()
    assert md.startswith("**small scale**") and "| PTB " in md and "120.00 ± 1.41" in md
    assert (
        "120.00 ± 1.41" in out.with_suffix(".html").read_text() and "\\toprule" in out.with_suffix(".tex").read_text()
    )
    assert not (tmp_path / "figures").exists()  # only what was asked for


def test_a_swept_value_reads_as_the_configuration_and_the_run_tag_write_it(tmp_path):
    """Before, a float 1.0 showed as ``1`` (``:g``): an int's text, and not the value the runs' tags and the
    configuration's grid hold (writing 1 for a float's 1.0 names other runs)."""
    out = tmp_path / "t" / "sweep_scale"
    sweeps.render_table("scale", sweeps.read_sweep(_summary(tmp_path), "scale"), out)
    rows = [line.split("|") for line in out.with_suffix(".md").read_text().splitlines() if line.startswith("| ")]
    assert [row[2].strip() for row in rows[1:]] == ["0.5", "1.0", "2.0"] * 2
    sweep = {"variant": "taylor", "schedule": "et", "datasets": ["ptb"], "seeds": [141],
             "grid": {"taylor_scale": [0.5, 1.0], "n_experts": [1, 2]}}  # fmt: skip
    assert "taylor_scale ∈ {0.5, 1.0} × n_experts ∈ {1, 2}" in sweeps.report_caption("scale", sweep)


def test_a_sweep_computes_the_rank_of_its_runs_in_its_table_and_figure(tmp_path):
    """Before, a sweep ran no analysis: "rank against K" could not be answered from the configuration."""
    summary = _summary(tmp_path, ranks=True)
    frame = pd.read_csv(summary / "sweep_scale.csv")
    assert sorted(frame["press_rank"]) == sorted([1000 * s + d for s in (0.5, 1.0, 2.0) for d in (-10, 10)] * 2)
    tidy = sweeps.render_table("scale", sweeps.read_sweep(summary, "scale"), tmp_path / "t" / "sweep_scale")
    row = tidy[(tidy["dataset"] == "wt2") & (tidy["taylor_scale"] == 2.0)].iloc[0]
    assert row["press_rank_mean"] == 2000 and row["press_rank_sd"] == pytest.approx(math.sqrt(200))
    md = (tmp_path / "t" / "sweep_scale.md").read_text()
    assert "| Press' rank " in md and "2,000 ± 14" in md
    fig = sweeps.build_figure("scale", summary)
    assert [ax.get_ylabel() for ax in fig.axes] == ["test perplexity"] * 2 + ["Press' rank"] * 2
    for ax in fig.axes[2:]:  # rank against the swept value, ± 1 sd over the seeds
        line, _, _ = ax.containers[0].lines
        assert list(line.get_xdata()) == [0.5, 1.0, 2.0] and list(line.get_ydata()) == [500.0, 1000.0, 2000.0]
    assert not _outside_canvas(fig)
    assert [ax.get_ylabel() for ax in sweeps.build_figure("scale", _summary(tmp_path / "no")).axes] == [
        "test perplexity"
    ] * 2  # no rank yet: no rank row


def _legend(fig) -> list[str]:
    """The labels of each panel's legend (the same in every panel)."""
    (labels,) = {tuple(t.get_text() for t in ax.get_legend().get_texts()) for ax in fig.axes}
    return list(labels)


def test_the_figure_draws_test_ppl_against_the_first_key_inside_the_canvas(tmp_path):
    summary = _summary(tmp_path, keys=("taylor_scale", "dropouti"), dropouti=0.1)
    fig = sweeps.build_figure("scale", summary, banner="small scale — pipeline check, not the paper")
    titles = [ax.get_title() for ax in fig.axes]  # Taylor where the example is installed, else its variant name
    assert [t.split(":")[0] for t in titles] == ["PTB", "WT2"] and all(
        t.lower().endswith("taylor (et)") for t in titles
    )
    assert all(ax.get_xlabel() == "taylor_scale" and ax.get_ylabel() == "test perplexity" for ax in fig.axes)
    assert not _outside_canvas(fig) and _legend(fig) == ["dropouti = 0.1"]
    on_top = [text.get_text() for text in fig.texts]  # its name, as a paper figure's, then the configuration's mark
    assert on_top[-2:] == ["Sweep scale", "small scale — pipeline check, not the paper"], on_top
    assert_shows_its_data(fig)
    for ax in fig.axes:  # one line per value of the other key, its error bars ± 1 sd over the seeds
        assert len(ax.containers) == 1
        line, _, (bars,) = ax.containers[0].lines
        assert list(line.get_ydata()) == pytest.approx([105.0, 110.0, 120.0])
        assert [seg[1][1] - seg[0][1] for seg in bars.get_segments()] == pytest.approx([2 * math.sqrt(2)] * 3)
    for name in ("a", "b"):
        with matplotlib.rc_context(figures.STYLE):
            figures.save(sweeps.build_figure("scale", summary), tmp_path / name / "sweep_scale")
    pdf = (tmp_path / "a" / "sweep_scale.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/Type3" not in pdf and b"/FontFile2" in pdf  # Type 42 fonts
    assert (tmp_path / "a" / "sweep_scale.png").read_bytes().startswith(b"\x89PNG")
    for ext in ("pdf", "png"):
        assert (tmp_path / "a" / f"sweep_scale.{ext}").read_bytes() == (
            tmp_path / "b" / f"sweep_scale.{ext}"
        ).read_bytes()


def test_a_categorical_or_missing_sweep_still_draws(tmp_path):
    summary = _summary(tmp_path, keys=("tf32", "taylor_scale"), tf32=True)
    fig = sweeps.build_figure("scale", summary)
    assert not _outside_canvas(fig)
    assert _legend(fig) == ["taylor_scale = 0.5", "taylor_scale = 1.0", "taylor_scale = 2.0"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["true"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "sweep_scale.csv").write_text("")
    assert not _outside_canvas(sweeps.build_figure("scale", tmp_path / "empty"))
    command = ["sweep", "nope", "--summary-dir", str(summary), "--out-table", str(tmp_path / "t")]
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", *command], capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.strip().endswith("sweep_nope.csv not found"), done.stderr


def test_the_lines_of_one_model_are_shades_of_its_colour_and_never_another_models(tmp_path):
    """Before, a panel's second line took the palette's first colour: Softmax's, as if Softmax were in the sweep."""
    from matplotlib.colors import rgb_to_hsv, to_hex, to_rgb

    from softmax_bottleneck.report import variants

    fig = sweeps.build_figure("scale", _summary(tmp_path, keys=("tf32", "taylor_scale"), tf32=True))
    own, others = variants.color("taylor"), set(variants.colors().values()) - {variants.color("taylor")}
    for ax in fig.axes:
        lines = [container.lines[0] for container in ax.containers]
        shades = [to_hex(line.get_color()) for line in lines]
        assert len(shades) == 3 and shades[0] == to_hex(own) and len(set(shades)) == 3 and not set(shades) & others
        hues = {round(float(rgb_to_hsv(to_rgb(shade))[0]), 2) for shade in shades}
        assert hues == {round(float(rgb_to_hsv(to_rgb(own))[0]), 2)}  # mixed with black or white: the same hue
        assert len({(line.get_marker(), line.get_linestyle()) for line in lines}) == 3  # told apart in grey too


# --------------------------------------------------------------------------------------------- the workflow
def snakemake(workdir: Path, config: Path, *args: str, env: dict | None = None, timeout: float = 900):
    env = dict(env or os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(REPO / "Snakefile"), "--configfile", str(config),
           "--directory", str(workdir)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=timeout)


def test_rule_all_and_the_sweeps_target_plan_its_runs_table_and_figure(tmp_path):
    config = small(gssc={"variant": "gss", "datasets": ["ptb"], "schedule": "et", "seeds": "all",
                         "grid": {"gss_c": [-1.5, 0.0]}})  # fmt: skip
    path = tmp_path / "gssc.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(tmp_path, path, "sweep_gssc", "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    counts = dict(line.split() for line in out.splitlines() if len(line.split()) == 2 and line.split()[1].isdigit())
    assert counts["train"] == str(2 * SMALL_SEEDS) and counts["summarize_sweep"] == "1" and counts["sweep_gssc"] == "1"
    assert counts["analyze"] == str(2 * SMALL_SEEDS)  # the rank of every run of the sweep
    everything = snakemake(tmp_path, path, "-n", "--quiet", "rules")
    assert "sweep_gssc" in everything.stdout + everything.stderr
    files = snakemake(tmp_path, path, "reports/small/figures/sweep_gssc.png", "-n", "--quiet", "rules")
    assert files.returncode == 0 and "sweep_gssc" in files.stdout + files.stderr


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    return install_example(tmp_path_factory.mktemp("plugin") / "site")


#: docs/adding-an-output-layer.md's command (tests/test_readme.py leaves it to this file: it needs the example)
DOCS_COMMAND = "snakemake sweep_taylor_scale --configfile config/small.yaml examples/taylor_softmax/sweep.yaml"
#: on top of it, a shorter run: 2 values, the authors' seed and one random seed, 1 epoch on 600 tokens
SHORT = {
    "seeds": {"random": yaml.safe_load(SMALL.read_text())["seeds"]["random"][:1]},
    "model_overrides": {"variants": {"taylor": {"epochs": 1, "train_tokens": 600, "valid_tokens": 200,
                                                "test_tokens": 200}}},
    "sweeps": {"taylor_scale": {"grid": {"taylor_scale": [0.5, 1.0]}}},
}  # fmt: skip


@pytest.mark.long
@pytest.mark.slow
@needs_data
def test_a_plugins_own_key_swept_from_the_config_alone(plugin_path, tmp_path):
    """The example plug-in installed, the docs' command as written plans the example's sweep (3 values × the seeds);
    with a shorter grid and 2 seeds merged on top, `snakemake sweep_taylor_scale` trains the 4 models and writes the
    table and the figure, which the HTML report shows."""
    env = dict(os.environ, PYTHONPATH=str(plugin_path))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    target, _, files = DOCS_COMMAND.removeprefix("snakemake ").partition(" --configfile ")
    work = tmp_path / "work"
    work.mkdir()
    dry = subprocess.run([sys.executable, "-m", "snakemake", target, "-n", "--quiet", "rules", "--configfile",
                          *files.split(), "--directory", str(work)],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=300)  # fmt: skip
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-4000:]
    assert re.search(rf"^train\s+{3 * SMALL_SEEDS}$", dry.stdout + dry.stderr, flags=re.M), dry.stdout + dry.stderr
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({"data_mirror": str(MIRROR), **SHORT}))
    configs = [*(str(REPO / f) for f in files.split()), str(short)]
    done = subprocess.run([sys.executable, "-m", "snakemake", target, "--cores", "2", "-s", str(REPO / "Snakefile"),
                           "--configfile", *configs, "--directory", str(work)],
                          capture_output=True, text=True, env=env, cwd=work, timeout=900)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    models = [p for p in (work / "results" / "runs").rglob("model.pt") if ".resume" not in p.parts]
    assert len(models) == 4 and all("taylor" in p.parts for p in models)
    assert sum(p.parent.name.startswith("default-") for p in models) == 2  # taylor_scale = 1.0 is the preset
    tables_dir, figures_dir = work / "reports" / "small" / "tables", work / "reports" / "small" / "figures"
    table = pd.read_csv(tables_dir / "sweep_taylor_scale.csv")
    assert table["taylor_scale"].tolist() == [0.5, 1.0] and table["n_seeds"].tolist() == [2, 2]
    assert table["test_ppl_mean"].notna().all() and table["test_ppl_sd"].notna().all()
    md = (tables_dir / "sweep_taylor_scale.md").read_text()
    assert md.startswith("**small scale — pipeline check, not the paper**") and "Taylor (ET)" in md and " ± " in md
    assert (figures_dir / "sweep_taylor_scale.pdf").read_bytes().startswith(b"%PDF")
    assert (figures_dir / "sweep_taylor_scale.png").read_bytes().startswith(b"\x89PNG")
    summary = work / "results" / "small" / "summary"
    assert len(pd.read_csv(summary / "sweep_taylor_scale.csv")) == 4
    assert not _outside_canvas(sweeps.build_figure("taylor_scale", summary))
    report = subprocess.run([sys.executable, "-m", "snakemake", target, "--report", str(work / "report.zip"), "-s",
                             str(REPO / "Snakefile"), "--configfile", *configs, "--directory", str(work)],
                            capture_output=True, text=True, env=env, cwd=work, timeout=600)  # fmt: skip
    assert report.returncode == 0, (report.stdout + report.stderr)[-4000:]
    names = zipfile.ZipFile(work / "report.zip").namelist()
    assert any(n.endswith("sweep_taylor_scale.html") for n in names), names
    assert any(n.endswith("sweep_taylor_scale.png") for n in names), names
