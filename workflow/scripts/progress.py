"""Render the study's progress page and its learning curves (softmax_bottleneck.report.progress)."""

from softmax_bottleneck.report.progress import render_progress
from softmax_bottleneck.study.runs import Study

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

study = Study(snakemake.config, root=".")  # each run in the folder it was trained in
status = render_progress(study, config=snakemake.params.config, retry_options=snakemake.params.retry)
with open(snakemake.log[0], "w") as log:
    log.write(f"{snakemake.output.page}: {', '.join(f'{n} {s}' for s, n in status.counts().items())}\n")
