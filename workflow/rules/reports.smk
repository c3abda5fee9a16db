# Every table and figure of the paper and its SM, rendered from this configuration's small summary
# tables: tables as <reports>/tables/<name>.{csv,md,html}, figures as <reports>/figures/<name>.{pdf,png}
# (<reports> is reports/, or reports/<output_subdir>/ for a configuration other than the paper's).
# One rule per name, so `snakemake table2` or `snakemake figure2` builds exactly what that item
# needs. The rendering code is an input: editing it re-renders, and retrains or re-analyses nothing.
# The config's `report_banner` is a parameter of these rules only: changing it re-renders them alone.
# The HTML report (`snakemake --report`) shows each table's HTML page (the paper's layout) and each
# figure's PNG.


include: "helpers/reports.smk"


for table_name in TABLES:

    rule:
        """Render one table of the paper or its SM (the rule's name) as CSV, Markdown and HTML."""
        name:
            table_name
        input:
            summaries=summary_files(TABLE_REQUIRES[table_name]),
            code=rendering_code,
        output:
            csv=f"{REPORTS}/tables/{table_name}.csv",
            md=f"{REPORTS}/tables/{table_name}.md",
            html=report(
                f"{REPORTS}/tables/{table_name}.html",
                caption=f"../report/{table_name}.rst",
                category=report_category(table_name),
                subcategory="Tables",
                labels=report_labels(table_name),
            ),
        log:
            f"{LOGS}/tables/{table_name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=table_name,
            summary_dir=summary_dir,
            out=output_prefix,
            banner=banner_option,
        shell:
            "python -m softmax_bottleneck table {params.name} --summary-dir {params.summary_dir} "
            "--out {params.out} {params.banner} > {log} 2>&1"

    describe_rule(table_name)


for figure_name in FIGURES:

    rule:
        """Draw one figure of the paper or its SM (the rule's name) as PDF and PNG."""
        name:
            figure_name
        input:
            summaries=summary_files(FIGURE_REQUIRES[figure_name]),
            code=rendering_code,
        output:
            pdf=f"{REPORTS}/figures/{figure_name}.pdf",
            png=report(
                f"{REPORTS}/figures/{figure_name}.png",
                caption=f"../report/{figure_name}.rst",
                category=report_category(figure_name),
                subcategory="Figures",
                labels=report_labels(figure_name),
            ),
        log:
            f"{LOGS}/figures/{figure_name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=figure_name,
            summary_dir=summary_dir,
            out=output_prefix,
            banner=banner_option,
        shell:
            "python -m softmax_bottleneck figure {params.name} --summary-dir {params.summary_dir} "
            "--out {params.out} {params.banner} > {log} 2>&1"

    describe_rule(figure_name)
