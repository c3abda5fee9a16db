# Training: one job per run folder (dataset × variant × schedule × seed × <swept values>-<hash>).
# The trainer keeps its resume state in <run>/.resume/ (not a declared output), so a job that is
# killed (pre-emption, time limit, Ctrl-C) resumes from its last epoch when it runs again.
#
# A finished run is never redone by accident (docs/running.md, "Rerun policy"): its outputs are protected()
# (read-only) and update() (Snakemake never deletes them before a job), and `train` never trains
# over a finished run: under `snakemake -F` or `-R train`, or when Snakemake re-runs a job whose
# finish it did not record, it finds the outputs equal to the copy it kept in <run>/.resume/final/
# and exits 0; if Snakemake removed the outputs of a job killed after training, it restores them
# from that copy. To retrain a run on purpose, delete its whole folder and force the summaries (docs/running.md).
#
# The run's training log (logs/train/<run>.log) is not the rule's `log:`: Snakemake empties a job's `log:` before the
# job starts, and a job that finds its run finished or taken (a no-op, or one that fails on the run's lock) would
# wipe the log of the training that did the work. Each attempt appends to it; the rule's own log
# (logs/train_jobs/<run>.log) gets its last lines when an attempt fails (what `show-failed-logs` prints). The
# job's first act (job-start) takes the run's lock, before `import torch`, and refuses a GPU job without CUDA.


include: "training_jobs.smk"


onstart:
    start_workflow_run()


onsuccess:
    end_workflow_run(ok=True)


onerror:
    end_workflow_run(ok=False)


rule train:
    """Train one run folder's model (resumable; never retrains a finished run)."""
    input:
        corpus=ancient_corpus,
        cache=ancient_corpus_cache,
        stamp=conformance_stamp,
        fused=fused_group_first,
    output:
        model=protected(update(f"{RUN_DIR}/model.pt")),
        metrics=protected(update(f"{RUN_DIR}/metrics.json")),
        curve=protected(update(f"{RUN_DIR}/curve.csv")),
    log:
        f"logs/train_jobs/{RUN_LOG}.log",
    benchmark:
        f"benchmarks/train/{RUN_LOG}.tsv"
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: train_memory_mb(wildcards.dataset, attempt),
        runtime=train_runtime,
    params:
        data=corpus_data_dir,
        sets=train_sets,
        out=RUN_DIR,
        train_log=train_log,
        cpu_guard=lambda wildcards: cpu_guard([STUDY.job(wildcards)]),
    shell:
        "echo 'the training writes its progress to {params.train_log}' > {log} && "
        'mkdir -p "$(dirname {params.train_log})" && '
        "python -m softmax_bottleneck gpu-lease -- python -m softmax_bottleneck job-start --run {params.out} -- "
        "python -m softmax_bottleneck train --dataset {wildcards.dataset} --variant {wildcards.variant} "
        "--schedule {wildcards.schedule} --seed {wildcards.seed} --out {params.out} "
        "--data {params.data} --corpus-cache {input.cache} --read-only-outputs {params.cpu_guard} {params.sets} "
        ">> {params.train_log} 2>&1 "
        "|| {{ code=$?; tail -n 40 {params.train_log} >> {log}; exit $code; }}"


# Fused training (`fusion: runs_per_job: K`, docs/fused-training.md): the runs of one group (one dataset, shape and
# set of summaries; softmax_bottleneck.study.fusion) that are not trained, running or queued are trained by one job,
# one process (train-fused), their LSTM recurrences fused. The job is a checkpoint that each of those runs' `train`
# jobs waits for: once it has run, Snakemake looks at them again, finds their outputs, and runs none of them (a run
# the group could not train is then trained by its own `train` job). Each run's folder holds the files its `train`
# job writes, made read-only as protected() makes them (--read-only-outputs), and its own training log; analyses,
# tables, status and the preview read them as any run's. The group's record (results/fused/<group>.json) and log are
# its own. Without fusion the rule has no job (its wildcard matches nothing).
checkpoint train_fused:
    """Train the runs of one fused group that are not trained, running or queued yet, in one process."""
    input:
        corpus=fused_corpus,
        cache=fused_corpus_cache,
        stamps=fused_stamps,
    output:
        "results/fused/{group}.json",
    log:
        "logs/train_fused_jobs/{group}.log",
    benchmark:
        "benchmarks/train_fused/{group}.tsv"
    wildcard_constraints:
        group="|".join(re.escape(name) for name in FUSED_GROUPS) or "(?!)",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 1
    resources:
        gpu=1,
        mem_mb=fused_memory,
        runtime=fused_runtime,
    params:
        dataset=fused_dataset,
        data=lambda wildcards: corpus_dir(fused_dataset(wildcards)),
        runs=fused_arguments,
        locks=fused_locks,
        group_log="logs/train_fused/{group}.log",
        cpu_guard=lambda wildcards: cpu_guard(FUSED_GROUPS[wildcards.group].runs),
    shell:
        "echo 'the fused training writes its progress to {params.group_log}' > {log} && "
        'mkdir -p "$(dirname {params.group_log})" && '
        "python -m softmax_bottleneck gpu-lease -- python -m softmax_bottleneck job-start --leave-busy {params.locks} "
        "-- python -m softmax_bottleneck train-fused --dataset {params.dataset} {params.runs} --data {params.data} "
        "--corpus-cache {input.cache} --leave-busy --read-only-outputs {params.cpu_guard} --record {output} "
        ">> {params.group_log} 2>&1 "
        "|| {{ code=$?; tail -n 40 {params.group_log} >> {log}; exit $code; }}"


