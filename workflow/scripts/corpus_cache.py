"""Tokenise a corpus once (paper §4, SM §1) into resources/corpus/<dataset>.pt for the training jobs.

The text files must be the study's (SHA-256 of softmax_bottleneck.corpora.download); the cache records their
checksums, so every later job can check it against the files beside it. A wrong file fails in one line.
"""

import logging
import sys

from softmax_bottleneck.corpora.corpus import CorpusError, read_corpus, save_corpus

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
try:
    corpus = read_corpus(snakemake.params.data, dataset=snakemake.wildcards.dataset)
except (CorpusError, FileNotFoundError) as err:
    logging.error("%s", err)
    sys.exit(f"corpus_cache: {err}")
save_corpus(corpus, snakemake.output[0])
logging.info(
    "%s: vocabulary %d, tokens %s, sha256 %s",
    snakemake.output[0],
    corpus.vocab_size,
    {split: int(getattr(corpus, split).numel()) for split in ("train", "valid", "test")},
    corpus.sources,
)
