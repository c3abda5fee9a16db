# Data: PTB, WikiText-2 and the 13 word-similarity benchmarks (spec §2.1, §12), each file verified
# by SHA-256 (softmax_bottleneck.corpora.download). `data_mirror: DIR` copies from a local folder instead.


include: "helpers/data.smk"


localrules:
    fetch_corpus,
    fetch_wordsim,


rule fetch_corpus:
    output:
        expand("resources/data/{{corpus}}/{split}.txt", split=SPLITS),
    log:
        "logs/fetch_corpus/{corpus}.log",
    retries: 2
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        files=corpus_fetch_paths,
        mirror=mirror_arg,
    shell:
        "python -m softmax_bottleneck.corpora.download --out-dir resources/data {params.mirror} {params.files} > {log} 2>&1"


rule fetch_wordsim:
    output:
        "resources/data/word-sim/{benchmark}.txt",
    log:
        "logs/fetch_wordsim/{benchmark}.log",
    retries: 2
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        mirror=mirror_arg,
    shell:
        "python -m softmax_bottleneck.corpora.download --out-dir resources/data {params.mirror} "
        "word-sim/{wildcards.benchmark}.txt > {log} 2>&1"


rule corpus_cache:
    input:
        corpus_files,
    output:
        "resources/corpus/{dataset}.pt",
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
