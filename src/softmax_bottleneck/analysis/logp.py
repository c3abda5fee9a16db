"""The log-probability matrix of a trained model on the test set, streamed into its rank (paper §5; SM §4).

The test split is batchified with batch size 1 and read in chunks of ``bptt`` (70) rows with the
hidden state carried from the start (the same pass as the test evaluation); row r is the model's
full vector log P(· | test tokens 0…r). Rows: PTB all T − 1 = 82,429; WT2 by the reference's rule
"stop after the chunk that makes rows > columns" = 33,320 (``rows="reference"``), or every row
(``"full"``, 245,568), or the first N. Chunks go straight into :class:`softmax_bottleneck.analysis.rank.RankStream`,
so the matrix is never held in memory, on any device, unless the exact SVD is chosen (``method="auto"`` picks it
only while the float64 matrix, m·n·8 bytes, fits ``memory_budget_bytes``, default 8 GiB: PTB's 6.6 GB does, WT2
full's 65 GB does not). ``save_logp`` optionally writes the matrix to disk as ``.npy`` (memory-mapped).

Memory (besides the model), from :mod:`softmax_bottleneck.analysis.svd_stream`:

* ``rows="full"`` on WT2 (m = 245,568, n = 33,278) takes the streamed TSQR
  (:class:`~softmax_bottleneck.analysis.svd_stream.QRAccumulator`, b = 4096 rows per block), bounded
  independently of m: CPU ``≈ (n² + 1.5·b·n)·8`` bytes ≈ 10.5 GB; CUDA ``≈ 2·(n + b)·n·8`` bytes ≈ 20 GB.
  The reference rows of WT2 (33,320: 8.9 GB in float64, over the default budget) take the same path.
* PTB (82,429 × 10,000) takes the exact SVD: ``≈ m·n·12`` bytes on CPU (float32 rows, then float64) ≈ 10 GB;
  CUDA ``≈ 2·m·n·8`` bytes ≈ 13 GB. ``--method tsqr`` bounds it to ≈ 1.3 GB (CPU) / 2.3 GB (CUDA).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck.analysis.inputs import InputError, model_and_corpus, report
from softmax_bottleneck.analysis.rank import (
    DEFAULT_MEMORY_BUDGET,
    METHODS,
    RankStream,
    add_memory_budget_option,
    spectrum_table,
)
from softmax_bottleneck.analysis.signals import stop_on_signals
from softmax_bottleneck.argtypes import positive_int
from softmax_bottleneck.atomic import atomic_path, atomic_write_json
from softmax_bottleneck.corpora.corpus import batchify, get_batch

log = logging.getLogger(__name__)


class NonFiniteLogP(ValueError):
    """The model gave a NaN or infinite log-probability (the message names the row)."""


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
):
    """Stream the test log-P matrix into its rank; returns ``(singular values, summary dict)``.

    The summary has the keys of :func:`softmax_bottleneck.analysis.rank.rank_summary` plus ``rows_rule``,
    ``logp_test_loss`` (mean NLL of the true next tokens over the rows), ``max_abs_log_normaliser``
    (max over rows of |logsumexp(row)|, 0 up to rounding: every row is a distribution), ``seconds`` (in all),
    ``seconds_rows`` (the forward passes and the streamed updates), ``device`` and, on CUDA,
    ``peak_cuda_memory_gib`` (``torch.cuda.max_memory_allocated`` during the analysis, model included).
    """
    vocab = model.vocab_size
    n_rows = row_count(rows, dataset, len(test), vocab, model.hp["bptt"])
    device = model.encoder.weight.device
    stream = RankStream(vocab, method, device=str(device), memory_budget_bytes=memory_budget_bytes,
                        expected_rows=n_rows)  # fmt: skip
    nll_sum, worst_norm, done = 0.0, 0.0, 0
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    started = time.monotonic()
    with _npy_writer(save_logp, (n_rows, vocab)) as out:
        for log_prob, targets in iter_logp(model, test, n_rows, model.hp["bptt"]):
            if not torch.isfinite(log_prob).all():
                bad = done + int((~torch.isfinite(log_prob)).any(1).nonzero()[0])
                raise NonFiniteLogP(f"log-P row {bad} has non-finite entries; the SVD needs a finite matrix")
            nll_sum -= float(log_prob.gather(1, targets[:, None]).double().sum())
            worst_norm = max(worst_norm, float(torch.logsumexp(log_prob.double(), 1).abs().max()))
            stream.update(log_prob)
            if out is not None:
                out[done : done + len(log_prob)] = log_prob.cpu().numpy()
            done += len(log_prob)
            if done % (70 * 200) < len(log_prob):
                log.info("log-P: %d/%d rows (%.0fs)", done, n_rows, time.monotonic() - started)
    seconds_rows = time.monotonic() - started
    log.info("log-P: %d rows in %.0fs; computing singular values (%s)", done, seconds_rows, stream.method)
    sv, summary = stream.finish()
    summary.update(
        rows_rule=str(rows),
        logp_test_loss=nll_sum / done,
        max_abs_log_normaliser=worst_norm,
        seconds=time.monotonic() - started,
        seconds_rows=seconds_rows,
        device=str(device),
    )
    if cuda:
        summary["peak_cuda_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return sv, summary


@contextmanager
def _npy_writer(path, shape):
    """Yield a memory-mapped float32 ``.npy`` of ``shape`` that appears at ``path`` only once complete.

    The rows go to a temporary file beside ``path`` (:func:`softmax_bottleneck.atomic.atomic_path`), removed on any
    error or interruption (SIGTERM/SIGINT inside :func:`softmax_bottleneck.analysis.signals.stop_on_signals`).
    """
    if path is None:
        yield None
        return
    with atomic_path(path) as tmp:
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=shape)
        try:
            yield array
            array.flush()
        finally:
            del array


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
        help="singular-value method; auto: exact SVD if it fits --memory-budget-gb, else TSQR",
    )
    add_memory_budget_option(parser)
    parser.add_argument(
        "--save-logp",
        default=None,
        metavar="FILE.npy",
        help="also write the log-P matrix as a float32 .npy (PTB: 3.3 GB)",
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")


def run_cli(args) -> int:
    with stop_on_signals("analyze"):
        try:
            model, meta, corpus = model_and_corpus(args)
            sv, summary = analyze(model, corpus.test, meta["dataset"], args.rows, args.method,
                                  int(args.memory_budget_gb * 2**30), args.save_logp)  # fmt: skip
        except NonFiniteLogP as err:
            return report("analyze", f"{args.checkpoint}: {err}")
        except InputError as err:
            return report("analyze", err)
        summary.update(checkpoint=str(args.checkpoint), dataset=meta["dataset"], variant=meta["variant"])
        if args.out_spectrum:
            with atomic_path(args.out_spectrum) as tmp:
                spectrum_table(sv).to_csv(tmp, index=False)
        atomic_write_json(summary, args.out_json)
    log.info(
        "Press' rank %d of %s; ε-ranks %s; log-P test loss %.4f (ppl %.2f); %.0fs (%s)",
        summary["press_rank"], summary["shape"], json.dumps(summary["effective_rank"]),
        summary["logp_test_loss"], math.exp(summary["logp_test_loss"]), summary["seconds"], summary["method"],
    )  # fmt: skip
    return 0
