"""The log-probability matrix of a trained model on the test set, streamed into its rank (paper §5; SM §4).

The test split is batchified with batch size 1 and read in chunks of ``bptt`` (70) rows with the
hidden state carried from the start (the same pass as the test evaluation); row r is the model's
full vector log P(· | test tokens 0…r). Rows: PTB all T − 1 = 82,429; WT2 by the reference's rule
"stop after the chunk that makes rows > columns" = 33,320 (``rows="reference"``), or every row
(``"full"``, 245,568), or the first N. Chunks go straight into :class:`softmax_bottleneck.analysis.rank.RankStream`,
so the matrix is never held in memory, on any device, unless the exact SVD is chosen (``method="auto"`` picks it
only for small matrices, float64 copy ≤ 1 GiB; beyond, the streamed Gram method). Every method's peak memory is
estimated before the model runs and a method over ``memory_budget_bytes`` (``--memory-budget-gb``, default 17 GiB)
is refused with one line naming what fits. ``save_logp`` optionally writes the matrix to disk as ``.npy``
(memory-mapped, its disk space reserved up front).

Memory of the rank computation (besides the model), from :func:`softmax_bottleneck.analysis.rank.memory_needed`:
Gram ``(n² + b·n)·8`` bytes (b = 4,096): PTB 1.1 GiB, WT2 (reference or full rows) 9.3 GiB; TSQR
``(n² + 1.5·b·n)·8``; exact ``m·n·12 + min(m, n)²·8`` (PTB ≈ 10 GB). Costs, precision and measurements:
``docs/rank-at-scale.md`` and ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from softmax_bottleneck.analysis.inputs import InputError, model_and_corpus, model_and_corpus_files, report
from softmax_bottleneck.analysis.logp_rows import NonFiniteLogP, feed_rows
from softmax_bottleneck.analysis.outputs import (
    OutputError,
    all_or_none,
    check_writable,
    npy_writer,
    remove_stale_temporaries,
    write_text,
)
from softmax_bottleneck.analysis.rank import (
    DEFAULT_MEMORY_BUDGET,
    METHODS,
    MemoryBudgetError,
    RankStream,
    add_memory_budget_option,
    memory_needed,
    spectrum_table,
)
from softmax_bottleneck.argtypes import npy_path, positive_int
from softmax_bottleneck.cluster import processes
from softmax_bottleneck.cluster.signals import stop_on_signals
from softmax_bottleneck.corpora.corpus import batchify, get_batch

log = logging.getLogger(__name__)


class Progress:
    """One log line every ``every`` seconds: rows done, rate, time left, resident memory (now / peak)."""

    def __init__(self, total: int, every: float = 30.0):
        self.total, self.every = int(total), float(every)
        self.started = self.last = time.monotonic()

    def rows(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every and done < self.total:
            return
        self.last = now
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (self.total - done) / rate if rate > 0 else float("nan")
        log.info(
            "log-P: %d/%d rows (%.1f%%), %.0f rows/s, %.0fs elapsed, %.0fs left; %s",
            done, self.total, 100.0 * done / max(self.total, 1), rate, elapsed, left, processes.memory_text(),
        )  # fmt: skip

    @contextmanager
    def heartbeat(self, what: str):
        """Log ``what``, elapsed seconds and memory every ``every`` seconds while the block runs.

        The lines come from a small watcher process that reads this one's memory (:func:`.processes.memory_text`): a
        long LAPACK call through scipy holds the GIL, so no Python thread of this process could speak meanwhile.
        Without ``/proc`` (macOS) the lines give the time alone. The watcher ends when the block ends or this process
        dies (its stdin pipe closes).
        """
        started = time.monotonic()
        watcher = None
        try:
            package_root = Path(processes.__file__).resolve().parents[2]  # the folder that holds softmax_bottleneck
            argv = [str(os.getpid()), str(self.every), what, log.name, str(processes.PROC), str(package_root)]
            watcher = subprocess.Popen([sys.executable, "-c", _WATCHER, *argv], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, process_group=0)  # fmt: skip
        except OSError:  # no watcher, no heartbeat: the result does not depend on it
            pass
        try:
            yield
        finally:
            if watcher is not None:
                watcher.stdin.close()
                try:
                    watcher.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    watcher.kill()
        seconds, peak = time.monotonic() - started, processes.peak_resident_bytes() / 2**30
        log.info("%s: done in %.0fs; peak RSS %.2f GiB", what, seconds, peak)


#: the heartbeat's watcher process (see :meth:`Progress.heartbeat`): argv = pid, seconds, what, logger name, /proc,
#: the folder that holds the package. It imports :mod:`softmax_bottleneck.cluster.processes` alone (no PyTorch). It
#: runs in its own process group, which a terminal's Ctrl-C does not reach, and ignores a SIGINT sent to it all the
#: same (a batch scheduler may signal every process of a job): it ends with the step, or when the analysis dies.
_WATCHER = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
import pathlib, select, sys, time
sys.path.insert(0, sys.argv[6])
from softmax_bottleneck.cluster import processes
pid, every, what, name = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
processes.PROC = pathlib.Path(sys.argv[5])
started = time.monotonic()
while not select.select([sys.stdin], [], [], every)[0]:
    memory = processes.memory_text(pid)
    stamp, seconds = time.strftime("%Y-%m-%d %H:%M:%S"), time.monotonic() - started
    print(f"{stamp} INFO {name}: {what}: running for {seconds:.0f}s" + (f"; {memory}" if memory else ""),
          file=sys.stderr, flush=True)
"""


