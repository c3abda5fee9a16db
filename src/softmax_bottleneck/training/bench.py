"""``bench``: time real training steps of a preset model and project the cost of one epoch.

The model is the preset's at paper hyper-parameters (``--set`` overrides allowed); the timed steps
are the trainer's own (:func:`.step.train_batch`: variable-length BPTT, chunked accumulation, clip,
SGD or ASGD step), after warm-up. The validation estimate runs :func:`.evaluation.evaluate` on the
first ``--valid-chunks`` × ``bptt`` rows of the validation split and scales by its length.
Without a data folder the splits are random tokens of the published sizes (PTB 929,589 / 73,760 /
82,430; WT2 2,088,628 / 217,646 / 245,569): the cost of a step does not depend on which words it sees.
``--runs K`` starts K independent runs at once on the same device (one process each, timed between
a common start barrier and their ends) and reports their aggregate throughput. ``--loss-path full`` times the
full-matrix path (``forward``'s [L, B, V] log-probabilities and a gather) instead of the loss path the trainer
uses (``nll``: the targets' log-probabilities only), for comparison. ``--fused K`` times K runs trained fused in this
process beside one run alone (:func:`measure_fused`: the K runs take seeds ``seed``, ``seed + 1``, …, so
their batch lengths differ as in a group of the study's seeds; the speed-up is the group's tokens/s over the solo
run's), and their validation pass together (:func:`.fused_evaluation.evaluate_group`).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time
from pathlib import Path

import torch

from softmax_bottleneck import presets
from softmax_bottleneck.argtypes import positive_int
from softmax_bottleneck.cluster import processes
from softmax_bottleneck.corpora.corpus import DATASET_DIRS, Corpus, Dictionary, batchify, get_batch, load_corpus
from softmax_bottleneck.corpora.datasets import DATA_ROOT, DATASETS
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.training.environment import configure_precision, resolve_device
from softmax_bottleneck.training.evaluation import evaluate
from softmax_bottleneck.training.fused_evaluation import evaluate_group
from softmax_bottleneck.training.fused_step import fused_update
from softmax_bottleneck.training.host_memory import keep_freed_host_memory
from softmax_bottleneck.training.run_rng import RunRNG
from softmax_bottleneck.training.schedule import make_optimizer
from softmax_bottleneck.training.state import seed_everything
from softmax_bottleneck.training.step import LOSS_PATHS, LossSums, next_batch, train_batch

log = logging.getLogger("softmax_bottleneck.bench")

#: tokens (one <eos> per line included) of the train/valid/test splits (paper §5; KIT batch shapes)
SPLIT_TOKENS = {name: d.split_tokens for name, d in DATASETS.items()}


def synthetic_corpus(dataset: str) -> Corpus:
    """Random tokens with the dataset's vocabulary size and split lengths."""
    vocab = presets.VOCAB_SIZES[dataset]
    dictionary = Dictionary()
    for i in range(vocab):
        dictionary.add(f"w{i}")
    gen = torch.Generator().manual_seed(0)
    splits = [torch.randint(vocab, (n,), generator=gen) for n in SPLIT_TOKENS[dataset]]
    return Corpus(dictionary, *splits)


def bench_corpus(dataset: str, data_dir, corpus_cache) -> tuple[Corpus, str]:
    """The real corpus when its files (or cache) are there, else :func:`synthetic_corpus`."""
    default = Path(DATA_ROOT) / DATASET_DIRS[dataset]
    if data_dir is None and corpus_cache is None and not (default / "train.txt").is_file():
        return synthetic_corpus(dataset), "synthetic"
    corpus = load_corpus(data_dir or default, corpus_cache)
    if corpus.vocab_size != presets.VOCAB_SIZES[dataset]:
        raise ValueError(f"{data_dir or corpus_cache}: not the {dataset} corpus ({corpus.vocab_size} words)")
    return corpus, "real"


