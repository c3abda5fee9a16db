"""The study as a Snakemake ``module`` of another workflow (docs/cluster.md, "Your own workflow"): a Snakefile outside
this checkout uses every rule of it under a prefix and adds its own rule on one of its outputs; the dry run plans
both, the study's rules running this checkout's package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import data_dir

REPO = Path(__file__).resolve().parents[1]

OUTER = """
module softmax_bottleneck:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from softmax_bottleneck as sb_*


rule my_figure7_copy:
    input:
        rules.sb_figure7.output.png,
    output:
        "mine/figure7.png",
    shell:
        "cp {{input}} {{output}}"
"""


def test_the_study_runs_as_a_module_of_another_workflow(tmp_path):
    own = tmp_path / "my-workflow"
    own.mkdir()
    (own / "Snakefile").write_text(OUTER.format(snakefile=REPO / "Snakefile"))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(own / "Snakefile"), "--directory", str(own),
           "--configfile", str(REPO / "config" / "small.yaml"), "--config", f"data_mirror={data_dir()}",
           "--cores", "1", "--dry-run", "my_figure7_copy"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the workflow finds its package itself
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=own, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    listed = set(line.split()[0] for line in proc.stdout.split("Job stats:")[1].split("total")[0].splitlines()[3:])
    assert {"my_figure7_copy", "sb_figure7", "sb_train", "sb_analyze"} <= listed, listed
    assert "rule train:" not in proc.stdout  # every rule of the study under the prefix
    # the study's rules run the package of this checkout (src/ beside its Snakefile), whatever else is installed:
    # its rendering code is an input of the figure
    figure = re.search(r"^rule sb_figure7:\n((?:    .*\n)+)", proc.stdout, flags=re.M).group(1)
    assert f"{REPO / 'src' / 'softmax_bottleneck' / 'report' / 'figures' / 'spectra.py'}" in figure, figure[:3000]


def test_the_studys_local_rules_stay_local_under_the_modules_prefix(tmp_path):
    """Each rule the study runs on the controller (downloads, summaries, status, ...) is local under the prefix too.
    Before, the study named them in `localrules:` directives, which a module's prefix does not reach: `sb_fetch_corpus`
    went through sbatch asking `threads: all` (1,024 CPUs) and pended for ever."""
    from softmax_bottleneck.cluster.snakemake_run import parsed_local_rules

    own = tmp_path / "my-workflow"
    own.mkdir()
    (own / "Snakefile").write_text(OUTER.format(snakefile=REPO / "Snakefile"))
    configs = [REPO / "config" / "small.yaml"]
    study = parsed_local_rules(REPO / "Snakefile", own, configs)
    assert {"fetch_corpus", "fetch_wordsim", "summarize_runs", "status", "plan", "figure7"} <= study
    assert parsed_local_rules(own / "Snakefile", own, configs) == {f"sb_{rule}" for rule in study}
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        assert not re.search(r"^localrules:", rules.read_text(), flags=re.M), rules  # `localrule: True` per rule


def test_a_modules_paper_scale_trainings_refuse_a_cpu_themselves(tmp_path):
    """Snakemake does not run a module's `onstart:`, where the study stops paper-scale training on a machine without
    CUDA before any job: before, `snakemake my_figure7_copy` in the module's workflow trained WT2 GSS (1,000 epochs)
    on the CPU. Each such job now refuses a CPU itself (--refuse-cpu), unless allow_cpu_training."""
    own = tmp_path / "my-workflow"
    own.mkdir()
    (own / "Snakefile").write_text(OUTER.format(snakefile=REPO / "Snakefile"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def trainings(*config: str) -> list[str]:
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(own / "Snakefile"), "--directory", str(own),
               "--configfile", str(REPO / "config" / "config.yaml"), "--config", f"data_mirror={data_dir()}", *config,
               "--cores", "1", "--dry-run", "--printshellcmds", "sb_table3"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=own, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return [line for line in proc.stdout.splitlines() if " softmax_bottleneck train " in line]

    guarded = trainings()
    assert len(guarded) == 22 and all(" --refuse-cpu " in line for line in guarded), guarded[:2]
    allowed = trainings("allow_cpu_training=true")
    assert len(allowed) == 22 and not any("--refuse-cpu" in line for line in allowed)
