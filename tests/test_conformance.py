"""``check-layer``: every registered layer passes; broken layers are rejected by the right check."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from softmax_bottleneck.models.output_layers import Hyperparameter, OutputLayer, output_layers, register_output_layer
from softmax_bottleneck.models.output_layers import registry as registry_module
from softmax_bottleneck.training.conformance import CHECKS, CheckResult, check_layer


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made inside a test are dropped afterwards."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))


@pytest.mark.parametrize("name", list(output_layers()))
def test_every_registered_layer_conforms(name):
    results = check_layer(name)
    assert [r.check for r in results] == list(CHECKS)
    failed = [f"{r.check}: {r.detail}" for r in results if r.status == "fail"]
    assert not failed, failed
    skipped = {r.check for r in results if r.status == "skip"}
    # only the comparison with log_softmax(W h + b) may be skipped, and only for layers that project the context
    assert skipped <= ({"not-softmax"} if output_layers()[name].cls.projects_context else set())


def _register(name, cls, **kwargs):
    register_output_layer(name, display=name, family="softmax", **kwargs)(cls)
    return {r.check: r for r in check_layer(name)}


def _failures(results, check, also=()):
    """The detail of ``check``'s failure; no other check fails except those in ``also``."""
    failed = {c: r.detail for c, r in results.items() if r.status == "fail"}
    assert check in failed and set(failed) <= {check, *also}, failed
    return failed[check]


class _Unnormalised(OutputLayer):
    def forward(self, context, weight):
        return self.logits(context, weight)  # forgot the log_softmax


class _Overflowing(OutputLayer):
    def forward(self, context, weight):  # softmax(l / 2) by its literal formula: exp overflows in float32 beyond ~88
        e = torch.exp(self.logits(context, weight) / 2)
        return torch.log(e / e.sum(-1, keepdim=True))


class _Temperature(OutputLayer):
    """A learned temperature the registration does not count."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.log_temperature = nn.Parameter(torch.zeros(1))

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * self.log_temperature.exp() * 0.5, dim=-1)


class _PlainSoftmax(OutputLayer):
    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight), dim=-1)


class _NoBias(OutputLayer):
    def forward(self, context, weight):
        return F.log_softmax(F.linear(context, weight) * 0.5, dim=-1)


class _NoisyEval(OutputLayer):
    def forward(self, context, weight):
        logits = self.logits(context, weight) * 0.5
        return F.log_softmax(logits + 1e-3 * torch.randn_like(logits), dim=-1)  # noise even in eval mode


class _Crashing(OutputLayer):
    def forward(self, context, weight):
        raise RuntimeError("boom")


class _RandomBuffer(OutputLayer):
    """Draws a fixed random map at construction but does not save it: reloading gives another model."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.register_buffer("shift", torch.randn(vocab_size), persistent=False)

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * 0.5 + self.shift, dim=-1)


class _WrongNll(OutputLayer):
    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * 0.5, dim=-1)

    def nll(self, context, weight, targets):
        return F.cross_entropy(self.logits(context, weight).flatten(0, -2), targets.flatten(), reduction="none").view(
            targets.shape
        )  # forgot the 0.5


class _NumpyNoise(OutputLayer):
    """Training-mode noise drawn from numpy's generator, which no torch seed reproduces."""

    def forward(self, context, weight):
        logits = self.logits(context, weight) * 0.5
        if self.training:
            logits = logits + torch.from_numpy(np.random.standard_normal(logits.shape)).to(logits) * 1e-3
        return F.log_softmax(logits, dim=-1)


class _PythonRandomNoise(OutputLayer):
    """A training-mode temperature drawn with Python's random."""

    def forward(self, context, weight):
        scale = 0.5 + (0.01 * random.random() if self.training else 0.0)
        return F.log_softmax(self.logits(context, weight) * scale, dim=-1)


class _OwnLr(OutputLayer):
    """A learned temperature at a learning rate of its own (``olr_lr``), counted in the layer's parameters."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast)
        self.log_temperature = nn.Parameter(torch.zeros(1))

    @classmethod
    def extra_parameter_count(cls, vocab_size, nemb, nhidlast, **hp):
        return int(vocab_size) + 1

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * self.log_temperature.exp() * 0.5, dim=-1)

    def own_lr_parameters(self):
        return [(self.log_temperature, "olr_lr")]


class _OwnLrFrozen(_OwnLr):
    """Asks its own learning rate for a parameter that does not train."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.log_temperature.requires_grad_(False)


