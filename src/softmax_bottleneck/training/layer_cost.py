"""What an output layer's training step costs against Softmax's, measured on this machine (``check-layer``'s COST).

A measurement at one small size, not a projection of a paper-scale run (``bench`` measures that).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from softmax_bottleneck.models.output_layers.registry import output_layer
from softmax_bottleneck.training.conformance import Subject

# ------------------------------------------------------------------------------------------------ cost
#: the size of :func:`relative_cost`: large enough that the layer's arithmetic, not Python's overhead, is timed
#: (PTB's vocabulary is 10,000, the paper's d 400), small enough to take about a second on a CPU
COST_V, COST_NEMB, COST_PROJECTED, COST_ROWS, COST_BATCH = 2000, 64, 96, 20, 10


@dataclass(frozen=True)
class RelativeCost:
    """The layer's training step (``nll`` forward + backward) timed against Softmax's at one size: their ratio."""

    ratio: float
    layer_s: float
    softmax_s: float
    repeats: int
    size: str
    device: str

    def text(self) -> str:
        return (f"{self.ratio:.2f}× Softmax's time for nll forward + backward ({self.layer_s * 1e3:.2f} ms against "
                f"{self.softmax_s * 1e3:.2f} ms, fastest of {self.repeats}, {self.size}, {self.device})")  # fmt: skip


def relative_cost(
    name: str, device: str | torch.device = "cpu", point: dict | None = None, budget_s: float = 1.0
) -> RelativeCost:
    """Time the layer ``name`` (at ``point``) and Softmax, alternately, for about ``budget_s`` seconds: the training
    step of each output layer alone (``nll`` of :data:`COST_ROWS` × :data:`COST_BATCH` tokens, mean, backward into the
    tied weight, the context and the layer's parameters) at ``V`` = :data:`COST_V`, on one CPU thread. The ratio of the
    fastest times (the least disturbed by other work) is a measurement of this machine at this size, not a projection
    of a paper-scale run (``bench`` measures that)."""
    device = torch.device(device)
    subjects = [Subject(output_layer(name), device, point), Subject(output_layer("softmax"), device)]
    steps = []
    rng, threads = torch.get_rng_state(), torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)  # one thread: other work on the machine disturbs a multi-threaded timing most
    try:
        for subject in subjects:
            nhidlast = COST_PROJECTED if subject.spec.cls.projects_context else COST_NEMB
            layer = subject.build(vocab=COST_V, nemb=COST_NEMB, nhidlast=nhidlast).train()
            gen = torch.Generator().manual_seed(13)
            context = torch.randn(COST_ROWS, COST_BATCH, nhidlast, generator=gen).to(device).requires_grad_()
            weight = (torch.randn(COST_V, COST_NEMB, generator=gen) * 0.1).to(device).requires_grad_()
            targets = torch.randint(COST_V, (COST_ROWS, COST_BATCH), generator=gen).to(device)

            def step(layer=layer, context=context, weight=weight, targets=targets) -> float:
                start = time.perf_counter()
                layer.nll(context, weight, targets).mean().backward()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                context.grad = weight.grad = None
                layer.zero_grad(set_to_none=True)
                return time.perf_counter() - start

            step(), step()  # warm-up
            steps.append(step)
        times: list[list[float]] = [[], []]
        deadline = time.perf_counter() + budget_s
        while len(times[0]) < 3 or (time.perf_counter() < deadline and len(times[0]) < 200):
            for kept, step in zip(times, steps, strict=True):
                kept.append(step())
    finally:
        torch.set_rng_state(rng)
        torch.set_num_threads(threads)
    layer_s, softmax_s = (min(kept) for kept in times)
    size = f"V={COST_V}, nemb={COST_NEMB}, {COST_ROWS}×{COST_BATCH} tokens"
    where = f"{device}, 1 thread" if device.type == "cpu" else str(device)
    return RelativeCost(layer_s / softmax_s, layer_s, softmax_s, len(times[0]), size, where)
