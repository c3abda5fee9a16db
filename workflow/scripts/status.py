"""Print where every training run of the configuration stands (the text `python -m softmax_bottleneck status`
prints), to the terminal and the rule's log. Without --configfile, as that command: the study the workflow last
started in this folder where it recorded one (workflow/rules/common.smk follows it, saying so), else the paper's."""

from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import status_text, study_status

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

study, source, retry = Study(snakemake.config, root="."), snakemake.params.config, snakemake.params.retry
text = status_text(study_status(study, config=source, retry_options=retry))
print(text, flush=True)
with open(snakemake.log[0], "w") as log:
    log.write(text + "\n")