# A run SLURM still lists, or one running or finished when Snakemake starts, is waited for on this machine, never
# submitted again (training_jobs.smk says how each is found).
if SCHEDULED_TRAININGS:

    rule await_scheduled_training:
        """Wait, on this machine and without a GPU, for a training whose `train` job an earlier Snakemake submitted and
        SLURM still lists (pending or running), then for its run as await_training does; never submits it again.
        """
        input:
            corpus=ancient_corpus,
            cache=ancient_corpus_cache,
            stamp=conformance_stamp,
        output:
            model=protected(update(f"{RUN_DIR}/model.pt")),
            metrics=protected(update(f"{RUN_DIR}/metrics.json")),
            curve=protected(update(f"{RUN_DIR}/curve.csv")),
        log:
            f"logs/await_training/{RUN_LOG}.log",
        wildcard_constraints:
            runid="|".join(re.escape(runid) for runid in SCHEDULED_TRAININGS),
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        threads: 0  # a wait holds no core: --cores N still runs N jobs beside any number of waits
        params:
            data=corpus_data_dir,
            sets=train_sets,
            out=RUN_DIR,
            job=lambda wildcards: Unrecorded(SCHEDULED_TRAININGS[wildcards.runid]),
            train_log=train_log,
            epochs=train_epochs,
            max_wait=await_max_wait,
        shell:
            "python -m softmax_bottleneck wait-for-job {params.job} > {log} 2>&1 && "
            "python -m softmax_bottleneck wait-for-run {params.out} --log {params.train_log} --dataset "
            "{wildcards.dataset} --variant {wildcards.variant} --schedule {wildcards.schedule} --seed "
            "{wildcards.seed} --epochs {params.epochs} --max-wait {params.max_wait} >> {log} 2>&1"

    ruleorder: await_scheduled_training > train


if LOCALLY_AWAITED_RUNIDS:

    rule await_training:
        """Wait, on this machine and without a GPU, for a training that was already running when Snakemake started
        (a job left by a Snakemake that died), or check one already finished (its finish unrecorded, or `-R train`);
        never trains, never submits it again.
        """
        input:
            corpus=ancient_corpus,
            cache=ancient_corpus_cache,
            stamp=conformance_stamp,
        output:
            model=protected(update(f"{RUN_DIR}/model.pt")),
            metrics=protected(update(f"{RUN_DIR}/metrics.json")),
            curve=protected(update(f"{RUN_DIR}/curve.csv")),
        log:
            f"logs/await_training/{RUN_LOG}.log",
        wildcard_constraints:
            runid="|".join(re.escape(runid) for runid in LOCALLY_AWAITED_RUNIDS),
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        threads: 0  # a wait holds no core: --cores N still runs N jobs beside any number of waits
        params:
            data=corpus_data_dir,
            sets=train_sets,
            out=RUN_DIR,
            train_log=train_log,
            epochs=train_epochs,
            max_wait=await_max_wait,
        shell:
            "python -m softmax_bottleneck wait-for-run {params.out} --log {params.train_log} --dataset "
            "{wildcards.dataset} --variant {wildcards.variant} --schedule {wildcards.schedule} --seed "
            "{wildcards.seed} --epochs {params.epochs} --max-wait {params.max_wait} > {log} 2>&1"

    ruleorder: await_training > train


rule check_layer:
    """Check one plug-in layer at every point of its own keys that the config trains (CPU, before training)."""
    output:
        STAMP,
    log:
        "logs/check_layer/{layer}.log",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        source=lambda wildcards: layer_source(wildcards.layer)["source_sha256"],
        points=check_layer_points,
    shell:
        "python -m softmax_bottleneck check-layer {wildcards.layer} --device cpu {params.points} "
        "--stamp {output} > {log} 2>&1"


# After an output layer's code changes this rule runs again (its params), and with it every summary that shows
# the layer, then the tables and figures built from them: a source file, not a parameter of those rules, since
# Snakemake does not look at the rerun triggers of jobs downstream of check_layer (also rerun), which the
# trainings' ancient() stamp keeps from being reached.
rule layer_source:
    """Write the installed source of one output layer (an input of the summaries that show it)."""
    output:
        LAYER_SOURCE,
    log:
        "logs/layer_source/{layer}.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        tag=lambda wildcards: current_tag(wildcards.layer),
    shell:
        "echo {params.tag:q} > {output} 2> {log}"


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
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        jobs=len(TRAIN_JOBS),
        table=lambda wildcards: "\n".join(
            [
                plan_markdown(plan_table(STUDY, finished_runs())),
                *proxy_notes(proxy_priced(STUDY)),
                *fusion_notes(STUDY),
                *stale_runs(STUDY),
            ]
        ),
    script:
        "../scripts/plan_summary.py"