def row_count(rows: str | int, dataset: str, n_tokens: int, vocab_size: int, bptt: int) -> int:
    """Number of log-P rows for the ``rows`` rule (see module docstring)."""
    predictable = n_tokens - 1
    if rows == "full" or (rows == "reference" and dataset == "ptb"):
        return predictable
    if rows == "reference":
        chunks = vocab_size // bptt + 1  # the first chunk count whose rows exceed the columns
        return min(predictable, chunks * bptt)
    n = int(rows)
    if n < 1:
        raise ValueError(f"rows must be positive, got {n}")
    return min(n, predictable)


@torch.no_grad()
def iter_logp(model, test: torch.Tensor, n_rows: int, bptt: int = 70) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``(log_prob [L, V], targets [L])`` chunks of the first ``n_rows`` rows, on the model's device."""
    model.eval()
    device = model.encoder.weight.device
    data = batchify(test, 1)
    hidden = model.init_hidden(1)
    done = 0
    for i in range(0, data.size(0) - 1, bptt):
        if done >= n_rows:
            break
        inputs, targets = get_batch(data, i, bptt)
        log_prob, hidden, _, _ = model(inputs.to(device), hidden)
        take = min(len(inputs), n_rows - done)
        yield log_prob[:take, 0, :].float(), targets[:take, 0].to(device)
        done += take


def analyze(
    model,
    test: torch.Tensor,
    dataset: str,
    rows: str | int = "reference",
    method: str = "auto",
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET,
    save_logp: str | Path | None = None,
    progress_seconds: float = 30.0,
):
    """Stream the test log-P matrix into its rank; returns ``(singular values, summary dict)``.

    The summary has the keys of :func:`softmax_bottleneck.analysis.rank.rank_summary` plus ``rows_rule``,
    ``logp_test_loss`` (mean NLL of the true next tokens over the rows), ``max_abs_log_normaliser``
    (max over rows of |logsumexp(row)|, 0 up to rounding: every row is a distribution), ``seconds`` (in all),
    ``seconds_rows`` (the forward passes and the streamed updates), ``seconds_update`` (the updates alone),
    ``seconds_factorisation`` (the final SVD or eigenvalues), ``peak_rss_gib`` (the process's peak resident
    memory so far), ``device`` and, on CUDA,
    ``peak_cuda_memory_gib`` (``torch.cuda.max_memory_allocated`` during the analysis, model included).
    """
    vocab = model.vocab_size
    n_rows = row_count(rows, dataset, len(test), vocab, model.hp["bptt"])
    device = model.encoder.weight.device
    stream = RankStream(vocab, method, device=str(device), memory_budget_bytes=memory_budget_bytes,
                        expected_rows=n_rows)  # fmt: skip
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    log.info(
        "log-P: %d × %d matrix, method %s (needs about %.1f GiB; budget %.1f GiB)",
        n_rows, vocab, stream.method, memory_needed(stream.method, n_rows, vocab, str(device)) / 2**30,
        memory_budget_bytes / 2**30,
    )  # fmt: skip
    started = time.monotonic()
    progress = Progress(n_rows, every=progress_seconds)
    with npy_writer(save_logp, (n_rows, vocab)) as out:
        totals = feed_rows(iter_logp(model, test, n_rows, model.hp["bptt"]), stream, out, progress.rows)
    done, seconds_update = totals.rows, totals.seconds_update
    seconds_rows = time.monotonic() - started
    log.info(
        "log-P: %d rows in %.0fs (%.0fs of them in the %s updates); computing the singular values",
        done, seconds_rows, seconds_update, stream.method,
    )  # fmt: skip
    flops = stream.flops
    if flops and seconds_update > 0:  # the eigen-reduction's floor at the speed the Gram updates ran
        rate = flops / seconds_update
        log.info(
            "Gram updates ran at %.1f GFLOP/s; the eigenvalues ((4/3)·n³ = %.2g flops) take at least %.0fs at that "
            "speed (their matrix-vector half runs slower)", rate / 1e9, 4 / 3 * vocab**3, 4 / 3 * vocab**3 / rate,
        )  # fmt: skip
    where = stream.eig_where
    with progress.heartbeat(f"singular values ({stream.method}, {done:,} × {vocab:,}{'; ' + where if where else ''})"):
        t0 = time.monotonic()
        sv, summary = stream.finish()
        seconds_factor = time.monotonic() - t0
    summary.update(
        rows_rule=str(rows),
        logp_test_loss=totals.nll_sum / done,
        max_abs_log_normaliser=totals.worst_norm,
        seconds=time.monotonic() - started,
        seconds_rows=seconds_rows,
        seconds_update=seconds_update,
        seconds_factorisation=seconds_factor,
        peak_rss_gib=processes.peak_resident_bytes() / 2**30,
        device=str(device),
    )
    if cuda:
        summary["peak_cuda_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return sv, summary


def _rows(text: str) -> str | int:
    if text in ("reference", "full"):
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected reference, full or a positive number of rows, not {text!r}"
        ) from None


