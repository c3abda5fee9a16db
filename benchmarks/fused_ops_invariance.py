"""Which operation of the batched fused recurrence (``models/fused_lstm.py``) gives a run other bits in a group of K
than alone? Each operation at the study's shapes (the LSTMs' hidden sizes at the training chunk's columns, the
validation's and the test's), with one run's operands in slot 0 and in slot K − 1 of K (the other runs' operands
random), against the same run's result at K = 1: equal bit for bit, and the largest difference. Then one whole layer
(``fused_lstm_layer``, forward and backward over ``bptt`` steps) the same way, batched (the GPU's mode) and run by run
(a control: its shapes do not depend on K).

cuBLAS may choose another kernel for another batch count (split-K sums a dot product in another order), and a
reduction's plan may depend on its output's size; ``benchmarks/fused_invariance.py`` asks whether whole updates
depend on K, this script says which operation would be the cause. Rows are written as they finish
(``fused-ops-invariance.md`` and ``.json`` in ``--out``)::

    python benchmarks/fused_ops_invariance.py --device cuda --groups 2,4,8,16,32 --out /tmp/fused
    python benchmarks/fused_ops_invariance.py --device cpu --groups 2,4 --models ptb/softmax --set nemb=16 \\
        --set nhid=32 --set nhidlast=16 --set bptt=5 --out /tmp/fused
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.models.fused_lstm import _cell, fused_lstm_layer  # noqa: E402
from softmax_bottleneck.training.environment import resolve_device  # noqa: E402

Operation = tuple[dict[str, tuple[int, ...]], Callable[[dict[str, torch.Tensor]], torch.Tensor]]


def operations(columns: int, hidden: int) -> dict[str, Operation]:
    """name -> (one run's operand shapes, the operation on the K runs' stacked operands → [K, ...]), as the fused
    recurrence and its backward pass call them (autograd of ``baddbmm(b, h, Wᵀ)``: ``g W`` and ``hᵀ g``)."""
    gates = 4 * hidden
    return {
        "h W_hhᵀ + b_hh (baddbmm)": (
            {"b": (1, gates), "h": (columns, hidden), "w": (gates, hidden)},
            lambda o: torch.baddbmm(o["b"], o["h"], o["w"].transpose(1, 2)),
        ),
        "gradient to h (bmm)": ({"g": (columns, gates), "w": (gates, hidden)}, lambda o: torch.bmm(o["g"], o["w"])),
        "gradient to W_hh (bmm)": (
            {"h": (columns, hidden), "g": (columns, gates)},
            lambda o: torch.bmm(o["h"].transpose(1, 2), o["g"]),
        ),
        "gradient to b_hh (sum over columns)": ({"g": (columns, gates)}, lambda o: o["g"].sum(1, keepdim=True)),
        "gates and cell (sigmoid, tanh)": (
            {"gates": (columns, gates), "c": (columns, hidden)},
            lambda o: torch.cat(_cell(o["gates"], o["c"], 2), 2),
        ),
    }


def _draw(shapes: dict[str, tuple[int, ...]], seed: int, device, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Operands of ``shapes`` drawn on ``device`` (a card draws them in microseconds) from generator ``seed``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return {name: torch.randn(*shape, generator=gen, device=device) * scale for name, shape in shapes.items()}


def _group(shapes: dict[str, tuple[int, ...]], k: int, slot: int, device, seed: int, scale: float = 1.0) -> list[dict]:
    """The operands of ``k`` runs: those of generator ``seed`` in slot ``slot``, the others' of other generators."""
    return [_draw(shapes, seed if i == slot else seed + 1 + i, device, scale) for i in range(k)]


def operation_result(op: Operation, k: int, slot: int, device, seed: int = 0) -> torch.Tensor:
    """The operation's result for the run of operands ``seed`` in slot ``slot`` of ``k`` runs."""
    shapes, fn = op
    runs = _group(shapes, k, slot, device, seed)
    stacked = {name: torch.stack([run[name] for run in runs]) for name in shapes}
    return fn(stacked)[slot].cpu()


