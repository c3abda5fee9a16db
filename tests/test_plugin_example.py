"""The worked plug-in example: ``examples/taylor_softmax`` installed as its own package.

It is installed with pip into a temporary folder (``--target``) and put on ``PYTHONPATH`` of subprocesses only,
so the test environment itself is untouched; nothing under ``src/`` knows about it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, data_dir, needs_data

EXAMPLE = REPO / "examples" / "taylor_softmax"
TINY_SET = ["nemb=8", "nhid=16", "nhidlast=8", "epochs=1", "bptt=20", "max_seq_len_delta=5", "batch_size=10",
            "small_batch_size=10", "eval_batch_size=10", "log_interval=5", "train_tokens=2000",
            "valid_tokens=500", "test_tokens=400"]  # fmt: skip


def install_example(target: Path) -> Path:
    """``pip install --no-deps --no-build-isolation --target target`` of a copy of the example (no build files in
    the source tree)."""
    source = target.parent / "taylor_softmax_src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-compile",
         "--target", str(target), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return target


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    return install_example(tmp_path_factory.mktemp("plugin") / "site")


def run(*args: str, pythonpath: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)  # fmt: skip


def test_example_is_its_own_package():
    assert (EXAMPLE / "pyproject.toml").is_file()
    assert not list(EXAMPLE.rglob("softmax_bottleneck"))  # it adds no module to the package
    # without the example installed, the package does not know the layer
    installed = importlib.metadata.entry_points(group="softmax_bottleneck.output_layers").select(name="taylor")
    if not installed:  # (the suite may run with the example installed: then it is known, which is right)
        done = run("describe", "--dataset", "ptb", "--variant", "taylor")
        assert done.returncode != 0 and "unknown variant 'taylor'" in done.stderr


def test_installed_example_registers_and_conforms(plugin_path, tmp_path):
    stamp = tmp_path / "stamps" / "taylor.json"
    done = run("check-layer", "taylor", "--stamp", str(stamp), pythonpath=plugin_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout and "PASS  reload" in done.stdout
    # the stamp names the distribution, its version and the SHA-256 of the installed module file
    module = plugin_path / "taylor_softmax" / "__init__.py"
    written = json.loads(stamp.read_text())
    assert (written["name"], written["distribution"], written["version"]) == ("taylor", "taylor-softmax-layer", "0.1.0")
    assert written["source_sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    code = ("import json, sys, torch; from softmax_bottleneck.training import conformance_stamp, environment as e; "
            "from softmax_bottleneck.models.output_layers import provenance; "
            "env = e.environment(torch.device('cpu'), output_layer='taylor'); "
            "print(json.dumps([conformance_stamp.conformance_stamp_ok(sys.argv[1], 'taylor'), env['software'], "
            "provenance.older_layer_source({'environment': env})]))")  # fmt: skip
    path = os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")]))
    checked = subprocess.run([sys.executable, "-c", code, str(stamp)], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    stamp_ok, software, older = json.loads(checked.stdout)
    assert stamp_ok == [True, ""] and older is None
    layer = software["output_layer"]
    assert (layer["distribution"], layer["version"]) == ("taylor-softmax-layer", "0.1.0")
    assert layer["source_sha256"] == written["source_sha256"]
    info = json.loads(run("describe", "--dataset", "ptb", "--variant", "taylor", pythonpath=plugin_path).stdout)
    assert info["parameters"] == 24_221_600  # the Softmax model's #Param: Taylor adds no parameter but the bias
    assert info["hyperparameters"]["output_layer"] == "taylor" and info["hyperparameters"]["seed"] == 141
    assert info["hyperparameters"]["taylor_scale"] == 1.0  # the layer's own key, at its registered default
    # docs/adding-an-output-layer.md's command: a value of its own key, typed and checked as it declares
    scaled = run("describe", "--dataset", "ptb", "--variant", "taylor", "--set", "taylor_scale=2",
                 pythonpath=plugin_path)  # fmt: skip
    assert json.loads(scaled.stdout)["hyperparameters"]["taylor_scale"] == 2.0, scaled.stderr


@pytest.mark.slow
def test_example_trains_reloads_analyzes_and_renders_table2(plugin_path, shared_data, ptb_cache, tmp_path):
    run_dir, summary, tables = tmp_path / "run", tmp_path / "summary", tmp_path / "tables"
    sets = [arg for item in TINY_SET for arg in ("--set", item)]
    data = ["--data", str(shared_data / "ptb"), "--corpus-cache", str(ptb_cache)]
    done = run("train", "--dataset", "ptb", "--variant", "taylor", "--out", str(run_dir), "--device", "cpu",
               *data, *sets, pythonpath=plugin_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["variant"] == "taylor" and metrics["hyperparameters"]["output_layer"] == "taylor"
    done = run("analyze", "--checkpoint", str(run_dir / "model.pt"), *data, "--rows", "120",
               "--out-json", str(run_dir / "rank.json"),
               "--out-spectrum", str(run_dir / "spectrum.csv"), "--device", "cpu", pythonpath=plugin_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rank = json.loads((run_dir / "rank.json").read_text())
    assert rank["variant"] == "taylor" and rank["shape"] == [120, 10_000] and rank["press_rank"] >= 1
    # the reloaded model's log-P test loss is the trained model's (both over the first rows of the test split)
    assert rank["max_abs_log_normaliser"] < 1e-4
    record = (f"experiment=main,dataset=ptb,variant=taylor,schedule=et,seed=141,seed_kind=authors,"
              f"metrics={run_dir / 'metrics.json'},rank={run_dir / 'rank.json'}")  # fmt: skip
    done = run("summarize", "--kind", "runs", "--out", str(summary / "main.csv"), "--record", record)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run("table", "table2", "--summary-dir", str(summary), "--out", str(tables / "table2"),
               pythonpath=plugin_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = pd.read_csv(tables / "table2.csv")
    assert "taylor" in set(table["variant"]), table
    row = table[table["variant"] == "taylor"].iloc[0]
    assert row["n_runs"] == 1 and row["test_ppl_mean_ours"] == pytest.approx(metrics["test_ppl"], rel=1e-6)


def test_table2_shows_the_plugins_display_name(plugin_path, tmp_path):
    from softmax_bottleneck.report.summaries import RUN_COLUMNS

    row = dict.fromkeys(RUN_COLUMNS, "")
    row.update(experiment="main", dataset="ptb", variant="taylor", schedule="et", seed=141, seed_kind="authors",
               parameters=24_221_600, train_ppl=70.0, valid_ppl=62.0, test_ppl=60.0, press_rank=401)  # fmt: skip
    (tmp_path / "summary").mkdir()
    pd.DataFrame([row], columns=RUN_COLUMNS).to_csv(tmp_path / "summary" / "main.csv", index=False)
    done = run("table", "table2", "--summary-dir", str(tmp_path / "summary"), "--out", str(tmp_path / "table2"),
               pythonpath=plugin_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| Taylor " in (tmp_path / "table2.md").read_text()


def _fake_plugin(root: Path, entry: str, modules: dict[str, str]) -> Path:
    """A folder with an installed distribution whose one entry point is ``entry`` (``name = module:attr``)."""
    dist = root / "brokenplug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[softmax_bottleneck.output_layers]\n{entry}\n")
    for name, code in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(code))
    return root


@pytest.mark.parametrize(
    ("entry", "modules", "message"),
    [
        ("broken = broken_mod:Layer", {"broken_mod": "import not_installed_anywhere\n"},
         "entry point 'broken' = 'broken_mod:Layer' of brokenplug 0.1 (softmax_bottleneck.output_layers) failed to "
         "import: "
         "ModuleNotFoundError: No module named 'not_installed_anywhere'"),
        ("plain = plain_mod:Plain",
         {"plain_mod": """
            from softmax_bottleneck.models.output_layers import OutputLayer

            class Plain(OutputLayer):
                pass
            """},
         "entry point 'plain' = 'plain_mod:Plain' of brokenplug 0.1 names a class that is not registered; "
         "decorate it with @register_output_layer(...)"),
    ],
    ids=["import-error", "unregistered-class"],
)  # fmt: skip
@pytest.mark.parametrize(
    "command",
    [
        ["describe", "--dataset", "ptb", "--variant", "{name}"],
        ["check-layer", "{name}"],
        ["check-layer", "--all"],
        ["train", "--dataset", "ptb", "--variant", "{name}", "--out", "never-created"],
    ],
    ids=["describe", "check-layer", "check-layer-all", "train"],
)
def test_a_broken_plugin_fails_in_one_line_naming_the_entry_point(tmp_path, entry, modules, message, command):
    name = entry.split("=")[0].strip()
    site = _fake_plugin(tmp_path / "site", entry, modules)
    done = run(*(part.format(name=name) for part in command), pythonpath=site)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(message), done.stderr


def test_a_broken_plugin_leaves_what_never_names_it_working(tmp_path):
    """Before, a broken plug-in stopped every command, even check-layer --list and describe of the paper's layers."""
    site = _fake_plugin(
        tmp_path / "site", "broken = broken_mod:Layer", {"broken_mod": "import not_installed_anywhere\n"}
    )
    done = run("describe", "--dataset", "ptb", "--variant", "softmax", pythonpath=site)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["parameters"] == 24_221_600
    done = run("check-layer", "--list", pythonpath=site)
    assert done.returncode == 0, done.stderr
    broken = [line for line in done.stdout.splitlines() if line.startswith("broken ")]
    assert len(broken) == 1 and "BROKEN" in broken[0] and "No module named 'not_installed_anywhere'" in broken[0]


