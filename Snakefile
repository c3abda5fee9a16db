# softmax-bottleneck: end-to-end reproduction of Parthiban, Mao & Inkpen, "On the Softmax Bottleneck
# of Recurrent Language Models" (AAAI 2021). Rules call the package's CLI (python -m softmax_bottleneck).
#
#   snakemake -n                                   dry run of the full study (config/config.yaml)
#   snakemake plan                                 print the training plan (jobs, GPU-hours)
#   snakemake status                               where every run stands (works while the study runs)
#   snakemake preview                              provisional tables and figures from the runs finished so far
#   snakemake --cores 2 --configfile config/small.yaml --config data_mirror=../shared/data
#   snakemake table2 | figure2 | reports/tables/table2.md   build one item and only what it needs
#   snakemake claims                               the paper's claims decided from the runs (reports/claims.md)
#   snakemake --report reports/report.html         bundle every table and figure (paper scale; after the
#       small scale: --report reports/small/report.zip --configfile config/small.yaml)
#   snakemake --list-rules                         what each rule does
#
# Targets go right after `snakemake` (--configfile and --config swallow what follows them).
# See config/README.md for every config key and README.md ("Running the workflow") for usage,
# run identity and the rerun policy.

from snakemake.utils import min_version

min_version("9.0")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


# With `--sdm apptainer`, every job runs in this image (envs/softmax-bottleneck.def, docs/cluster.md); otherwise unused.
if config.get("container_image"):

    container: config["container_image"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    corpus="|".join(CORPUS_DIRS.values()),
    benchmark="|".join(WORDSIM_BENCHMARKS),
    variant="|".join(presets.variants()),
    schedule="|".join(presets.SCHEDULES),
    seed=r"\d+",
    runid="|".join(re.escape(runid) for runid in RUNIDS),
    rows=r"reference|full|\d+",
    experiment="|".join(RUN_EXPERIMENTS),


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/reports.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/language_models.smk"
include: "workflow/rules/progress.smk"


rule all:
    """Every table and figure of the paper and its SM, the claims page, the sweeps' and language models' if any."""
    default_target: True
    input:
        all_reports(),
        rules.claims.output,
        LANGUAGE_MODEL_REPORTS,