class BenchRun:
    """One benchmarked run: model, optimizer, hidden states, loss sums, random streams, data position (cycling over
    the training rows)."""

    def __init__(self, hp: dict, corpus, device, phase: str):
        self.hp = hp
        seed_everything(hp["seed"])
        self.model = AWDLSTM(corpus.vocab_size, hp).to(device).train()
        self.optimizer = make_optimizer(self.model, hp, phase)
        self.data = batchify(corpus.train, hp["batch_size"]).to(device)
        chunks = hp["batch_size"] // hp["small_batch_size"]
        self.hidden = [self.model.init_hidden(hp["small_batch_size"]) for _ in range(chunks)]
        self.sums = LossSums(device)
        self.rng = RunRNG(device).capture()
        self.position = 0

    def _rewind(self) -> int:
        """Where the next batch starts: back at the first row once the data is used up."""
        if self.position >= self.data.size(0) - 2:
            self.position = 0
        return self.position

    def _advance(self, start: int, seq_len: int) -> int:
        """Move past the batch of ``seq_len`` rows at ``start``; its tokens (the rows it predicts × the columns)."""
        self.position = start + seq_len
        return (min(self.position, self.data.size(0) - 1) - start) * self.hp["batch_size"]

    def batch(self, seq_len: int | None = None):
        """The next ``(inputs, targets, seq_len)``, its length drawn from the run's streams (or ``seq_len``: runs in
        lock-step), and its tokens."""
        start = self._rewind()
        if seq_len is None:
            with self.rng:
                inputs, targets, seq_len = next_batch(self.hp, self.data, start)
        else:
            inputs, targets = get_batch(self.data, start, seq_len)
        return (inputs, targets, seq_len), self._advance(start, seq_len)

    def solo_step(self, loss_path: str = "nll") -> int:
        """One update of this run alone through the trainer's step (:func:`.step.train_batch`); its tokens."""
        start = self._rewind()
        with self.rng:
            seq_len = train_batch(self.model, self.optimizer, self.hp, self.data, start, self.hidden, self.sums,
                                  loss_path)  # fmt: skip
        return self._advance(start, seq_len)


