"""Where a training step's time goes: ``torch.profiler`` over N steps of the trainer's own step, summarised.

For each ``--model dataset/variant`` (default: PTB Softmax, PTB MoS, WT2 MoS) at the paper's hyper-parameters
(``--set`` overrides allowed, e.g. small sizes for a smoke test), on the real corpus when ``--data-root`` has it:
warm-up steps, then ``--steps`` steps of :func:`softmax_bottleneck.training.step.train_batch` (the trainer's and
``bench``'s step) under the profiler, then one synchronisation. From the profiler's Chrome trace:

* ``wall_ms_per_step``: the profiled span over the steps (host clock, the device drained at the end);
* ``gpu_busy``: the union of the kernels' intervals on the device over that span (memory copies and sets
  counted apart); ``gpu_idle`` = 1 − busy, the time the card waits, on the host (launches, Python) or on
  a synchronisation;
* ``kernels_per_step`` (kernels run on the device) and ``launches_per_step`` (``cudaLaunchKernel`` and
  its kin called by the host), memcopies and memsets per step;
* ``top_kernels``: the 10 kernels of most device time (count per step, ms per step, share of the kernel time);
* ``top_host_ops``: the 10 operators of most host time per step (inclusive of the operators they call): on a CPU
  run, where the time goes.

Writes ``<out>/profile-<dataset>-<variant>.json`` and prints a Markdown table of all models last::

    python benchmarks/profile_step.py --data-root ../shared/data --device cuda --out /tmp/profile
    python benchmarks/profile_step.py --device cpu --steps 3 --warmup 1 --set nemb=16 --set nhid=16 \\
        --set nhidlast=16 --out /tmp/profile          # smoke test of the script (any machine)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.corpora.corpus import batchify  # noqa: E402
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402
from softmax_bottleneck.models.awd_lstm import AWDLSTM  # noqa: E402
from softmax_bottleneck.training.bench import bench_corpus  # noqa: E402
from softmax_bottleneck.training.environment import configure_precision, resolve_device  # noqa: E402
from softmax_bottleneck.training.schedule import make_optimizer  # noqa: E402
from softmax_bottleneck.training.state import seed_everything  # noqa: E402
from softmax_bottleneck.training.step import LossSums, train_batch  # noqa: E402

DEFAULT_MODELS = ["ptb/softmax", "ptb/mos", "wt2/mos"]
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by ``[start, end)`` intervals (overlaps counted once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def summarise_trace(trace: dict, steps: int, wall_seconds: float) -> dict:
    """The summary of one profiled region from its Chrome trace (``traceEvents``: ``cat``, ``ts``, ``dur`` in µs)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    host_ops = [e for e in events if e.get("cat") == "cpu_op"]
    per_step = 1.0 / steps
    summary: dict = {"steps": steps, "wall_ms_per_step": wall_seconds * 1e3 * per_step}
    if kernels:
        span_start = min(e["ts"] for e in events)
        span_end = max(e["ts"] + e["dur"] for e in events)
        span = max(span_end - span_start, wall_seconds * 1e6)
        busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in kernels])
        by_name: dict[str, list[float]] = defaultdict(list)
        for e in kernels:
            by_name[e["name"]].append(e["dur"])
        kernel_time = sum(sum(d) for d in by_name.values())
        top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:10]
        summary.update(
            gpu_busy=busy / span,
            gpu_idle=1.0 - busy / span,
            gpu_busy_ms_per_step=busy / 1e3 * per_step,
            copy_ms_per_step=union_length([(e["ts"], e["ts"] + e["dur"]) for e in copies]) / 1e3 * per_step,
            kernels_per_step=len(kernels) * per_step,
            launches_per_step=sum(e["name"] in LAUNCHES for e in runtime) * per_step,
            memcpy_memset_per_step=len(copies) * per_step,
            synchronizations_per_step=sum("Synchronize" in e["name"] for e in runtime) * per_step,
            top_kernels=[
                {
                    "name": name[:120],
                    "per_step": len(d) * per_step,
                    "ms_per_step": sum(d) / 1e3 * per_step,
                    "share": sum(d) / kernel_time,
                }
                for name, d in top
            ],  # fmt: skip
        )
    else:
        summary.update(gpu_busy=None, gpu_idle=None, kernels_per_step=0.0, launches_per_step=0.0)
    by_op: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for e in host_ops:
        by_op[e["name"]] += e["dur"]
        counts[e["name"]] += 1
    top_ops = sorted(by_op.items(), key=lambda item: -item[1])[:10]
    summary["top_host_ops"] = [
        {"name": name[:120], "calls_per_step": counts[name] * per_step, "ms_per_step": t / 1e3 * per_step}
        for name, t in top_ops
    ]
    summary["host_ops_per_step"] = len(host_ops) * per_step
    return summary


