# Analyses of the trained models: log-P matrix → Press' and ε-effective ranks and the spectrum
# (every run), word similarity (E6), top-5 predictions (E5), robustness of Press' rank (E12), and
# this configuration's small summary tables (<results>/summary/) that every table and figure reads
# (a sweep of the configuration's `sweeps`: <results>/summary/sweep_<name>.csv, with the rank of each
# of its runs: every sweep run is analysed like the experiments' runs). A summary's input
# results/layer_sources/<layer>.txt, the installed source of each layer it shows (rule layer_source),
# writes it again after that layer's code changes, marking the rows an older source trained.
# Analysis outputs live in the run folder, named by the rows they use (rank-<rows>.json), so every
# configuration that asks for the same analysis of the same model shares it. The log-P matrices are
# streamed into the rank and never written, except E12's slice, which is temp().
# A run folder's model.pt is never rewritten (train refuses; retraining means deleting the folder, and
# with it these outputs), so it is an ancient() input: a copy with a newer date, e.g. the one Snakemake
# puts back after a refused `-F`/`-R train` (update()), re-analyses nothing. Each analysis checks the
# model's SHA-256 against its metrics.json before use.


from softmax_bottleneck.study.summary_records import COVERAGE_SUMMARY, coverage_records


include: "analysis_jobs.smk"


rule analyze:
    """Press' and ε-effective ranks and the spectrum of one model's test log-P matrix (E3, E11)."""
    input:
        model=ancient(f"{RUN_DIR}/model.pt"),
        corpus=ancient_corpus,
        cache=ancient_corpus_cache,
    output:
        rank=f"{RUN_DIR}/rank-{{rows}}.json",
        spectrum=f"{RUN_DIR}/spectrum-{{rows}}.csv",
    log:
        f"logs/analyze/{RUN_LOG}-{{rows}}.log",
    benchmark:
        f"benchmarks/analyze/{RUN_LOG}-{{rows}}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: analyze_threads
    resources:
        gpu=1,
        mem_mb=analyze_mem_mb,
        runtime=120,
    params:
        data=corpus_data_dir,
    shell:
        "python -m softmax_bottleneck gpu-lease -- python -m softmax_bottleneck job-start -- "
        "python -m softmax_bottleneck analyze --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --rows {wildcards.rows} --out-json {output.rank} "
        "--out-spectrum {output.spectrum} > {log} 2>&1"


# An analysis SLURM still lists (its `analyze` job submitted by a Snakemake that died) is waited for on this machine,
# never submitted again (analysis_jobs.smk).
if SCHEDULED_ANALYSES:

    rule await_scheduled_analysis:
        """Wait, on this machine and without a GPU, for an analysis whose `analyze` job an earlier Snakemake submitted
        and SLURM still lists (pending or running); never submits it again.
        """
        input:
            model=ancient(f"{RUN_DIR}/model.pt"),
            corpus=ancient_corpus,
            cache=ancient_corpus_cache,
            queued=not_scheduled,
        output:
            # update(): files the queued job may have written before this wait starts are kept, not removed
            rank=update(f"{RUN_DIR}/rank-{{rows}}.json"),
            spectrum=update(f"{RUN_DIR}/spectrum-{{rows}}.csv"),
        log:
            f"logs/await_analysis/{RUN_LOG}-{{rows}}.log",
        wildcard_constraints:
            runid="|".join(re.escape(runid) for runid, _ in SCHEDULED_ANALYSES),
            rows="|".join(re.escape(rows) for _, rows in SCHEDULED_ANALYSES),
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        threads: 0  # a wait holds no core
        params:
            data=corpus_data_dir,
            job=scheduled_analysis_job,
        shell:
            "python -m softmax_bottleneck wait-for-job {params.job} > {log} 2>&1 && "
            "test -s {output.rank} && test -s {output.spectrum} || "
            "{{ echo 'SLURM job {params.job} ended without this analysis: run snakemake again to submit it' >> {log}; "
            "exit 1; }}"

    ruleorder: await_scheduled_analysis > analyze


rule wordsim:
    """Spearman ρ of one model's embeddings on the 13 word-similarity benchmarks (E6)."""
    input:
        model=ancient(f"{RUN_DIR}/model.pt"),
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
        benchmarks=WORDSIM_FOLDER,
    shell:
        "python -m softmax_bottleneck wordsim --checkpoint {input.model} --benchmarks {params.benchmarks} "
        "--out {output} > {log} 2>&1"


rule qualitative:
    """One PTB model's top-5 predictions at the 18 test contexts (E5)."""
    input:
        model=ancient(f"{RUN_DIR}/model.pt"),
        corpus=ancient_corpus,
        cache=ancient_corpus_cache,
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
        "python -m softmax_bottleneck gpu-lease -- python -m softmax_bottleneck job-start -- "
        "python -m softmax_bottleneck qualitative --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --out {output} > {log} 2>&1"


rule robustness_logp:
    """Write the first rows of one model's log-P matrix (temporary) for E12, with their rank."""
    input:
        model=ancient(f"{RUN_DIR}/model.pt"),
        corpus=ancient_corpus,
        cache=ancient_corpus_cache,
    output:
        logp=temp(f"{RUN_DIR}/robustness-{{rows}}/logp.npy"),
        rank=f"{RUN_DIR}/robustness-{{rows}}/rank.json",
        spectrum=f"{RUN_DIR}/robustness-{{rows}}/spectrum.csv",
    log:
        f"logs/robustness_logp/{RUN_LOG}-{{rows}}.log",
    benchmark:
        f"benchmarks/robustness_logp/{RUN_LOG}-{{rows}}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 4
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=60,
    params:
        data=corpus_data_dir,
    shell:
        "python -m softmax_bottleneck gpu-lease -- python -m softmax_bottleneck job-start -- "
        "python -m softmax_bottleneck analyze --checkpoint {input.model} --data {params.data} "
        "--corpus-cache {input.cache} --rows {wildcards.rows} --save-logp {output.logp} "
        "--out-json {output.rank} --out-spectrum {output.spectrum} > {log} 2>&1"