def sync(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (CUDA; nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(opts: dict, barrier=None) -> dict:
    """One run: warm-up, (barrier), ``batches`` timed training steps, then the validation estimate."""
    if opts.get("threads"):
        torch.set_num_threads(opts["threads"])
    hp = presets.resolve(opts["dataset"], opts["variant"], "et", opts["overrides"])
    corpus, source = bench_corpus(opts["dataset"], opts["data"], opts["corpus_cache"])
    corpus = corpus.limited(hp["train_tokens"], hp["valid_tokens"], hp["test_tokens"])
    device = resolve_device(opts["device"])
    configure_precision(hp["tf32"])
    run = BenchRun(hp, corpus, device, opts["phase"])
    rows, width = run.data.size(0), hp["batch_size"]
    loss_path = opts.get("loss_path", "nll")

    def steps(n: int) -> int:
        run.model.train()
        return sum(run.solo_step(loss_path) for _ in range(n))

    steps(opts["warmup"])
    run.sums.read()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if barrier is not None:
        barrier.wait()
    started = time.monotonic()
    tokens = steps(opts["batches"])
    run.sums.read()
    sync(device)
    ended = time.monotonic()
    train_seconds = ended - started

    valid_seconds = _valid_seconds(run, corpus, device, opts.get("valid_chunks", 20), loss_path)

    tokens_per_second = tokens / train_seconds
    train_projection = rows * width / tokens_per_second
    return {
        "dataset": opts["dataset"],
        "variant": opts["variant"],
        "phase": opts["phase"],
        "overrides": dict(opts["overrides"]),  # --set values: {} at the paper's hyper-parameters
        "loss_path": loss_path,
        "data": source,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "mps": device.type == "cuda" and bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),  # runs under an MPS daemon
        "parameters": presets.parameter_count(hp, corpus.vocab_size),
        "batch_size": width,
        "batches": opts["batches"],
        "warmup": opts["warmup"],
        "seconds_per_batch": train_seconds / opts["batches"],
        "tokens_per_second": tokens_per_second,
        "projected_train_seconds_per_epoch": train_projection,
        "projected_valid_seconds_per_epoch": valid_seconds,
        "projected_seconds_per_epoch": train_projection + valid_seconds,
        "peak_memory_bytes": _peak_memory(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "tf32": hp["tf32"],
        "threads": torch.get_num_threads(),
        "started": started,
        "ended": ended,
        "tokens": tokens,
    }


def _pass_seconds(evaluate_pass, hp: dict, corpus, device, chunks: int) -> float:
    """Seconds of one validation pass of ``evaluate_pass(data)``, estimated from ``chunks`` bptt-row chunks of the
    validation split (after one chunk's warm-up of the eval path) and scaled to its length."""
    val_data = batchify(corpus.valid, hp["eval_batch_size"]).to(device)
    sample = val_data[: min(val_data.size(0), chunks * hp["bptt"] + 1)]
    evaluate_pass(sample[: hp["bptt"] + 1])
    tick = time.monotonic()
    evaluate_pass(sample)
    sync(device)
    return (time.monotonic() - tick) * val_data.size(0) / sample.size(0)


def _valid_seconds(run: BenchRun, corpus, device, chunks: int, loss_path: str = "nll") -> float:
    """Seconds of one validation pass of ``run``'s model alone (:func:`.evaluation.evaluate`)."""
    return _pass_seconds(lambda data: evaluate(run.model, data, run.hp["bptt"], loss_path), run.hp, corpus, device,
                         chunks)  # fmt: skip


def _fused_valid_seconds(runs: list[BenchRun], corpus, device, chunks: int, batched: bool | None) -> float:
    """Seconds of one validation pass of the K ``runs`` together (:func:`.fused_evaluation.evaluate_group`, as a fused
    group validates runs whose epochs end together)."""
    return _pass_seconds(lambda data: evaluate_group(runs, [data] * len(runs), batched), runs[0].hp, corpus, device,
                         chunks)  # fmt: skip


def _peak_memory(device: torch.device) -> int:
    """CUDA: the most memory allocated by tensors; CPU: the process's maximum resident set size."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return processes.peak_resident_bytes()


def _worker(opts: dict, barrier, queue) -> None:
    try:
        keep_freed_host_memory(resolve_device(opts["device"]))  # as the trainer's own process
        queue.put(measure(opts, barrier))
    except BaseException as err:  # reported by the parent, in one line
        barrier.abort()
        queue.put({"error": f"{type(err).__name__}: {err}"})


def run_bench(opts: dict) -> dict:
    """One run in this process, or ``opts["runs"]`` concurrent runs in as many processes (aggregated)."""
    if opts["runs"] == 1:
        result = measure(opts)
        result["runs"] = 1
        return result
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(opts["runs"]), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(opts, barrier, queue)) for _ in range(opts["runs"])]
    for worker in workers:
        worker.start()
    results = [queue.get() for _ in workers]
    for worker in workers:
        worker.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(errors[0])
    first = results[0]
    wall = max(r["ended"] for r in results) - min(r["started"] for r in results)
    summary = {k: first[k] for k in first if k not in ("started", "ended", "tokens")}
    summary.update(
        runs=opts["runs"],
        tokens_per_second=sum(r["tokens"] for r in results) / wall,
        per_run_tokens_per_second=[r["tokens_per_second"] for r in results],
        seconds_per_batch=sum(r["seconds_per_batch"] for r in results) / len(results),
        projected_seconds_per_epoch=max(r["projected_seconds_per_epoch"] for r in results),
        peak_memory_bytes=max(r["peak_memory_bytes"] for r in results),
    )
    return summary


#: how the fused recurrences run: ``auto`` batched on CUDA and run by run on the CPU (:mod:`.fused_lstm`)
RECURRENCES = {"auto": None, "batched": True, "per-run": False}


def _timed(device, steps, warmup: int, batches: int) -> tuple[float, int, int | None]:
    """(seconds, tokens, peak bytes on CUDA) of ``batches`` calls of ``steps`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        steps()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.monotonic()
    tokens = sum(steps() for _ in range(batches))
    sync(device)
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    return time.monotonic() - started, tokens, peak


def time_solo(run: BenchRun, device, warmup: int, batches: int) -> tuple[float, int, int | None]:
    """(seconds, tokens, peak bytes on CUDA) of ``batches`` updates of ``run`` alone (:meth:`BenchRun.solo_step`, the
    trainer's step) after ``warmup`` untimed ones (:func:`_timed`)."""
    return _timed(device, lambda: run.solo_step("nll"), warmup, batches)


def measure_fused(opts: dict, corpus, source: str, groups: list[int] | None = None) -> list[dict]:
    """One run alone, then K fused for each K of ``groups`` (default ``[opts["fused"]]``), on ``corpus``
    (:func:`.bench.bench_corpus`); a row of ``bench --fused`` per K, which ``costs --bench`` reads as K runs sharing
    the device (``runs``, ``projected_seconds_per_epoch``; ``fused``: true)."""
    if opts.get("threads"):
        torch.set_num_threads(opts["threads"])
    base = presets.resolve(opts["dataset"], opts["variant"], "et", opts["overrides"])
    corpus = corpus.limited(base["train_tokens"], base["valid_tokens"], base["test_tokens"])
    device = resolve_device(opts["device"])
    configure_precision(base["tf32"])
    batched = RECURRENCES[opts.get("recurrence", "auto")]
    solo = BenchRun(base, corpus, device, opts["phase"])
    solo_seconds, solo_tokens, solo_peak = time_solo(solo, device, opts["warmup"], opts["batches"])
    solo_rate = solo_tokens / solo_seconds
    epoch_tokens = solo.data.size(0) * base["batch_size"]
    valid_seconds = _valid_seconds(solo, corpus, device, opts.get("valid_chunks", 20))
    del solo
    rows = []
    for k in groups or [opts["fused"]]:
        runs = [BenchRun({**base, "seed": base["seed"] + i}, corpus, device, opts["phase"]) for i in range(k)]

        def fused_step(runs=runs) -> int:
            batches, tokens = zip(*(run.batch() for run in runs), strict=True)
            fused_update(runs, list(batches), batched=batched)
            return sum(tokens)

        fused_seconds, fused_tokens, fused_peak = _timed(device, fused_step, opts["warmup"], opts["batches"])
        fused_valid = _fused_valid_seconds(runs, corpus, device, opts.get("valid_chunks", 20), batched)
        del runs, fused_step
        fused_rate = fused_tokens / fused_seconds
        rows.append(
            {
                "dataset": opts["dataset"],
                "variant": opts["variant"],
                "phase": opts["phase"],
                "overrides": dict(opts["overrides"]),
                "data": source,
                "device": str(device),
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                "fused_runs": k,
                # as `bench --runs K` says it, for `costs --bench`: K runs hold the device, each for these seconds per
                # epoch: the group's epoch of training, then its validation pass of the K runs together
                "runs": k,
                "fused": True,
                "mps": False,
                "tokens_per_epoch": epoch_tokens,
                "projected_valid_seconds_per_epoch": valid_seconds,
                "fused_valid_seconds_per_epoch": fused_valid,
                "projected_seconds_per_epoch": k * epoch_tokens / fused_rate + fused_valid,
                "recurrence": "batched" if (device.type == "cuda" if batched is None else batched) else "per-run",
                "batches": opts["batches"],
                "warmup": opts["warmup"],
                "solo_tokens_per_second": solo_rate,
                "fused_tokens_per_second": fused_rate,
                "speedup": fused_rate / solo_rate,
                "solo_seconds_per_batch": solo_seconds / opts["batches"],
                "fused_seconds_per_batch": fused_seconds / opts["batches"],
                "solo_peak_memory_bytes": solo_peak,
                "fused_peak_memory_bytes": fused_peak,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    return rows


def add_cli(parser) -> None:
    parser.add_argument("--dataset", required=True, choices=presets.DATASETS, help="ptb or wt2")
    parser.add_argument("--variant", required=True, help=f"one of: {', '.join(presets.variants())}")
    parser.add_argument(
        "--data", default=None,
        help="folder with train/valid/test.txt (default resources/data/<dataset> if present, else random tokens)",
    )  # fmt: skip
    parser.add_argument("--corpus-cache", default=None, help="tensor cache of the corpus to read instead of --data")
    parser.add_argument("--batches", type=positive_int, default=50, help="timed training steps per run (default 50)")
    parser.add_argument("--warmup", type=positive_int, default=3, help="untimed steps before timing (default 3)")
    parser.add_argument("--valid-chunks", type=positive_int, default=20,
                        help="bptt-row chunks of the validation split timed for the estimate (default 20)")  # fmt: skip
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--runs", type=positive_int, default=1, help="independent runs started at once on the device")
    parser.add_argument("--phase", choices=("sgd", "asgd"), default="sgd", help="time SGD steps or ASGD steps")
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="torch CPU threads per run (default: torch's)"
    )
    parser.add_argument(
        "--loss-path", choices=LOSS_PATHS, default="nll",
        help="nll: the trainer's loss path (default); full: the [L, B, V] log-probabilities, for comparison",
    )  # fmt: skip
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one hyper-parameter of the preset (repeatable)")  # fmt: skip
    parser.add_argument(
        "--fused", type=positive_int, default=None, metavar="K",
        help="time K runs (seeds seed … seed+K-1) trained fused in this process beside one run alone",
    )  # fmt: skip
    parser.add_argument(
        "--recurrence", choices=("auto", "batched", "per-run"), default="auto",
        help="with --fused: the recurrences batched in one GEMM per step (CUDA's default) or run by run (the CPU's)",
    )  # fmt: skip


def run_cli(args) -> int:
    if args.fused is not None and args.runs != 1:
        raise SystemExit("bench: --runs (runs as separate processes) and --fused K (K runs in this process) time "
                         "different things: give one of them")  # fmt: skip
    if args.fused is None and args.recurrence != "auto":
        raise SystemExit(f"bench: --recurrence {args.recurrence} applies to --fused K only")
    try:
        opts = {
            "dataset": args.dataset,
            "variant": args.variant,
            "overrides": presets.parse_overrides(args.overrides),
            "data": args.data,
            "corpus_cache": args.corpus_cache,
            "batches": args.batches,
            "warmup": args.warmup,
            "valid_chunks": args.valid_chunks,
            "device": args.device,
            "runs": args.runs,
            "phase": args.phase,
            "threads": args.threads,
            "loss_path": args.loss_path,
            "fused": args.fused,
            "recurrence": args.recurrence,
        }
        presets.resolve(args.dataset, args.variant, "et", opts["overrides"])  # fail before any work
        foreign = presets.not_owned_note(args.variant, opts["overrides"])
        if foreign:  # as train: scripts bench several variants with one set of keys (benchmarks/packing.py)
            log.warning("%s (ignored)", foreign)
        keep_freed_host_memory(resolve_device(args.device))  # the steps timed as the trainer's process runs them
        if args.fused is not None:
            (result,) = measure_fused(opts, *bench_corpus(args.dataset, args.data, args.corpus_cache))
        else:
            result = run_bench(opts)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        raise SystemExit(f"bench: {err}") from None
    for key in ("started", "ended", "tokens"):
        result.pop(key, None)
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0
