# Training: one job per run folder (dataset × variant × schedule × seed × <swept values>-<hash>).
# The trainer keeps its resume state in <run>/.resume/ (not a declared output), so a job that is
# killed (pre-emption, time limit, Ctrl-C) resumes from its last epoch when it runs again.
#
# A finished run is never redone by accident (README, "Rerun policy"): its outputs are protected()
# (read-only) and update() (Snakemake never deletes them before a job), and `train` never trains
# over a finished run: under `snakemake -F` or `-R train`, or when Snakemake re-runs a job whose
# finish it did not record, it finds the outputs equal to the copy it kept in <run>/.resume/final/
# and exits 0; if Snakemake removed the outputs of a job killed after training, it restores them
# from that copy. To retrain a run on purpose, delete its whole folder.


import math

from softmax_bottleneck.study.plan import gpu_hours, plan_rows


def train_sets(wildcards):
    """``--set key=value`` arguments of one training job (model overrides + the experiment's values)."""
    return " ".join(
        f"--set {shlex.quote(item)}" for item in STUDY.job(wildcards).set_arguments
    )


def train_runtime(wildcards, attempt):
    """Minutes for one attempt: 1.5 × the paper's V100 time (at least 10), growing with the attempt; a
    killed or timed-out job resumes from its checkpoint (<run>/.resume) on retry."""
    return max(10, math.ceil(90 * gpu_hours(STUDY.job(wildcards)) * attempt))


def train_mem_mb(wildcards, attempt):
    """8 GB (PTB) or 16 GB (WT2), doubled for attempt 2 and kept there (a time-limit or pre-emption
    retry is not an out-of-memory one: the SLURM profile allows 30 attempts per run)."""
    return (8000 if wildcards.dataset == "ptb" else 16000) * min(attempt, 2)


def finished_runs(wildcards):
    """Run folders of the plan whose model is already trained."""
    return [path for path in TRAIN_JOBS if os.path.exists(f"{path}/model.pt")]


localrules:
    plan,


rule train:
    """Train one run folder's model (resumable; never retrains a finished run)."""
    input:
        corpus=ancient_corpus,
        cache=ancient_corpus_cache,
    output:
        model=protected(update(f"{RUN_DIR}/model.pt")),
        metrics=protected(update(f"{RUN_DIR}/metrics.json")),
        curve=protected(update(f"{RUN_DIR}/curve.csv")),
    log:
        f"logs/train/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/train/{RUN_LOG}.tsv"
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


rule training_plan:
    """Write every training job, its experiments and projected GPU-hours to <results>/plan/."""
    output:
        f"{RESULTS}/plan/training_jobs.csv",
    log:
        f"{LOGS}/plan/training_jobs.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        rows=plan_rows(STUDY),
    script:
        "../scripts/plan.py"


rule plan:
    """Print the training plan (jobs, projected GPU-hours, what is already trained)."""
    input:
        rules.training_plan.output,
    log:
        f"{LOGS}/plan/summary.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        done=finished_runs,
    script:
        "../scripts/plan_summary.py"
