"""The training update replayed from CUDA graphs, one per batch length: the same numbers? faster? An experiment,
not an option of ``train``: on an H200 (torch 2.11, cuDNN 9.19, 2026-11-27) graphs of the cuDNN LSTM hit an illegal
memory access at the 31st update, after 10 captures, with one memory pool or one per graph; with PyTorch's own LSTM
kernels (``--no-cudnn``) the replays were bit-identical to their plain updates and 2.36× faster than them, but still
1.65× slower than the plain cuDNN update the study uses (BENCHMARKS.md).

:class:`GraphedSteps` keeps one graph per (sampled length, rows) pair in one memory pool: the first update of a
length runs plainly on the capture stream (it warms that shape up), the second is captured and replayed, every later
one replayed, on static buffers (the batch's tokens, the carried hidden state, which the graph overwrites after its
backward pass). The lr scaled by ``seq_len/bptt`` is part of a graph, so a new optimizer, base lr, model, loss sums
or corpus drops every graph. PyTorch registers the default CUDA generator with each capture and advances its Philox
offset on every replay by what the graph draws, as the plain update advances it: the dropout masks are the plain
update's. Every output (weights, optimizer state, hidden state, loss sums) lives outside the pool.

For each ``--model dataset/variant[/phase]`` (default PTB Softmax and MoS under SGD, PTB Softmax under ASGD), two
runs from the same seed on the real training text: ``--steps`` updates plainly, then through :class:`GraphedSteps`.
After every update the running loss sum is copied on the device (no synchronisation); the runs are compared update
by update, bit for bit, and every weight at the end. Times: wall seconds per update over all updates (captures
included) and over the second half. Writes ``<out>/<name>.json`` and ``.md``; ``benchmarks/lstm_graph_probe.py`` is
the smallest case (one cuDNN LSTM, two graphs)::

    python benchmarks/cuda_graphs_check.py --data-root ../shared/data --out /tmp/graphs --sync-each-step
    python benchmarks/cuda_graphs_check.py --data-root ../shared/data --out /tmp/graphs --no-cudnn
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.corpora.corpus import batchify, get_batch  # noqa: E402
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402
from softmax_bottleneck.models.awd_lstm import AWDLSTM  # noqa: E402
from softmax_bottleneck.training.bench import bench_corpus  # noqa: E402
from softmax_bottleneck.training.environment import configure_precision  # noqa: E402
from softmax_bottleneck.training.schedule import make_optimizer, sample_seq_len  # noqa: E402
from softmax_bottleneck.training.state import seed_everything  # noqa: E402
from softmax_bottleneck.training.step import LossSums, update  # noqa: E402


class GraphedSteps:
    """:func:`.step.update` for each batch length: plain the first time, then captured once and replayed."""

    def __init__(self, device: torch.device, share_pool: bool = True):
        self.device = device
        self.share_pool = share_pool  # False: a pool per graph (more memory; a diagnostic)
        self.stream = torch.cuda.Stream(device)
        self.captured = 0  # graphs captured over the object's life (all owners)
        self.last = ""  # what the last update was: plain, capture or replay
        self._reset(None)

    def _reset(self, owner) -> None:
        self.owner = owner
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.seen: set[tuple[int, int]] = set()
        self.pool = None
        self.tokens: torch.Tensor | None = None
        self.hidden: list | None = None

    def run(self, model, optimizer, hp: dict, data: torch.Tensor, position: int, seq_len: int, hidden: list,
            sums: LossSums, loss_path: str) -> None:  # fmt: skip
        """The update of ``data`` from ``position`` with the sampled ``seq_len``; ``hidden`` updated in place."""
        inputs, targets = get_batch(data, position, seq_len)
        length = inputs.size(0)
        owner = (id(model), id(optimizer), id(sums), id(data), loss_path,
                 tuple(group["lr"] for group in optimizer.param_groups))  # fmt: skip
        if owner != self.owner:
            self._reset(owner)
        key = (seq_len, length)
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            if key not in self.graphs and key not in self.seen:
                self.seen.add(key)
                self.last = "plain"
                update(model, optimizer, hp, inputs, targets, seq_len, hidden, sums, loss_path)
            else:
                self._load(data, position, length, hidden, hp["bptt"] + hp["max_seq_len_delta"] + 1)
                self.last = "replay"
                if key not in self.graphs:
                    self.last = "capture"
                    self.graphs[key] = self._capture(model, optimizer, hp, length, seq_len, sums, loss_path)
                self.graphs[key].replay()
                for s_id, chunk in enumerate(self.hidden):
                    hidden[s_id] = list(chunk)
        current.wait_stream(self.stream)

    def _load(self, data: torch.Tensor, position: int, length: int, hidden: list, rows: int) -> None:
        """The batch's tokens and the carried hidden state into the static buffers (allocated on first use: ``rows``
        token rows, the longest batch :func:`.schedule.sample_seq_len` draws plus its targets' row)."""
        if self.tokens is None:
            self.tokens = torch.empty((rows, data.size(1)), dtype=data.dtype, device=data.device)
            self.hidden = [[(h.detach().clone(), c.detach().clone()) for h, c in chunk] for chunk in hidden]
        self.tokens[: length + 1].copy_(data[position : position + length + 1])
        for static, carried in zip(self.hidden, hidden, strict=True):
            for (h, c), (h_new, c_new) in zip(static, carried, strict=True):
                if h is not h_new:
                    h.copy_(h_new.detach())
                if c is not c_new:
                    c.copy_(c_new.detach())

    def _capture(self, model, optimizer, hp, length, seq_len, sums, loss_path) -> torch.cuda.CUDAGraph:
        if self.pool is None or not self.share_pool:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            new = [list(chunk) for chunk in self.hidden]
            update(model, optimizer, hp, self.tokens[:length], self.tokens[1 : length + 1], seq_len, new, sums,
                   loss_path)  # fmt: skip
            for static, fresh in zip(self.hidden, new, strict=True):
                for (h, c), (h_new, c_new) in zip(static, fresh, strict=True):
                    h.copy_(h_new)
                    c.copy_(c_new)
        self.captured += 1
        return graph


