"""Planned seconds of each job of a workflow run: the weights of the time left in the terminal.

The terminal (:mod:`softmax_bottleneck.cluster.time_left`) scales every planned time by the pace the run shows (wall
seconds per planned second of its finished jobs), so only the ratios of these times matter:

* a training of the paper's size: the plan's projection, the paper's V100 seconds per epoch × epochs
  (:func:`.plan.gpu_hours`);
* a training that reads only the first tokens of its splits (``train_tokens``: the small scale): the CPU seconds a
  training of its dataset and variant took at the small scale (:data:`SMALL_TRAINING`; a variant not measured takes
  its cost proxy's or its family's, :func:`.plan.time_sources`), its part above :data:`START_SECONDS` (starting
  Python and torch, reading the corpus cache, the preflight) scaled by the tokens it reads over all its epochs;
* a download: none (the network sets its time, and the pace leaves it out);
* every other job: its rule's CPU seconds at the small scale (:data:`RULE_SECONDS`; a summary, table, figure or
  sweep: :data:`RENDER_SECONDS`). At the paper's size these are minutes against weeks of training.

The measured numbers come from ``python benchmarks/job_seconds.py DIR``, DIR a folder where the small scale ran:
CPU seconds (user + system, from Snakemake's ``benchmarks/``) of each training and analysis, and of one table and one
figure rendered there, over the threads the job had; 2 idle cores, AMD EPYC (Zen 3, AVX2), 2026-11-27, the
small scale of ``benchmarks/time_left_check.py`` (a measurement on the same machine under a load average of 13 to 19
had made LMS-PLIF's and SigSoftmax's trainings and the robustness job 2-7 times their idle share).
"""

from __future__ import annotations

from softmax_bottleneck.cluster.workflow_run import DOWNLOAD, OTHER, TRAINING
from softmax_bottleneck.study.fusion import fused_groups
from softmax_bottleneck.study.plan import gpu_hours, time_sources
from softmax_bottleneck.study.runs import Run, Study

#: the CPU seconds of a small-scale training's job that do not grow with its tokens: about an analysis job's (starting
#: Python and torch, reading the corpus cache)
START_SECONDS = 4.0
#: (dataset, variant) -> CPU seconds of one small-scale training job (config/small.yaml; the median of its runs), and
#: the tokens it read over all its epochs (epochs × (train_tokens + valid_tokens) + test_tokens)
SMALL_TRAINING: dict[tuple[str, str], tuple[float, int]] = {
    ("ptb", "softmax"): (13.4, 55_000),
    ("ptb", "ss"): (13.9, 55_000),
    ("ptb", "gss"): (13.8, 55_000),
    ("ptb", "lms_plif"): (14.9, 55_000),
    ("ptb", "lms_plif_frozen"): (28.2, 55_000),
    ("ptb", "mos"): (13.9, 55_000),
    ("ptb", "moc"): (14.9, 55_000),
    ("ptb", "mos_fair"): (12.3, 55_000),
    ("ptb", "softmax_fair_large"): (14.4, 55_000),
    ("wt2", "softmax"): (13.4, 10_000),
    ("wt2", "ss"): (13.6, 10_000),
    ("wt2", "gss"): (14.1, 10_000),
    ("wt2", "lms_plif"): (13.7, 10_000),
    ("wt2", "lms_plif_frozen"): (12.8, 10_000),
    ("wt2", "mos"): (14.3, 10_000),
    ("wt2", "moc"): (13.7, 10_000),
}
#: rule -> CPU seconds of one of its jobs at the small scale (the median), over the threads it had (2 at --cores 2:
#: robustness_logp, robustness)
RULE_SECONDS: dict[str, float] = {
    "corpus_cache": 5.0,
    "analyze": 6.1,
    "wordsim": 6.6,
    "qualitative": 13.0,
    "robustness_logp": 3.4,
    "robustness": 11.1,
}
#: CPU seconds of any other job: a summary, a table, a figure, a sweep's table and figure, the progress page (one
#: table and one figure rendered three times each: the median)
RENDER_SECONDS = 6.8
#: the jobs of rules that take no time of their own: ``all``, and ``layer_source`` (a shell ``echo`` of the layer's
#: source tag: under a second; planned as a render, the seven of the small scale's first second made the time left
#: said after its first training half the time the run then took)
NO_SECONDS = ("all", "layer_source")
DOWNLOADS = ("fetch_corpus", "fetch_wordsim")
#: the rule of a training job
TRAINING_RULE = "train"
#: the rule of a fused group's job (:mod:`.fusion`): its runs' trainings one after another (fusion's gain on a card is
#: not measured yet); the `train` jobs of its runs wait for it and do not run
FUSED_RULE = "train_fused"