# --------------------------------------------------------------------------------- config only ---
MIRROR = data_dir()


def reduced_config(path: Path) -> Path:
    """config/small.yaml with Table 2's and Table 6's experiments cut to PTB, Softmax + Taylor, 2 seeds (the
    authors' + 1 random), and Taylor in the spectra and word-similarity lists (the other experiments stay as they
    are; the targets below do not need them).

    Naming ``taylor`` in the experiment and analysis lists is the only change a user makes for a new layer.
    """
    config = yaml.safe_load((REPO / "config" / "small.yaml").read_text())
    config["data_mirror"] = str(MIRROR)
    config["seeds"]["random"] = config["seeds"]["random"][:1]
    both = ["softmax", "taylor"]
    config["experiments"]["main"] = {"datasets": ["ptb"], "variants": both, "schedules": ["et"], "seeds": "all"}
    config["experiments"]["ntet"] = {"datasets": ["ptb"], "variants": both, "schedules": ["et"], "seeds": "authors"}
    config["analysis"]["spectra"] = {"datasets": ["ptb"], "variants": both, "schedule": "et"}
    config["analysis"]["wordsim"]["variants"].append("taylor")
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.mark.long
@pytest.mark.slow
@needs_data
def test_naming_the_plugin_in_the_config_puts_it_in_table2_table6_and_figure7(plugin_path, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    config = reduced_config(tmp_path / "taylor.yaml")
    env = dict(os.environ, PYTHONPATH=str(plugin_path))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "table2", "table6", "figure7",
           "-s", str(REPO / "Snakefile"), "--configfile", str(config), "--directory", str(work)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=1500)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    # the run folders' models (each also kept as a hard link in its .resume/final/)
    models = [path.parts for path in (work / "results").rglob("model.pt") if ".resume" not in path.parts]
    assert len(models) == 4 and sum("taylor" in parts for parts in models) == 2  # 2 seeds each, nothing else
    tables = work / "reports" / "small" / "tables"  # config/small.yaml's output_subdir
    table2 = pd.read_csv(tables / "table2.csv")
    taylor = table2[table2["variant"] == "taylor"]
    assert len(taylor) == 1 and taylor.iloc[0]["n_runs"] == 2
    table6 = pd.read_csv(tables / "table6.csv")
    assert "taylor" in set(table6["variant"])
    for name, ext in itertools.product(("table2", "table6"), ("md", "html")):
        assert "Taylor" in (tables / f"{name}.{ext}").read_text(), (name, ext)
    assert (work / "reports" / "small" / "figures" / "figure7.png").stat().st_size > 1000
    labels = subprocess.run(
        [sys.executable, "-c", "import sys; from softmax_bottleneck.report import figures; "
         "fig = figures.build('figure7', sys.argv[1]); "
         "print('\\n'.join(l.get_label() for ax in fig.axes for l in ax.get_lines()))",
         str(work / "results" / "small" / "summary")],
        capture_output=True, text=True, env=env, check=True, timeout=300,
    ).stdout.splitlines()  # fmt: skip
    assert "Taylor" in labels and "Softmax" in labels


