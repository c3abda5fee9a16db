# Hugging Face causal language models from local folders (config `language_models`, off while its
# `models` map is empty): the Press' and ε-effective ranks of each one's next-token log-P matrix on
# a test text (`analyze-lm`), then one table and one figure that set them beside the paper's models
# (`lm-report`): <reports>/tables/language_models.{csv,md}, <reports>/figures/language_models.{pdf,png}.
# The folders are the user's (written by save_pretrained); nothing is downloaded and no code from
# them is run. `snakemake language_models` builds the table and figure; docs/analyze-lm.md explains
# the numbers.

LM_CONFIG = config.get("language_models") or {}
#: name -> local model folder (relative paths: against the working directory)
LM_MODELS = {
    str(name): str(path) for name, path in (LM_CONFIG.get("models") or {}).items()
}
LM_RESULTS = f"{RESULTS}/language_models"
#: the table and the figure, for all_reports() (empty while no model is configured)
LANGUAGE_MODEL_REPORTS = (
    [f"{REPORTS}/tables/language_models.{ext}" for ext in ("csv", "md")]
    + [f"{REPORTS}/figures/language_models.{ext}" for ext in ("pdf", "png")]
    if LM_MODELS
    else []
)


def lm_text(wildcards):
    """The text the models read: a dataset's test split (fetched like the study's) or a file."""
    corpus = str(LM_CONFIG.get("corpus") or "ptb")
    if corpus in CORPUS_DIRS:
        return ancient(f"{corpus_dir(corpus)}/test.txt")
    return corpus


def lm_model_files(wildcards):
    """The model folder's config.json: a model saved anew over it re-analyses it."""
    return str(Path(LM_MODELS[wildcards.lm]) / "config.json")


def lm_options(wildcards):
    """``--rows`` and ``--stride`` of analyze-lm from the config (stride null: half the window)."""
    stride = LM_CONFIG.get("stride")
    rows = LM_CONFIG.get("rows") or "full"
    return f"--rows {rows}" + (f" --stride {int(stride)}" if stride else "")


rule analyze_lm:
    """Press' and ε-effective ranks of one Hugging Face LM's log-P matrix on the configured text."""
    input:
        model=lm_model_files,
        text=lm_text,
    output:
        rank=f"{LM_RESULTS}/{{lm}}/rank.json",
        spectrum=f"{LM_RESULTS}/{{lm}}/spectrum.csv",
    log:
        f"{LOGS}/analyze_lm/{{lm}}.log",
    benchmark:
        f"benchmarks/analyze_lm/{OUTPUT_SUBDIR or 'paper'}/{{lm}}.tsv"
    wildcard_constraints:
        lm="|".join(re.escape(name) for name in LM_MODELS) or "(?!)",
    conda:
        "../../envs/softmax-bottleneck.yaml"
    threads: 8
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=240,
    params:
        model=lambda wildcards: LM_MODELS[wildcards.lm],
        options=lm_options,
    shell:
        "python -m softmax_bottleneck gpu-lease -- "
        "python -m softmax_bottleneck analyze-lm --model {params.model:q} --text {input.text:q} {params.options} "
        "--out-json {output.rank} --out-spectrum {output.spectrum} > {log} 2>&1"


rule language_models:
    """Table and figure: the configured Hugging Face LMs' ranks beside the paper's models."""
    input:
        ranks=expand(f"{LM_RESULTS}/{{lm}}/rank.json", lm=list(LM_MODELS)),
        code=f"{PACKAGE_SRC}/softmax_bottleneck/report/language_models.py",
    output:
        csv=f"{REPORTS}/tables/language_models.csv",
        md=f"{REPORTS}/tables/language_models.md",
        pdf=f"{REPORTS}/figures/language_models.pdf",
        png=f"{REPORTS}/figures/language_models.png",
    log:
        f"{LOGS}/tables/language_models.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        analyses=lambda wildcards, input: [
            f"{name}={path}" for name, path in zip(LM_MODELS, input.ranks)
        ],
        table=f"{REPORTS}/tables/language_models",
        figure=f"{REPORTS}/figures/language_models",
    shell:
        "python -m softmax_bottleneck lm-report {params.analyses:q} --out-table {params.table} "
        "--out-figure {params.figure} > {log} 2>&1"
