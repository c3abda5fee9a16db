"""The fused update of K runs replayed from CUDA graphs (:mod:`softmax_bottleneck.training.fused_graphs`): the same
numbers as the eager fused update the trainer runs? how much faster, and against K runs alone? An experiment, not an
option of ``train-fused``.

For each ``--models`` key (``dataset/variant[/sgd|asgd]``) and each K of ``--groups``:

* ``solo``: one run alone through the trainer's step (cuDNN's LSTM), timed over ``--solo-updates``.
* ``eager``: K runs (seeds ``seed``, ``seed + 1``, …, in lock-step: every run takes the batch length run 0 draws, as
  runs of one seed do) through :func:`.fused_update` with the trainer's streams (:class:`.RunRNG`).
* ``graphs``: the same K runs, their streams made graph-safe (:class:`.GraphSafeRNG`), through
  :class:`.GraphedFusedUpdates` (one graph per batch length, captured at a length's second update).

Compared: every run's running loss sum after every update and every weight at the end, bit for bit. Times: the wall
seconds per update over the second half of ``--updates``, and each kind's mean (eager, capture, replay) from CUDA
events around every update. From these, per run: seconds per epoch alone, fused eagerly and fused from graphs (the
steady state: every length of the epoch captured; the first epoch also captures once per distinct length, counted
from the run's own length stream). On a CPU the graphs are :class:`.Rerun`'s stand-in (a check of the script, not a
measurement). Rows are written as soon as they are measured (``<out>/fused-graphs.json`` and ``.md``); a failure is
a row, and ends the call (a CUDA error leaves the context unusable)::

    python benchmarks/fused_graphs_check.py --data-root benchmarks/data --models ptb/softmax --groups 16,4 --out /tmp/fg
    python benchmarks/fused_graphs_check.py --device cpu --groups 2 --updates 8 --solo-updates 2 --set nemb=8 \\
        --set nhid=8 --set nhidlast=8 --out /tmp/fg
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402
from softmax_bottleneck.training.bench import BenchRun, bench_corpus, sync, time_solo  # noqa: E402
from softmax_bottleneck.training.environment import configure_precision, resolve_device  # noqa: E402
from softmax_bottleneck.training.fused_graphs import CudaGraphs, GraphedFusedUpdates, GraphSafeRNG, Rerun  # noqa: E402
from softmax_bottleneck.training.fused_step import fused_update  # noqa: E402
from softmax_bottleneck.training.schedule import sample_seq_len  # noqa: E402


class Clock:
    """Seconds of each update: CUDA events on the device's current stream (no synchronisation), else the host's."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def seconds(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1000 for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]


def epoch_lengths(hp: dict, rows: int) -> tuple[int, int]:
    """(batches, distinct batch lengths) of one epoch of ``rows`` rows, from the run's own length stream."""
    outside = np.random.get_state()
    np.random.seed(hp["seed"])
    position, lengths = 0, []
    while position < rows - 2:
        seq_len = sample_seq_len(hp)
        lengths.append((seq_len, min(seq_len, rows - 1 - position)))
        position += seq_len
    np.random.set_state(outside)
    return len(lengths), len(set(lengths))