def job_kind(rule: str) -> str:
    """The kind of a job of ``rule`` in the record (:mod:`softmax_bottleneck.cluster.workflow_run`)."""
    return TRAINING if rule in (TRAINING_RULE, FUSED_RULE) else DOWNLOAD if rule in DOWNLOADS else OTHER


def job_runs(study: Study, rule: str, wildcards: dict) -> list[Run]:
    """The runs a job of ``rule`` trains: a `train` job's run, a `train_fused` job's group; none for another rule."""
    if rule == TRAINING_RULE:
        return [study.job(wildcards)]
    if rule == FUSED_RULE:
        return list(fused_groups(study)[wildcards["group"]].runs)
    return []


def training_seconds(run: Run) -> float:
    """Planned seconds of one training (module docstring)."""
    hp = run.hyperparameters
    if hp.get("train_tokens") is None:
        return gpu_hours(run) * 3600.0
    from softmax_bottleneck.corpora.datasets import dataset

    full = dataset(run.dataset).split_tokens
    tokens = hp["epochs"] * ((hp.get("train_tokens") or full[0]) + (hp.get("valid_tokens") or full[1]))
    tokens += hp.get("test_tokens") or full[2]
    measured = next(
        (SMALL_TRAINING[run.dataset, name] for name, _ in time_sources(run.variant) if (run.dataset, name) in
         SMALL_TRAINING), None,
    )  # fmt: skip
    if measured is None:  # a dataset the small scale does not train
        return gpu_hours(run) * 3600.0
    seconds, reference_tokens = measured
    return START_SECONDS + (seconds - START_SECONDS) * tokens / reference_tokens


def planned_seconds(study: Study, rule: str, wildcards: dict) -> float:
    """Planned seconds of one job of ``rule`` with ``wildcards`` (module docstring)."""
    if rule in (TRAINING_RULE, FUSED_RULE):
        return sum(training_seconds(run) for run in job_runs(study, rule, wildcards))
    if rule in NO_SECONDS or rule in DOWNLOADS:
        return 0.0
    return RULE_SECONDS.get(rule, RENDER_SECONDS)


def planned_jobs(study: Study, jobs) -> list[dict]:
    """The record's ``jobs`` (:mod:`softmax_bottleneck.cluster.workflow_run`) of ``jobs``, each ``(jobid, rule,
    wildcards, threads)``, but the `train` jobs of runs whose fused group's job is among them (they do not run)."""
    fused = {wildcards["group"] for _, rule, wildcards, _ in jobs if rule == FUSED_RULE}
    grouped = {run.dir for name in fused for run in fused_groups(study)[name].runs}
    jobs = [job for job in jobs if job[1] != TRAINING_RULE or study.job(job[2]).dir not in grouped]
    return [
        {"jobid": int(jobid), "rule": rule, "what": ", ".join(f"{k}={v}" for k, v in wildcards.items()),
         "kind": job_kind(rule), "planned_s": round(planned_seconds(study, rule, wildcards), 3),
         "threads": max(1, int(threads))}
        for jobid, rule, wildcards, threads in jobs
    ]  # fmt: skip
