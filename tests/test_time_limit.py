"""The partition's time limit of the profile (``set-resources: train: max_runtime:``) in whole minutes: as an integer,
or in SLURM's own formats, and one line for anything else, through the workflow too."""

from __future__ import annotations

import pytest
from test_workflow import planned_jobs, snakemake

from softmax_bottleneck.cluster.time_limit import time_limit_minutes


@pytest.mark.parametrize(
    ("value", "minutes"),
    [(1440, 1440), ("1440", 1440), ("1-00:00:00", 1440), ("2-12", 3600), ("2-12:30", 3630), ("24:00:00", 1440),
     ("23:59:59", 1439), ("90:30", 90), ("7-00:00:00", 10_080), (" 30 ", 30)],
)  # fmt: skip
def test_minutes_and_slurms_formats(value, minutes):
    assert time_limit_minutes(value) == minutes


@pytest.mark.parametrize("value", ["infinite", "UNLIMITED", "24h", "1440.5", "1-", "-5", "", 0, "0", "0:59", True])
def test_anything_else_is_refused_saying_what_is_expected(value):
    with pytest.raises(ValueError, match="expected") as err:
        time_limit_minutes(value)
    if str(value).lower() in ("infinite", "unlimited"):
        assert "give the longest time one job may hold a GPU, e.g. 1440" in str(err.value)


def test_the_workflow_reads_sinfos_format_and_names_a_bad_value_in_one_line(tmp_path):
    ok = snakemake(tmp_path, "table3", "-n", "--quiet", "rules", "--set-resources", "train:max_runtime=1-00:00:00",
                   "--config", "allow_cpu_training=true")  # fmt: skip
    assert planned_jobs(ok)["train"] == 22
    bad = snakemake(tmp_path, "table3", "-n", "--set-resources", "train:max_runtime=infinite")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "set-resources: train: max_runtime: 'infinite': expected the partition's time limit in whole minutes" in (
        bad.stdout + bad.stderr
    )


def test_a_runtime_given_to_train_is_noted_as_replacing_every_estimate(tmp_path):
    """docs/cluster.md says not to give `train` a runtime in set-resources; before, one was taken without a word."""
    note = "note: set-resources: train: runtime replaces every training's own time estimate with one number"
    given = snakemake(tmp_path, "table3", "-n", "--quiet", "rules", "--set-resources", "train:runtime=600",
                      "--config", "allow_cpu_training=true")  # fmt: skip
    assert given.returncode == 0 and note in given.stderr
    plain = snakemake(tmp_path, "table3", "-n", "--quiet", "rules", "--config", "allow_cpu_training=true")
    assert plain.returncode == 0 and note not in plain.stderr
