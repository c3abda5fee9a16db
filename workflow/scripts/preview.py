"""Render every table and figure from the runs finished so far, stamped provisional
(softmax_bottleneck.report.preview); the log says, item by item as they are made, which are placeholders and why,
and the terminal where they were written."""

import logging

from softmax_bottleneck.report.preview import render_preview
from softmax_bottleneck.report.progress import PREVIEW, progress_files
from softmax_bottleneck.study.runs import Study, output_roots

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

logging.basicConfig(filename=snakemake.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
study = Study(snakemake.config, root=".")
outcome = render_preview(study)
rendered = sum(what == "rendered" for what in outcome.values())
line = (
    f"preview: wrote {rendered} provisional tables and figures under {output_roots(study.config)[1]}/{PREVIEW}/ "
    f"({len(outcome) - rendered} not yet: placeholders saying why); open {progress_files(study)[0]}"
)
logging.info("%s", line)
print(line, flush=True)
