"""Top-5 predictions at the 18 located contexts of the PTB test stream (Figure 3, SM Table 2).

The PTB test set is read at batch size 1 with the hidden state carried from its beginning (the log-P
pass of ``analyze``); at each context the model's five most probable next words and their probabilities are
reported, and whether the true next token is among them. ``token_index`` is the 0-based position of
the true token in the test stream (``<eos>`` included), so the prediction is log-P row index − 1.
"""

from __future__ import annotations

import logging

import pandas as pd
import torch

from softmax_bottleneck.analysis.inputs import model_and_corpus, model_and_corpus_files, report, write_error
from softmax_bottleneck.analysis.logp import iter_logp
from softmax_bottleneck.analysis.outputs import OutputError, check_writable
from softmax_bottleneck.atomic import atomic_path
from softmax_bottleneck.cluster.signals import stop_on_signals

log = logging.getLogger(__name__)

#: (group, number, true next token, token index in the PTB test stream) of the contexts of SM Table 2
CONTEXTS = [
    ("Yang", 1, "tons", 2700), ("Yang", 2, "a", 21300), ("Yang", 3, "african", 82040),
    ("Yang", 4, "ual", 478), ("Yang", 5, "conspiracy", 82205), ("Yang", 6, "subsidies", 63609),
    ("Ours", 1, "states", 32603), ("Ours", 2, "bill", 36509), ("Ours", 3, "stocks", 38890),
    ("Ours", 4, "customers", 46198), ("Ours", 5, "incentives", 54702), ("Ours", 6, "workers", 57173),
    ("Random", 1, "expected", 18782), ("Random", 2, "centrust", 28690), ("Random", 3, "usair", 48746),
    ("Random", 4, "stake", 65255), ("Random", 5, "rate", 41649), ("Random", 6, "skills", 58545),
]  # fmt: skip
COLUMNS = ["group", "number", "token_index", "true_token"]
COLUMNS += [f"word_{k}" for k in range(1, 6)] + [f"prob_{k}" for k in range(1, 6)] + ["hit"]


def check_contexts(test: torch.Tensor, idx2word: list[str], contexts=CONTEXTS) -> None:
    """The located tokens must be where SM Table 2 has them; otherwise the test file is not the canonical one."""
    for group, number, word, index in contexts:
        found = idx2word[int(test[index])] if index < len(test) else None
        if found != word:
            raise ValueError(f"{group} #{number}: expected {word!r} at test token {index}, found {found!r}")


def top5(model, test: torch.Tensor, idx2word: list[str], contexts=CONTEXTS) -> pd.DataFrame:
    """One row per context: the five most probable words, their probabilities and the hit flag."""
    check_contexts(test, idx2word, contexts)
    wanted = {index - 1: (group, number, word, index) for group, number, word, index in contexts}
    rows, done = [], 0
    for log_prob, _ in iter_logp(model, test, max(wanted) + 1, model.hp["bptt"]):
        for r in range(len(log_prob)):
            if done + r in wanted:
                group, number, word, index = wanted[done + r]
                values, ids = log_prob[r].topk(5)
                words = [idx2word[int(i)] for i in ids]
                probs = [round(float(v.exp()), 6) for v in values]
                rows.append([group, number, index, word, *words, *probs, word in words])
        done += len(log_prob)
    order = {(g, n): k for k, (g, n, _, _) in enumerate(contexts)}
    rows.sort(key=lambda row: order[(row[0], row[1])])
    return pd.DataFrame(rows, columns=COLUMNS)


def add_cli(parser) -> None:
    parser.description = (
        "Top-5 next-word predictions of a PTB model at the 18 test contexts of the paper's Figure 3 and SM Table 2 "
        "(hidden state carried from the start of the test set)."
    )
    parser.add_argument("--checkpoint", required=True, metavar="MODEL.pt", help="model.pt of a PTB run")
    parser.add_argument("--data", default=None, metavar="DIR", help="PTB folder (default: resources/data/ptb)")
    parser.add_argument(
        "--corpus-cache", default=None, metavar="FILE.pt", help="tensor cache of PTB, checked against --data"
    )
    parser.add_argument("--out", required=True, metavar="CSV", help="where to write the 18 rows of top-5 words")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")


def run_cli(args) -> int:
    with stop_on_signals("qualitative"):
        try:
            check_writable(args.out, inputs=model_and_corpus_files(args))
            model, _, corpus = model_and_corpus(args, "ptb")
            check_contexts(corpus.test, corpus.dictionary.idx2word)
        except (ValueError, OutputError) as err:  # InputError, contexts not where SM Table 2 has them, an output
            return report("qualitative", err)
        table = top5(model, corpus.test, corpus.dictionary.idx2word)
        try:
            with atomic_path(args.out) as tmp:
                table.to_csv(tmp, index=False)
        except OSError as err:
            return report("qualitative", write_error(args.out, err))
    log.info("top-5 hits: %d of %d contexts", int(table["hit"].sum()), len(table))
    return 0
