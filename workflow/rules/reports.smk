# Every table and figure of the paper and its SM, rendered from this configuration's small summary
# tables: tables as <reports>/tables/<name>.{csv,md,html,tex,ours.tex}, figures as
# <reports>/figures/<name>.{pdf,png}
# (<reports> is reports/, or reports/<output_subdir>/ for a configuration other than the paper's).
# One rule per registered table or figure (the package's registry: summaries read, caption, HTML
# report paragraph), so `snakemake table2` or `snakemake figure2` builds exactly what that item
# needs. The rendering code is an input: editing it re-renders, and retrains or re-analyses nothing.
# The config's `report_banner` is a parameter of these rules only: changing it re-renders them alone.
# After an output layer's code changes, the summaries that show the layer are written again (their input
# results/layer_sources/<layer>.txt, workflow/rules/analysis.smk), then the tables and figures built from
# them, noting the results an older source of it trained (nothing retrains).
# The HTML report (`snakemake --report`) shows each table's HTML page (the paper's layout) and each
# figure's PNG, with the registration's paragraph as caption. Each sweep of the configuration's
# `sweeps` has one rule, sweep_<name>: its table (<reports>/tables/sweep_<name>.{csv,md,html,tex}) and
# figure (<reports>/figures/sweep_<name>.{pdf,png}), in the report's "Sweeps" category.

import shlex

from softmax_bottleneck.report import figures as paper_figures
from softmax_bottleneck.report import sweeps as config_sweeps
from softmax_bottleneck.report import tables as paper_tables
from softmax_bottleneck.study.summary_records import ITEM_FOLDER, item_summary_records

#: ``--banner '<report_banner>'`` of ``table``/``figure``, or nothing (``report_banner: null``): a
#: parameter of these rules only, so changing it re-renders them and nothing else
BANNER_OPTION = (
    f"--banner {shlex.quote(config['report_banner'])}"
    if config["report_banner"]
    else ""
)
# A table or figure that reads only some runs of its summaries (its registration's `runs`: Table 4 the
# LMS-PLIF runs of E1 and E7) is built from its own summaries of those runs, <results>/summary/for/<name>/
# (rule summarize_for_item), so that `snakemake table4` trains and analyses nothing else.
SELECTING = [
    item
    for item in [*paper_tables.TABLES.values(), *paper_figures.FIGURES.values()]
    if item.runs is not None
]
ITEM_RECORDS = item_summary_records(SUMMARY_RECORDS, SELECTING)
SUMMARY_RECORDS.update(ITEM_RECORDS)
ITEM_SUMMARY = f"{RESULTS}/summary/{ITEM_FOLDER}"
# The input functions below are lambdas (`snakemake --lint` wants no function definitions in a
# file of rules). Every file of every table and figure (the sweeps' too), for rule `all`:
all_reports = lambda: [
    path
    for name in [*paper_tables.TABLES, *paper_figures.FIGURES, *SWEEP_RULES]
    for path in getattr(rules, name).output
]
#: the folder of the summaries a table or figure is built from
summary_dir_of = lambda item: (
    ITEM_SUMMARY.format(item=item.name) if item.runs else f"{RESULTS}/summary"
)
#: the SUMMARY_RECORDS key of one job of summarize_for_item
item_summary = lambda wildcards: f"{ITEM_FOLDER}/{{summary}}.csv".format(**wildcards)


rule summarize_for_item:
    """The runs of one summary that one table or figure reads (its registration's `runs`), for it alone."""
    input:
        files=lambda wildcards: files_of(item_summary(wildcards)),
        sources=lambda wildcards: layer_source_files(item_summary(wildcards)),
        code=rendering_code,
    output:
        f"{ITEM_SUMMARY}/{{summary}}.csv",
    log:
        f"{LOGS}/summarize/{ITEM_FOLDER}/{{summary}}.log",
    wildcard_constraints:
        item="|".join(item.name for item in SELECTING) or "(?!)",
        summary="|".join(
            {re.escape(file[:-4]) for item in SELECTING for file in item.requires}
        )
        or "(?!)",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        kind=lambda wildcards: SUMMARY_RECORDS[item_summary(wildcards)][0],
        records=lambda wildcards: records_of(item_summary(wildcards)),
    shell:
        "python -m softmax_bottleneck summarize --kind {params.kind} --out {output} {params.records} > {log} 2>&1"


