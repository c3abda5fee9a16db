# Hugging Face causal language models from local folders (config `language_models`, off while its
# `models` map is empty): the Press' and ε-effective ranks of each one's next-token log-P matrix on
# a test text (`analyze-lm`), then one table and one figure that set them beside the paper's models
# (`lm-report`): <reports>/tables/language_models.{csv,md}, <reports>/figures/language_models.{pdf,png}.
# The folders are the user's (written by save_pretrained); nothing is downloaded and no code from
# them is run. `snakemake language_models` builds the table and figure; docs/analyze-lm.md explains
# the numbers.


include: "language_model_inputs.smk"


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
        mem_mb=lm_mem_mb,
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
        table=lambda wildcards, output: os.path.splitext(output.csv)[0],
        figure=lambda wildcards, output: os.path.splitext(output.pdf)[0],
    shell:
        "python -m softmax_bottleneck lm-report {params.analyses:q} --out-table {params.table} "
        "--out-figure {params.figure} > {log} 2>&1"
