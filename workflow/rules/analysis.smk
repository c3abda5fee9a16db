# Analyses of the trained models: log-P matrix → Press' and ε-effective ranks and the spectrum
# (every run, spec §8-9), word similarity (E6), top-5 predictions (E5), robustness of Press' rank
# (E12), and the small summary tables under results/summary/ that every table and figure reads.
# The log-P matrices are streamed into the rank and never written, except E12's 10,000-row slice,
# which is temp().


include: "helpers/analysis.smk"


localrules:
    summarize_runs,
    summarize_spectra,
    summarize_wordsim,
    summarize_top5,


rule analyze:
    input:
        model=f"{RUN_DIR}/model.pt",
        corpus=corpus_files,
        cache="resources/corpus/{dataset}.pt",
    output:
        rank=f"{RUN_DIR}/rank.json",
        spectrum=f"{RUN_DIR}/spectrum.csv",
    log:
        f"logs/analyze/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/analyze/{RUN_LOG}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: analyze_threads
    resources:
        gpu=1,
        mem_mb=analyze_mem_mb,
        runtime=120,
    params:
        data=corpus_data_dir,
        rows=rank_rows,
    shell:
        "python -m softmax_bottleneck gpu-lease -- "
        "python -m softmax_bottleneck analyze --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --rows {params.rows} --out-json {output.rank} "
        "--out-spectrum {output.spectrum} > {log} 2>&1"


rule wordsim:
    input:
        model=f"{RUN_DIR}/model.pt",
        benchmarks=wordsim_files,
    output:
        f"{RUN_DIR}/wordsim.csv",
    log:
        f"logs/wordsim/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/wordsim/{RUN_LOG}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        benchmarks="resources/data/word-sim",
    shell:
        "python -m softmax_bottleneck wordsim --checkpoint {input.model} --benchmarks {params.benchmarks} "
        "--out {output} > {log} 2>&1"


rule qualitative:
    input:
        model=f"{RUN_DIR}/model.pt",
        corpus=corpus_files,
        cache="resources/corpus/{dataset}.pt",
    output:
        f"{RUN_DIR}/top5.csv",
    log:
        f"logs/qualitative/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/qualitative/{RUN_LOG}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    resources:
        gpu=1,
        runtime=60,
    params:
        data=corpus_data_dir,
    shell:
        "python -m softmax_bottleneck gpu-lease -- "
        "python -m softmax_bottleneck qualitative --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --out {output} > {log} 2>&1"


rule robustness_logp:
    input:
        model=robustness_checkpoint,
        corpus=robustness_corpus,
        cache=robustness_corpus_cache,
    output:
        logp=temp("results/analysis/robustness/logp.npy"),
        rank="results/analysis/robustness/rank.json",
        spectrum="results/analysis/robustness/spectrum.csv",
    log:
        "logs/robustness_logp.log",
    benchmark:
        "benchmarks/robustness_logp.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 4
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=60,
    params:
        data=robustness_data_dir,
        rows=config["analysis"]["robustness"]["rows"],
    shell:
        "python -m softmax_bottleneck gpu-lease -- "
        "python -m softmax_bottleneck analyze --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --rows {params.rows} --save-logp {output.logp} --out-json {output.rank} "
        "--out-spectrum {output.spectrum} > {log} 2>&1"


rule robustness:
    input:
        "results/analysis/robustness/logp.npy",
    output:
        "results/summary/robustness.csv",
    log:
        "logs/robustness.log",
    benchmark:
        "benchmarks/robustness.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 8
    resources:
        mem_mb=16000,
        runtime=240,
    params:
        rows=config["analysis"]["robustness"]["rows"],
    shell:
        "python -m softmax_bottleneck robustness {input} --rows {params.rows} --out {output} > {log} 2>&1"


rule summarize_runs:
    input:
        summary_inputs,
    output:
        "results/summary/{experiment}.csv",
    log:
        "logs/summarize/{experiment}.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=summary_records,
    shell:
        "python -m softmax_bottleneck summarize --kind runs --out {output} {params.records} > {log} 2>&1"


rule summarize_spectra:
    input:
        spectra_inputs,
    output:
        "results/summary/spectra.csv",
    log:
        "logs/summarize/spectra.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=spectra_records,
    shell:
        "python -m softmax_bottleneck summarize --kind spectra --out {output} {params.records} > {log} 2>&1"


rule summarize_wordsim:
    input:
        wordsim_inputs,
    output:
        "results/summary/wordsim.csv",
    log:
        "logs/summarize/wordsim.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=wordsim_records,
    shell:
        "python -m softmax_bottleneck summarize --kind wordsim --out {output} {params.records} > {log} 2>&1"


rule summarize_top5:
    input:
        top5_inputs,
    output:
        "results/summary/top5.csv",
    log:
        "logs/summarize/top5.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=top5_records,
    shell:
        "python -m softmax_bottleneck summarize --kind top5 --out {output} {params.records} > {log} 2>&1"
