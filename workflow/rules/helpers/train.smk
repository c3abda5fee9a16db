# Input functions, params and resources of workflow/rules/train.smk (training jobs and their plan).

import math
import shlex

from softmax_bottleneck.report import costs


def train_job(wildcards):
    return TRAIN_JOBS[RUN_DIR.format(**wildcards)]


def train_sets(wildcards):
    """``--set key=value`` arguments of one training job (model overrides + experiment overrides)."""
    overrides = run_overrides(train_job(wildcards))
    return " ".join(
        f"--set {shlex.quote(f'{k}={format_value(v)}')}"
        for k, v in sorted(overrides.items())
    )


def paper_seconds_per_epoch(run):
    """(V100 seconds per epoch, the reported variant it is taken from; 0 s when none)."""
    seconds, time_of = costs.seconds_per_epoch(run.dataset, run.variant)
    return (0.0, "") if math.isnan(seconds) else (seconds, time_of)


def train_gpu_hours(run):
    """Projected V100 GPU-hours of one run: the paper's seconds per epoch (Table 2) × epochs."""
    seconds, _ = paper_seconds_per_epoch(run)
    return resolved_hyperparameters(run)["epochs"] * seconds / 3600.0


def train_runtime(wildcards, attempt):
    """Minutes for one attempt: 1.5 × the paper's V100 time (at least 10), growing with the attempt.

    A killed or timed-out job resumes from its checkpoint (``results/runs/.../.resume``) on retry.
    """
    return max(
        10, math.ceil(1.5 * 60 * train_gpu_hours(train_job(wildcards)) * attempt)
    )


#: attempts after which a training job's memory stops growing (a time-limit or pre-emption retry
#: is not an out-of-memory one: the SLURM profile allows 30 attempts per run)
TRAIN_MEM_ATTEMPTS = 2


def train_mem_mb(wildcards, attempt):
    """8 GB (PTB) or 16 GB (WT2), doubled for attempt 2 and kept there."""
    base = 8000 if wildcards.dataset == "ptb" else 16000
    return base * min(attempt, TRAIN_MEM_ATTEMPTS)


def training_plan():
    """Every training job with its experiments and projected cost (``snakemake plan``)."""
    members = {}
    for name, runs in RUNS_BY_EXPERIMENT.items():
        for run in runs:
            members.setdefault(run.dir, []).append(name)
    for run in analysis_models():
        if "analysis" not in members.setdefault(run.dir, []):
            members[run.dir].append("analysis")
    rows = []
    for path, run in TRAIN_JOBS.items():
        seconds, time_of = paper_seconds_per_epoch(run)
        rows.append(
            dict(
                run=path,
                experiments=" ".join(members[path]),
                dataset=run.dataset,
                variant=run.variant,
                schedule=run.schedule,
                seed=run.seed,
                seed_kind=run.seed_kind,
                tag=run.tag,
                runid=run.runid,
                epochs=resolved_hyperparameters(run)["epochs"],
                v100_s_per_epoch=seconds,
                time_of=time_of,
                gpu_hours=round(train_gpu_hours(run), 4),
            )
        )
    return rows


def finished_runs(wildcards):
    """Run folders of the plan whose model is already trained."""
    return [path for path in TRAIN_JOBS if os.path.exists(f"{path}/model.pt")]
