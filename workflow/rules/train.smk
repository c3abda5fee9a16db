# Training: one job per dataset × variant × schedule × seed × overrides (the run folder is the run's
# identity). The trainer keeps its resume state in <run>/.resume/ (not a declared output), so a job
# that is killed (pre-emption, time limit) resumes from its last epoch when Snakemake retries it.


include: "helpers/train.smk"


rule train:
    input:
        corpus=corpus_files,
        cache="resources/corpus/{dataset}.pt",
    output:
        model=f"{RUN_DIR}/model.pt",
        metrics=f"{RUN_DIR}/metrics.json",
        curve=f"{RUN_DIR}/curve.csv",
    log:
        f"logs/train/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/train/{RUN_LOG}.tsv"
    retries: 2
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 1
    resources:
        gpu=1,
        mem_mb=train_mem_mb,
        runtime=train_runtime,
    params:
        data=corpus_data_dir,
        sets=train_sets,
        out=RUN_DIR,
    shell:
        "python -m softmax_bottleneck gpu-lease -- "
        "python -m softmax_bottleneck train --dataset {wildcards.dataset} --variant {wildcards.variant} "
        "--schedule {wildcards.schedule} --seed {wildcards.seed} --out {params.out} "
        "--data {params.data} --corpus-cache {input.cache} {params.sets} >> {log} 2>&1"


rule plan:
    output:
        "results/plan/training_jobs.csv",
    log:
        "logs/plan.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        rows=training_plan(),
    script:
        "../scripts/plan.py"
