"""Plug-in packages as users write them, each installed (a ``.dist-info`` with its entry points) into a private folder
that only the subprocesses of these tests see: a plug-in named like a shipped layer or labelled like an installed one
is refused in one line at every load, several layers of one module each load behind their own entry point, a
plug-in's cost is marked as assumed in the plan and measured by check-layer, randomness outside torch's generator is
named as such, and after a layer's source changes the workflow renders again what shows it (and nothing else).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, data_dir, needs_data

#: a sigsoftmax with a learned per-word bias inside the sigmoid and a hyper-parameter of its own (the layer a new
#: user tried), and a second layer in the same module
TWO_LAYERS = """
    import torch
    import torch.nn.functional as F

    from softmax_bottleneck.models.output_layers import Hyperparameter, SoftmaxOfScores, register_output_layer


    @register_output_layer("bss", display="BSS", family="softmax",
                           hyperparameters={"bss_init": Hyperparameter(0.0, float, "initial bias", minimum=-5.0)})
    class BiasedSigSoftmax(SoftmaxOfScores):
        def __init__(self, vocab_size, nemb, nhidlast, bss_init=0.0, **hp):
            super().__init__(vocab_size, nemb, nhidlast, **hp)
            self.inner = torch.nn.Parameter(torch.full((vocab_size,), float(bss_init)))

        @classmethod
        def extra_parameter_count(cls, vocab_size, nemb, nhidlast, **hp):
            return 2 * vocab_size

        def scores(self, context, weight):
            logits = self.logits(context, weight)
            return logits + F.logsigmoid(logits + self.inner)


    @register_output_layer("bss_half", display="BSS-half", family="softmax")
    class HalfSigSoftmax(SoftmaxOfScores):
        def scores(self, context, weight):
            logits = self.logits(context, weight)
            return logits + 0.5 * F.logsigmoid(logits)
"""
#: a layer named like the shipped SigSoftmax (its entry point named like the layer, as the docs advise)
SHADOW = """
    from softmax_bottleneck.models.output_layers import SoftmaxOfScores, register_output_layer


    @register_output_layer("ss", display="SSb", family="softmax")
    class MySigSoftmax(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)
"""
#: a layer labelled like an installed plug-in (bss's "BSS")
SAME_LABEL = SHADOW.replace('"ss", display="SSb"', '"dup", display="BSS"')
#: training-mode noise from numpy's generator
NUMPY_NOISE = """
    import numpy as np
    import torch
    import torch.nn.functional as F

    from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer


    @register_output_layer("noisy", display="Noisy", family="softmax")
    class Noisy(OutputLayer):
        def forward(self, context, weight):
            logits = self.logits(context, weight) * 0.5
            if self.training:
                logits = logits + torch.from_numpy(np.random.standard_normal(logits.shape)).to(logits) * 1e-3
            return F.log_softmax(logits, dim=-1)
"""


def install(site: Path, distribution: str, entries: list[str], modules: dict[str, str]) -> Path:
    """Install ``distribution`` (its ``entries``: ``name = module:attr``, and its ``modules``) into ``site``."""
    dist = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[softmax_bottleneck.output_layers]\n" + "\n".join(entries) + "\n")
    for name, code in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(code))
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A private folder holding four plug-in distributions (never the environment the other tests use)."""
    root = tmp_path_factory.mktemp("plugins") / "site"
    install(root, "two-layers", ["bss = two_layers:BiasedSigSoftmax", "bss_half = two_layers:HalfSigSoftmax"],
            {"two_layers": TWO_LAYERS})  # fmt: skip
    install(root, "my-ss", ["ss = my_ss:MySigSoftmax"], {"my_ss": SHADOW})
    install(root, "dup-label", ["dup = dup_label:MySigSoftmax"], {"dup_label": SAME_LABEL})
    install(root, "numpy-noise", ["noisy = numpy_noise:Noisy"], {"numpy_noise": NUMPY_NOISE})
    return root


def run(site: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)  # fmt: skip


SHADOW_LINE = (
    "entry point 'ss' = 'my_ss:MySigSoftmax' of my-ss 0.1 (softmax_bottleneck.output_layers) is refused: output "
    "layer 'ss' (my_ss.MySigSoftmax): the name is already registered by the built-in layer 'ss' "
    "(softmax_bottleneck.models.output_layers.sigsoftmax.SigSoftmax); choose another name; 'ss' keeps meaning the "
    "built-in layer, not this plug-in"
)


