"""The study's run set (softmax_bottleneck.study): expanded from a configuration without Snakemake.

The run folders of config/config.yaml and config/small.yaml are pinned (tests/data/plans/*.csv, the training
plans written before the run set moved into the package): a folder name that changes would orphan a user's
trained model, and a new one would train it again.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import plan_frame
from softmax_bottleneck.study.runs import RUN_EXPERIMENTS, Study, StudyError

REPO = Path(__file__).resolve().parents[1]


def study_of(name: str, **changes) -> Study:
    config = study_config.read(REPO / "config" / name)
    config.update(changes)
    return Study(study_config.check(config))


@pytest.mark.parametrize("name", ["config", "small"])
def test_plan_is_the_pinned_one(name):
    pinned = pd.read_csv(REPO / "tests" / "data" / "plans" / f"{name}.csv", keep_default_na=False)
    ours = plan_frame(study_of(f"{name}.yaml"))
    assert list(ours["run"]) == list(pinned["run"])
    pd.testing.assert_frame_equal(ours.astype(str), pinned.astype(str), check_dtype=False)


def test_paper_config_plans_283_distinct_training_jobs():
    study = study_of("config.yaml")
    assert len(study.jobs) == 283
    assert len({run.dir for run in study.jobs.values()}) == 283


def test_a_run_that_several_experiments_use_is_one_job():
    study = study_of("config.yaml")
    members = study.members()
    authors_softmax = study.reference_run("ptb", "softmax", "et")
    assert authors_softmax.dir in study.jobs
    assert {"main", "ntet", "analysis"} <= set(members[authors_softmax.dir])
    # the GSS grid point equal to the preset (c, k) is E1's run: named "default", not by its values
    grid = study.experiments["gss_grid"]
    assert sum(run.tag == "default" for run in grid if run.dataset == "ptb") == 1
    assert authors_softmax.tag == "default"


def test_the_run_hash_covers_every_resolved_hyperparameter():
    base = study_of("small.yaml")
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["all"]["epochs"] = 4
    changed = Study(study_config.check(config))
    before = base.reference_run("ptb", "softmax", "et")
    after = changed.reference_run("ptb", "softmax", "et")
    assert before.tag == after.tag == "default"
    assert before.runid != after.runid
    assert after.hyperparameters["epochs"] == 4


def test_swept_values_name_the_run_and_reach_its_set_arguments():
    study = study_of("small.yaml")
    grid = [run for run in study.experiments["gss_grid"] if run.tag != "default"]
    assert grid
    for run in grid:
        for key, value in run.overrides:
            assert (key, value) in run.sets
            assert run.hyperparameters[key] == value
    assert all(run.tag.startswith(("c", "k")) for run in grid)


def test_every_experiment_is_expanded():
    study = study_of("small.yaml")
    assert tuple(study.experiments) == RUN_EXPERIMENTS
    assert all(study.experiments[name] for name in RUN_EXPERIMENTS)


def test_a_bad_combination_names_its_experiment():
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["all"]["small_batch_size"] = 3  # batch_size 10 is no multiple of 3
    study = Study(config)
    with pytest.raises(StudyError, match=r"^experiments/main: .*multiple of small_batch_size"):
        _ = study.jobs


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["experiments"]["main"]["variants"].append("nope"), "experiments/main/variants: unknown variant"),
        (lambda c: c["model_overrides"]["all"].update(lr=-1), "model_overrides/all/lr"),
        (lambda c: c["model_overrides"]["all"].update(seed=1), "seed cannot be set here"),
        (lambda c: c["experiments"]["main"].update(colour="red"), r"unknown key\(s\) \['colour'\]; allowed: "),
        (lambda c: c.pop("analysis"), "missing key analysis"),
    ],
)
def test_config_errors_name_the_key(change, message):
    config = study_config.read(REPO / "config" / "small.yaml")
    change(config)
    with pytest.raises(study_config.ConfigError, match=message):
        study_config.check(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "the file is empty"), ("- a\n- b\n", "expected keys at the top level"), ("a: [1,\n", "YAML syntax")],
)
def test_unreadable_config_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(study_config.ConfigError, match=message) as err:
        study_config.read(path)
    assert str(path) in err.value.source


def test_hyperparameters_decide_the_run_folder_not_their_spelling():
    """lr: 30 (int) and lr: 30.0 are the same run; lr: 20 is another one."""
    folders = {}
    for label, lr in (("int", 30), ("float", 30.0), ("other", 20.0)):
        config = study_config.read(REPO / "config" / "small.yaml")
        config["model_overrides"]["all"]["lr"] = lr
        folders[label] = set(Study(study_config.check(config)).jobs)
    assert folders["int"] == folders["float"]
    assert not folders["int"] & folders["other"]


def test_the_readme_shows_the_plan_that_plan_prints():
    """The README's plan block is the output of `python -m softmax_bottleneck plan` for config/config.yaml."""
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ python -m softmax_bottleneck plan\n", 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "plan"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert block == out


def test_plan_table_counts_a_shared_run_once():
    from softmax_bottleneck.study.plan import plan_table

    study = study_of("config.yaml")
    table = plan_table(study).set_index("experiment")
    assert table.loc["E2 NT vs ET", "jobs"] == 24 and table.loc["E2 NT vs ET", "new jobs"] == 14
    assert table.loc["total", "new jobs"] == len(study.jobs) == 283
    some = set(list(study.jobs)[:3])
    assert plan_table(study, some).set_index("experiment").loc["total", "trained"] == 3


def test_the_folder_hash_is_the_trainers_fingerprint_of_the_same_run(shared_data):
    """One run identity: the trainer's fingerprint (its resolved hyper-parameters with --set and --seed, and the
    corpus it reads) starts with the hash in the run's folder name, for every run of the small configuration."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.corpora.corpus import load_corpus
    from softmax_bottleneck.training.state import run_fingerprint

    corpora = {name: load_corpus(shared_data / folder, None) for name, folder in (("ptb", "ptb"),
                                                                                   ("wt2", "wikitext-2"))}  # fmt: skip
    study = study_of("small.yaml")
    for run in study.jobs.values():
        sets = presets.parse_overrides(run.set_arguments)
        hp = presets.resolve(run.dataset, run.variant, run.schedule, {**sets, "seed": run.seed})
        assert run_fingerprint(hp, corpora[run.dataset]).startswith(run.runid.rsplit("-", 1)[1]), run.dir
