"""A configuration edited after its runs trained (softmax_bottleneck.study.changed_runs): its next start stops
before training new models in the finished ones' places, in one line saying what differs; ``train_changed_runs``
trains them, the finished models untouched; the record the workflow writes carries what it has not compared yet."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import needs_data
from test_readme import MIRROR_OPTION, SMOKE, run_in, scratch_repo

from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.study import changed_runs, workflow_start
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.job_seconds import TRAINING_RULE
from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import status_text, study_status

ROOT = Path(__file__).resolve().parents[1]
REFUSED = "would start new models"


def finished_models(repo: Path) -> dict[Path, str]:
    """Every trained model under ``repo``'s run folders, with its SHA-256."""
    return {
        path.relative_to(repo): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (repo / "results" / "runs").rglob("model.pt")
        if ".resume" not in path.parts
    }


@needs_data
@pytest.mark.slow
def test_an_edited_hyperparameter_stops_the_workflow_before_it_trains_new_models_in_finished_ones_places(tmp_path):
    repo = scratch_repo(tmp_path)
    first = run_in(repo, f"{SMOKE} {MIRROR_OPTION}")
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    trained = finished_models(repo)
    assert len(trained) == 2
    folders = sorted(p.name for p in (repo / "results" / "runs").rglob("*") if p.is_dir())
    config = repo / "config" / "smoke.yaml"
    original = config.read_text()
    assert original.count("    log_interval: 25\n") == 1
    config.write_text(original.replace("    log_interval: 25\n", "    log_interval: 10\n"))

    refused = run_in(repo, f"{SMOKE} {MIRROR_OPTION}")
    output = refused.stdout + refused.stderr
    assert refused.returncode == 1, output[-4000:]
    lines = [line for line in output.splitlines() if REFUSED in line]
    assert len(lines) == 1 and "Traceback" not in output, output[-4000:]
    assert lines[0].startswith("config/smoke.yaml: 2 trainings would start new models"), lines[0]
    assert "(what differs: in 2 runs, log_interval 25 → 10; e.g. " in lines[0]
    assert "Nothing was started" in lines[0]
    assert "--config train_changed_runs=true" in lines[0]
    assert any(f"e.g. {model.parent} is finished" in lines[0] for model in trained), lines[0]
    assert sorted(p.name for p in (repo / "results" / "runs").rglob("*") if p.is_dir()) == folders  # nothing began
    assert finished_models(repo) == trained
    # status says it too, and what the next start will do
    status = run_in(repo, "python -m softmax_bottleneck status")
    assert status.returncode == 0, (status.stdout + status.stderr)[-3000:]
    said = [line for line in status.stdout.splitlines() if line.startswith("Changed since the workflow's last start")]
    assert len(said) == 1 and "2 runs of this study are new models where it named finished or begun runs" in said[0]
    assert "(what differs: in 2 runs, log_interval 25 → 10; e.g. " in said[0] and "stops first" in said[0], said
    # what differs, read from the metrics.json the trainer wrote: at most four keys, the others counted
    edited = smoke_study(repo, log_interval=10, dropout=0.1, dropouth=0.2, dropouti=0.3, wdrop=0.4, alpha=1.0)
    softmax = next(run for run in edited.jobs.values() if run.variant == "softmax")
    old = next(model.parent for model in trained if "/softmax/" in str(model))
    assert changed_runs.what_differs(softmax, repo / old) == (
        "alpha 0.0 → 1.0, dropout 0.0 → 0.1, dropouth 0.0 → 0.2, dropouti 0.0 → 0.3, 2 other keys"
    )

    # deliberately: the new models train in new folders, the finished ones stay as they were
    deliberate = run_in(repo, f"{SMOKE} {MIRROR_OPTION} train_changed_runs=true")
    assert deliberate.returncode == 0, (deliberate.stdout + deliberate.stderr)[-4000:]
    now = finished_models(repo)
    assert len(now) == 4 and {path: now[path] for path in trained} == trained
    # the answer was for that start: neither the record nor the retry commands built from it repeat it
    values = workflow_run.read(repo / "logs" / "smoke" / workflow_run.RECORD)["config"]["values"]
    assert values == {"data_mirror": "../shared/data"}
    # the record names the new runs: the next start, and a start with the edit undone, train nothing and ask nothing
    for text in (None, original):
        if text is not None:
            config.write_text(text)
        again = run_in(repo, f"{SMOKE} {MIRROR_OPTION}")
        output = again.stdout + again.stderr
        assert again.returncode == 0 and REFUSED not in output, output[-4000:]
        assert "rule train" not in output and "train_fused" not in output, output[-4000:]
        assert finished_models(repo) == now
        status = run_in(repo, "python -m softmax_bottleneck status")
        assert status.returncode == 0 and "Changed since" not in status.stdout, status.stdout[-3000:]


