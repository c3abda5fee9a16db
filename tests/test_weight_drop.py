"""Spec §3 step 6, §15.1: DropConnect that works on current PyTorch."""

from __future__ import annotations

import pytest
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
    # the authors' parameter order (their WeightDrop re-registers the raw weight last): clip_grad_norm_'s order
    assert [name for name, _ in module.named_parameters()] == [
        "lstm.weight_ih_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0", "lstm.weight_hh_l0",
    ]  # fmt: skip


def test_mask_statistics():
    module = WeightDropLSTM(4, 50, 0.5).train()
    torch.manual_seed(1)
    dropped = torch.nn.functional.dropout(module.lstm.weight_hh_l0, 0.5, True)
    kept = dropped != 0
    assert 0.4 < kept.float().mean() < 0.6
    assert torch.allclose(dropped[kept], 2 * module.lstm.weight_hh_l0[kept])


# --------------------------------------------------------------------------- the same checks on every device
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, needs_cuda])]


def _stock_copy(module: WeightDropLSTM, weight_hh: torch.Tensor) -> torch.nn.LSTM:
    """A plain ``nn.LSTM`` with ``module``'s weights, ``weight_hh_l0`` replaced by ``weight_hh``."""
    stock = torch.nn.LSTM(module.lstm.input_size, module.hidden_size).to(weight_hh.device)
    with torch.no_grad():
        for name, param in module.lstm.named_parameters():
            getattr(stock, name).copy_(weight_hh if name == "weight_hh_l0" else param)
    return stock


@pytest.mark.parametrize("device", DEVICES)
def test_training_output_and_gradients_equal_a_stock_lstm_with_the_dropped_weight(device):
    torch.manual_seed(0)
    module = WeightDropLSTM(30, 40, 0.5).to(device).train()
    x = torch.randn(12, 3, 30, device=device)
    h = (torch.zeros(1, 3, 40, device=device), torch.zeros(1, 3, 40, device=device))
    torch.manual_seed(7)
    out, _ = module(x, h)
    torch.manual_seed(7)  # the same mask: the dropout of weight_hh_l0 is the forward's first random draw
    dropped = torch.nn.functional.dropout(module.lstm.weight_hh_l0.detach(), 0.5, True)
    stock = _stock_copy(module, dropped)
    ref, _ = stock(x, h)
    assert torch.allclose(out, ref, atol=1e-6, rtol=1e-5)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    ref.backward(grad_out)
    kept = (dropped != 0).float()
    expected = stock.weight_hh_l0.grad * kept / 0.5  # d dropped / d raw = mask / (1 - p)
    assert torch.allclose(module.lstm.weight_hh_l0.grad, expected, atol=1e-6, rtol=1e-5)
    assert torch.allclose(module.lstm.weight_ih_l0.grad, stock.weight_ih_l0.grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_eval_mode_uses_the_raw_weight(device):
    torch.manual_seed(0)
    module = WeightDropLSTM(30, 40, 0.5).to(device).eval()
    x = torch.randn(12, 3, 30, device=device)
    h = (torch.zeros(1, 3, 40, device=device), torch.zeros(1, 3, 40, device=device))
    with torch.no_grad():
        out, _ = module(x, h)
        ref, _ = _stock_copy(module, module.lstm.weight_hh_l0.detach())(x, h)
    assert torch.allclose(out, ref, atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
@needs_cuda
def test_memory_stays_flat_over_many_training_calls_on_cuda():
    module = WeightDropLSTM(400, 1150, 0.5).cuda().train()
    x = torch.randn(70, 20, 400, device="cuda")
    h = (torch.zeros(1, 20, 1150, device="cuda"), torch.zeros(1, 20, 1150, device="cuda"))

    def call():
        module.zero_grad(set_to_none=True)
        out, _ = module(x, h)
        out.sum().backward()

    for _ in range(5):  # warm-up: cuDNN workspaces, caching allocator
        call()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(200):
        call()
    torch.cuda.synchronize()
    growth = torch.cuda.memory_allocated() - before
    assert growth <= 1 << 20, f"allocated memory grew by {growth} bytes over 200 calls"
    peak_first = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(200):
        call()
    assert torch.cuda.max_memory_allocated() <= peak_first + (1 << 20)  # no per-call compaction copies piling up
