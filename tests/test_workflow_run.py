"""What a workflow run records at its start (softmax_bottleneck.cluster.workflow_run, .study.workflow_start): its
configuration, for `status` and `preview` without a configuration, and every job with its planned seconds
(softmax_bottleneck.study.job_seconds), for the terminal's time left."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import pytest

from softmax_bottleneck import bounds, readback
from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study import job_seconds, workflow_start
from softmax_bottleneck.study.plan import gpu_hours
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small() -> Study:
    return Study(study_config.check(study_config.read(REPO / "config" / "small.yaml")))


def _jobs(study: Study) -> list[tuple[int, str, dict, int]]:
    """A run's jobs as the workflow gives them: a download, every training, an analysis, a table, `all`."""
    trainings = [(i, "train", dict(run.wildcards), 1) for i, run in enumerate(study.jobs.values(), 10)]
    return [(1, "fetch_corpus", {"corpus": "ptb"}, 1), *trainings, (900, "analyze", {}, 1), (901, "table2", {}, 1),
            (902, "all", {}, 1), (903, "layer_source", {"layer": "ss"}, 1)]  # fmt: skip


def test_the_record_holds_every_job_with_its_kind_and_planned_seconds(tmp_path, small, monkeypatch):
    monkeypatch.delenv(workflow_run.RECORD_VARIABLE, raising=False)
    path = workflow_start.record(small, _jobs(small), str(tmp_path / "logs" / "small"), files=["config/small.yaml"],
                                 values={"data_mirror": "../shared/data"}, slots=2)  # fmt: skip
    assert path == (tmp_path / "logs" / "small" / workflow_run.RECORD).resolve()
    assert workflow_run.path_from_environment() == path  # named to the terminal
    record = workflow_run.read(path)
    kinds = {job["rule"]: job["kind"] for job in record["jobs"]}
    assert kinds == {"fetch_corpus": "download", "train": "training", "analyze": "job", "table2": "job", "all": "job",
                     "layer_source": "job"}  # fmt: skip
    planned = {job["jobid"]: job["planned_s"] for job in record["jobs"]}
    assert planned[1] == 0 and planned[902] == 0 and planned[900] == job_seconds.RULE_SECONDS["analyze"]
    assert planned[903] == 0  # an echo: a job planned as a render that ends at once would drag the pace down
    assert planned[901] == job_seconds.RENDER_SECONDS
    trainings = [job["planned_s"] for job in record["jobs"] if job["kind"] == "training"]
    assert len(trainings) == len(small.jobs) and min(trainings) > job_seconds.START_SECONDS
    assert record["config"] == {"files": ["config/small.yaml"], "values": {"data_mirror": "../shared/data"}}
    # a run of rules that run nothing of the study records nothing and leaves the variable unset
    following = [(0, "status", {}, 1), (1, "plan", {}, 1), (2, "training_plan", {}, 1)]
    assert workflow_start.record(small, following, str(tmp_path / "x"), files=[], values={}, slots=1) is None
    assert workflow_run.path_from_environment() is None and not (tmp_path / "x").exists()


def test_a_small_scale_training_is_planned_from_its_measured_cost_and_a_paper_one_from_the_plan(small, monkeypatch):
    paper = Study(study_config.check(study_config.read(REPO / "config" / "config.yaml")))
    run = next(iter(paper.jobs.values()))
    assert job_seconds.training_seconds(run) == pytest.approx(gpu_hours(run) * 3600)
    mos = next(r for r in small.jobs.values() if r.dataset == "wt2" and r.variant == "mos")
    seconds, _ = job_seconds.SMALL_TRAINING["wt2", "mos"]
    assert job_seconds.training_seconds(mos) == pytest.approx(seconds)  # the measured configuration itself
    moc = next(r for r in small.jobs.values() if r.dataset == "wt2" and r.variant == "moc")
    unmeasured = {key: value for key, value in job_seconds.SMALL_TRAINING.items() if key != ("wt2", "moc")}
    monkeypatch.setattr(job_seconds, "SMALL_TRAINING", unmeasured)
    assert job_seconds.training_seconds(moc) == job_seconds.training_seconds(mos)  # not measured: its family's