def one_run(model_key: str, data_root: str | None, device: torch.device, steps: int, graphs: bool,
            overrides: dict, args=None) -> dict:  # fmt: skip
    dataset, variant, *phase = model_key.split("/")
    phase = phase[0] if phase else "sgd"
    hp = presets.resolve(dataset, variant, "et", overrides)
    corpus, source = bench_corpus(dataset, str(Path(data_root) / CORPUS_DIRS[dataset]) if data_root else None, None)
    configure_precision(hp["tf32"])
    seed_everything(hp["seed"])
    model = AWDLSTM(corpus.vocab_size, hp).to(device)
    optimizer = make_optimizer(model, hp, phase)
    data = batchify(corpus.train, hp["batch_size"]).to(device)
    hidden = [model.init_hidden(hp["small_batch_size"]) for _ in range(hp["batch_size"] // hp["small_batch_size"])]
    sums = LossSums(device)
    stepper = GraphedSteps(device, share_pool=not getattr(args, "own_pools", False)) if graphs else None
    model.train()
    losses, position, marks = [], 0, []
    torch.cuda.synchronize(device)
    for i in range(steps):
        if i in (0, steps // 2):
            torch.cuda.synchronize(device)
            marks.append(time.perf_counter())
        if position >= data.size(0) - 2:
            position = 0
        try:
            seq_len = sample_seq_len(hp)
            if stepper is None:
                inputs, targets = get_batch(data, position, seq_len)
                update(model, optimizer, hp, inputs, targets, seq_len, hidden, sums, "nll")
            else:
                stepper.run(model, optimizer, hp, data, position, seq_len, hidden, sums, "nll")
            position += seq_len
            if getattr(args, "sync_each_step", False):
                torch.cuda.synchronize(device)
        except Exception as err:
            kind = stepper.last if stepper else "plain"
            captured = stepper.captured if stepper else 0
            raise RuntimeError(f"{'graphs' if graphs else 'plain'} run, step {i} ({kind}, {captured} captured): "
                               f"{type(err).__name__}: {str(err).splitlines()[0][:160]}") from err  # fmt: skip
        losses.append(sums.raw.clone())
    torch.cuda.synchronize(device)
    end = time.perf_counter()
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return {
        "losses": torch.stack(losses).cpu(),
        "weights": weights,
        "s_per_step": (end - marks[0]) / steps,
        "s_per_step_second_half": (end - marks[1]) / (steps - steps // 2),
        "graphs_captured": stepper.captured if stepper else 0,
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30,
        "data": source,
    }


def compare(model_key: str, args, device: torch.device) -> dict:
    overrides = presets.parse_overrides(args.set)
    plain = one_run(model_key, args.data_root, device, args.steps, False, overrides, args)
    torch.cuda.reset_peak_memory_stats(device)
    graphed = one_run(model_key, args.data_root, device, args.steps, True, overrides, args)
    a, b = plain["losses"].double(), graphed["losses"].double()
    differing = (a != b).nonzero()
    same_weights = all(torch.equal(plain["weights"][k], graphed["weights"][k]) for k in plain["weights"])
    row = {"model": model_key, "steps": args.steps, "data": plain["data"],
           "losses_identical": bool(differing.numel() == 0),
           "first_differing_step": int(differing[0]) if differing.numel() else None,
           "max_abs_diff_loss_sum": float((a - b).abs().max()), "weights_identical": same_weights,
           "graphs_captured": graphed["graphs_captured"]}  # fmt: skip
    for name, run in (("plain", plain), ("graphs", graphed)):
        row[f"{name}_s_per_step"] = run["s_per_step"]
        row[f"{name}_s_per_step_second_half"] = run["s_per_step_second_half"]
        row[f"{name}_peak_memory_gib"] = run["peak_memory_gib"]
    row["speed_up_second_half"] = plain["s_per_step_second_half"] / graphed["s_per_step_second_half"]
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| model | steps | plain s/step | graphs s/step (all) | graphs s/step (2nd half) | × faster (2nd half) "
             "| graphs | losses identical | weights identical | peak GiB plain / graphs |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]  # fmt: skip
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | | | | |")
            continue
        same = "yes" if r["losses_identical"] else f"no (from step {r['first_differing_step']}, " \
                                                   f"max {r['max_abs_diff_loss_sum']:.3g})"  # fmt: skip
        lines.append(f"| {r['model']} | {r['steps']} | {r['plain_s_per_step_second_half']:.4f} | "
                     f"{r['graphs_s_per_step']:.4f} | {r['graphs_s_per_step_second_half']:.4f} | "
                     f"{r['speed_up_second_half']:.2f} | {r['graphs_captured']} | {same} | "
                     f"{'yes' if r['weights_identical'] else 'no'} | {r['plain_peak_memory_gib']:.2f} / "
                     f"{r['graphs_peak_memory_gib']:.2f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=None, help="dataset/variant[/sgd|asgd] (repeatable)")
    parser.add_argument("--data-root", default=None, help="folder with ptb/ and wikitext-2/ (else random tokens)")
    parser.add_argument("--steps", type=int, default=300, help="updates per run (default 300)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="hyper-parameter override")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sync-each-step", action="store_true", help="synchronise after every update (diagnosis)")
    parser.add_argument("--own-pools", action="store_true", help="a memory pool per graph (diagnosis)")
    parser.add_argument("--no-cudnn", action="store_true", help="PyTorch's own LSTM kernels instead of cuDNN's")
    parser.add_argument("--name", default="cuda-graphs", help="file name of the results (default cuda-graphs)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("cuda_graphs_check: needs a CUDA device")
    if args.no_cudnn:
        torch.backends.cudnn.enabled = False
    device = torch.device("cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model_key in args.model or ["ptb/softmax", "ptb/mos", "ptb/softmax/asgd"]:
        try:
            rows.append(compare(model_key, args, device))
        except Exception as err:  # noqa: BLE001  (a capture that fails is a result: keep it, stop)
            traceback.print_exc()
            rows.append({"model": model_key, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"})
        (out / f"{args.name}.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out / f"{args.name}.md").write_text(markdown(rows) + "\n")
        if "error" in rows[-1]:
            break  # an illegal memory access leaves the CUDA context unusable
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
