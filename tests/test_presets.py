"""Spec §3.1 / §5 / §10.4: presets and the paper's parameter counts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from softmax_bottleneck import presets

PAPER_COUNTS = [  # #Param of paper Table 2 and SM Tables 4, 5, 9
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
    with pytest.raises(ValueError, match="unknown hyper-parameter 'nembb'; did you mean nemb"):
        presets.resolve("ptb", "softmax", overrides={"nembb": 3})
    with pytest.raises(ValueError, match=r"epochs must be in \[1, 100000\], got -1"):
        presets.resolve("ptb", "softmax", overrides={"epochs": -1})
    with pytest.raises(ValueError, match="ptb only"):
        presets.resolve("wt2", "mos_fair")
    with pytest.raises(ValueError, match="nhidlast must equal nemb"):
        presets.resolve("ptb", "ss", overrides={"nhidlast": 100})


# ------------------------------------------------------------------------------- typed overrides ---
def test_set_values_are_parsed_by_their_declared_type():
    parsed = presets.parse_overrides(
        ["lr=1e-3", "clip=1", "gss_c=-1", "epochs=3", "n_experts=4", "train_tokens=null", "dropout=.5", "bptt=3.0"]
    )
    assert parsed == {"lr": 0.001, "clip": 1.0, "gss_c": -1.0, "epochs": 3, "n_experts": 4,
                      "train_tokens": None, "dropout": 0.5, "bptt": 3}  # fmt: skip
    assert [type(parsed[k]) for k in ("lr", "clip", "gss_c", "epochs", "bptt")] == [float, float, float, int, int]
    hp = presets.resolve("ptb", "mos", overrides=parsed)
    assert hp["lr"] == 0.001 and hp["n_experts"] == 4 and hp["train_tokens"] is None  # null: the whole split


@pytest.mark.parametrize("item", ["gss_c=null", "gss_c=", "gss_k=none", "n_experts=~"])
def test_a_layer_key_cannot_be_set_to_null(item):
    """Null used to mean "the registration default", silently beating a preset (GSS's c = −1.5 on PTB became 0.0)."""
    key = item.partition("=")[0]
    with pytest.raises(ValueError, match=rf"^{key} cannot be null \(got {item!r}\).*omit {key} to keep the preset"):
        presets.parse_overrides([item])
    with pytest.raises(ValueError, match=rf"^{key} cannot be null.*omit {key} to keep the preset's value"):
        presets.resolve("ptb", "gss" if key.startswith("gss") else "mos", overrides={key: None})
    assert presets.resolve("ptb", "gss")["gss_c"] == -1.5  # omitting the key keeps the preset


def test_describe_names_a_wrong_extra_parameter_count_in_one_line(monkeypatch, capsys):
    """A plug-in whose extra_parameter_count is wrong: one line naming the layer, not a traceback."""
    import argparse

    from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer("miscounted", display="Miscounted", family="softmax")
    class Miscounted(OutputLayer):
        def __init__(self, vocab_size, nemb, nhidlast):
            super().__init__(vocab_size, nemb, nhidlast)
            self.scale = torch.nn.Parameter(torch.ones(1))  # not counted below

        def forward(self, context, weight):
            return (self.logits(context, weight) * self.scale).log_softmax(-1)

    args = argparse.Namespace(dataset="ptb", variant="miscounted", schedule="et", overrides=[])
    with pytest.raises(SystemExit) as info:
        presets.run_cli(args)
    message = str(info.value)
    assert "\n" not in message and message.startswith("describe: output layer 'miscounted': the built model has ")
    assert "24221601 parameters but the #Param formula gives 24221600" in message
    assert "Miscounted.extra_parameter_count" in message


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("lr=abc", r"lr must be a float, got 'abc'"),
        ("clip=abc", r"clip must be a float"),
        ("lr=0", r"lr must be > 0, got 0\.0"),
        ("lr=-1", r"lr must be > 0"),
        ("lr=nan", r"lr must be a finite number"),
        ("lr=inf", r"lr must be a finite number"),
        ("lr=null", r"lr cannot be null"),
        ("clip=0", r"clip must be > 0"),
        ("epochs=0", r"epochs must be in \[1, 100000\], got 0"),
        ("epochs=2.5", r"epochs must be an int, got '2.5'"),
        ("epochs=1e3x", r"epochs must be an int"),
        ("dropout=1", r"dropout must be in \[0, 1\), got 1\.0"),
        ("wdrop=-0.1", r"wdrop must be in \[0, 1\)"),
        ("dropoutl=1.0", r"dropoutl must be in \[0, 1\)"),
        ("batch_size=0", r"batch_size must be >= 1"),
        ("small_batch_size=-2", r"small_batch_size must be >= 1"),
        ("n_experts=0", r"n_experts must be >= 1"),
        ("plif_knots=0", r"plif_knots must be >= 1"),
        ("gss_k=0", r"gss_k must be > 0"),
        ("seed=-1", r"seed must be in \[0, 4.29497e\+09\]"),
        ("train_tokens=1", r"train_tokens must be >= 2"),
        ("nembb=3", r"unknown hyper-parameter 'nembb'; did you mean nemb"),
        ("output_layer=mos", r"output_layer cannot be overridden"),
        ("schedule=nt", r"schedule cannot be overridden: use --schedule"),
        ("epochs", r"--set expects KEY=VALUE, got 'epochs'"),
        ("=3", r"--set expects KEY=VALUE"),
    ],
)
def test_bad_set_values_are_rejected_naming_the_key(item, message):
    with pytest.raises(ValueError, match=message):
        presets.parse_overrides([item])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lr": "1e-3"}, r"lr must be of type float, got '1e-3' \(YAML 1\.1 reads 1e-3 as a string"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ({"epochs": 0}, r"epochs must be in \[1, 100000\]"),
        ({"epochs": True}, r"epochs must be of type int, got True"),
        ({"n_experts": 0}, r"n_experts must be >= 1"),
        ({"clip": -0.25}, r"clip must be > 0"),
        ({"small_batch_size": 5}, r"batch_size 12 is not a multiple of small_batch_size 5"),
        ({"output_layer": "softmax"}, r"output_layer cannot be overridden"),
    ],
)
def test_resolve_checks_every_value(overrides, message):
    """Overrides from a workflow config (already YAML-parsed) get the same checks as --set."""
    with pytest.raises(ValueError, match=message):
        presets.resolve("ptb", "mos", overrides=overrides)