def test_a_long_training_of_a_cut_corpus_is_not_paper_scale_and_the_whole_corpus_is():
    """Before, ``--refuse-cpu`` priced a run by the paper's seconds per epoch whatever ``train_tokens`` kept: 90 epochs
    of PTB's MoS on 40,000 of its 929,589 training tokens were refused as "months of CPU time"."""
    from types import SimpleNamespace

    def mos(**hp):
        return SimpleNamespace(dataset="ptb", variant="mos", hyperparameters={"epochs": 90, **hp})

    assert workflow_start.read_hours(mos()) == pytest.approx(gpu_hours(mos())) and workflow_start.paper_scale([mos()])
    cut = mos(train_tokens=40_000)
    assert workflow_start.read_hours(cut) == pytest.approx(gpu_hours(cut) * 40_000 / 929_589)
    assert not workflow_start.paper_scale([cut]) and workflow_start.paper_scale([cut, mos()])
    assert workflow_start.read_hours(mos(train_tokens=10**9)) == pytest.approx(gpu_hours(mos()))  # at most the split


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"config": {"files": [], "values": {}}, "started": 1.0, "slots": 1, "jobs": []}', "config/files"),
        ('{"config": {"files": ["a.yaml"], "values": {}}, "started": 1.0, "slots": 0, "jobs": []}', "slots"),
        ('{"config": {"files": ["a.yaml"], "values": {}}, "started": 1.0, "slots": 1, "jobs": [{"jobid": 1, '
         '"rule": "train", "planned_s": -4, "threads": 1}]}', "jobs/0/planned_s"),
        ('{"config": {"files": ["a.yaml"], "values": {}}, "started": 1.0, "started": 2.0}', "started"),
        ("[1, 2]", "expected a JSON object"),
    ],
)  # fmt: skip
def test_a_record_that_is_not_one_is_refused_in_one_line_naming_it(tmp_path, content, why):
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(readback.ReadbackError) as err:
        workflow_run.read(path)
    assert str(err.value).startswith(f"{path}: ") and why in str(err.value) and "\n" not in str(err.value)