rule robustness:
    """Robustness of Press' rank on that slice, Algorithms 1 and 2 (E12, SM Tables 14-16)."""
    input:
        f"{RUN_DIR}/robustness-{{rows}}/logp.npy",
    output:
        f"{RUN_DIR}/robustness-{{rows}}/robustness.csv",
    log:
        f"logs/robustness/{RUN_LOG}-{{rows}}.log",
    benchmark:
        f"benchmarks/robustness/{RUN_LOG}-{{rows}}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 8
    resources:
        mem_mb=16000,
        runtime=240,
    shell:
        "python -m softmax_bottleneck robustness {input} --rows {wildcards.rows} --out {output} > {log} 2>&1"


rule summarize_runs:
    """One experiment's runs (metrics and ranks) in one summary CSV."""
    input:
        runs=lambda wildcards: files_of(f"{wildcards.experiment}.csv"),
        sources=lambda wildcards: layer_source_files(f"{wildcards.experiment}.csv"),
        code=rendering_code,
    output:
        f"{RESULTS}/summary/{{experiment}}.csv",
    log:
        f"{LOGS}/summarize/{{experiment}}.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=lambda wildcards: records_of(f"{wildcards.experiment}.csv"),
    shell:
        "python -m softmax_bottleneck summarize --kind runs --out {output} {params.records} > {log} 2>&1"


rule summarize_sweep:
    """One sweep's runs (swept values, training metrics and ranks) in one summary CSV."""
    input:
        runs=lambda wildcards: files_of(f"{SWEEP_PREFIX}{wildcards.sweep}.csv"),
        sources=lambda wildcards: layer_source_files(
            f"{SWEEP_PREFIX}{wildcards.sweep}.csv"
        ),
        code=rendering_code,
    output:
        f"{RESULTS}/summary/{SWEEP_PREFIX}{{sweep}}.csv",
    log:
        f"{LOGS}/summarize/{SWEEP_PREFIX}{{sweep}}.log",
    wildcard_constraints:
        sweep="|".join(re.escape(name) for name in SWEEPS) or "(?!)",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        columns=sweep_columns,
        records=lambda wildcards: records_of(f"{SWEEP_PREFIX}{wildcards.sweep}.csv"),
    shell:
        "python -m softmax_bottleneck summarize --kind sweep {params.columns} --out {output} {params.records} "
        "> {log} 2>&1"


rule summarize_spectra:
    """Singular values of the spectra models in one summary CSV (Table 6, Figure 7)."""
    input:
        spectra=files_of("spectra.csv"),
        sources=layer_source_files("spectra.csv"),
        code=rendering_code,
    output:
        f"{RESULTS}/summary/spectra.csv",
    log:
        f"{LOGS}/summarize/spectra.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=records_of("spectra.csv"),
    shell:
        "python -m softmax_bottleneck summarize --kind spectra --out {output} {params.records} > {log} 2>&1"


rule summarize_wordsim:
    """Word-similarity scores of the wordsim models in one summary CSV."""
    input:
        wordsim=files_of("wordsim.csv"),
        sources=layer_source_files("wordsim.csv"),
        code=rendering_code,
    output:
        f"{RESULTS}/summary/wordsim.csv",
    log:
        f"{LOGS}/summarize/wordsim.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=records_of("wordsim.csv"),
    shell:
        "python -m softmax_bottleneck summarize --kind wordsim --out {output} {params.records} > {log} 2>&1"


# SM Table 13 counts the benchmark pairs each vocabulary misses: from the corpora and the benchmarks, no model
# (softmax_bottleneck.study.summary_records.coverage_records), so `snakemake sm_table13` trains nothing.
COVERAGE_RECORDS = coverage_records(STUDY)


rule summarize_wordsim_coverage:
    """The benchmark pairs each vocabulary misses (SM Table 13), from the corpora alone: no model."""
    input:
        corpora=ancient([record["corpus"] for record in COVERAGE_RECORDS]),
        benchmarks=wordsim_files,
        code=rendering_code,
    output:
        f"{RESULTS}/summary/{COVERAGE_SUMMARY}",
    log:
        f"{LOGS}/summarize/wordsim_coverage.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=" ".join(record_arg(**record) for record in COVERAGE_RECORDS),
    shell:
        "python -m softmax_bottleneck summarize --kind coverage --out {output} {params.records} > {log} 2>&1"


rule summarize_top5:
    """Top-5 predictions of the top5 models in one summary CSV."""
    input:
        top5=files_of("top5.csv"),
        sources=layer_source_files("top5.csv"),
        code=rendering_code,
    output:
        f"{RESULTS}/summary/top5.csv",
    log:
        f"{LOGS}/summarize/top5.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        records=records_of("top5.csv"),
    shell:
        "python -m softmax_bottleneck summarize --kind top5 --out {output} {params.records} > {log} 2>&1"


rule summarize_robustness:
    """The E12 result as this configuration's summary CSV."""
    input:
        files_of("robustness.csv"),
    output:
        f"{RESULTS}/summary/robustness.csv",
    log:
        f"{LOGS}/summarize/robustness.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    shell:
        "cp {input} {output} 2> {log}"