def smoke_study(root: Path, **overrides) -> Study:
    """config/smoke.yaml's study (``overrides`` of its ``model_overrides: all:``), its run folders below ``root``."""
    config = study_config.read(ROOT / "config" / "smoke.yaml")
    config["model_overrides"]["all"].update(overrides)
    return Study(study_config.check(config), root)


def train_jobs(study: Study, which=None) -> list[tuple]:
    """The `train` jobs (``(jobid, rule, wildcards, threads)``) of ``study``'s runs (those of ``which`` variants)."""
    return [(i, TRAINING_RULE, run.wildcards, 1) for i, run in enumerate(study.jobs.values())
            if which is None or run.variant in which]  # fmt: skip


def check(study: Study, jobs, logs: Path, train_changed: bool = False):
    return changed_runs.check(study, jobs, logs, "config/smoke.yaml", train_changed=train_changed)


def test_a_start_for_another_target_keeps_the_finished_runs_it_did_not_compare_in_the_record(tmp_path, monkeypatch):
    """The record of a start that trains only the Softmax successor still names the finished MoS run, so that the start
    that trains MoS's successor compares it; one that trains both names only the new runs. A begun run counts as a
    finished one, and is named first."""
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    before = smoke_study(tmp_path)
    workflow_start.record(before, train_jobs(before), str(logs), files=["config/smoke.yaml"], values={}, slots=2)
    for folder in before.jobs:  # finished (the reader tested here is the record's; a model's file says it is there)
        Path(folder).mkdir(parents=True)
        (Path(folder) / "model.pt").write_bytes(b"")
    after = smoke_study(tmp_path, log_interval=10)
    assert changed_runs.recorded_runs(logs) == list(before.jobs)
    assert set(after.jobs).isdisjoint(before.jobs)
    refusal, _ = check(after, train_jobs(after, {"softmax"}), logs)
    assert refusal.startswith("config/smoke.yaml: a training would start a new model where"), refusal
    refusal, kept = check(after, train_jobs(after, {"softmax"}), logs, train_changed=True)
    (old_mos,) = [folder for folder, run in before.jobs.items() if run.variant == "mos"]
    assert refusal is None and kept == [*after.jobs, old_mos]
    path = workflow_start.record(after, train_jobs(after, {"softmax"}), str(logs), files=["config/smoke.yaml"],
                                 values={}, slots=2, runs=kept)  # fmt: skip
    assert workflow_run.read(path)["runs"] == kept
    found = changed_runs.changed_runs(after, train_jobs(after), changed_runs.recorded_runs(logs))
    assert [(run.variant, str(old)) for run, old, _ in found] == [("mos", old_mos)]
    assert check(after, train_jobs(after), logs, train_changed=True) == (None, list(after.jobs))
    # a training begun there (a resume state, no model yet) counts too, named first: a run of days may be under way
    (old_softmax,) = [folder for folder, run in before.jobs.items() if run.variant == "softmax"]
    (Path(old_mos) / "model.pt").unlink()
    (Path(old_mos) / ".resume").mkdir()
    workflow_start.record(after, train_jobs(after), str(logs), files=["config/smoke.yaml"], values={}, slots=2,
                          runs=[old_softmax, old_mos])  # fmt: skip
    refusal, _ = check(after, train_jobs(after), logs)
    assert refusal.startswith("config/smoke.yaml: 2 trainings would start new models where"), refusal
    assert f"(what differs: in 1 run, {changed_runs.BEGUN}; in 1 run, " in refusal
    assert f"; e.g. {old_mos} holds a training begun, which may be running, " in refusal
    # a folder that holds neither began nothing
    (Path(old_mos) / ".resume").rmdir()
    refusal, _ = check(after, train_jobs(after), logs)
    assert refusal.startswith("config/smoke.yaml: a training would start a new model") and old_mos not in refusal


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda path, record: path.write_text(json.dumps({**record, "runs": {"a": 1}})), "runs: expected a list"),
        (lambda path, record: path.write_text(json.dumps({**record, "runs": [""]})), "runs: expected a list"),
        (lambda path, record: path.write_text("{"), "not valid JSON"),
        (lambda path, record: (path.unlink(), path.symlink_to(path.parent / "elsewhere.json")), "a symbolic link"),
    ],
    ids=["object", "empty-name", "cut", "link"],
)
def test_a_record_that_cannot_be_read_stops_a_start_that_would_train_naming_it(tmp_path, damage, why):
    """Fail closed: without the record nothing can be compared, so a start that would train stops in one line naming
    it; one that trains nothing, or answers train_changed_runs, goes on; the record it writes replaces a link, never
    writes through it."""
    study = smoke_study(tmp_path)
    logs = tmp_path / "logs"
    path = workflow_start.record(study, train_jobs(study), str(logs), files=["config/smoke.yaml"], values={}, slots=1)
    record = json.loads(path.read_text())
    (path.parent / "elsewhere.json").write_text(path.read_text())
    damage(path, record)
    refusal, _ = check(study, train_jobs(study), logs)
    assert refusal.startswith(f"config/smoke.yaml: {path}: ") and why in refusal, refusal
    assert "move it away" in refusal and "--config train_changed_runs=true" in refusal
    assert check(study, [], logs) == (None, list(study.jobs))
    assert check(study, train_jobs(study), logs, train_changed=True) == (None, list(study.jobs))
    elsewhere = (path.parent / "elsewhere.json").read_text()
    workflow_start.record(study, train_jobs(study), str(logs), files=["config/smoke.yaml"], values={}, slots=1)
    assert (path.parent / "elsewhere.json").read_text() == elsewhere and not path.is_symlink()
    assert changed_runs.recorded_runs(logs) == list(study.jobs)


