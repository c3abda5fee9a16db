"""Print the training plan's summary to the terminal (and its log): jobs, projected GPU-hours, progress."""

import pandas as pd

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

plan = pd.read_csv(snakemake.input[0], keep_default_na=False)
done = set(snakemake.params.done)
plan["done"] = plan["run"].isin(done)
members = plan.assign(experiment=plan["experiments"].str.split()).explode("experiment")
lines = [
    f"Training plan ({snakemake.input[0]}): {len(plan)} training jobs, "
    f"{plan['gpu_hours'].sum():,.0f} projected V100 GPU-hours (the paper's seconds per epoch × epochs); "
    f"{int(plan['done'].sum())} already trained.",
    "  experiment       jobs  trained  GPU-hours   (a run that several experiments use counts in each)",
]
for experiment, group in members.groupby("experiment", sort=False):
    lines.append(
        f"  {experiment:<15} {len(group):>5}  {int(group['done'].sum()):>7}  {group['gpu_hours'].sum():>9,.0f}"
    )
proxies = plan[(plan["time_of"] != plan["variant"]) & (plan["time_of"] != "")]
for variant, group in proxies.groupby("variant"):
    lines.append(f"  {variant}: no time in the paper; projected with {group['time_of'].iloc[0]}'s")
unknown = plan[plan["time_of"] == ""]
if len(unknown):
    names = sorted(set(unknown["variant"]))
    lines.append(f"  {len(unknown)} jobs have no paper time and no proxy (counted as 0 h): {names}")
lines.append(
    "Live logs while the workflow runs: tail -f logs/train/<dataset>/<variant>/<schedule>/seed<seed>/<run>.log"
)
text = "\n".join(lines)
print(text, flush=True)
with open(snakemake.log[0], "w") as log:
    log.write(text + "\n")
