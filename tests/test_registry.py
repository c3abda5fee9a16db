"""The output-layer registry: one registration per layer, every list of variants derived from it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
import textwrap

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

#: the paper's layers in the paper's order (Table 2 rows, §3): a fact of the paper, not a list to extend with a layer
PAPER_ORDER = ("softmax", "ss", "gss", "lms_plif", "lms_plif_frozen", "mos", "moc")


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

    assert "scaled_softmax" in presets.variants()  # no cache to clear: derived lists follow the registry
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


def test_a_registered_layer_is_in_every_derived_list(scratch_registry):
    """variants(), known_keys(), float_keys(), the hyper-parameter schema and variant_info() follow the registry."""
    before = presets.variants()

    @register_output_layer(
        "late_layer",
        display="Late",
        family="mixture",
        color="#123456",
        cost_proxy="mos",
        hyperparameters={
            "late_scale": Hyperparameter(1.5, float, "a float", exclusive_minimum=0.0),
            "late_order": Hyperparameter(2, int, "an int", minimum=1),
        },
    )
    class Late(OutputLayer):
        projects_context = True

    after = presets.variants()
    assert tuple(v for v in after if v != "late_layer") == before  # plug-ins sort by name: another may follow
    assert after.index("late_layer") > max(after.index(v) for v in before if presets.variant_info(v).paper)
    assert {"late_scale", "late_order"} <= presets.known_keys()
    assert "late_scale" in presets.float_keys() and "late_order" not in presets.float_keys()
    assert presets.hyperparameter_schema()["late_scale"] == {
        "type": "number",
        "exclusiveMinimum": 0.0,
        "description": "a float",
    }
    info = presets.variant_info("late_layer")
    assert (info.family, info.display, info.color, info.cost_proxy, info.paper) == (
        "mixture",
        "Late",
        "#123456",
        "mos",
        False,
    )
    assert presets.parse_overrides(["late_scale=2"]) == {"late_scale": 2.0}
    with pytest.raises(ValueError, match="late_order must be >= 1"):
        presets.parse_overrides(["late_order=0"])
    hp = presets.resolve("wt2", "late_layer")
    assert (hp["late_scale"], hp["late_order"], hp["seed"], hp["nhidlast"]) == (1.5, 2, 1881, 650)  # mixture family
    for spec in output_layers().values():  # every registered layer, in every derived list
        assert spec.name in presets.variants()
        assert set(spec.hyperparameters) <= presets.known_keys()
        assert {k for k, h in spec.hyperparameters.items() if h.type is float} <= presets.float_keys()


def test_a_layer_key_may_not_shadow_a_base_hyper_parameter(scratch_registry):
    """Refused at registration (not later, under check-layer's reload check, failing the built-ins' checks too)."""
    with pytest.raises(RegistryError, match=r"output layer 'shadow'.*lr belong to the base network.*shadow_lr"):

        @register_output_layer(
            "shadow", display="Shadow", family="softmax", hyperparameters={"lr": Hyperparameter(1.0)}
        )
        class Shadow(OutputLayer):
            pass

    assert "shadow" not in output_layers()
    assert presets.resolve("ptb", "gss")["lr"] == 20.0  # the built-ins are untouched


@pytest.mark.parametrize(
    ("name", "holder"),
    [
        ("mos_fair", r"presets.yaml's variant 'mos_fair' \(MoS†, output layer 'mos'\)"),
        ("softmax_fair", r"presets.yaml's variant 'softmax_fair' \(Softmax†, output layer 'softmax'\)"),
        ("softmax_fair_large", r"presets.yaml's variant 'softmax_fair_large' \(Softmax‡, output layer 'softmax'\)"),
        ("softmax", r"the built-in layer 'softmax' \(softmax_bottleneck.models.output_layers.softmax.Softmax\)"),
        ("mos", r"the built-in layer 'mos' \(softmax_bottleneck.models.output_layers.mixtures.MixtureOfSoftmaxes\)"),
    ],
)
def test_a_plugin_cannot_take_the_name_of_a_variant_or_layer(scratch_registry, name, holder):
    """A plug-in named like an existing variant is refused in one line naming who holds the name (before, a plug-in
    named mos_fair silently took over E10's MoS†)."""
    with pytest.raises(RegistryError, match=rf"output layer {name!r} .*already .* by {holder}; choose another name"):
        register_output_layer(name, display="Mine", family="mixture")(type("Mine", (OutputLayer,), {}))
    assert presets.variant_info("mos_fair").output_layer == "mos" and presets.display_name("mos_fair") == "MoS†"
    assert output_layers()["softmax"].builtin


def test_the_variant_table_refuses_a_layer_named_like_a_presets_variant(scratch_registry):
    """Even a registration that bypassed the decorator cannot take a presets.yaml variant's place."""
    spec = registry_module.OutputLayerSpec(name="mos_fair", cls=type("Sneaky", (OutputLayer,), {}), display="S",
                                           family="mixture")  # fmt: skip
    registry_module._REGISTRY["mos_fair"] = spec
    with pytest.raises(RegistryError, match=r"'mos_fair' .*already taken by presets.yaml's variant 'mos_fair' \(MoS†"):
        presets.variants()


# ------------------------------------------------------------------------ plug-ins loaded from entry points
@pytest.fixture
def plugins(monkeypatch, tmp_path, scratch_registry, request):
    """``plugins({"entry = module:attr": code_of_module})``: load those entry points as the installed plug-ins."""
    monkeypatch.setattr(registry_module, "_BROKEN", {})
    monkeypatch.setattr(registry_module, "_ORIGINS", {})
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(entries: dict[str, str]):
        points = []
        for line, code in entries.items():
            name, _, value = (part.strip() for part in line.partition("="))
            module = value.split(":")[0]
            (tmp_path / f"{module}.py").write_text(textwrap.dedent(code))
            sys.modules.pop(module, None)
            request.addfinalizer(lambda module=module: sys.modules.pop(module, None))
            points.append(importlib.metadata.EntryPoint(name, value, registry_module.ENTRY_POINT_GROUP))
        monkeypatch.setattr(registry_module, "_entry_points", lambda: sorted(points, key=lambda e: e.name))
        monkeypatch.setattr(registry_module, "_PLUGINS_LOADED", False)
        return tmp_path

    return install


GOOD = """
    from softmax_bottleneck.models.output_layers import SoftmaxOfScores, register_output_layer

    @register_output_layer("{name}", display="{name}", family="softmax")
    class Layer(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)
"""


def test_a_broken_plugin_stops_only_what_names_it(plugins):
    plugins({"broken = broken_mod:Layer": "import not_installed_anywhere\n",
             "fine = fine_mod:Layer": GOOD.format(name="fine")})  # fmt: skip
    reason = ("entry point 'broken' = 'broken_mod:Layer' (softmax_bottleneck.output_layers) failed to import: "
              "ModuleNotFoundError: No module named 'not_installed_anywhere'")  # fmt: skip
    assert registry_module.broken_plugins() == {"broken": reason}
    assert "fine" in presets.variants() and "broken" not in presets.variants()
    assert presets.resolve("ptb", "softmax")["output_layer"] == "softmax"  # what never names it keeps working
    for call in (lambda: output_layer("broken"), lambda: presets.variant_info("broken")):
        with pytest.raises(RegistryError) as info:
            call()
        assert str(info.value) == reason


def test_a_plugin_named_like_an_e10_variant_is_broken_and_e10_keeps_its_name(plugins):
    plugins({"mos_fair = clash_mod:Layer": GOOD.format(name="mos_fair")})
    broken = registry_module.broken_plugins()
    assert "already taken by presets.yaml's variant 'mos_fair'" in broken["mos_fair"]
    assert presets.variant_info("mos_fair").output_layer == "mos"


def test_layer_source_names_module_file_and_its_sha256(plugins):
    root = plugins({"fine = fine_mod:Layer": GOOD.format(name="fine")})
    source = registry_module.layer_source("fine")
    assert source["name"] == "fine" and source["builtin"] is False and source["class"] == "fine_mod.Layer"
    assert source["source_sha256"] == hashlib.sha256((root / "fine_mod.py").read_bytes()).hexdigest()
    builtin = registry_module.layer_source("gss")
    assert builtin["distribution"] == "softmax-bottleneck" and builtin["version"]
    assert builtin["module_file"].endswith("gss.py") and len(builtin["source_sha256"]) == 64
