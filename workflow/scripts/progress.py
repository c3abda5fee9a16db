"""Render the study's progress page and its learning curves (softmax_bottleneck.report.progress)."""

from softmax_bottleneck.report.progress import render_progress
from softmax_bottleneck.study.runs import Study

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

status = render_progress(Study(snakemake.config), config=snakemake.params.config, retry_options=snakemake.params.retry)
with open(snakemake.log[0], "w") as log:
    log.write(f"{snakemake.output.page}: {', '.join(f'{n} {s}' for s, n in status.counts().items())}\n")
