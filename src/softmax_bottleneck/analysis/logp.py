"""The log-probability matrix of a trained model on the test set, streamed into its rank (spec §8, §9).

The test split is batchified with batch size 1 and read in chunks of ``bptt`` (70) rows with the
hidden state carried from the start (the same pass as the test evaluation); row r is the model's
full vector log P(· | test tokens 0…r). Rows: PTB all T − 1 = 82,429; WT2 by the reference's rule
"stop after the chunk that makes rows > columns" = 33,320 (``rows="reference"``), or every row
(``"full"``, 245,568), or the first N. Chunks go straight into :class:`softmax_bottleneck.analysis.rank.RankStream`,
so the matrix is never needed in memory; ``save_logp`` optionally writes it as ``.npy``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck.analysis.rank import DEFAULT_MEMORY_BUDGET, METHODS, RankStream, spectrum_table
from softmax_bottleneck.atomic import atomic_path, atomic_write_json
from softmax_bottleneck.corpora.corpus import DATASET_DIRS, batchify, get_batch, load_corpus
from softmax_bottleneck.training.checkpoint import load_model

log = logging.getLogger(__name__)


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
    ``logp_test_loss`` (mean NLL of the true next tokens over the rows) and ``max_abs_log_normaliser``
    (max over rows of |logsumexp(row)|, 0 up to rounding: every row is a distribution).
    """
    vocab = model.vocab_size
    n_rows = row_count(rows, dataset, len(test), vocab, model.hp["bptt"])
    device = model.encoder.weight.device
    stream = RankStream(vocab, method, device=str(device), memory_budget_bytes=memory_budget_bytes,
                        expected_rows=n_rows)  # fmt: skip
    nll_sum, worst_norm, done = 0.0, 0.0, 0
    started = time.monotonic()
    with _maybe_npy(save_logp, (n_rows, vocab)) as out:
        for log_prob, targets in iter_logp(model, test, n_rows, model.hp["bptt"]):
            if not torch.isfinite(log_prob).all():
                bad = done + int((~torch.isfinite(log_prob)).any(1).nonzero()[0])
                raise ValueError(f"log-P row {bad} has non-finite entries; the SVD needs a finite matrix (§15.6)")
            nll_sum -= float(log_prob.gather(1, targets[:, None]).double().sum())
            worst_norm = max(worst_norm, float(torch.logsumexp(log_prob.double(), 1).abs().max()))
            stream.update(log_prob)
            if out is not None:
                out[done : done + len(log_prob)] = log_prob.cpu().numpy()
            done += len(log_prob)
            if done % (70 * 200) < len(log_prob):
                log.info("log-P: %d/%d rows (%.0fs)", done, n_rows, time.monotonic() - started)
    log.info("log-P: %d rows; computing singular values (%s)", done, stream.method)
    sv, summary = stream.finish()
    summary.update(
        rows_rule=str(rows),
        logp_test_loss=nll_sum / done,
        max_abs_log_normaliser=worst_norm,
        seconds=time.monotonic() - started,
    )
    return sv, summary


class _maybe_npy:
    """Write rows into ``path`` (``.npy``, memory-mapped, renamed into place only when complete)."""

    def __init__(self, path, shape):
        self.path, self.shape, self._ctx = path, shape, None

    def __enter__(self):
        if self.path is None:
            return None
        self._ctx = atomic_path(self.path)
        tmp = self._ctx.__enter__()
        self.array = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=self.shape)
        return self.array

    def __exit__(self, *exc):
        if self._ctx is None:
            return False
        self.array.flush()
        del self.array
        return self._ctx.__exit__(*exc)


def add_cli(parser) -> None:
    parser.add_argument("--checkpoint", required=True, help="model.pt of a trained run")
    parser.add_argument("--data", default=None, help="train/valid/test.txt folder (default resources/data/<dataset>)")
    parser.add_argument("--corpus-cache", default=None)
    parser.add_argument("--out-json", required=True, help="rank summary (JSON)")
    parser.add_argument("--out-spectrum", default=None, help="singular values (CSV: index, sigma, sigma_normalised)")
    parser.add_argument("--rows", default="reference", help="reference (§8), full, or a number of rows")
    parser.add_argument("--method", default="auto", choices=METHODS)
    parser.add_argument("--memory-budget-gb", type=float, default=DEFAULT_MEMORY_BUDGET / 2**30)
    parser.add_argument("--save-logp", default=None, help="also write the matrix as .npy")
    parser.add_argument("--device", default="auto")


def run_cli(args) -> int:
    from softmax_bottleneck.training.trainer import resolve_device

    device = resolve_device(args.device)
    rows = args.rows if args.rows in ("reference", "full") else int(args.rows)
    try:
        meta_dataset = torch.load(args.checkpoint, map_location="cpu", weights_only=True)["dataset"]
        data_dir = args.data or Path("resources/data") / DATASET_DIRS[meta_dataset]
        corpus = load_corpus(data_dir, args.corpus_cache)
        model, meta = load_model(args.checkpoint, device, corpus=corpus)
        sv, summary = analyze(model, corpus.test, meta["dataset"], rows, args.method,
                              int(args.memory_budget_gb * 2**30), args.save_logp)  # fmt: skip
    except (ValueError, FileNotFoundError, KeyError) as err:
        raise SystemExit(f"analyze: {err}") from None
    summary.update(checkpoint=str(args.checkpoint), dataset=meta["dataset"], variant=meta["variant"])
    if args.out_spectrum:
        with atomic_path(args.out_spectrum) as tmp:
            spectrum_table(sv).to_csv(tmp, index=False)
    atomic_write_json(summary, args.out_json)
    log.info(
        "Press' rank %d of %s; ε-ranks %s; log-P test loss %.4f (ppl %.2f)",
        summary["press_rank"], summary["shape"], json.dumps(summary["effective_rank"]),
        summary["logp_test_loss"], math.exp(summary["logp_test_loss"]),
    )  # fmt: skip
    return 0
