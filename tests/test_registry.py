"""The output-layer registry: one registration per layer, every list of variants derived from it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
import textwrap
from pathlib import Path

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

REPO = Path(__file__).resolve().parent.parent
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


def test_a_float_default_written_as_an_int_is_said_once_at_registration(scratch_registry, monkeypatch, caplog):
    """``Hyperparameter(2, float)`` resolves to the int 2, and a run's identity holds the value as written: writing
    ``2.0`` later names its runs anew and trains them again. Said in one warning line naming the layer and the key."""
    monkeypatch.setattr(registry_module, "_WARNINGS", [])
    spec = {"tempered_t": Hyperparameter(2, float, "temperature"), "tempered_e": Hyperparameter(0.5, float, "floor")}
    register_output_layer("tempered", display="Tempered", family="softmax", hyperparameters=spec)(
        type("Tempered", (OutputLayer,), {})
    )
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "tempered" in r.getMessage()]
    assert len(lines) == 1 and lines == registry_module.plugin_warnings()
    assert "output layer 'tempered'" in lines[0] and "'tempered_t', a float, has its default written 2" in lines[0]
    assert "writing 2.0 later trains its runs again" in lines[0]


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


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (Hyperparameter("a", float), "its default 'a' is not a float"),
        (Hyperparameter(-1.0, float, minimum=0.0), "its default -1.0 is not >= 0"),
        (Hyperparameter(1.0, float, minimum=5.0, maximum=0.0), r"its range \(in \[5, 0\]\) holds no value"),
        (Hyperparameter(1, int, exclusive_minimum=1, maximum=1), r"its range \(in \(1, 1\]\) holds no value"),
        (Hyperparameter(True, int), "its default True is not an int"),
        (Hyperparameter(None, float), "its default is None: give a value, or declare it nullable=True"),
        (Hyperparameter("x", str, minimum=1), r"a str has no range \(minimum given\)"),
        (Hyperparameter(1.0, float, maximum=float("inf")), "maximum must be a finite number, got inf"),
        (Hyperparameter([1], list), "its type must be one of float, int, bool, str; got 'list'"),
    ],
)
def test_a_hyper_parameter_declared_wrongly_is_refused_at_registration(scratch_registry, declared, problem):
    """Before, such a layer registered and was listed healthy; its default failed later, at describe, check-layer or
    train (a default 'a' said "YAML 1.1 reads 1e-3 as a string", though no YAML was read)."""
    with pytest.raises(RegistryError, match=rf"^output layer 'bad_layer' \(.*\): hyper-parameter 'bad_x': {problem}$"):
        register_output_layer("bad_layer", display="Bad", family="softmax", hyperparameters={"bad_x": declared})(
            type("Bad", (OutputLayer,), {})
        )
    assert "bad_layer" not in output_layers()
    for fine in (Hyperparameter(None, float, nullable=True), Hyperparameter(2, float, exclusive_minimum=0.0)):
        assert fine.declaration_problem() is None


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


def test_a_layer_key_another_layer_declares_otherwise_is_refused(scratch_registry):
    """Before, the first layer's declaration checked every configuration's value: MoS's n_experts (integer >= 1,
    default 15) refused n_experts=0.5 for a layer whose n_experts is a float in (0, 1)."""
    with pytest.raises(
        RegistryError,
        match=r"^output layer 'share' \(.*\): hyper-parameter 'n_experts' is declared "
        r"otherwise by the built-in layer 'mos' \(.*\); rename it in 'share' \(e\.g\. share_n_experts\)$",
    ):

        @register_output_layer(
            "share",
            display="Share",
            family="mixture",
            hyperparameters={"n_experts": Hyperparameter(0.5, float, minimum=0.0, maximum=1.0)},
        )
        class Share(OutputLayer):
            pass

    assert "share" not in output_layers()
    alike = Hyperparameter(15, int, help="my own words", minimum=1)
    assert alike.help != output_layers()["mos"].hyperparameters["n_experts"].help

    @register_output_layer("alike", display="Alike", family="mixture", hyperparameters={"n_experts": alike})
    class Alike(OutputLayer):
        pass

    assert "alike" in output_layers()  # declared alike (the help line aside): the two layers share the name
    assert presets.resolve("ptb", "alike", overrides={"n_experts": 3})["n_experts"] == 3


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
    for store in ("_BROKEN", "_ORIGINS", "_NAMED", "_WARNINGS"):
        monkeypatch.setattr(registry_module, store, type(getattr(registry_module, store))())
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


def test_a_broken_plugins_message_is_one_line_a_terminal_does_not_obey(plugins):
    """Before, ``check-layer --list`` printed a plug-in's exception as it was: its line breaks and escape sequences
    (a cleared screen, a window title) reached the terminal."""
    plugins({"noisy = noisy_mod:Layer": 'raise RuntimeError("boom\\n\\x1b[2J\\x1b]0;title\\x07 second line")\n'})
    reason = registry_module.broken_plugins()["noisy"]
    assert reason.endswith("failed to import: RuntimeError: boom [2J ]0;title second line"), reason
    assert reason.isprintable()


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


# ------------------------------------------------------------------------ one registration per name
TWICE = """
    from softmax_bottleneck.models.output_layers import SoftmaxOfScores, register_output_layer

    @register_output_layer("twice", display="Twice", family="softmax")
    class First(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)

    {second}
