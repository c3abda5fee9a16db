"""Word similarity of a model's (tied) embedding on the 13 wordvectors.org benchmarks (SM Tables 3, 13; Figure 4).

Protocol of the reference (KIT ``utils/analysis/word_similarity/{process,ranking}.py``, after Faruqui & Dyer's
``all_wordsim.py``):

* embedding = ``model.encoder.weight`` (the tied input/output embedding), every row L2-normalised;
* vocabulary = the model's corpus dictionary, **case-sensitive** as stored. Benchmark lines are lower-cased, so a
  benchmark word matches the vocabulary token equal to its lower-cased form (direct lookup; PTB and WT2 are
  mostly lower-case, capitalised WT2 tokens such as ``Paris`` never match). With this rule the "not found" counts of
  SM Table 13 are reproduced exactly for both corpora (see ``tests/test_wordsim.py``);
* pairs are keyed by the lower-cased ``(word1, word2)`` as the reference's dict keys them: a pair listed twice
  counts once, with its **last** score (:func:`unique_pairs`). Only WS-353 has such a pair in the shipped files
  (money–cash, 9.15 then 9.08), so it scores 352 pairs; the reference prints the file's 353 lines as its "Num
  Pairs" (SM Table 13) but correlates the 352 keys;
* a pair is skipped ("not found") if either word is missing; nothing is backed off;
* score = Spearman's ρ (average ranks for ties, ``scipy.stats.spearmanr``) between the gold scores and the
  cosine similarities of the kept pairs; ρ = 0 if no pair is kept.

The reference adds 1e-6 in place to both vectors before each cosine (a drift of 1e-6 per use); this is not
replicated (it changes ρ at most in the 4th decimal).
"""

from __future__ import annotations

import argparse
import io
import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from softmax_bottleneck import readback

log = logging.getLogger(__name__)

#: the largest word-similarity benchmark file read (the 13 of the SM: under 200 KB each)
MAX_BENCHMARK_BYTES = 64 * 2**20

#: SM name → file name in the benchmark folder, in SM Table 3 order
BENCHMARKS: OrderedDict[str, str] = OrderedDict(
    [
        ("WS-353", "WS-353-ALL.txt"),
        ("WS-353-SIM", "WS-353-SIM.txt"),
        ("WS-353-REL", "WS-353-REL.txt"),
        ("RG-65", "RG-65.txt"),
        ("MC-30", "MC-30.txt"),
        ("MTurk-287", "MTurk-287.txt"),
        ("MTurk-771", "MTurk-771.txt"),
        ("MEN", "MEN-TR-3k.txt"),
        ("YP-130", "YP-130.txt"),
        ("VERB-143", "VERB-143.txt"),
        ("RW-STANFORD", "RW-STANFORD.txt"),
        ("SimVerb-3500", "SimVerb-3500.txt"),
        ("SimLex-999", "SimLex-999.txt"),
    ]
)

Pair = tuple[str, str, float]


def read_benchmark(path: str | Path) -> list[Pair]:
    """Read ``word1 word2 score`` lines (``line.strip().lower().split()``), skipping blank lines.

    Handles CRLF, mixed case and a missing final newline. A line that does not have exactly three fields or whose
    score is not a finite number raises ``ValueError`` naming the file and the (1-based) line number; so do a file
    that is not UTF-8 text and a file without a single pair (a benchmark of 0 pairs would score a Spearman of 0).
    """
    path = Path(path)
    try:  # the bounded reader: a regular file (a link's target: a data mirror may link), never a FIFO waited on
        text = readback.read_bytes(path, MAX_BENCHMARK_BYTES, follow_links=True, what="benchmark file").decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte offset {err.start}); restore the benchmark file") from None
    pairs: list[Pair] = []
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
        fields = line.strip().lower().split()
        if not fields:
            continue
        if len(fields) != 3:
            raise ValueError(f"{path}:{lineno}: expected 'word1 word2 score', got {len(fields)} field(s)")
        try:
            score = float(fields[2])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: score {fields[2]!r} is not a number") from None
        if not math.isfinite(score):
            raise ValueError(f"{path}:{lineno}: score {fields[2]!r} is not finite")
        pairs.append((fields[0], fields[1], score))
    if not pairs:
        raise ValueError(f"{path}: no word pairs (empty file); restore the benchmark file")
    return pairs


