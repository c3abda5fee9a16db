"""The smoke check (config/smoke.yaml), as the README's quick start runs it, end to end through Snakemake in a
scratch copy of the repository: two tiny PTB models trained, analysed, summarised and two tables rendered (13 jobs,
a minute or two on 2 cores; not marked long). Then what a user runs beside it: ``status`` and ``snakemake preview``
without a configuration follow the study the workflow last started there, and show its time left as the workflow's
terminal wrote it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import needs_data
from test_readme import MIRROR_OPTION, SMOKE, run_in, scratch_repo

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study

ROOT = Path(__file__).resolve().parents[1]
SMOKE_CONFIG = ROOT / "config" / "smoke.yaml"
#: a line of the terminal that says when: ``[15:23:04] ...``
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


def test_the_smoke_configuration_is_complete_and_valid():
    """Read and checked as every configuration is (the schema, then the presets and the registry): two runs."""
    study = Study(study_config.check(study_config.read(SMOKE_CONFIG)))
    assert sorted((run.dataset, run.variant) for run in study.jobs.values()) == [("ptb", "mos"), ("ptb", "softmax")]
    assert study.config["output_subdir"] == "smoke"


@needs_data
def test_the_smoke_check_runs_end_to_end(tmp_path):
    repo = scratch_repo(tmp_path)
    result = run_in(repo, f"{SMOKE} {MIRROR_OPTION}", timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "13 of 13 steps (100%) done" in output and "Traceback" not in output
    progress = [line for line in output.splitlines() if "trainings: " in line and "done" in line]
    assert progress and all(STAMPED.match(line) for line in progress), progress  # stamped as every other line
    models = sorted(p for p in (repo / "results" / "runs").rglob("model.pt") if ".resume" not in p.parts)
    assert len(models) == 2
    for model in models:
        assert json.loads((model.parent / "metrics.json").read_text())["epochs_run"] == 2
        # the job's own log (what Snakemake shows of a failed or killed job) names the training's log
        run = model.parent.relative_to(repo / "results" / "runs")
        assert (repo / "logs" / "train_jobs" / f"{run}.log").read_text() == (
            f"the training writes its progress to logs/train/{run}.log\n"
        )
    for name in ("table2", "table6"):
        table = (repo / "reports" / "smoke" / "tables" / f"{name}.md").read_text()
        assert "smoke check — not the paper" in table, name
    # status without a configuration follows the smoke check, and shows the time left the terminal wrote last
    status = run_in(repo, "python -m softmax_bottleneck status")
    assert status.returncode == 0, (status.stdout + status.stderr)[-3000:]
    assert status.stdout.startswith("Status of config/smoke.yaml at ")
    assert "2 training jobs: 2 finished." in status.stdout
    shown = [line for line in status.stdout.splitlines() if line.startswith("The workflow's last run of this study ")]
    assert len(shown) == 1 and shown[0].startswith("The workflow's last run of this study finished at "), shown
    assert shown[0].endswith("ago); its last line: trainings: 2 of 2 done, jobs: 13 of 13."), status.stdout
    # so does snakemake preview: it renders the smoke check's provisional tables and says where
    preview = run_in(repo, "snakemake preview")
    output = preview.stdout + preview.stderr
    assert preview.returncode == 0, output[-3000:]
    page = repo / "reports" / "smoke" / "preview" / "progress.html"
    assert page.is_file() and "reports/smoke/preview" in output, output[-3000:]
    assert (repo / "reports" / "smoke" / "preview" / "tables" / "table2.md").is_file()
    assert (page.parent / "claims.html").is_file() and 'href="claims.html"' in page.read_text()  # the page's link
    assert "The workflow&#x27;s last run of this study finished at " in page.read_text()  # marked by onsuccess
    assert "trainings: 2 of 2 done, jobs: 13 of 13." in page.read_text()
    # pages the command wrote are rendered again by Snakemake (before: "Nothing to be done", the command's pages kept)
    assert run_in(repo, "python -m softmax_bottleneck preview").returncode == 0
    again = run_in(repo, "snakemake progress")
    output = again.stdout + again.stderr
    assert again.returncode == 0 and "1 of 1 steps (100%) done" in output, output[-3000:]
    third = run_in(repo, "snakemake progress")  # once only: the runs have not moved since
    assert "Nothing to be done" in third.stdout + third.stderr, (third.stdout + third.stderr)[-3000:]
