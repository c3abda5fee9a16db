# Data: PTB, WikiText-2 and the 13 word-similarity benchmarks of E6 (Faruqui & Dyer's
# wordvectors.org files), each file verified by SHA-256 (softmax_bottleneck.corpora.download).
# `data_mirror: DIR` copies from a local folder instead. It reaches the fetch commands through the
# environment, set here from the config (never from the user's shell), not as a rule parameter: every
# file is verified by its pinned SHA-256 whatever its source, so switching between a mirror and the
# download must not fetch again (as a parameter it did, and a re-fetch hides the trainings still to run
# from that invocation: Snakemake skips jobs downstream of a rerun job when their inputs from it are
# ancient(), snakemake/snakemake#4166).
# A failed fetch is not retried (an unreachable source stays unreachable for seconds to come; each file has a
# second source where one exists), and fetches run one at a time: they claim every core (Snakemake scales a
# rule's threads down to --cores), so offline the first failure stops the run with one error block.
ONE_FETCH_AT_A_TIME = 1024


rule fetch_corpus:
    """Download (or copy from data_mirror) one corpus's train/valid/test.txt, verified by SHA-256."""
    output:
        [f"{DATA_ROOT}/{{corpus}}/{split}.txt" for split in SPLITS],
    log:
        "logs/fetch_corpus/{corpus}.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: ONE_FETCH_AT_A_TIME
    params:
        files=corpus_fetch_paths,
    shell:
        'echo "data mirror: ${{SOFTMAX_BOTTLENECK_DATA_MIRROR:-none (download)}}" > {log}; '
        f"python -m softmax_bottleneck.corpora.download --out-dir {DATA_ROOT} "
        '${{SOFTMAX_BOTTLENECK_DATA_MIRROR:+--mirror "$SOFTMAX_BOTTLENECK_DATA_MIRROR"}} {params.files} >> {log} 2>&1'


rule fetch_wordsim:
    """Download (or copy from data_mirror) one word-similarity benchmark, verified by SHA-256."""
    output:
        f"{WORDSIM_FOLDER}/{{benchmark}}.txt",
    log:
        "logs/fetch_wordsim/{benchmark}.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: ONE_FETCH_AT_A_TIME
    shell:
        'echo "data mirror: ${{SOFTMAX_BOTTLENECK_DATA_MIRROR:-none (download)}}" > {log}; '
        f"python -m softmax_bottleneck.corpora.download --out-dir {DATA_ROOT} "
        '${{SOFTMAX_BOTTLENECK_DATA_MIRROR:+--mirror "$SOFTMAX_BOTTLENECK_DATA_MIRROR"}} '
        "word-sim/{wildcards.benchmark}.txt >> {log} 2>&1"


rule corpus_cache:
    """Tokenise one corpus once into a tensor cache that records the text files' SHA-256."""
    input:
        corpus_files,
    output:
        CORPUS_CACHE,
    log:
        "logs/corpus_cache/{dataset}.log",
    benchmark:
        "benchmarks/corpus_cache/{dataset}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        data=corpus_data_dir,
    script:
        "../scripts/corpus_cache.py"