"""
SECOND_CLASS = """@register_output_layer("twice", display="Twice", family="softmax")
    class Second(First):
        pass"""
SAME_CLASS_AGAIN = 'register_output_layer("twice", display="Twice again", family="softmax")(First)'


def _refused_everywhere(name: str, reason_part: str):
    """``name`` is in no list and every place that loads the registry refuses it in one line giving the reason."""
    from softmax_bottleneck.study import config as study_config

    assert name not in output_layers() and name not in presets.variants()
    for load in (lambda: output_layer(name), lambda: presets.variant_info(name), lambda: presets.describe("ptb", name)):
        with pytest.raises(RegistryError, match=reason_part) as info:
            load()
        assert "\n" not in str(info.value)
    config = study_config.read(REPO / "config" / "small.yaml")
    config["experiments"]["main"]["variants"].append(name)
    with pytest.raises(study_config.ConfigError, match=rf"experiments/main/variants: variant '{name}' is a broken"):
        study_config.check(config)


@pytest.mark.parametrize("second", [SECOND_CLASS, SAME_CLASS_AGAIN], ids=["two classes", "one class twice"])
def test_a_plugin_registering_one_name_twice_is_refused_wherever_the_registry_loads(plugins, second):
    """Before, the first registration stayed: describe and train used it, only check-layer refused the name."""
    plugins({"twice = twice_mod:First": TWICE.format(second=second)})
    layer = r"output layer 'twice' \(twice_mod\.(Second|First)\): (the name is already registered|registered twice)"
    refused = r"entry point 'twice' = 'twice_mod:First' \(softmax_bottleneck.output_layers\) is refused: "
    _refused_everywhere("twice", refused + layer)
    assert presets.resolve("ptb", "softmax")["output_layer"] == "softmax"  # what never names it keeps working


def test_two_entry_points_of_one_layer_are_refused(plugins):
    layer = GOOD.format(name="fine")
    plugins({"fine = fine_mod:Layer": layer, "fine_again = fine_mod:Layer": layer})
    again = r"and again \(entry point 'fine_again' = 'fine_mod:Layer' registers it too\)"
    _refused_everywhere(
        "fine", r"output layer 'fine' is registered twice: by entry point 'fine' = 'fine_mod:Layer' " + again
    )
    assert set(registry_module.broken_plugins()) == {"fine", "fine_again"}


def test_two_plugins_under_one_name_are_both_refused(plugins):
    plugins({"a_layer = a_mod:Layer": GOOD.format(name="shared"), "b_layer = b_mod:Layer": GOOD.format(name="shared")})
    _refused_everywhere(
        "shared", r"output layer 'shared' is registered twice: by entry point 'a_layer' = 'a_mod:Layer'"
    )


DECLARES = """
    from softmax_bottleneck.models.output_layers import Hyperparameter, SoftmaxOfScores, register_output_layer

    @register_output_layer("{name}", display="{name}", family="softmax",
                           hyperparameters={{"powsm_a": Hyperparameter({default}, float, minimum=0.0)}})
    class Layer(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)
