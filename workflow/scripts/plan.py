"""Write the training plan: every training job of the config, its experiments and projected cost."""

import pandas as pd

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

plan = pd.DataFrame(snakemake.params.rows)
plan.to_csv(snakemake.output[0], index=False)
with open(snakemake.log[0], "w") as log:
    log.write(f"{len(plan)} training jobs -> {snakemake.output[0]}\n")