def unique_pairs(pairs: Sequence[Pair]) -> list[Pair]:
    """One pair per lower-cased ``(word1, word2)``, the last score winning (the reference's dict); first-seen order."""
    scores: dict[tuple[str, str], float] = {}
    for w1, w2, score in pairs:
        scores[(w1.lower(), w2.lower())] = score
    return [(w1, w2, score) for (w1, w2), score in scores.items()]


def _index(vocab: Sequence[str]) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, w in enumerate(vocab):
        index.setdefault(w, i)
    return index


def _normalised(embedding) -> np.ndarray:
    if type(embedding).__module__.startswith("torch"):
        embedding = embedding.detach().cpu().numpy()
    emb = np.asarray(embedding, dtype=np.float64)
    if emb.ndim != 2:
        raise ValueError(f"embedding must be 2-D [V, d], got shape {emb.shape}")
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return emb / norms


def _in_vocabulary(index: dict[str, int], pairs: Sequence[Pair]) -> tuple[int, list[tuple[int, int, float]]]:
    """The number of :func:`unique_pairs` of ``pairs``, and those whose two words (lower-cased) are in the
    vocabulary, as (row of word 1, row of word 2, gold score)."""
    pairs = unique_pairs(pairs)
    kept = [(index.get(w1.lower()), index.get(w2.lower()), score) for w1, w2, score in pairs]
    return len(pairs), [(i, j, score) for i, j, score in kept if i is not None and j is not None]


def _evaluate(unit: np.ndarray, index: dict[str, int], pairs: Sequence[Pair]) -> dict:
    from scipy import stats

    total, kept = _in_vocabulary(index, pairs)
    gold = [score for _, _, score in kept]
    pred = [float(unit[i] @ unit[j]) for i, j, _ in kept]
    found = len(gold)
    rho = 0.0
    if found:
        rho = float(stats.spearmanr(gold, pred).statistic)
        if not math.isfinite(rho):  # constant scores or similarities
            rho = 0.0
    return {"pairs": total, "found": found, "not_found": total - found, "spearman": rho}


def evaluate_embedding(embedding, vocab: Sequence[str], pairs: Sequence[Pair]) -> dict:
    """Spearman ρ of cosine similarity vs gold score on one benchmark.

    ``embedding``: ``[V, d]`` array (numpy or torch), row i is the vector of ``vocab[i]``. Returns
    ``{"pairs", "found", "not_found", "spearman"}``, counted over :func:`unique_pairs`.
    """
    unit = _normalised(embedding)
    if unit.shape[0] != len(vocab):
        raise ValueError(f"embedding has {unit.shape[0]} rows but the vocabulary {len(vocab)} words")
    return _evaluate(unit, _index(vocab), pairs)


def benchmark_files(benchmark_dir: str | Path, pinned: bool = True) -> OrderedDict[str, Path]:
    """SM name → path of every benchmark in ``benchmark_dir``: ``FileNotFoundError`` if one is missing; with
    ``pinned``, ``ValueError`` if one is not the published file (its SHA-256,
    :data:`softmax_bottleneck.corpora.download.FILES`): the study's numbers are those of the published benchmarks, and
    an edited score would change them in silence."""
    from softmax_bottleneck.corpora.download import FILES
    from softmax_bottleneck.corpora.integrity import file_sha256

    d = Path(benchmark_dir)
    out: OrderedDict[str, Path] = OrderedDict()
    missing = []
    for name, fname in BENCHMARKS.items():
        p = d / fname
        if not p.is_file():
            missing.append(fname)
        out[name] = p
    if missing:
        raise FileNotFoundError(f"{d}: missing benchmark file(s) {', '.join(missing)}")
    for fname in BENCHMARKS.values() if pinned else ():
        published, got = FILES[f"word-sim/{fname}"].sha256, file_sha256(d / fname)
        if got != published:
            raise ValueError(f"{d / fname}: SHA-256 {got[:8]}… is not the published benchmark's ({published[:8]}…): "
                             f"a damaged or edited copy; restore it with: python -m softmax_bottleneck fetch "
                             f"word-sim/{fname} (--own-benchmarks for files of your own)")  # fmt: skip
    return out