"""


@pytest.mark.parametrize("newcomer", ["bad", "zzz"])
def test_two_plugins_declaring_one_key_otherwise_are_both_refused_whatever_their_order(plugins, newcomer):
    """Before, which plug-in was refused depended on the order of the entry points' names: a newly installed
    plug-in named `bad` broke `powsm`, trained and working, while one named `zzz` was itself refused."""
    plugins({"powsm = powsm_mod:Layer": DECLARES.format(name="powsm", default=1.0),
             f"{newcomer} = new_mod:Layer": DECLARES.format(name=newcomer, default=2.0),
             "fine = fine_mod:Layer": GOOD.format(name="fine")})  # fmt: skip
    broken = registry_module.broken_plugins()
    assert {"powsm", newcomer} <= set(broken) and "fine" not in broken
    hint = f"rename it in '{newcomer}' (e.g. {newcomer}_a)"  # powsm_a is powsm's: the other layer renames it
    for name in ("powsm", newcomer):
        _refused_everywhere(name, "hyper-parameter 'powsm_a' is declared otherwise by the plug-in layer")
        assert hint in broken[name], broken[name]
    assert "fine" in output_layers()


TWO_WITH_A_KEY = """
    from softmax_bottleneck.models.output_layers import Hyperparameter, SoftmaxOfScores, register_output_layer

    @register_output_layer("noisysm", display="noisysm", family="softmax")
    class Noisy(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)

    @register_output_layer("tempsm", display="tempsm", family="softmax",
                           hyperparameters={"powsm_a": Hyperparameter(1.0, float, minimum=0.0)})
    class Temp(SoftmaxOfScores):
        def scores(self, context, weight):
            return 3 * self.logits(context, weight)
"""


def test_a_module_that_failed_for_one_entry_point_is_not_imported_again_for_another(plugins):
    """Before, the first entry point's import failed (its key declared otherwise by ``c_share``, which it withdrew),
    the second imported the module again, now without the clash: ``tempsm`` and ``noisysm`` worked while
    ``check-layer --list`` also listed ``noisysm`` BROKEN, and a warning said it 'keeps meaning' its own class."""
    plugins({"c_share = share_mod:Layer": DECLARES.format(name="c_share", default=2.0),
             "noisysm = temp_mod:Noisy": TWO_WITH_A_KEY, "tempsm = temp_mod:Temp": TWO_WITH_A_KEY})  # fmt: skip
    broken = registry_module.broken_plugins()
    assert {"c_share", "noisysm", "tempsm"} <= set(broken)
    assert "its module temp_mod failed to load for entry point 'noisysm'" in broken["tempsm"]
    assert not {"c_share", "noisysm", "tempsm"} & set(output_layers())
    assert registry_module.plugin_warnings() == []


def test_a_plugin_named_like_a_preset_variant_leaves_the_shipped_configs_loadable(plugins):
    """A plug-in named mos_fair is refused; the paper's and the small configuration, which name E10's mos_fair, still
    load and plan (before: "experiments/fair/variants: variant 'mos_fair' is a broken plug-in")."""
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study

    plugins({"mos_fair = clash_mod:Layer": GOOD.format(name="mos_fair")})
    assert "already taken by presets.yaml's variant 'mos_fair'" in registry_module.broken_plugins()["mos_fair"]
    for name in ("config.yaml", "small.yaml"):
        study = Study(study_config.check(study_config.read(REPO / "config" / name)))
        fair = [run for run in study.experiments["fair"] if run.variant == "mos_fair"]
        assert fair and all(run.hyperparameters["output_layer"] == "mos" for run in fair)


# ------------------------------------------------------------------------ colours
def test_ciede2000_matches_the_published_test_pairs():
    """Sharma, Wu & Dalal (2005), Table 1: pairs 1, 7, 17, 25, 13 and 33, ΔE₀₀ to 4 decimals."""
    from softmax_bottleneck.models.output_layers.colours import ciede2000, to_lab

    pairs = [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
        ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0011), 7.2195),
        ((90.8027, -2.0831, 1.441), (91.1528, -1.6435, 0.0447), 1.4441),
    ]
    for lab1, lab2, expected in pairs:
        assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=5e-5)
        assert ciede2000(lab2, lab1) == pytest.approx(expected, abs=5e-5)
    assert to_lab("#ffffff") == pytest.approx((100.0, 0.0, 0.0), abs=1e-3)
    assert to_lab("#ff0000") == pytest.approx((53.2408, 80.0925, 67.2032), abs=1e-3)


def test_a_colour_too_close_to_another_variants_is_refused(scratch_registry):
    """Before, a colour a shade off MoS's was taken silently: the two were indistinguishable in Figure 7."""
    with pytest.raises(RegistryError, match=r"output layer 'lookalike' .*color '#9568bd' is too close to '#9467bd' of "
                                            r"layer 'mos' \(MoS\) \(CIEDE2000 ΔE = 0\.\d < 10"):  # fmt: skip
        register_output_layer("lookalike", display="L", family="softmax", color="#9568bd")(
            type("L", (OutputLayer,), {})
        )
    with pytest.raises(RegistryError, match=r"too close to '#7f7f7f' of presets.yaml's variant 'mos_fair' \(MoS†\)"):
        register_output_layer("greyish", display="G", family="softmax", color="#808080")(type("G", (OutputLayer,), {}))
    with pytest.raises(RegistryError, match=r"color 'not-a-colour' is not a colour"):
        register_output_layer("nocolour", display="N", family="softmax", color="not-a-colour")(
            type("N", (OutputLayer,), {})
        )
    assert {"lookalike", "greyish", "nocolour"}.isdisjoint(output_layers())
    register_output_layer("distinct", display="D", family="softmax", color="#000000")(type("D", (OutputLayer,), {}))
    assert output_layers()["distinct"].color == "#000000"