def test_every_preset_value_is_declared_and_valid():
    declared = presets.base_hyperparameters()
    data = presets.presets_data()
    blocks = [data["defaults"]] + [b for fam in data["families"].values() for b in fam.values()]
    blocks += [presets._variant_block(v, ds) for v in presets.variants() for ds in presets.DATASETS]
    for block in blocks:
        for key in block:
            assert key in declared or key in presets.layer_keys(), key
    for variant in presets.variants():
        for dataset in presets.variant_datasets(variant):
            for schedule in presets.SCHEDULES:
                hp = presets.resolve(dataset, variant, schedule)  # every value passes its declared check
                for key, decl in declared.items():
                    assert decl.check(hp[key], key) == hp[key]


def test_hyperparameter_schema_agrees_with_the_checks():
    jsonschema = pytest.importorskip("jsonschema")
    schema = presets.hyperparameter_schema()
    assert set(schema) == presets.known_keys()
    for key, value, ok in [("lr", 0.0, False), ("lr", 1e-3, True), ("dropout", 1.0, False), ("dropout", 0.0, True),
                           ("train_tokens", None, True), ("epochs", 0, False), ("n_experts", 2, True)]:  # fmt: skip
        valid = jsonschema.Draft202012Validator(schema[key]).is_valid(value)
        assert valid is ok, (key, value)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "softmax_bottleneck", *args], capture_output=True, text=True, timeout=120
    )


