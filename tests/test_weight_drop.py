"""Spec §3 step 6, §15.1: DropConnect that works on current PyTorch."""

from __future__ import annotations

import torch

from softmax_bottleneck.models.weight_drop import WeightDropLSTM


def _inputs(seq=6, batch=3, n_in=4, n_out=5):
    torch.manual_seed(0)
    x = torch.randn(seq, batch, n_in)
    h = (torch.zeros(1, batch, n_out), torch.zeros(1, batch, n_out))
    return x, h


def test_eval_equals_plain_lstm_and_train_differs():
    module = WeightDropLSTM(4, 5, 0.5)
    x, h = _inputs()
    module.eval()
    out_eval, _ = module(x, h)
    ref, _ = module.lstm(x, h)
    assert torch.equal(out_eval, ref)
    module.train()
    out_a, _ = module(x, h)
    out_b, _ = module(x, h)
    assert not torch.allclose(out_a, out_b)  # a new mask on every call
    # the first step does not see W_hh (h0 = 0), so it is unaffected by the mask
    assert torch.allclose(out_a[0], ref[0]) and not torch.allclose(out_a[1:], ref[1:])


def test_gradients_reach_raw_weight_and_train_eval_cycles_do_not_drift():
    module = WeightDropLSTM(4, 5, 0.5)
    raw = module.lstm.weight_hh_l0.detach().clone()
    x, h = _inputs()
    for _ in range(3):  # the reference WeightDrop breaks on the 2nd train→eval→train cycle (§15.1)
        module.train()
        out, _ = module(x, h)
        out.sum().backward()
        module.eval()
        module(x, h)
    assert module.lstm.weight_hh_l0.grad is not None and module.lstm.weight_hh_l0.grad.abs().sum() > 0
    assert torch.equal(module.lstm.weight_hh_l0.detach(), raw)  # no optimiser step: no drift
    assert [name for name, _ in module.named_parameters()] == [
        "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0",
    ]  # fmt: skip


def test_mask_statistics():
    module = WeightDropLSTM(4, 50, 0.5).train()
    torch.manual_seed(1)
    dropped = torch.nn.functional.dropout(module.lstm.weight_hh_l0, 0.5, True)
    kept = dropped != 0
    assert 0.4 < kept.float().mean() < 0.6
    assert torch.allclose(dropped[kept], 2 * module.lstm.weight_hh_l0[kept])