def test_a_plugin_named_like_a_shipped_layer_is_said_wherever_the_registry_loads(site):
    """Before, the plug-in ``ss`` appeared nowhere: --list, describe and the workflow used the shipped SigSoftmax."""
    listed = run(site, "check-layer", "--list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split(": ", 1)[-1] for line in listed.stderr.splitlines()] == [SHADOW_LINE]  # (a logging prefix)
    lines = {tuple(line.split()[:2]) for line in listed.stdout.splitlines()}
    assert {("ss", "SS"), ("ss", "BROKEN"), ("bss", "BSS"), ("bss_half", "BSS-half"), ("dup", "BROKEN")} <= lines
    digest = hashlib.sha256((site / "two_layers.py").read_bytes()).hexdigest()[:16]
    origins = {line.split()[0]: line.split(None, 4)[-1] for line in listed.stdout.splitlines() if "BROKEN" not in line}
    assert origins["bss"] == f"plug-in two_layers.BiasedSigSoftmax, two-layers 0.1, source bss@{digest}"
    assert origins["bss_half"] == f"plug-in two_layers.HalfSigSoftmax, two-layers 0.1, source bss_half@{digest}"
    assert origins["ss"] == "built-in"
    described = run(site, "describe", "--dataset", "ptb", "--variant", "ss")
    assert described.returncode == 0 and described.stderr.splitlines() == [SHADOW_LINE]
    # a configuration naming ss (the paper's, the small one): said once, before any plan
    planned = run(site, "plan", "--config", str(REPO / "config" / "small.yaml"))
    assert planned.returncode == 0
    assert [line.split(": ", 1)[-1] for line in planned.stderr.splitlines()] == [SHADOW_LINE]


def test_a_label_an_installed_layer_has_is_refused_in_one_line(site):
    """Before, a second "BSS" was accepted: Table 2 and the figures would have carried two "BSS" rows."""
    done = run(site, "describe", "--dataset", "ptb", "--variant", "dup")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()[-1:]
    assert lines == [
        "describe: entry point 'dup' = 'dup_label:MySigSoftmax' of dup-label 0.1 (softmax_bottleneck.output_layers) "
        "is refused: output layer 'dup' (dup_label.MySigSoftmax): display 'BSS' is already 'BSS', the label of the "
        "plug-in layer 'bss' (two_layers.BiasedSigSoftmax): two rows of a table or two curves of a figure would carry "
        "one label; choose another display name"
    ]


def test_one_entry_point_installed_by_two_distributions_names_both(tmp_path):
    """Before, the line named the one entry point twice and neither distribution: nothing said what to uninstall."""
    site = tmp_path / "site"
    install(
        site,
        "twin-a",
        ["twin = twin_mod:MySigSoftmax"],
        {"twin_mod": SHADOW.replace('"ss", display="SSb"', '"twin", display="Twin"')},
    )
    install(site, "twin-b", ["twin = twin_mod:MySigSoftmax"], {})
    listed = run(site, "check-layer", "--list")
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith("twin ")]
    first, second = sorted(["twin-a", "twin-b"], key=line.index)
    assert line.split(None, 2)[1:] == [
        "BROKEN",
        f"output layer 'twin' is registered twice: by entry point 'twin' = 'twin_mod:MySigSoftmax' of {first} 0.1 "
        f"and again (entry point 'twin' = 'twin_mod:MySigSoftmax' of {second} 0.1 registers it too); which code "
        "trains under one name must not depend on the order of installation: uninstall one of them, or rename one "
        "layer",
    ]