def add_cli(parser) -> None:
    parser.description = (
        "Extract a trained model's log-probability matrix on the test set (batch size 1, hidden state carried) and "
        "compute its Press' rank, ε-effective ranks and singular values without holding the matrix in memory."
    )
    parser.add_argument("--checkpoint", required=True, metavar="MODEL.pt", help="model.pt of a trained run")
    parser.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="folder with train/valid/test.txt (default: resources/data/<the model's dataset>)",
    )
    parser.add_argument(
        "--corpus-cache",
        default=None,
        metavar="FILE.pt",
        help="tensor cache of the corpus, checked against --data (written if absent)",
    )
    parser.add_argument("--out-json", required=True, metavar="JSON", help="where to write the rank summary")
    parser.add_argument(
        "--out-spectrum",
        default=None,
        metavar="CSV",
        help="also write the singular values (index, sigma, sigma_normalised)",
    )
    parser.add_argument(
        "--rows",
        default="reference",
        type=_rows,
        help="log-P rows: reference (PTB all, WT2 33,320 as the paper), full, or a number N",
    )
    parser.add_argument(
        "--method",
        default="auto",
        choices=METHODS,
        help="singular-value method; auto: exact SVD up to a 1 GiB float64 matrix, else the streamed Gram",
    )
    add_memory_budget_option(parser)
    parser.add_argument(
        "--save-logp",
        type=npy_path,
        default=None,
        metavar="FILE.npy",
        help="also write the log-P matrix as a float32 .npy (PTB: 3.3 GB)",
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")


def run_cli(args) -> int:
    with stop_on_signals("analyze"):
        try:
            check_writable(args.out_json, args.out_spectrum, args.save_logp, inputs=model_and_corpus_files(args))
        except OutputError as err:
            return report("analyze", err)
        remove_stale_temporaries(args.out_json, args.out_spectrum, args.save_logp)
        try:
            with all_or_none(args.save_logp, args.out_spectrum, args.out_json):
                model, meta, corpus = model_and_corpus(args)
                sv, summary = analyze(model, corpus.test, meta["dataset"], args.rows, args.method,
                                      int(args.memory_budget_gb * 2**30), args.save_logp)  # fmt: skip
                summary.update(checkpoint=str(args.checkpoint), dataset=meta["dataset"], variant=meta["variant"])
                if args.out_spectrum:
                    write_text(spectrum_table(sv).to_csv(index=False), args.out_spectrum)
                write_text(json.dumps(summary, indent=2, sort_keys=True, allow_nan=False) + "\n", args.out_json)
        except (NonFiniteLogP, MemoryBudgetError) as err:
            return report("analyze", f"{args.checkpoint}: {err}")
        except (InputError, OutputError) as err:
            return report("analyze", err)
    log.info(
        "Press' rank %d of %s; ε-ranks %s; log-P test loss %.4f (ppl %.2f); %.0fs (%s)",
        summary["press_rank"], summary["shape"], json.dumps(summary["effective_rank"]),
        summary["logp_test_loss"], math.exp(summary["logp_test_loss"]), summary["seconds"], summary["method"],
    )  # fmt: skip
    return 0