def test_the_study_colours_are_far_apart_and_listed_in_the_docs():
    import itertools

    from softmax_bottleneck.models.output_layers.colours import MIN_DELTA_E, delta_e, to_hex

    colours = {v: presets.variant_info(v).color for v in presets.variants() if presets.variant_info(v).paper}
    assert all(colours.values())
    for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
        assert delta_e(ca, cb) >= MIN_DELTA_E, (a, b)
    docs = (REPO / "docs" / "adding-an-output-layer.md").read_text(encoding="utf-8")
    for variant, colour in colours.items():
        assert f"`{to_hex(colour)}`" in docs and f"`{variant}`" in docs, variant


# ------------------------------------------------------------------------ a name or a label another variant holds
@pytest.mark.parametrize(
    ("entry", "name"), [("ss = mine_mod:Layer", "ss"), ("mine = mine_mod:Layer", "ss"), ("fair = mine_mod:Layer",
                                                                                           "mos_fair")],
)  # fmt: skip
def test_a_plugin_named_like_another_variant_is_said_at_every_load(plugins, caplog, entry, name):
    """Before, an entry point ``ss`` registering ``ss`` was refused silently: check-layer --list, describe and the
    workflow all used the built-in SigSoftmax under the user's name."""
    plugins({entry: GOOD.format(name=name)})
    with caplog.at_level("WARNING", logger=registry_module.__name__):
        warnings = registry_module.plugin_warnings()
    assert len(warnings) == 1 and "\n" not in warnings[0] and caplog.messages == warnings
    holder = "the built-in layer" if name == "ss" else "presets.yaml's variant"
    assert warnings[0].startswith(f"entry point {entry.split(' =')[0]!r} = 'mine_mod:Layer'")
    assert f"is refused: output layer {name!r} (mine_mod.Layer)" in warnings[0]
    assert warnings[0].endswith(f"; {name!r} keeps meaning {holder}, not this plug-in")
    assert presets.variant_info(name).paper  # the shipped variant keeps its name, and the line says so
    registry_module.plugin_warnings()
    assert len(caplog.messages) == 1  # said once per process, when the plug-ins load


def test_a_plugin_that_fails_under_a_free_name_warns_nobody(plugins, caplog):
    """A broken plug-in whose name nothing else holds fails where it is named, and only there."""
    plugins({"broken = broken_mod:Layer": "import not_installed_anywhere\n"})
    with caplog.at_level("WARNING", logger=registry_module.__name__):
        assert registry_module.plugin_warnings() == [] and not caplog.messages


@pytest.mark.parametrize(
    ("display", "match"),
    [
        ("SS", r"display 'SS' is already 'SS', the label of the built-in layer 'ss' \(softmax_bottleneck"),
        ("moS", r"display 'moS' is already 'MoS', the label of the built-in layer 'mos'"),
        ("MoS†", r"display 'MoS†' is already 'MoS†', the label of presets.yaml's variant 'mos_fair'"),
        ("SS b", r"display 'SS b' must be a letter then letters, digits, '_', '\+', '-', '†' or '‡'"),
        ("$x$", r"display '\$x\$' must be"),
    ],
)
def test_a_label_another_variant_has_or_no_table_takes_is_refused(scratch_registry, display, match):
    """Before, a display "SS" gave Table 2 two "SS" rows, and "SS+b" was taken here but refused as a top-5 key."""
    with pytest.raises(RegistryError, match=rf"^output layer 'mine' \(test_registry\.Mine\): {match}"):
        register_output_layer("mine", display=display, family="softmax")(type("Mine", (OutputLayer,), {}))
    assert "mine" not in output_layers()