def test_two_layers_of_one_module_each_load_and_check_and_the_cost_is_measured(site, tmp_path):
    """Before, the second entry point into one module was BROKEN ("registered twice"); check-layer now also times the
    layer against Softmax (a measurement: printed and sane)."""
    done = run(site, "check-layer", "bss_half", "--stamp", str(tmp_path / "bss_half.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout and "stamp written" in done.stdout
    cost = re.search(r"^  COST  ([0-9.]+)× Softmax's time for nll forward \+ backward .*bench \(docs/costs.md\)$",
                     done.stdout, re.MULTILINE)  # fmt: skip
    assert cost and 0.05 < float(cost.group(1)) < 50, done.stdout
    described = run(site, "describe", "--dataset", "ptb", "--variant", "bss")
    assert described.returncode == 0, described.stderr
    assert '"bss_init": 0.0' in described.stdout


def test_randomness_outside_torch_is_named_not_blamed_on_nll(site):
    """Before: "loss-path: nll differs from −forward[targets]", and the user looked for a bug in nll."""
    done = run(site, "check-layer", "noisy")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert any(line.startswith("check-layer: noisy: loss-path: two training-mode forward calls after the same "
                               "torch.manual_seed differ") and "outside torch's global generator" in line
               for line in lines), lines  # fmt: skip
    assert not any("nll differs" in line for line in lines)


def test_the_plan_marks_a_plugin_priced_at_its_proxys_time(site, tmp_path):
    """Before, the plan priced a plug-in at Softmax's paper time with no word that this is assumed."""
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("experiments:\n  main:\n    variants: [softmax, ss, gss, lms_plif, mos, bss]\n")
    done = run(site, "plan", "--config", str(REPO / "config" / "small.yaml"), "--config", str(overlay))
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[4].strip() for line in done.stdout.splitlines()
            if line.startswith("| ")}  # fmt: skip
    assert rows["E1 main comparison"].endswith(" *") and rows["total"].endswith(" *")
    assert not rows["E2 NT vs ET"].endswith("*")  # the paper's own layers: not marked
    notes = [line for line in done.stdout.splitlines() if line.startswith("* ")]
    assert len(notes) == 1 and notes[0].startswith("* bss: priced at the paper's time per epoch of softmax (family")
    assert "check-layer bss" in notes[0] and "bench --dataset ptb --variant bss" in notes[0]


# --------------------------------------------------------------------------------- a layer's source changes ---
def _snakemake(work: Path, site: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(REPO / "Snakefile"), "--configfile", str(config),
           "--directory", str(work)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=1500)


def _planned(result) -> dict[str, int]:
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    counts = {}
    for line in (result.stdout + result.stderr).splitlines():
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if match and match.group(1) not in ("total", "count"):
            counts[match.group(1)] = int(match.group(2))
    return counts


@pytest.mark.long
@pytest.mark.slow
@needs_data
def test_a_changed_layer_renders_again_what_shows_it_and_nothing_else(site, tmp_path):
    """Before, after the layer's source changed, the tables and figures that show it kept their old text (no note),
    while those that do not show it were rendered again; nothing retrains either way."""
    config = yaml.safe_load((REPO / "config" / "small.yaml").read_text())
    config["data_mirror"] = str(data_dir())
    config["model_overrides"]["all"].update(epochs=2, switch_epoch=1, train_tokens=2000, valid_tokens=400,
                                            test_tokens=400)  # fmt: skip
    config["analysis"]["rank_rows"] = 100
    config["experiments"]["main"] = {"datasets": ["ptb"], "variants": ["softmax", "bss"], "schedules": ["et"],
                                     "seeds": "authors"}  # fmt: skip
    # Table 1 (E2's summary) shows Softmax only: it is not rendered again
    config["experiments"]["ntet"] = {"datasets": ["ptb"], "variants": ["softmax"], "schedules": ["et"],
                                     "seeds": "authors"}  # fmt: skip
    config["analysis"]["spectra"] = {"datasets": ["ptb"], "variants": ["softmax", "bss"], "schedule": "et"}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    private = tmp_path / "site"  # a copy of its own: its module is edited below
    install(private, "two-layers", ["bss = two_layers:BiasedSigSoftmax"], {"two_layers": TWO_LAYERS})
    work = tmp_path / "work"
    work.mkdir()
    targets = ["table1", "table2", "figure7"]
    built = _snakemake(work, private, path, *targets, "--cores", "2")
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    tables = work / "reports" / "small" / "tables"
    assert "older source" not in (tables / "table2.md").read_text(encoding="utf-8")
    with (private / "two_layers.py").open("a") as module:
        module.write("# a comment: another source of the layer\n")
    changed = _snakemake(work, private, path, *targets, "-n", "--quiet", "rules")
    # what shows the layer, and its summaries; no training, no analysis, not Table 1
    assert _planned(changed) == {"check_layer": 1, "layer_source": 1, "summarize_runs": 1, "summarize_spectra": 1,
                                 "table2": 1, "figure7": 1}  # fmt: skip
    assert "trained with an older source of bss (kept, never retrained" in changed.stderr
    done = _snakemake(work, private, path, *targets, "--cores", "2")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    note = "note: some results here were trained with an older source of bss than the one installed"
    assert note in (tables / "table2.md").read_text(encoding="utf-8")
    assert "older source" not in (tables / "table1.md").read_text(encoding="utf-8")
    summaries = work / "results" / "small" / "summary"
    summary = pd.read_csv(summaries / "main.csv").set_index("variant")
    assert summary.loc["bss", "older_source"] and not summary.loc["softmax", "older_source"]
    spectra = pd.read_csv(summaries / "spectra.csv")  # Figure 7's: its note (tests/test_layer_source_notes.py)
    assert spectra.groupby("variant")["older_source"].all().to_dict() == {"bss": True, "softmax": False}
    assert "Nothing to be done" in _snakemake(work, private, path, *targets, "-n").stdout