class _Float32Always(OutputLayer):
    """Casts to float32 whatever it is given: the loss path's float64 comparison would be float32's."""

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight).float() * 0.5, dim=-1)


class _StepCounter(OutputLayer):
    """Keeps a count that every call changes, outside its state dict."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.steps = 0

    def forward(self, context, weight):
        self.steps += 1
        return F.log_softmax(self.logits(context, weight) * (0.5 + 0.01 * self.steps), dim=-1)


#: what the loss-path check says of randomness outside torch's generator (before: "nll differs from −forward")
OUTSIDE_TORCH = r"^two training-mode forward calls after the same torch.manual_seed differ .*outside torch's global "
OUTSIDE_TORCH += r"generator \(numpy, Python's random.*the fault is not in nll"

BROKEN = [  # (layer, the check that must reject it, its message, other checks it may fail as well)
    (_Unnormalised, "normalise", r"at logits of ±5 \(evaluation mode\) rows sum to 1 ±", {"loss-path", "shapes"}),
    (_Overflowing, "normalise", r"at logits of ±500 \(evaluation mode\) the output has \d+ non-finite values", ()),
    (_Temperature, "parameters", r"built layer has 33 parameters but _Temperature.extra_parameter_count says 32", ()),
    (_PlainSoftmax, "not-softmax", r"equals log_softmax\(W h \+ b\).*softmax_equivalent=True", ()),
    (_NoBias, "gradients", r"no gradient reaches the bias", ()),
    (_NoisyEval, "eval-deterministic", r"two evaluation-mode calls differ", {"reload", "shapes"}),
    (_RandomBuffer, "reload", r"log-probabilities after save → load differ", ()),
    (_WrongNll, "loss-path", r"nll differs from −forward\[targets\]", {"shapes"}),
    (_NumpyNoise, "loss-path", OUTSIDE_TORCH, ()),
    (_PythonRandomNoise, "loss-path", OUTSIDE_TORCH, ()),
    (_StepCounter, "loss-path", r"or keeps state that changes between calls", {"eval-deterministic", "reload"}),
    (_Float32Always, "loss-path", r"^float64 in, forward gave torch.float32 and nll torch.float32", ()),
    (_OwnLr, "parameters", r"the learning-rate key 'olr_lr', which the registration does not declare.*\(none\)", ()),
    (_OwnLrFrozen, "parameters", r"names log_temperature, which does not require grad", ()),
]


@pytest.mark.parametrize(("cls", "check", "message", "also"), BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_a_broken_layer_fails_the_right_check(scratch_registry, cls, check, message, also):
    detail = _failures(_register(f"bad_{check.replace('-', '_')}", cls), check, also)
    assert re.search(message, detail), detail


def test_a_layer_whose_own_learning_rate_is_declared_passes_and_says_it(scratch_registry):
    olr = {"olr_lr": Hyperparameter(0.01, float, "the temperature's learning rate", exclusive_minimum=0.0)}
    results = _register("own_lr", _OwnLr, hyperparameters=olr)
    assert all(r.status == "pass" for c, r in results.items() if c != "not-softmax"), results
    assert results["parameters"].detail.endswith("; own lr: log_temperature at olr_lr=0.01")


def test_a_training_whose_layer_asks_an_undeclared_learning_rate_stops_in_one_line_naming_it():
    from softmax_bottleneck.training.schedule import param_groups

    layer = _OwnLr(32, 8, 8)
    model = SimpleNamespace(output_layer=layer, parameters=layer.parameters)
    with pytest.raises(ValueError, match=r"^output layer 'own_lr': own_lr_parameters\(\) asks the learning rate 'olr"):
        param_groups(model, {"output_layer": "own_lr", "lr": 20.0})
    groups = param_groups(model, {"output_layer": "own_lr", "lr": 20.0, "olr_lr": 0.01})
    assert [g["lr"] for g in groups] == [20.0, 0.01] and groups[1]["params"] == [layer.log_temperature]


def test_overflow_is_caught_only_at_large_logits(scratch_registry):
    from softmax_bottleneck.training.conformance import SCALES

    assert SCALES == (5.0, 50.0, 500.0)
    results = _register("bad_overflow", _Overflowing)
    assert "±500" in results["normalise"].detail and "±50 " not in results["normalise"].detail


def test_a_crashing_layer_fails_without_a_traceback(scratch_registry):
    results = _register("bad_crash", _Crashing)
    assert results["build"].status == "fail" and results["build"].detail == "RuntimeError: boom"
    assert all(r.status == "skip" for c, r in results.items() if c != "build")


def test_declared_softmax_equivalence_is_verified(scratch_registry):
    results = _register("bad_equivalent", _NoBias, softmax_equivalent=True)  # declares softmax, is not
    assert results["not-softmax"].status == "fail"
    assert "declared softmax_equivalent but differs" in results["not-softmax"].detail


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_layer("mos", checks=["normalise", "eval-deterministic"])
    assert torch.equal(torch.rand(3), expected)


def _cli(*args, code: str | None = None):
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "softmax_bottleneck", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_cli_passes_a_good_layer_and_rejects_an_unknown_name():
    done = _cli("check-layer", "ss")
    assert done.returncode == 0, done.stderr
    assert "PASS  normalise" in done.stdout and "FAIL" not in done.stdout
    # then its cost, measured against Softmax's (a measurement: printed and sane, not a speed)
    cost = re.search(r"^  COST  ([0-9.]+)× Softmax's time for nll forward \+ backward \(.*fastest of (\d+), V=2000",
                     done.stdout, re.MULTILINE)  # fmt: skip
    assert cost and 0.05 < float(cost.group(1)) < 50 and int(cost.group(2)) >= 3, done.stdout
    done = _cli("check-layer", "sofmax")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"check-layer: unknown output layer 'sofmax'; registered: {', '.join(output_layers())}"
    ]


def test_cli_names_layer_and_check_of_each_failure(tmp_path):
    code = textwrap.dedent(
        """
        import sys, torch
        from softmax_bottleneck.cli import main
        from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer

        @register_output_layer("raw_logits", display="Raw", family="softmax")
        class Raw(OutputLayer):
            def forward(self, context, weight):
                return self.logits(context, weight)

        sys.exit(main(sys.argv[1:]))
        """
    )
    done = _cli("check-layer", "raw_logits", code=code)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines and all(line.startswith("check-layer: raw_logits: ") for line in lines), lines
    assert any(line.startswith("check-layer: raw_logits: normalise: at logits of ±5") for line in lines)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", list(output_layers()))
def test_every_registered_layer_conforms_on_cuda(name):
    failed = [f"{r.check}: {r.detail}" for r in check_layer(name, "cuda") if r.status == "fail"]
    assert not failed, failed


# ------------------------------------------------------------------ a layer that starts as the softmax
class _LearnedScale(OutputLayer):
    """``log_softmax(a · l)`` with ``a`` initialised to 1: the softmax at initialisation, not once ``a`` moves."""

    def __init__(self, vocab_size, nemb, nhidlast, **hp):
        super().__init__(vocab_size, nemb, nhidlast, **hp)
        self.scale = nn.Parameter(torch.ones(1))

    @classmethod
    def extra_parameter_count(cls, vocab_size, nemb, nhidlast, **hp):
        return vocab_size + 1

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight) * self.scale, dim=-1)


class _IdleParameter(_LearnedScale):
    """Owns a parameter that never reaches the output: the Softmax baseline whatever it learns."""

    def forward(self, context, weight):
        return F.log_softmax(self.logits(context, weight), dim=-1) + 0 * self.scale


def test_a_layer_that_starts_as_the_softmax_passes_not_softmax(scratch_registry):
    """Before, an identity-initialised layer failed with the advice to declare itself softmax_equivalent."""
    results = _register("learned_scale", _LearnedScale)
    assert results["not-softmax"].status == "pass", results["not-softmax"].detail
    assert "equals log_softmax(W h + b) at initialisation, differs by up to" in results["not-softmax"].detail


def test_a_layer_that_stays_the_softmax_fails_not_softmax_with_the_right_advice(scratch_registry):
    detail = _failures(_register("idle_parameter", _IdleParameter), "not-softmax", {"gradients"})
    assert "even after its own parameters move" in detail and "softmax_equivalent=True" in detail


# ------------------------------------------------------------------ the conformance stamp
def test_a_stamp_is_written_only_when_every_check_passes_and_vouches_for_that_source(tmp_path):
    from softmax_bottleneck.models.output_layers.registry import layer_source
    from softmax_bottleneck.training.conformance_stamp import conformance_stamp_ok, write_stamp

    stamp = tmp_path / "ss.json"
    ok, why = conformance_stamp_ok(stamp, "ss")
    assert not ok and why == f"ss: no conformance stamp at {stamp}; run: python -m softmax_bottleneck check-layer ss " \
        f"--stamp {stamp}"  # fmt: skip
    partial = write_stamp("ss", stamp, check_layer("ss", checks=["build", "parameters"]))
    assert partial["checks"] == {"build": "pass", "parameters": "pass"}
    assert conformance_stamp_ok(stamp, "ss")[1].startswith(f"ss: the stamp {stamp} does not record every conformance")
    written = write_stamp("ss", stamp, [CheckResult("ss", check, "pass") for check in CHECKS])
    source = layer_source("ss")
    assert {key: written[key] for key in ("name", "distribution", "version", "source_sha256")} == {
        key: source[key] for key in ("name", "distribution", "version", "source_sha256")
    }
    assert json.loads(stamp.read_text()) == written and conformance_stamp_ok(stamp, "ss") == (True, "")
    ok, why = conformance_stamp_ok(stamp, "gss")  # another layer's stamp (before: "the layer changed", name ss → gss)
    assert not ok and why.startswith(f"gss: the stamp {stamp} is another layer's ('ss'); run: "), why
    changed = dict(written, source_sha256="0" * 64)  # the plug-in's code changed since it was checked
    stamp.write_text(json.dumps(changed))
    ok, why = conformance_stamp_ok(stamp, "ss")
    assert not ok and why.startswith("ss: the layer changed since it was checked (source_sha256 '0000")
    failing = [CheckResult("ss", "build", "pass"), CheckResult("ss", "normalise", "fail", "rows do not sum to 1")]
    with pytest.raises(ValueError, match="no stamp written"):
        write_stamp("ss", tmp_path / "never.json", failing)
    assert not (tmp_path / "never.json").exists()


def test_check_layer_stamp_cli(tmp_path, capsys):
    import argparse

    from softmax_bottleneck.training.check_layer import add_cli as add_check_layer_cli
    from softmax_bottleneck.training.check_layer import run_cli as run_check_layer_cli

    parser = argparse.ArgumentParser()
    add_check_layer_cli(parser)
    stamp = tmp_path / "stamps" / "softmax.json"
    assert run_check_layer_cli(parser.parse_args(["softmax", "--stamp", str(stamp)])) == 0
    assert json.loads(stamp.read_text())["name"] == "softmax" and f"stamp written: {stamp}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--stamp takes exactly one NAME"):
        run_check_layer_cli(parser.parse_args(["softmax", "ss", "--stamp", str(stamp)]))


def test_check_layer_list_shows_a_broken_plugin_with_its_reason(monkeypatch, capsys):
    """A broken plug-in no longer stops --list (nor any command that does not name it)."""
    import argparse

    from softmax_bottleneck.training.check_layer import add_cli as add_check_layer_cli
    from softmax_bottleneck.training.check_layer import run_cli as run_check_layer_cli

    reason = "entry point 'broken' = 'broken_mod:Layer' (softmax_bottleneck.output_layers) failed to import: boom"
    registry_module.broken_plugins()  # load the real plug-ins first
    monkeypatch.setattr(registry_module, "_BROKEN", {"broken": reason})
    parser = argparse.ArgumentParser()
    add_check_layer_cli(parser)
    assert run_check_layer_cli(parser.parse_args(["--list"])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].split()[:2] == ["broken", "BROKEN"] and lines[-1].endswith(reason)
    assert any(line.startswith("softmax ") for line in lines)
    with pytest.raises(SystemExit, match=rf"^check-layer: {re.escape(reason)}$"):
        run_check_layer_cli(parser.parse_args(["broken"]))