def evaluate_all(embedding, vocab: Sequence[str], benchmark_dir: str | Path, pinned: bool = True):
    """All 13 benchmarks → ``pandas.DataFrame(benchmark, pairs, found, not_found, spearman)`` in SM Table 3 order."""
    pairs = {name: read_benchmark(path) for name, path in benchmark_files(benchmark_dir, pinned).items()}
    return evaluate_pairs(embedding, vocab, pairs)


def evaluate_pairs(embedding, vocab: Sequence[str], pairs: dict[str, Sequence[Pair]]):
    """:func:`evaluate_all` of benchmarks already read (SM name → pairs, in SM Table 3 order)."""
    import pandas as pd

    unit = _normalised(embedding)
    if unit.shape[0] != len(vocab):
        raise ValueError(f"embedding has {unit.shape[0]} rows but the vocabulary {len(vocab)} words")
    index = _index(vocab)
    rows = [{"benchmark": name, **_evaluate(unit, index, benchmark)} for name, benchmark in pairs.items()]
    return pd.DataFrame(rows, columns=["benchmark", "pairs", "found", "not_found", "spearman"])


def vocabulary_coverage(vocab: Sequence[str], pairs: dict[str, Sequence[Pair]]):
    """SM Table 13 of one vocabulary, no model needed: per benchmark (SM name → pairs, in SM Table 3 order) its
    unique pairs, those whose two words are in ``vocab`` (scored by every model of that vocabulary) and those not,
    as ``pandas.DataFrame(benchmark, pairs, found, not_found)``."""
    import pandas as pd

    index = _index(vocab)
    rows = []
    for name, benchmark in pairs.items():
        total, kept = _in_vocabulary(index, benchmark)
        rows.append({"benchmark": name, "pairs": total, "found": len(kept), "not_found": total - len(kept)})
    return pd.DataFrame(rows, columns=["benchmark", "pairs", "found", "not_found"])


# --------------------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------------------


def add_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Spearman's rho between the cosine similarities of a model's (tied) word embedding and the human scores of "
        "the 13 word-similarity benchmarks of SM Table 3, with the pairs the vocabulary misses (SM Table 13)."
    )
    parser.add_argument("--checkpoint", required=True, metavar="MODEL.pt", help="model.pt of a trained run")
    parser.add_argument("--benchmarks", required=True, metavar="DIR", help="folder with the 13 benchmark files")
    parser.add_argument("--out", required=True, metavar="CSV", help="where to write one row per benchmark")
    parser.add_argument(
        "--own-benchmarks", action="store_true",
        help="the files need not be the published benchmarks (checked by SHA-256 otherwise): a folder of your own, "
        "whose numbers are not the study's",
    )  # fmt: skip


def run_cli(args) -> int:
    from softmax_bottleneck.analysis.inputs import InputError, load_checkpoint, report, write_error
    from softmax_bottleneck.analysis.outputs import check_writable
    from softmax_bottleneck.atomic import atomic_path
    from softmax_bottleneck.cluster.signals import stop_on_signals

    with stop_on_signals("wordsim"):
        try:
            files = benchmark_files(args.benchmarks, pinned=not args.own_benchmarks)
            pairs = {name: read_benchmark(p) for name, p in files.items()}  # a malformed file fails before the model
            check_writable(args.out, inputs=[args.checkpoint, *files.values()])
        except (OSError, ValueError) as exc:
            return report("wordsim", exc)
        try:
            model, meta = load_checkpoint(args.checkpoint, "cpu")
        except InputError as err:
            return report("wordsim", err)
        vocab = list(meta["vocab"])
        table = evaluate_pairs(model.encoder.weight, vocab, pairs)  # the files checked and read above, once
        table.insert(0, "variant", meta.get("variant"))
        table.insert(0, "dataset", meta.get("dataset"))
        try:
            with atomic_path(args.out) as tmp:
                table.to_csv(tmp, index=False, float_format="%.9g")
        except OSError as err:
            return report("wordsim", write_error(args.out, err))
    for row in table.itertuples():
        log.info("%-13s %4d/%4d pairs  rho = %.4f", row.benchmark, row.found, row.pairs, row.spearman)
    return 0
