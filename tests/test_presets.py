"""Spec §3.1 / §5 / §10.4: presets and the paper's parameter counts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from softmax_bottleneck import presets

PAPER_COUNTS = [  # spec §3.1
    ("ptb", "softmax", {}, 24_221_600),
    ("ptb", "lms_plif", {}, 24_321_600),
    ("wt2", "softmax", {}, 33_556_078),
    ("ptb", "mos", {}, 21_500_620),
    ("ptb", "moc", {}, 21_500_620),
    ("wt2", "mos", {}, 34_909_528),
    ("ptb", "mos", {"n_experts": 1}, 19_057_620),
    ("ptb", "mos", {"n_experts": 3}, 19_406_620),
    ("ptb", "mos", {"n_experts": 5}, 19_755_620),
    ("ptb", "mos", {"n_experts": 10}, 20_628_120),
    ("ptb", "mos", {"n_experts": 20}, 22_373_120),
    ("wt2", "mos", {"n_experts": 10}, 33_929_778),
    ("wt2", "mos", {"n_experts": 20}, 35_889_278),
    ("ptb", "mos_fair", {}, 17_535_200),
    ("ptb", "softmax_fair", {}, 16_350_800),
    ("ptb", "softmax_fair_large", {}, 17_560_880),
]


@pytest.mark.parametrize(("dataset", "variant", "overrides", "count"), PAPER_COUNTS)
def test_parameter_counts_equal_the_paper(dataset, variant, overrides, count):
    info = presets.describe(dataset, variant, overrides=overrides)  # also checks the built model's count
    assert info["parameters"] == count


def test_describe_cli_prints_json():
    out = subprocess.run(
        [sys.executable, "-m", "softmax_bottleneck", "describe", "--dataset", "wt2", "--variant", "gss"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    info = json.loads(out)
    assert info["parameters"] == 33_556_078
    hp = info["hyperparameters"]
    assert (hp["gss_c"], hp["gss_k"], hp["seed"], hp["batch_size"], hp["lr"]) == (-1.5, 3.0, 1881, 80, 30.0)


def test_frozen_plif_counts_its_slopes_but_does_not_train_them():
    info = presets.describe("ptb", "lms_plif_frozen")
    assert info["parameters"] == 24_321_600 and info["trainable_parameters"] == 24_221_600


def test_schedules_and_paper_values():
    assert presets.resolve("ptb", "softmax", "et")["switch_epoch"] == 200
    assert presets.resolve("ptb", "softmax", "nt")["switch_epoch"] == -1
    assert presets.resolve("wt2", "mos")["epochs"] == 500
    assert presets.resolve("wt2", "moc")["epochs"] == 1000
    mos = presets.resolve("ptb", "mos")
    assert (mos["nemb"], mos["nhid"], mos["nhidlast"], mos["n_experts"], mos["dropoutl"], mos["seed"]) == (
        280, 960, 620, 15, 0.29, 28,
    )  # fmt: skip


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="unknown variant 'sofmax'"):
        presets.resolve("ptb", "sofmax")
    with pytest.raises(ValueError, match="unknown hyper-parameter.*nembb"):
        presets.resolve("ptb", "softmax", overrides={"nembb": 3})
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        presets.resolve("ptb", "softmax", overrides={"epochs": -1})
    with pytest.raises(ValueError, match="ptb only"):
        presets.resolve("wt2", "mos_fair")
    with pytest.raises(ValueError, match="nhidlast must equal nemb"):
        presets.resolve("ptb", "ss", overrides={"nhidlast": 100})


def test_parse_overrides_types():
    parsed = presets.parse_overrides(["gss_c=-1", "epochs=3", "n_experts=null", "lr=20"])
    assert parsed == {"gss_c": -1.0, "epochs": 3, "n_experts": None, "lr": 20}
    assert isinstance(parsed["gss_c"], float)
    with pytest.raises(ValueError, match="key=value"):
        presets.parse_overrides(["epochs"])
