"""Print where every training run of the configuration stands (the text `python -m softmax_bottleneck status`
prints), to the terminal and the rule's log. Without --configfile, as that command: the study the workflow last
started in this folder where it recorded one (said in one line), else the paper's."""

import logging
from argparse import Namespace

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import status_text, study_status

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

logging.basicConfig(format="%(message)s", level=logging.INFO)
study, source, retry = Study(snakemake.config), snakemake.params.config, snakemake.params.retry
if snakemake.params.follow and study_config.recorded_study() is not None:
    args = Namespace(config=None, directory=".")
    study, source = study_config.load_study(args, "status", follow=True)
    if study is None:
        raise SystemExit(1)
    retry = study_config.snakemake_options(args)
text = status_text(study_status(study, config=source, retry_options=retry))
print(text, flush=True)
with open(snakemake.log[0], "w") as log:
    log.write(text + "\n")