def test_a_record_written_before_runs_were_recorded_names_none(tmp_path):
    study = smoke_study(tmp_path)
    path = tmp_path / workflow_run.RECORD
    record = workflow_run.write(path, files=["config/smoke.yaml"], values={}, slots=1, jobs=[], runs=list(study.jobs))
    del record["runs"]
    path.write_text(json.dumps(record))
    assert changed_runs.recorded_runs(tmp_path) == []


def test_the_answer_is_given_on_the_command_line_only(tmp_path):
    """A file that sets it would answer every later start: refused, naming the file; commands built from a start's
    values leave it out."""
    values = {"data_mirror": "../shared/data", study_config.TRAIN_CHANGED_RUNS: True}
    options = study_config.command_options(["config/smoke.yaml"], values, tmp_path)
    assert "--config data_mirror=../shared/data --directory" in options and "train_changed" not in options
    mine = tmp_path / "mine.yaml"
    mine.write_text((ROOT / "config" / "smoke.yaml").read_text() + "train_changed_runs: true\n")
    with pytest.raises(study_config.ConfigError, match="train_changed_runs: an answer for one start") as err:
        study_config.load([mine])
    assert err.value.source == str(mine)
    assert (
        study_config.load([ROOT / "config" / "smoke.yaml"], {"train_changed_runs": "true"})["train_changed_runs"]
        is True
    )


def test_status_names_the_runs_the_next_start_stops_for_from_any_folder(tmp_path, monkeypatch):
    """``status --directory``: the record and the run folders are read below the study's folder, not the current one;
    reading them changes nothing."""
    study_dir = tmp_path / "study"
    before = smoke_study(study_dir)
    logs = study_dir / "logs" / "smoke"
    workflow_start.record(before, train_jobs(before), str(logs), files=["config/smoke.yaml"], values={}, slots=2)
    for folder in before.jobs:
        (study_dir / folder).mkdir(parents=True)
        (study_dir / folder / ".resume").mkdir()  # begun, both
    monkeypatch.chdir(tmp_path)
    after = smoke_study(study_dir, log_interval=10)
    record = (logs / workflow_run.RECORD).read_bytes()
    status = study_status(after, directory=study_dir, slurm=False)
    assert status.changed.startswith("Changed since the workflow's last start: 2 runs of this study are new models")
    assert f"(what differs: in 2 runs, {changed_runs.BEGUN}; e.g. " in status.changed
    assert status.as_dict()["changed_runs"] == status.changed and status.changed in status_text(status)
    assert (logs / workflow_run.RECORD).read_bytes() == record
    assert study_status(before, directory=study_dir, slurm=False).changed is None
