"""Which runs the workflow trains together (softmax_bottleneck.study.fusion): groups of one dataset, shape and set of
summaries, at most K runs, every run in at most one group; a table built alone never trains a run it does not need;
the groups follow from the configuration, not from what is trained; and fusion never changes a run's folder."""

from __future__ import annotations

import pytest
from test_study import study_of

from softmax_bottleneck.study.fusion import fused_groups, group_name, group_of_runs
from softmax_bottleneck.study.summary_records import summary_records
from softmax_bottleneck.training.fused_step import check_fusable


@pytest.mark.parametrize(("name", "k"), [("config.yaml", 8), ("config.yaml", 3), ("small.yaml", 2)])
def test_groups_hold_runs_of_one_shape_at_most_k_each_in_one_group(name, k):
    study = study_of(name, fusion={"runs_per_job": k})
    groups = fused_groups(study)
    assert groups
    seen = set()
    for group_name_, group in groups.items():
        assert 2 <= len(group.runs) <= k
        assert group.name == group_name_ == group_name(group.dataset, list(group.runs))
        assert {run.dataset for run in group.runs} == {group.dataset}
        hps = [run.hyperparameters for run in group.runs]
        check_fusable(hps, [run.dir for run in group.runs])  # raises where two runs differ in shape
        dirs = {run.dir for run in group.runs}
        assert not dirs & seen and len(dirs) == len(group.runs)
        assert dirs <= set(study.jobs)
        seen |= dirs
    assert set(group_of_runs(groups)) == seen


@pytest.mark.parametrize("name", ["config.yaml", "small.yaml"])
def test_a_summary_built_alone_trains_no_run_it_does_not_read(name):
    """Every table and figure reads whole summaries: a group that trains one run of a summary trains only runs of
    that summary."""
    study = study_of(name, fusion={"runs_per_job": 8})
    of = group_of_runs(fused_groups(study))
    groups = fused_groups(study)
    for summary, (_, records) in summary_records(study).items():
        needed = {run.dir for run, _ in records}
        trained = {r.dir for run in needed if run in of for r in groups[of[run]].runs}
        assert trained <= needed, (summary, sorted(trained - needed)[:3])


def test_the_paper_study_is_mostly_fused_and_same_seed_runs_share_a_group():
    study = study_of("config.yaml", fusion={"runs_per_job": 8})
    groups = fused_groups(study)
    fused = sum(len(g.runs) for g in groups.values())
    assert fused >= 0.8 * len(study.jobs), (fused, len(study.jobs))
    # the GSS grid (one seed, one shape): its groups are full and all of one seed, lock-step
    grid = [g for g in groups.values() if all(run.variant == "gss" and run.tag != "default" for run in g.runs)]
    assert grid and all(len({run.seed for run in g.runs}) == 1 for g in grid)


def test_fusion_off_plans_no_group_and_never_changes_a_run_folder():
    plain = study_of("config.yaml")
    assert fused_groups(plain) == {}
    assert fused_groups(study_of("config.yaml", fusion={"runs_per_job": 1})) == {}
    fused = study_of("config.yaml", fusion={"runs_per_job": 16})
    assert list(fused.jobs) == list(plain.jobs)


def test_the_same_configuration_gives_the_same_groups():
    first = fused_groups(study_of("config.yaml", fusion={"runs_per_job": 4}))
    again = fused_groups(study_of("config.yaml", fusion={"runs_per_job": 4}))
    assert {n: [r.dir for r in g.runs] for n, g in first.items()} == {
        n: [r.dir for r in g.runs] for n, g in again.items()
    }


def test_the_guides_command_plans_the_paper_study_in_fused_jobs(tmp_path):
    """docs/gpus-and-slurm.md's `--config 'fusion={runs_per_job: 8}'`, dry: 44 fused jobs, each run's `train` job
    waiting for its group's (and the 10 runs left alone trained by theirs); fusion off plans none."""
    from test_workflow import planned_jobs, snakemake

    fused = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules", "--config", "fusion={runs_per_job: 8}"))
    assert fused["train_fused"] == 44 and fused["train"] == 283, fused
    plain = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules"))
    assert "train_fused" not in plain and plain["train"] == 283


def test_the_time_left_plans_a_group_as_its_runs_and_not_their_waiting_train_jobs():
    """The workflow's record (study.job_seconds): a group's job is a training planned at its runs' seconds; the `train`
    jobs of its runs, which wait for it and do not run, are left out; a run alone keeps its `train` job."""
    from softmax_bottleneck.study.job_seconds import planned_jobs, training_seconds

    study = study_of("small.yaml")
    group = next(iter(fused_groups(study).values()))
    alone = next(run for run in study.jobs.values() if run.dir not in group_of_runs(fused_groups(study)))
    jobs = [(1, "train_fused", {"group": group.name}, 1), (4, "train", alone.wildcards, 1)]
    jobs += [(10 + i, "train", run.wildcards, 1) for i, run in enumerate(group.runs)]
    record = planned_jobs(study, jobs)
    assert [job["jobid"] for job in record] == [1, 4]
    assert record[0]["kind"] == record[1]["kind"] == "training"
    assert record[0]["planned_s"] == pytest.approx(sum(training_seconds(run) for run in group.runs), abs=0.01)