#: docs/adding-an-output-layer.md, "Using it": the overlay and its two commands (tests/test_readme.py leaves them here)
DOCS = (REPO / "docs" / "adding-an-output-layer.md").read_text(encoding="utf-8")
OVERLAY_COMMANDS = [
    "snakemake -n --configfile config/small.yaml mine.yaml",
    "python -m softmax_bottleneck plan --config config/small.yaml --config mine.yaml",
]


def test_the_docs_overlay_adds_the_plugin_to_a_complete_configuration(plugin_path, tmp_path):
    """``mine.yaml`` as the docs show it, laid over config/small.yaml: 4 trainings of taylor (2 datasets × 2 seeds)
    and its check, priced and marked as priced at Softmax's paper time."""
    section = DOCS[DOCS.index("## 5. Using it") :]
    overlay = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert all(command in section for command in OVERLAY_COMMANDS)
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "small.yaml", tmp_path / "config" / "small.yaml")
    (tmp_path / "mine.yaml").write_text(overlay)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")])))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    dry, plan = (
        subprocess.run([*command.split(), *(["-s", str(REPO / "Snakefile"), "--quiet", "rules"] if i == 0 else [])],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        for i, command in enumerate(OVERLAY_COMMANDS)
    )  # fmt: skip
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
    out = dry.stdout + dry.stderr
    assert re.search(r"^train\s+55$", out, re.M) and re.search(r"^check_layer\s+1$", out, re.M), out[-3000:]
    assert plan.returncode == 0, plan.stderr
    assert "* taylor: priced at the paper's time per epoch of softmax, an assumption" in plan.stdout


