"""Render every table and figure from the runs finished so far, stamped provisional
(softmax_bottleneck.report.preview); the log says, item by item as they are made, which are placeholders and why."""

import logging

from softmax_bottleneck.report.preview import render_preview
from softmax_bottleneck.study.runs import Study

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

logging.basicConfig(filename=snakemake.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
render_preview(Study(snakemake.config))
