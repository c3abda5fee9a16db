"""The output-layer registry: one registration per layer, every list of variants derived from it."""

from __future__ import annotations

import pytest

from softmax_bottleneck import presets
from softmax_bottleneck.models.output_layers import (
    Hyperparameter,
    OutputLayer,
    RegistryError,
    output_layer,
    output_layers,
    register_output_layer,
)
from softmax_bottleneck.models.output_layers import registry as registry_module

PAPER_ORDER = ("softmax", "ss", "gss", "lms_plif", "lms_plif_frozen", "mos", "moc")  # paper Table 2 / §3


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made inside a test are dropped afterwards."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))


def test_builtin_layers_are_registered_in_the_papers_order():
    builtins = tuple(name for name, spec in output_layers().items() if spec.builtin)
    assert builtins == PAPER_ORDER


def test_every_registered_layer_is_a_variant_with_its_registration():
    for name, spec in output_layers().items():
        info = presets.variant_info(name)
        assert (info.output_layer, info.family, info.display, info.color) == (
            name,
            spec.family,
            spec.display,
            spec.color,
        )
    # the paper's layers come first, then E10's variants, then plug-ins
    assert presets.variants()[: len(PAPER_ORDER)] == PAPER_ORDER


def test_resolve_keeps_only_the_layers_own_hyper_parameters_with_defaults():
    hp = presets.resolve("ptb", "gss")
    assert (hp["gss_c"], hp["gss_k"]) == (-1.5, 2.5)  # the preset's values win over the registered defaults
    assert "n_experts" not in hp and "plif_knots" not in hp
    mos = presets.resolve("ptb", "mos", overrides={"gss_c": 1.0})  # another layer's key is dropped
    assert (mos["n_experts"], mos["dropoutl"]) == (15, 0.29) and "gss_c" not in mos
    fair = presets.resolve("ptb", "softmax_fair_large")  # mixture family, softmax layer
    assert fair["output_layer"] == "softmax" and "n_experts" not in fair


def test_parameter_count_is_base_plus_the_registered_extra_count():
    for dataset in presets.DATASETS:
        for variant in presets.variants():
            if dataset not in presets.variant_datasets(variant):
                continue
            hp = presets.resolve(dataset, variant)
            vocab = presets.VOCAB_SIZES[dataset]
            built, _ = presets.built_parameter_counts(hp, vocab)
            assert presets.parameter_count(hp, vocab) == built, (dataset, variant)


def test_a_new_layer_is_one_registration(scratch_registry, monkeypatch):
    @register_output_layer(
        "scaled_softmax",
        display="Scaled",
        family="softmax",
        hyperparameters={"scale": Hyperparameter(2.0, float, "logit scale")},
    )
    class Scaled(OutputLayer):
        def forward(self, context, weight):
            return (self.logits(context, weight) * self.scale).log_softmax(-1)

        def __init__(self, vocab_size, nemb, nhidlast, scale=2.0):
            super().__init__(vocab_size, nemb, nhidlast)
            self.scale = scale

    monkeypatch.setattr(presets, "_variant_table", presets._variant_table.__wrapped__)
    monkeypatch.setattr(presets, "layer_keys", presets.layer_keys.__wrapped__)
    assert "scaled_softmax" in presets.variants()
    hp = presets.resolve("ptb", "scaled_softmax", overrides={"scale": 3})
    assert hp["scale"] == 3.0 and isinstance(hp["scale"], float)  # declared type
    assert presets.display_name("scaled_softmax") == "Scaled"
    assert output_layer("scaled_softmax").extra_parameter_count(10, 4, 4) == 10  # the bias by default


@pytest.mark.parametrize(
    ("kwargs", "cls", "match"),
    [
        ({"display": "X", "family": "recurrent"}, OutputLayer, "family must be one of"),
        ({"display": "X", "family": "softmax"}, object, "subclass of"),
        ({"display": "", "family": "softmax"}, OutputLayer, "display name"),
        ({"display": "X", "family": "softmax", "hyperparameters": {"k": 3}}, OutputLayer, "Hyperparameter"),
    ],
)
def test_bad_registrations_name_the_layer(scratch_registry, kwargs, cls, match):
    with pytest.raises(RegistryError, match=match) as info:
        register_output_layer("bad_layer", **kwargs)(type("Bad", (cls,), {}))
    assert "bad_layer" in str(info.value)


def test_a_name_cannot_be_taken_twice(scratch_registry):
    with pytest.raises(RegistryError, match="already registered"):
        register_output_layer("softmax", display="Mine", family="softmax")(type("Mine", (OutputLayer,), {}))


def test_hyper_parameter_types_are_enforced():
    spec = Hyperparameter(1, int)
    assert spec.coerce(None, "k") == 1 and spec.coerce(4.0, "k") == 4
    with pytest.raises(ValueError, match="k must be of type int"):
        spec.coerce("abc", "k")
    with pytest.raises(ValueError, match="k must be of type int"):
        spec.coerce(True, "k")
