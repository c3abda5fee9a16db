"""Which code trained a run: this package's version and checkout, and the output layer's source (metrics.json)."""

from __future__ import annotations

import hashlib
import sys
import textwrap

import pytest
import torch

from softmax_bottleneck import __version__
from softmax_bottleneck.models.output_layers import provenance
from softmax_bottleneck.models.output_layers import registry as registry_module
from softmax_bottleneck.training import environment as env_module


def test_the_environment_names_the_package_and_the_layer_source():
    record = env_module.environment(torch.device("cpu"), output_layer="gss")
    software = record["software"]
    assert software["softmax_bottleneck"]["version"] == __version__
    git = software["softmax_bottleneck"]["git"]
    assert git is None or (isinstance(git, str) and git)
    layer = software["output_layer"]
    path = sys.modules["softmax_bottleneck.models.output_layers.gss"].__file__
    assert layer["name"] == "gss" and layer["builtin"] is True
    assert layer["source_sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert (layer["distribution"], layer["version"]) == ("softmax-bottleneck", __version__)


def test_git_describe_never_fails_without_git(monkeypatch, tmp_path):
    env_module.git_describe.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on PATH
    try:
        assert env_module.git_describe() is None
        assert env_module.software()["softmax_bottleneck"] == {"version": __version__, "git": None}
    finally:
        env_module.git_describe.cache_clear()


@pytest.fixture
def plugin_module(monkeypatch, tmp_path, request):
    """A plug-in layer ``prov`` defined in a module file of its own (its source is that file)."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "prov_layer.py"
    path.write_text(textwrap.dedent("""
        from softmax_bottleneck.models.output_layers import SoftmaxOfScores, register_output_layer

        @register_output_layer("prov", display="Prov", family="softmax")
        class Prov(SoftmaxOfScores):
            def scores(self, context, weight):
                return 2 * self.logits(context, weight)
        """))  # fmt: skip
    sys.modules.pop("prov_layer", None)
    request.addfinalizer(lambda: sys.modules.pop("prov_layer", None))
    __import__("prov_layer")
    return path


def test_a_run_trained_with_another_source_of_its_plugin_is_named(plugin_module):
    metrics = {"hyperparameters": {"output_layer": "prov"},
               "environment": env_module.environment(torch.device("cpu"), output_layer="prov")}  # fmt: skip
    recorded = metrics["environment"]["software"]["output_layer"]
    assert recorded["source_sha256"] == hashlib.sha256(plugin_module.read_bytes()).hexdigest()
    assert provenance.older_layer_source(metrics) is None  # the same source
    plugin_module.write_text(plugin_module.read_text() + "\n# a fix\n")
    assert provenance.older_layer_source(metrics) == "trained with an older source of prov"
    assert provenance.older_layer_source({"hyperparameters": {"output_layer": "prov"}}) is None  # not recorded