def _checked_sweep(plugin_path, tmp_path, grid: list):
    """The small scale with a sweep of the example layer's ``taylor_scale`` over ``grid``, its layer checked:
    (the configuration, ``grid`` itself, to edit, and a dry run of a target with the configuration as it is then)."""
    work, path = tmp_path / "work", tmp_path / "taylor.yaml"
    config = yaml.safe_load((REPO / "config" / "small.yaml").read_text())
    config["data_mirror"] = str(MIRROR)
    config["sweeps"] = {"scale": {"variant": "taylor", "datasets": ["ptb"], "schedule": "et", "seeds": "authors",
                                  "grid": {"taylor_scale": grid}}}  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")])))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    snakemake = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile", str(path),
                 "--directory", str(work)]  # fmt: skip
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    checked = subprocess.run([*snakemake, "--cores", "1", "results/conformance/taylor.json"], capture_output=True,
                             text=True, env=env, timeout=600)  # fmt: skip
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-3000:]

    def dry_run(target: str) -> subprocess.CompletedProcess:
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return subprocess.run([*snakemake, "-n", "--quiet", "rules", "--", target], capture_output=True, text=True,
                              env=env, timeout=600)  # fmt: skip

    return config, grid, dry_run


@pytest.mark.slow
def test_a_point_added_after_its_layer_was_checked_is_trained_in_the_same_run(plugin_path, tmp_path):
    """A sweep that gains a point runs its plug-in layer's check again; the new point's trainings, and all that reads
    them, are planned in that same run, not left for the next `snakemake` (Snakemake leaves out a job whose only link
    to a job that runs again is an ancient() input, snakemake/snakemake#4166: the stamp is one for finished runs only).
    """
    config, grid, dry_run = _checked_sweep(plugin_path, tmp_path, [0.5, 2.0])
    grid.append(4.0)
    dry = dry_run("sweep_scale")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    assert re.search(r"^check_layer\s+1$", out, re.M), out[-3000:]  # the check again, at the three points
    assert re.search(r"^train\s+3$", out, re.M) and re.search(r"^sweep_scale\s+1$", out, re.M), out[-3000:]


@pytest.mark.slow
def test_the_same_points_in_another_order_check_nothing_again(plugin_path, tmp_path):
    """The check's points are sorted: a sweep's values reordered do not run the check again. Before, its parameters
    changed, the check ran again, and Snakemake left out what was linked to it only through a finished run's
    ancient() stamp (snakemake/snakemake#4166): with a table that also needed another training, the run ended
    "1 of 1 steps (100%) done" with the table unbuilt."""
    config, grid, dry_run = _checked_sweep(plugin_path, tmp_path, [0.5, 2.0, 4.0])
    grid.reverse()
    dry = dry_run("results/conformance/taylor.json")
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0 and "Nothing to be done" in out, out[-3000:]