for item in paper_tables.TABLES.values():

    # one table of the paper or its SM (the rule's name) as CSV, Markdown, HTML and LaTeX
    rule:
        f"""{item.description}"""
        name:
            item.name
        input:
            summaries=[f"{summary_dir_of(item)}/{file}" for file in item.requires],
            code=rendering_code,
        output:
            csv=f"{REPORTS}/tables/{item.name}.csv",
            md=f"{REPORTS}/tables/{item.name}.md",
            tex=f"{REPORTS}/tables/{item.name}.tex",
            tex_ours=f"{REPORTS}/tables/{item.name}.ours.tex",
            html=report(
                f"{REPORTS}/tables/{item.name}.html",
                caption="../report/item.rst",
                category=item.category,
                subcategory="Tables",
                labels={"item": item.label},
            ),
        log:
            f"{LOGS}/tables/{item.name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=item.name,
            summary_dir=lambda wildcards, folder=summary_dir_of(item): folder,
            out=lambda wildcards, output: output.csv.removesuffix(".csv"),
            banner=lambda wildcards: BANNER_OPTION,
            # the HTML report's caption (../report/item.rst), kept as written (not a wildcard pattern)
            caption=lambda wildcards, text=item.report_caption: text,
        shell:
            "python -m softmax_bottleneck table {params.name} --summary-dir {params.summary_dir} "
            "--out {params.out} {params.banner} > {log} 2>&1"


for item in paper_figures.FIGURES.values():

    # one figure of the paper or its SM (the rule's name) as PDF and PNG
    rule:
        f"""{item.description}"""
        name:
            item.name
        input:
            summaries=[f"{summary_dir_of(item)}/{file}" for file in item.requires],
            code=rendering_code,
        output:
            pdf=f"{REPORTS}/figures/{item.name}.pdf",
            png=report(
                f"{REPORTS}/figures/{item.name}.png",
                caption="../report/item.rst",
                category=item.category,
                subcategory="Figures",
                labels={"item": item.label},
            ),
        log:
            f"{LOGS}/figures/{item.name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=item.name,
            summary_dir=lambda wildcards, folder=summary_dir_of(item): folder,
            out=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
            banner=lambda wildcards: BANNER_OPTION,
            # the HTML report's caption (../report/item.rst), kept as written (not a wildcard pattern)
            caption=lambda wildcards, text=item.report_caption: text,
        shell:
            "python -m softmax_bottleneck figure {params.name} --summary-dir {params.summary_dir} "
            "--out {params.out} {params.banner} > {log} 2>&1"


#: the HTML report's caption of each sweep's table and figure (what was swept, from the configuration)
SWEEP_CAPTIONS = {
    name: config_sweeps.report_caption(name, config["sweeps"][name]) for name in SWEEPS
}


for name in SWEEPS:

    # one sweep of the configuration (sweeps:): its table and its figure
    rule:
        f"""{config_sweeps.description(name, config["sweeps"][name])}"""
        name:
            f"{SWEEP_PREFIX}{name}"
        input:
            summary=f"{RESULTS}/summary/{SWEEP_PREFIX}{name}.csv",
            code=rendering_code,
        output:
            csv=f"{REPORTS}/tables/{SWEEP_PREFIX}{name}.csv",
            md=f"{REPORTS}/tables/{SWEEP_PREFIX}{name}.md",
            tex=f"{REPORTS}/tables/{SWEEP_PREFIX}{name}.tex",
            html=report(
                f"{REPORTS}/tables/{SWEEP_PREFIX}{name}.html",
                caption="../report/item.rst",
                category="Sweeps",
                subcategory="Tables",
                labels={"item": f"sweep {name}"},
            ),
            pdf=f"{REPORTS}/figures/{SWEEP_PREFIX}{name}.pdf",
            png=report(
                f"{REPORTS}/figures/{SWEEP_PREFIX}{name}.png",
                caption="../report/item.rst",
                category="Sweeps",
                subcategory="Figures",
                labels={"item": f"sweep {name}"},
            ),
        log:
            f"{LOGS}/sweeps/{name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=name,
            summary_dir=lambda wildcards: f"{RESULTS}/summary",
            table=lambda wildcards, output: output.csv.removesuffix(".csv"),
            figure=lambda wildcards, output: output.pdf.removesuffix(".pdf"),
            banner=lambda wildcards: BANNER_OPTION,
            # the HTML report's caption (../report/item.rst), kept as written (not a wildcard pattern)
            caption=lambda wildcards, text=SWEEP_CAPTIONS[name]: text,
        shell:
            "python -m softmax_bottleneck sweep {params.name} --summary-dir {params.summary_dir} "
            "--out-table {params.table} --out-figure {params.figure} {params.banner} > {log} 2>&1"
