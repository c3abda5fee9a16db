"""The two corpora of the study (paper §4; SM §1), each described once.

Penn Treebank as preprocessed by Mikolov et al. (10,000 words with ``<eos>``) and WikiText-2 v1, tokenised
(33,278 words with ``<eos>``). ``split_tokens`` counts one ``<eos>`` per line, as AWD-LSTM's ``data.py`` reads the
files (the test splits, 82,430 and 245,569 tokens, give the log-P matrices of Tables 2 and 6 their rows: every
token but the last on PTB, 82,429, and the first 33,320 on WT2: :mod:`softmax_bottleneck.analysis.logp`). The files
themselves and their SHA-256 are :data:`softmax_bottleneck.corpora.download.FILES`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dataset:
    name: str  # the study's name: ptb, wt2
    folder: str  # its folder under resources/data (and in a data mirror)
    display: str  # its name in tables and figures
    vocab_size: int  # words, <eos> included
    split_tokens: tuple[int, int, int]  # train, valid, test tokens, one <eos> per line included


#: name -> dataset, in the paper's order
DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("ptb", "ptb", "PTB", 10_000, (929_589, 73_760, 82_430)),
        Dataset("wt2", "wikitext-2", "WT2", 33_278, (2_088_628, 217_646, 245_569)),
    )
}


#: a corpus's three text files, ``<split>.txt`` in its folder
SPLITS = ("train", "valid", "test")
#: where the workflow keeps the data, relative to its working directory: the text files (one folder per dataset,
#: ``Dataset.folder``), the 13 word-similarity benchmarks, and each corpus tokenised once (rule ``corpus_cache``)
DATA_ROOT = "resources/data"
WORDSIM_FOLDER = f"{DATA_ROOT}/word-sim"
CORPUS_CACHE = "resources/corpus/{dataset}.pt"


def dataset(name: str) -> Dataset:
    """The dataset called ``name``; ValueError naming the known ones otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}") from None
