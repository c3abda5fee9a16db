# Input functions, params and resources of workflow/rules/analysis.smk.

import shlex

RANK = f"rank-{rank_rows()}.json"
SPECTRUM = f"spectrum-{rank_rows()}.csv"
ROBUSTNESS = f"robustness-{config['analysis']['robustness']['rows']}"


def wordsim_files(wildcards):
    """The benchmarks as ancient(): verified by their pinned SHA-256, a re-fetched copy (e.g. after a
    change of data_mirror) re-scores nothing."""
    return ancient(
        [f"resources/data/word-sim/{name}.txt" for name in WORDSIM_BENCHMARKS]
    )


def record_arg(**fields):
    """One ``--record key=value,...`` argument of ``softmax_bottleneck summarize``."""
    text = ",".join(f"{key}={value}" for key, value in fields.items())
    return f"--record {shlex.quote(text)}"


def summary_records(wildcards):
    """``--record`` arguments of a run summary: one per run of the experiment."""
    return " ".join(
        record_arg(
            experiment=wildcards.experiment,
            dataset=run.dataset,
            variant=run.variant,
            schedule=run.schedule,
            seed=run.seed,
            seed_kind=run.seed_kind,
            metrics=run_file(run, "metrics.json"),
            rank=run_file(run, RANK),
        )
        for run in RUNS_BY_EXPERIMENT[wildcards.experiment]
    )


def summary_inputs(wildcards):
    runs = RUNS_BY_EXPERIMENT[wildcards.experiment]
    return [run_file(r, name) for r in runs for name in ("metrics.json", RANK)]


def spectra_inputs(wildcards):
    return [run_file(r, SPECTRUM) for r in model_set("spectra")]


def spectra_records(wildcards):
    return " ".join(
        record_arg(dataset=r.dataset, variant=r.variant, csv=run_file(r, SPECTRUM))
        for r in model_set("spectra")
    )


def wordsim_inputs(wildcards):
    return [run_file(r, "wordsim.csv") for r in model_set("wordsim")]


def wordsim_records(wildcards):
    return " ".join(
        record_arg(dataset=r.dataset, variant=r.variant, csv=run_file(r, "wordsim.csv"))
        for r in model_set("wordsim")
    )


def top5_inputs(wildcards):
    return [run_file(r, "top5.csv") for r in top5_models().values()]


def top5_records(wildcards):
    return " ".join(
        record_arg(model=name, csv=run_file(r, "top5.csv"))
        for name, r in top5_models().items()
    )


def robustness_result(wildcards):
    return run_file(robustness_model(), f"{ROBUSTNESS}/robustness.csv")


def analyze_mem_mb(wildcards, attempt):
    """Host memory of the log-P → rank step (streamed; the exact SVD holds a float64 Gram or matrix)."""
    return (24000 if wildcards.dataset == "ptb" else 32000) * attempt


def analyze_threads(wildcards):
    """CPU threads of the log-P → rank step: 1 for a few hundred rows, 8 for the paper's matrices.

    The log-P pass runs on the GPU; the threads serve the CPU side of the float64 SVD/Gram.
    """
    rows = config["analysis"]["rank_rows"]
    return 1 if isinstance(rows, int) and rows <= 5000 else 8
