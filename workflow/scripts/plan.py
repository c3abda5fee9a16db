"""Write the training plan: every training job of the config, its experiments and projected cost."""

import pandas as pd

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

plan = pd.DataFrame(snakemake.params.rows)
plan.to_csv(snakemake.output[0], index=False)
lines = [
    f"{len(plan)} training jobs, {plan['gpu_hours'].sum():,.0f} projected V100 GPU-hours "
    "(the paper's seconds per epoch × epochs, spec §11.4); per experiment (shared runs count in each):"
]
members = plan.assign(experiment=plan["experiments"].str.split()).explode("experiment")
for experiment, group in members.groupby("experiment", sort=False):
    lines.append(f"  {experiment}: {len(group)} jobs, {group['gpu_hours'].sum():,.0f} GPU-hours")
with open(snakemake.log[0], "w") as log:
    log.write("\n".join(lines) + "\n")