def test_every_label_the_registry_takes_keys_a_top5_model(scratch_registry):
    """A display name is a top-5 model's key in a configuration (a star after it: NT-ASGD): one pattern for both."""
    from softmax_bottleneck.study import config as study_config

    schema = study_config.read_schema()
    top5 = schema["properties"]["analysis"]["properties"]["top5"]["properties"]["models"]["propertyNames"]["pattern"]
    assert top5 == registry_module.DISPLAY.pattern.removesuffix("$") + "[*]*$"
    register_output_layer("mine", display="SS+b", family="softmax")(
        type("Mine", (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
    )
    config = study_config.read(REPO / "config" / "small.yaml")
    config["analysis"]["top5"]["models"].update({"SS+b": {"variant": "mine", "schedule": "et"},
                                                 "SS+b*": {"variant": "mine", "schedule": "nt"}})  # fmt: skip
    study_config.check(config)
    for spec in output_layers().values():
        assert registry_module.DISPLAY.match(spec.display), spec.display


# ------------------------------------------------------------------------ several layers in one module
MULTI = """
    from softmax_bottleneck.models.output_layers import SoftmaxOfScores, register_output_layer

    @register_output_layer("multi_one", display="One", family="softmax")
    class One(SoftmaxOfScores):
        def scores(self, context, weight):
            return 2 * self.logits(context, weight)

    @register_output_layer("multi_two", display="Two", family="softmax")
    class Two(SoftmaxOfScores):
        def scores(self, context, weight):
            return 3 * self.logits(context, weight)
"""


def test_several_layers_of_one_module_each_behind_its_entry_point(plugins):
    """Before, the first entry point's import registered both and the second was BROKEN: "registered twice"."""
    plugins({"multi_one = multi_mod:One": MULTI, "multi_two = multi_mod:Two": MULTI})
    assert registry_module.broken_plugins() == {} and registry_module.plugin_warnings() == []
    assert {"multi_one", "multi_two"} <= set(output_layers())
    assert {name: registry_module._ORIGINS[name].name for name in ("multi_one", "multi_two")} == {
        "multi_one": "multi_one",
        "multi_two": "multi_two",
    }  # each registration is its own entry point's
    assert registry_module.layer_source("multi_two")["class"] == "multi_mod.Two"


def test_one_module_behind_one_entry_point_registers_all_its_layers(plugins):
    plugins({"multi = multi_mod": MULTI})
    assert registry_module.broken_plugins() == {} and {"multi_one", "multi_two"} <= set(output_layers())


def test_a_builtin_layers_keyword_defaults_are_its_declared_defaults():
    """A declared default is the one fact: a layer built by hand (``PLIF(V, d, d')``) gets the value the registry
    would give it, for every declared hyper-parameter its ``__init__`` takes."""
    import inspect

    checked = 0
    for spec in output_layers().values():
        if not spec.builtin:
            continue
        params = inspect.signature(spec.cls.__init__).parameters
        for key, declared in spec.hyperparameters.items():
            if key in params and params[key].default is not inspect.Parameter.empty:
                assert params[key].default == declared.default, (spec.name, key)
                checked += 1
    assert checked == 14  # GSS 2, LMS-PLIF and its frozen ablation 4 each, MoS and MoC 2 each


@pytest.mark.parametrize(
    ("declared", "value"),
    [(Hyperparameter(0.5, float, "f"), v) for v in (0.1, 1e-05, 1 / 3, 2.5e300, -0.0, 3.0)]
    + [(Hyperparameter(1, int, "i"), v) for v in (0, 7, -12, 10**15)]
    + [(Hyperparameter(True, bool, "b"), v) for v in (True, False)]
    + [(Hyperparameter("a", str, "s"), v) for v in ("tanh", "x-y")]
    + [(Hyperparameter(None, float, "n", nullable=True), None)],
)
def test_a_value_written_as_text_reads_back_the_same(declared, value):
    """``format_value`` writes what ``Hyperparameter.parse`` reads back, to the last bit of a float (a run's tag, its
    ``--set`` arguments and a ``check-layer --point`` are written with it)."""
    from softmax_bottleneck.models.output_layers.hyperparameters import format_value

    back = declared.parse(format_value(value), "key")
    assert back == value and type(back) is type(value)
    assert value is None or str(back) == str(value)  # -0.0 keeps its sign


def test_a_check_layer_point_written_as_an_argument_reads_back_the_same():
    """The stamp's hint and the workflow write each ``check-layer --point`` with ``point_argument``; ``check-layer``
    parses it back to the same point, to the last bit of each float."""
    from softmax_bottleneck.training.conformance import parse_point, point_argument

    point = {"plif_knots": 1000, "plif_t": 1 / 3, "plif_init_std": 1e-05, "plif_lr": 0.02}
    back = parse_point("lms_plif", point_argument(point))
    assert back == point and [type(v) for v in back.values()] == [type(v) for v in point.values()]