def layer_result(k: int, slot: int, columns: int, n_in: int, hidden: int, steps: int, device, batched: bool,
                 seed: int = 0) -> torch.Tensor:  # fmt: skip
    """One LSTM layer of ``k`` runs fused, forward and backward (each run's outputs weighted by a cotangent of its
    own): the slot's outputs, final state and gradients to its weights, input and initial state, flattened."""
    gates = 4 * hidden
    shapes = {"w_ih": (gates, n_in), "w_hh": (gates, hidden), "b_ih": (gates,), "b_hh": (gates,),
              "x": (steps, columns, n_in), "h0": (1, columns, hidden), "c0": (1, columns, hidden),
              "cot": (steps, columns, hidden)}  # fmt: skip
    runs = [{name: t.requires_grad_(name != "cot") for name, t in drawn.items()}
            for drawn in _group(shapes, k, slot, device, seed, scale=0.1)]  # fmt: skip
    outputs, finals = fused_lstm_layer([r["x"] for r in runs],
                                       [(r["w_ih"], r["w_hh"], r["b_ih"], r["b_hh"]) for r in runs],
                                       [(r["h0"], r["c0"]) for r in runs], batched)  # fmt: skip
    total = sum((out * r["cot"]).sum() + c.sum() for out, (_, c), r in zip(outputs, finals, runs, strict=True))
    total.backward()
    grads = [runs[slot][name].grad for name in ("w_ih", "w_hh", "b_ih", "b_hh", "x", "h0", "c0")]
    parts = [outputs[slot], *finals[slot], *grads]
    return torch.cat([p.detach().reshape(-1).cpu() for p in parts])


def compare(result: Callable[[int, int], torch.Tensor], groups: list[int]) -> dict:
    """Slot 0 and slot K − 1 of each K of ``groups`` against K = 1: the K whose bits differ, the largest difference
    and the largest magnitude of the K = 1 result (its scale)."""
    alone = result(1, 0)
    differ: dict[str, list[int]] = {"slot 0": [], "slot K-1": []}
    largest = 0.0
    for k in groups:
        for label, slot in (("slot 0", 0), ("slot K-1", k - 1)):
            other = result(k, slot)
            if not torch.equal(alone, other):
                differ[label].append(k)
                largest = max(largest, float((alone.double() - other.double()).abs().max()))
    return {"differ_at_K": differ, "max_abs_difference": largest, "max_abs_value": float(alone.abs().max())}


def shapes_of(models: list[str], overrides: list[str]) -> tuple[list[tuple[int, int]], list[tuple]]:
    """(columns, hidden) of every recurrent GEMM of ``models`` (training chunk, validation, test; every layer's
    hidden size), and per model its first layer at the training chunk: (model, columns, input, hidden, steps)."""
    gemms, layers = [], []
    for model in models:
        dataset, variant = model.split("/")
        hp = presets.resolve(dataset, variant, "et", presets.parse_overrides(overrides))
        for columns in (hp["small_batch_size"], hp["eval_batch_size"], hp["test_batch_size"]):
            for hidden in (hp["nhid"], hp["nhidlast"]):
                if (columns, hidden) not in gemms:
                    gemms.append((columns, hidden))
        layers.append((model, hp["small_batch_size"], hp["nemb"], hp["nhid"], hp["bptt"]))
    return gemms, layers


def write(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "fused-ops-invariance.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| operation | columns | hidden | K with other bits, slot 0 | slot K−1 | largest difference | largest "
             "value |", "|---|---:|---:|---|---|---:|---:|"]  # fmt: skip
    for row in rows:
        first, last = (", ".join(map(str, row["differ_at_K"][s])) or "none" for s in ("slot 0", "slot K-1"))
        lines.append(f"| {row['operation']} | {row['columns']} | {row['hidden']} | {first} | {last} | "
                     f"{row['max_abs_difference']:.3g} | {row['max_abs_value']:.3g} |")  # fmt: skip
    (out / "fused-ops-invariance.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--groups", default="2,4,8,16,32", help="the K to compare with K = 1")
    parser.add_argument("--models", default="ptb/softmax,wt2/softmax,ptb/mos,wt2/mos", help="dataset/variant, ...")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    groups = [int(k) for k in args.groups.split(",")]
    gemms, layers = shapes_of(args.models.split(","), args.overrides)
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append({**row, "device": str(device)})
        print(json.dumps(rows[-1]), flush=True)
        write(rows, Path(args.out))

    for columns, hidden in gemms:
        for name, op in operations(columns, hidden).items():
            found = compare(lambda k, slot, op=op: operation_result(op, k, slot, device), groups)
            done({"operation": name, "columns": columns, "hidden": hidden, **found})
    for model, columns, n_in, hidden, steps in layers:
        for batched, label in ((True, "batched"), (False, "run by run, the control")):
            found = compare(lambda k, slot, b=batched, c=columns, i=n_in, h=hidden, s=steps:
                            layer_result(k, slot, c, i, h, s, device, b), groups)  # fmt: skip
            done({"operation": f"{model} layer 1, {steps} steps, {label}", "columns": columns, "hidden": hidden,
                  **found})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