def test_describe_rejects_a_bad_set_value_in_one_line():
    done = _cli("describe", "--dataset", "ptb", "--variant", "softmax", "--set", "lr=abc")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["describe: lr must be a float, got 'abc'"]
    assert done.stdout == ""


def test_train_rejects_a_bad_set_value_before_any_work(tmp_path):
    out = tmp_path / "run"
    done = _cli("train", "--dataset", "ptb", "--variant", "softmax", "--out", str(out),
                "--data", str(tmp_path / "no-data"), "--set", "clip=abc")  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["train: clip must be a float, got 'abc'"]
    assert not out.exists()


def test_train_refuses_a_model_too_large_for_the_device_before_making_its_folder(tmp_path):
    """Before, `train --set nhid=1000000000` was refused after its run folder and lock were made: an empty folder
    stayed behind."""
    out = tmp_path / "run"
    done = _cli("train", "--dataset", "ptb", "--variant", "softmax", "--out", str(out), "--device", "cpu",
                "--data", str(tmp_path / "no-data"), "--set", "nhid=1000000000")  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("train: the model (nemb=400, nhid=1000000000, ")
    assert not out.exists()


def test_another_layers_hyper_parameter_is_refused_by_describe_and_said_by_train(tmp_path, caplog):
    """Before, `describe --variant softmax --set n_experts=5` (and bench, train) printed a Softmax as if asked for
    nothing, the key dropped in silence. describe refuses it; train, which the workflow gives its whole
    model_overrides (whose `all` block may name other layers' keys), says it in its log (bench too:
    tests/test_bench.py)."""
    from softmax_bottleneck.cli import main

    assert presets.not_owned("softmax", {"n_experts": 5, "lr": 2.0, "gss_c": 1.0}) == ["n_experts", "gss_c"]
    assert presets.not_owned("mos", {"n_experts": 5, "dropoutl": 0.1}) == []
    line = (
        "--set n_experts: variant 'softmax' has no such hyper-parameter (another output layer's; softmax's own: none)"
    )
    with pytest.raises(SystemExit) as exc:
        main(["describe", "--dataset", "ptb", "--variant", "softmax", "--set", "n_experts=5"])
    assert str(exc.value.code).startswith(f"describe: {line}")
    caplog.set_level("WARNING")
    with pytest.raises(SystemExit, match="nowhere: missing train.txt"):  # no data here: it stops after saying it
        main(["train", "--dataset", "ptb", "--variant", "softmax", "--schedule", "et", "--out", str(tmp_path / "run"),
              "--data", str(tmp_path / "nowhere"), "--set", "n_experts=5"])  # fmt: skip
    assert f"{line}, so it changes nothing (ignored)" in caplog.text
    assert not (tmp_path / "run" / "model.pt").exists()
    caplog.clear()  # train-fused: the group's shared --set and a run's own KEY=VALUE, each run said by its folder
    gss, softmax = tmp_path / "gss", tmp_path / "softmax"
    with pytest.raises(SystemExit, match="nowhere: missing train.txt"):
        main(["train-fused", "--dataset", "ptb", "--data", str(tmp_path / "nowhere"), "--set", "n_experts=5", "--run",
              "softmax", "et", "1", str(softmax), "gss_c=1.0", "--run", "gss", "et", "1", str(gss)])  # fmt: skip
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"{softmax}: --set n_experts, gss_c: variant 'softmax' has no such hyper-parameter (another output layer's;"
        " softmax's own: none), so it changes nothing (ignored)",
        f"{gss}: {presets.not_owned_note('gss', {'n_experts': 5})} (ignored)",
    ], warned
    assert "gss's own: gss_c" in warned[1]
    assert not softmax.exists() and not gss.exists()