def profile_model(dataset: str, variant: str, args) -> dict:
    """Warm-up, then ``args.steps`` profiled training steps of the preset model; the summary."""
    overrides = presets.parse_overrides(args.set)
    hp = presets.resolve(dataset, variant, "et", overrides)
    data_dir = Path(args.data_root) / CORPUS_DIRS[dataset] if args.data_root else None
    corpus, source = bench_corpus(dataset, data_dir if data_dir and data_dir.is_dir() else None, None)
    device = resolve_device(args.device)
    configure_precision(hp["tf32"])
    seed_everything(hp["seed"])
    model = AWDLSTM(corpus.vocab_size, hp).to(device)
    optimizer = make_optimizer(model, hp, "sgd")
    data = batchify(corpus.train, hp["batch_size"]).to(device)
    hidden = [model.init_hidden(hp["small_batch_size"]) for _ in range(hp["batch_size"] // hp["small_batch_size"])]
    sums, position = LossSums(device), 0

    def step() -> None:
        nonlocal position
        if position >= data.size(0) - 2 - hp["bptt"] - hp["max_seq_len_delta"]:
            position = 0
        position += train_batch(model, optimizer, hp, data, position, hidden, sums)

    model.train()
    for _ in range(args.warmup):
        step()
    sums.read()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        started = time.perf_counter()
        for _ in range(args.steps):
            step()
        sums.read()  # the step's one synchronisation per logging interval, here at the end
        wall = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    summary = summarise_trace(trace, args.steps, wall)
    summary.update(dataset=dataset, variant=variant, device=str(device), data=source, overrides=overrides,
                   device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                   batch_size=hp["batch_size"], bptt=hp["bptt"], torch=torch.__version__,
                   cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)  # fmt: skip
    return summary


def markdown(summaries: list[dict]) -> str:
    """One row per model, then each model's top kernels (or host operators on a CPU)."""
    lines = ["| model | ms/step | GPU busy | GPU idle | kernels/step | launches/step | memcpy+set/step |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    pct = lambda x: "—" if x is None else f"{100 * x:.0f} %"  # noqa: E731
    for s in summaries:
        lines.append(f"| {s['dataset']} {s['variant']} | {s['wall_ms_per_step']:.2f} | {pct(s['gpu_busy'])} | "
                     f"{pct(s['gpu_idle'])} | {s['kernels_per_step']:.0f} | {s['launches_per_step']:.0f} | "
                     f"{s.get('memcpy_memset_per_step', 0):.0f} |")  # fmt: skip
    for s in summaries:
        top = s.get("top_kernels")
        lines += ["", f"{s['dataset']} {s['variant']}: " + ("top kernels" if top else "top host operators")]
        for row in top or s["top_host_ops"]:
            calls = row.get("per_step", row.get("calls_per_step"))
            share = f", {100 * row['share']:.0f} %" if "share" in row else ""
            lines.append(f"- {row['ms_per_step']:.3f} ms/step, {calls:.0f}/step{share}: `{row['name']}`")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=None, help="dataset/variant (repeatable)")
    parser.add_argument("--data-root", default=None, help="folder with ptb/ and wikitext-2/ (else random tokens)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50, help="profiled training steps (default 50)")
    parser.add_argument("--warmup", type=int, default=10, help="steps before profiling (default 10)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="hyper-parameter override")
    parser.add_argument("--out", required=True, help="folder for profile-<dataset>-<variant>.json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = []
    for model in args.model or DEFAULT_MODELS:
        dataset, variant = model.split("/")
        summary = profile_model(dataset, variant, args)
        (out / f"profile-{dataset}-{variant}.json").write_text(json.dumps(summary, indent=1) + "\n")
        summaries.append(summary)
        print(f"{model}: {summary['wall_ms_per_step']:.2f} ms/step", flush=True)
    text = markdown(summaries)
    (out / "profile.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
