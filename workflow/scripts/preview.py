"""Render every table and figure from the runs finished so far, stamped provisional
(softmax_bottleneck.report.preview); the log says which are placeholders and why."""

from softmax_bottleneck.report.preview import render_preview
from softmax_bottleneck.study.runs import Study

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

outcome = render_preview(Study(snakemake.config))
with open(snakemake.log[0], "w") as log:
    log.writelines(f"{name}: {what}\n" for name, what in outcome.items())
