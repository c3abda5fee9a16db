"""Initialisation in the authors' draw order: the same seed gives the authors' initial weights.

Each expected value is the authors' construction sequence written out with plain torch (KIT
``base_models/dai.py``: embedding, LSTMs, the encoder's U(−0.1, 0.1); then the top model: its decoder
``nn.Linear(d, V)``, MoS/MoC's prior and latent, the decoder's U(−0.1, 0.1), LMS-PLIF's slopes; the embedding is
tied to the decoder's weight). The golden trajectory (test_golden_trajectory.py) checks the same against the
authors' code itself.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from softmax_bottleneck import presets
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
from softmax_bottleneck.models.output_layers import registry as registry_module

V = 50
SMALL = {"nemb": 6, "nhid": 8, "plif_knots": 30, "n_experts": 3}


def _hp(variant: str) -> dict:
    size = {"nhidlast": 7} if variant in ("mos", "moc") else {}
    keys = presets.known_keys()
    return presets.resolve("ptb", variant, overrides={k: v for k, v in {**SMALL, **size}.items() if k in keys})


def _authors_base(hp: dict):
    """KIT dai.py: nn.Embedding, one nn.LSTM per layer, then the encoder's U(−0.1, 0.1) (dai.py:88)."""
    d, h, dl = hp["nemb"], hp["nhid"], hp["nhidlast"]
    sizes = [d] + [h] * (hp["nlayers"] - 1) + [dl]
    encoder = nn.Embedding(V, d)
    lstms = [nn.LSTM(i, o, 1) for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
    encoder.weight.data.uniform_(-0.1, 0.1)
    return encoder, lstms


def _ours_and_authors_base(hp: dict, seed: int):
    """This package's model and the authors' base network ``(encoder, LSTMs)``, each built from ``seed``; the random
    stream is then where the authors' top model starts drawing."""
    torch.manual_seed(seed)
    model = AWDLSTM(V, hp)
    torch.manual_seed(seed)
    encoder, lstms = _authors_base(hp)
    return model, encoder, lstms


def _assert_base(model: AWDLSTM, lstms) -> None:
    for rnn, lstm in zip(model.rnns, lstms, strict=True):
        for name, value in lstm.named_parameters():
            assert torch.equal(getattr(rnn.lstm, name), value), name


@pytest.mark.parametrize("variant", ["softmax", "ss", "gss", "lms_plif", "lms_plif_frozen"])
def test_softmax_family_replays_the_authors_construction(variant):
    hp = _hp(variant)
    model, _, lstms = _ours_and_authors_base(hp, hp["seed"])
    decoder = nn.Linear(hp["nemb"], V)  # KIT smax.py:10 (default init), then init_weights (smax.py:16-17)
    decoder.weight.data.uniform_(-0.1, 0.1)
    _assert_base(model, lstms)
    assert torch.equal(model.encoder.weight, decoder.weight)  # tied to the decoder's draw (KIT model.py:21)
    assert torch.equal(model.output_layer.bias, torch.zeros(V))
    if "plif" in variant:  # KIT plif_smax.py:26-28, after the decoder
        slopes = torch.randn(hp["plif_knots"]) * hp["plif_init_std"] + math.log(math.e - 1)
        assert torch.equal(model.output_layer.slope_raw, slopes)
        # the authors' parameter order: plif_w before the decoder's bias
        assert [n for n, _ in model.output_layer.named_parameters()] == ["slope_raw", "bias"]


@pytest.mark.parametrize("variant", ["mos", "moc"])
def test_mixtures_replay_the_authors_construction(variant):
    hp = _hp(variant)
    model, _, lstms = _ours_and_authors_base(hp, hp["seed"])
    k, d, dl = hp["n_experts"], hp["nemb"], hp["nhidlast"]
    decoder = nn.Linear(d, V)  # KIT mos.py:11-14: decoder, prior, latent; then mos.py:26
    prior = nn.Linear(dl, k, bias=False)
    latent = nn.Linear(dl, k * d)
    decoder.weight.data.uniform_(-0.1, 0.1)
    _assert_base(model, lstms)
    layer = model.output_layer
    assert torch.equal(model.encoder.weight, decoder.weight)
    assert torch.equal(layer.prior.weight, prior.weight)
    assert torch.equal(layer.latent.weight, latent.weight) and torch.equal(layer.latent.bias, latent.bias)
    assert [n for n, _ in layer.named_parameters()] == ["bias", "prior.weight", "latent.weight", "latent.bias"]


def test_the_authors_parameter_order_puts_each_raw_recurrent_weight_last():
    model = AWDLSTM(V, _hp("softmax"))
    names = [n for n, _ in model.named_parameters()]
    per_lstm = ["lstm.weight_ih_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0", "lstm.weight_hh_l0"]
    assert names == ["encoder.weight", *[f"rnns.{i}.{n}" for i in range(3) for n in per_lstm], "output_layer.bias"]


def test_a_layer_without_the_authors_draw_order_keeps_the_models_uniform_draw(monkeypatch):
    """A plug-in that knows nothing of the authors' order: the tied matrix is the model's own U(−0.1, 0.1)."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer("plain_plugin", display="Plain", family="softmax")
    class Plain(OutputLayer):
        def forward(self, context, weight):
            return F.log_softmax(self.logits(context, weight), dim=-1)

    hp = {**_hp("softmax"), "output_layer": "plain_plugin"}
    model, encoder, lstms = _ours_and_authors_base(hp, 3)
    _assert_base(model, lstms)
    assert torch.equal(model.encoder.weight, encoder.weight)
    assert model.encoder.weight.abs().max() <= 0.1
    assert model.output_layer.take_tied_init() is None


@pytest.mark.parametrize("variant", ["softmax", "lms_plif", "mos"])
def test_construction_on_the_meta_device_counts_the_same_parameters(variant):
    hp = _hp(variant)
    with torch.device("meta"):
        meta = AWDLSTM(V, hp)
    real = AWDLSTM(V, hp)
    assert meta.encoder.weight.is_meta
    assert [(n, p.shape) for n, p in meta.named_parameters()] == [(n, p.shape) for n, p in real.named_parameters()]
    assert sum(p.numel() for p in real.parameters()) == presets.parameter_count(hp, V)