def train(hp: dict, corpus, device, k: int, phase: str, updates: int, graphs) -> dict:
    """``updates`` lock-step updates of K runs, eagerly (``graphs`` None) or through ``graphs``."""
    runs = [BenchRun({**hp, "seed": hp["seed"] + i}, corpus, device, phase) for i in range(k)]
    updater = None
    if graphs is not None:
        if device.type == "cuda":
            for run in runs:
                run.rng = GraphSafeRNG.of(run.rng)
        updater = GraphedFusedUpdates(runs, graphs)
    clock, ways, losses = Clock(device), [], []
    sync(device)
    walls = []
    for i in range(updates):
        if i in (0, updates // 2):
            sync(device)
            walls.append(time.perf_counter())
        first, _ = runs[0].batch()
        batches = [first] + [run.batch(first[2])[0] for run in runs[1:]]
        clock.mark()
        if updater is None:
            fused_update(runs, batches)
        else:
            updater.update(batches)
        clock.mark()
        ways.append(updater.last if updater else "eager")
        losses.append(torch.stack([run.sums.raw for run in runs]).clone())
    sync(device)
    end = time.perf_counter()
    seconds = clock.seconds()[::2]  # each update's own span (the odd spans are the batches' slicing)
    return {
        "losses": torch.stack(losses).cpu(),
        "weights": [{n: v.detach().cpu() for n, v in run.model.state_dict().items()} for run in runs],
        "wall_second_half": (end - walls[1]) / (updates - updates // 2),
        "ways": ways,
        "mean": {way: float(np.mean([s for s, w in zip(seconds, ways, strict=True) if w == way])) for way in set(ways)},
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "epoch_rows": runs[0].data.size(0),
    }


def compare(key: str, k: int, corpus, source: str, args, device) -> dict:
    dataset, variant, *phase = key.split("/")
    phase = phase[0] if phase else "sgd"
    hp = presets.resolve(dataset, variant, "et", presets.parse_overrides(args.set))
    configure_precision(hp["tf32"])
    seconds, _, _ = time_solo(BenchRun(hp, corpus, device, phase), device, 5, args.solo_updates)
    solo = seconds / args.solo_updates  # one run alone, after 5 untimed updates
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    eager = train(hp, corpus, device, k, phase, args.updates, None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs = CudaGraphs(device) if device.type == "cuda" else Rerun()
    graphed = train(hp, corpus, device, k, phase, args.updates, graphs)
    a, b = eager["losses"].double(), graphed["losses"].double()
    differing = (a != b).any(dim=1).nonzero()
    batches, distinct = epoch_lengths(hp, eager["epoch_rows"])
    eager_s = eager["mean"]["eager"]
    replay_s = graphed["mean"].get("replay")
    capture_s = graphed["mean"].get("capture")
    ways = graphed["ways"]
    row = {
        "model": key, "K": k, "updates": args.updates, "data": source, "device": torch.cuda.get_device_name(device)
        if device.type == "cuda" else platform.processor() or "cpu", "torch": torch.__version__,
        "losses_identical": bool(differing.numel() == 0),
        "first_differing_update": int(differing[0]) if differing.numel() else None,
        "max_abs_diff_loss_sum": float((a - b).abs().max()),
        "weights_identical": all(torch.equal(x[n], y[n])
                                 for x, y in zip(eager["weights"], graphed["weights"], strict=True) for n in x),
        "solo_s_per_update": solo, "eager_s_per_update": eager_s, "eager_wall_s_per_update": eager["wall_second_half"],
        "graphs_wall_s_per_update": graphed["wall_second_half"], "replay_s_per_update": replay_s,
        "capture_s_per_update": capture_s, "graphs_eager_s_per_update": graphed["mean"].get("eager"),
        "ways": {way: ways.count(way) for way in ("eager", "capture", "replay")},
        "ways_second_half": {way: ways[len(ways) // 2 :].count(way) for way in ("eager", "capture", "replay")},
        "peak_gib_eager": eager["peak_gib"], "peak_gib_graphs": graphed["peak_gib"],
        "epoch_batches": batches, "epoch_distinct_lengths": distinct,
    }  # fmt: skip
    row["solo_s_per_epoch"] = batches * solo
    row["eager_s_per_epoch_per_run"] = batches * eager_s / k
    if replay_s is not None:
        row["graphs_s_per_epoch_per_run"] = batches * replay_s / k  # the steady state: every length captured
        if capture_s is not None:
            first = distinct * (eager_s + capture_s) + max(batches - 2 * distinct, 0) * replay_s
            row["graphs_first_epoch_s_per_run"] = first / k
        row["graphs_speedup_over_eager"] = eager_s / replay_s
        row["graphs_speedup_over_solo"] = k * solo / replay_s
    return row


COLUMNS = ("model", "K", "same numbers", "s/update: solo, fused eager, fused replay", "× eager", "× K alone",
           "s/epoch per run: alone, eager, graphs (first epoch)", "updates: eager/capture/replay",
           "peak GiB")  # fmt: skip


def _same(r: dict) -> str:
    if r["losses_identical"] and r["weights_identical"]:
        return "yes"
    if r["losses_identical"]:
        return "losses yes, weights no"
    return f"no (from update {r['first_differing_update']}, max {r['max_abs_diff_loss_sum']:.3g})"


def markdown(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        if "error" in r:
            lines.append([r["model"], r["K"], r["error"], *[""] * (len(COLUMNS) - 3)])
            continue
        replay, ways = r["replay_s_per_update"], r["ways"]
        seconds = f"{r['solo_s_per_update']:.4f}, {r['eager_s_per_update']:.4f}, "
        epoch = f"{r['solo_s_per_epoch']:.1f}, {r['eager_s_per_epoch_per_run']:.1f}, "
        if replay is None:  # no length came back a third time
            seconds, epoch, speed = seconds + "–", epoch + "–", ("–", "–")
        else:
            seconds += f"{replay:.4f}"
            first = r.get("graphs_first_epoch_s_per_run")
            epoch += f"{r['graphs_s_per_epoch_per_run']:.1f}" + ("" if first is None else f" ({first:.1f})")
            speed = (f"{r['graphs_speedup_over_eager']:.2f}×", f"{r['graphs_speedup_over_solo']:.2f}×")
        peak = "–" if r["peak_gib_eager"] is None else f"{r['peak_gib_eager']:.1f} / {r['peak_gib_graphs']:.1f}"
        lines.append([r["model"], r["K"], _same(r), seconds, *speed, epoch,
                      f"{ways['eager']}/{ways['capture']}/{ways['replay']}", peak])  # fmt: skip
    return pd.DataFrame(lines, columns=COLUMNS).to_markdown(index=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default=None, help="folder with ptb/ and wikitext-2/ (else random tokens)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="ptb/softmax", help="dataset/variant[/sgd|asgd], comma-separated")
    parser.add_argument("--groups", default="16,4", help="K values, comma-separated (default 16,4)")
    parser.add_argument("--updates", type=int, default=160, help="lock-step updates per run (default 160)")
    parser.add_argument("--solo-updates", type=int, default=40)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="hyper-parameter override")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, corpora = [], {}
    for key in args.models.split(","):
        dataset = key.split("/")[0]
        if dataset not in corpora:
            data_dir = str(Path(args.data_root) / CORPUS_DIRS[dataset]) if args.data_root else None
            corpora[dataset] = bench_corpus(dataset, data_dir, None)
        for k in (int(x) for x in args.groups.split(",")):
            try:
                rows.append(compare(key, k, *corpora[dataset], args, device))
            except Exception as err:  # noqa: BLE001  (a capture that fails is a result: keep it, stop)
                traceback.print_exc()
                rows.append({"model": key, "K": k, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"})
            (out / "fused-graphs.json").write_text(json.dumps(rows, indent=1) + "\n")
            (out / "fused-graphs.md").write_text(markdown(rows) + "\n")
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
            if "error" in rows[-1]:
                return 1
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
