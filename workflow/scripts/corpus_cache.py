"""Tokenise a corpus once (spec §2.2) into resources/corpus/<dataset>.pt for the training jobs."""

import logging

from softmax_bottleneck.corpora.corpus import read_corpus, save_corpus

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
corpus = read_corpus(snakemake.params.data)
save_corpus(corpus, snakemake.output[0])
logging.info(
    "%s: vocabulary %d, tokens %s",
    snakemake.output[0],
    corpus.vocab_size,
    {split: int(getattr(corpus, split).numel()) for split in ("train", "valid", "test")},
)
