"""Print where every training run of the configuration stands (the text `python -m softmax_bottleneck status`
prints), to the terminal and the rule's log."""

from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import status_text, study_status

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

status = study_status(Study(snakemake.config), config=snakemake.params.config, retry_options=snakemake.params.retry)
text = status_text(status)
print(text, flush=True)
with open(snakemake.log[0], "w") as log:
    log.write(text + "\n")