def _study_folder(tmp_path: Path, started: dict[str, float]) -> Path:
    """A working directory with the configurations and a record of each given one, started at the given times."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    for name, when in started.items():
        logs = tmp_path / "logs" / ("" if name == "config" else name)
        workflow_run.write(logs / workflow_run.RECORD, files=[f"config/{name}.yaml"], values={}, slots=2, jobs=[],
                           started=when)  # fmt: skip
    return tmp_path


def test_status_without_a_configuration_follows_the_study_last_started_in_its_folder(tmp_path, capsys, caplog,
                                                                                     monkeypatch):  # fmt: skip
    from softmax_bottleneck import cli

    caplog.set_level(logging.INFO)
    folder = _study_folder(tmp_path, {"config": 1000.0, "small": 2000.0})
    assert study_config.recorded_study(folder)[0] == [str(folder / "config" / "small.yaml")]
    command = ["status", "--directory", str(folder)]
    assert cli.main(command) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Status of {folder / 'config' / 'small.yaml'} at ") and "51 training jobs" in out
    assert "--config FILE names another" in caplog.text
    assert "the study the workflow started in this folder at " in caplog.text
    caplog.clear()
    assert cli.main([*command, "--config", str(folder / "config" / "config.yaml")]) == 0
    assert "283 training jobs" in capsys.readouterr().out and "started in this folder" not in caplog.text
    monkeypatch.chdir(REPO)
    assert cli.main(["status", "--directory", str(tmp_path / "elsewhere")]) == 0
    assert capsys.readouterr().out.startswith("Status of config/config.yaml at ")  # nothing recorded: the paper's


def test_preview_of_the_papers_study_where_only_another_runs_stops_in_one_line(tmp_path, small, monkeypatch):
    folder = _study_folder(tmp_path, {"small": 2000.0})
    monkeypatch.chdir(folder)
    paper = Study(study_config.check(study_config.read(REPO / "config" / "config.yaml")))
    line = workflow_start.other_study(paper, [(1, "progress", {}, 1), (2, "preview", {}, 1)])
    assert line == (
        "preview: no run of config/config.yaml has started in this folder; the workflow last started "
        "config/small.yaml here: snakemake preview --configfile config/small.yaml"
    )
    assert workflow_start.other_study(paper, [(1, "status", {}, 1)]) is None  # status follows it by itself
    assert workflow_start.other_study(paper, [(1, "train", {}, 1)]) is None  # the study itself
    (folder / next(iter(paper.jobs))).mkdir(parents=True)  # a paper run has started here: its preview is wanted
    assert workflow_start.other_study(paper, [(1, "preview", {}, 1)]) is None


def test_the_newest_readable_record_wins_and_a_broken_one_is_named(tmp_path, caplog):
    folder = _study_folder(tmp_path, {"config": 3000.0, "small": 2000.0})
    assert study_config.recorded_study(folder)[0] == [str(folder / "config" / "config.yaml")]
    (folder / "logs" / workflow_run.RECORD).write_text(json.dumps({"config": "x"}))
    assert study_config.recorded_study(folder)[0] == [str(folder / "config" / "small.yaml")]
    assert f"{folder / 'logs' / workflow_run.RECORD}: config" in caplog.text


def test_the_time_left_the_terminal_writes_now_reads_back(tmp_path):
    """Written by the writer the terminal calls, with the real clock: ``written`` is a Unix time (≈ 1.8·10⁹ s), not
    a duration, and is read back as one; ``seconds_left`` is a duration, null while estimating."""
    record = tmp_path / "logs" / workflow_run.RECORD
    workflow_run.write(record, files=["config/small.yaml"], values={}, slots=2, jobs=[])
    path = tmp_path / "logs" / workflow_run.TIME_LEFT
    assert workflow_run.read_time_left(path) is None  # nothing written yet
    before = time.time()
    workflow_run.write_time_left(record, "trainings: 0 of 51 done, jobs: 0 of 186; time left: estimating", None)
    read = workflow_run.read_time_left(path)
    assert before <= read["written"] <= time.time() and read["written"] > bounds.MAX_SECONDS
    assert read["seconds_left"] is None and read["line"].startswith("trainings: 0 of 51 done")
    workflow_run.write_time_left(record, "about 7m 40s left", 460.0)
    assert workflow_run.read_time_left(path)["seconds_left"] == 460.0
    for content, why in (({"written": -1.0}, "written = -1.0 is impossible"),
                         ({"seconds_left": -5}, "seconds_left = -5 is impossible"),
                         ({"line": 3}, "line: expected")):  # fmt: skip
        path.write_text(json.dumps({"written": time.time(), "line": "x", "seconds_left": 1.0, **content}))
        with pytest.raises(readback.ReadbackError, match=why):
            workflow_run.read_time_left(path)


def test_the_rules_whose_seconds_are_planned_are_the_workflows():
    """Every rule the time left names (its measured seconds, its downloads, trainings and no-time jobs) is a rule of
    the workflow: a renamed rule would fall back to a table's time in silence."""
    import re

    declared = {
        m.group(1)
        for path in [REPO / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")]
        for m in re.finditer(r"^\s*(?:rule|checkpoint) (\w+):", path.read_text(encoding="utf-8"), re.MULTILINE)
    }
    named = {
        *job_seconds.RULE_SECONDS,
        *job_seconds.NO_SECONDS,
        *job_seconds.DOWNLOADS,
        job_seconds.TRAINING_RULE,
        job_seconds.FUSED_RULE,
    }
    assert "train" in declared and named <= declared, named - declared
