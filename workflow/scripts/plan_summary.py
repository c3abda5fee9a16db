"""Print the training plan's table to the terminal (and its log): per experiment its jobs, the jobs it adds,
their projected V100 GPU-hours and how many are trained (the table `python -m softmax_bottleneck plan` prints)."""

snakemake = globals()["snakemake"]  # injected by Snakemake's script: directive

text = (
    f"Training plan ({snakemake.input[0]}): {snakemake.params.jobs} training jobs (a run that several experiments "
    "use is trained once); projected with the paper's V100 seconds per epoch × epochs.\n\n"
    f"{snakemake.params.table}\n"
    "Live logs while the workflow runs: tail -f logs/train/<dataset>/<variant>/<schedule>/seed<seed>/<run>.log"
)
print(text, flush=True)
with open(snakemake.log[0], "w") as log:
    log.write(text + "\n")
