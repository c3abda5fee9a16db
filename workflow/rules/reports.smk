# Every table and figure of the paper and its SM (spec §14), rendered from the small summary tables:
# tables as reports/tables/<name>.{csv,md}, figures as reports/figures/<name>.{pdf,png}. One rule per
# name, so `snakemake table2` or `snakemake figure2` builds exactly what that item needs.


include: "helpers/reports.smk"


for table_name in TABLES:

    rule:
        name:
            table_name
        input:
            summary_files(TABLE_REQUIRES[table_name]),
        output:
            csv=report(
                f"reports/tables/{table_name}.csv",
                caption=f"../report/{table_name}.rst",
                category=report_category(table_name),
                subcategory="Tables",
                labels=report_labels(table_name),
            ),
            md=f"reports/tables/{table_name}.md",
        log:
            f"logs/tables/{table_name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=table_name,
        shell:
            "python -m softmax_bottleneck table {params.name} --summary-dir results/summary "
            "--out reports/tables/{params.name} > {log} 2>&1"


for figure_name in FIGURES:

    rule:
        name:
            figure_name
        input:
            summary_files(FIGURE_REQUIRES[figure_name]),
        output:
            pdf=f"reports/figures/{figure_name}.pdf",
            png=report(
                f"reports/figures/{figure_name}.png",
                caption=f"../report/{figure_name}.rst",
                category=report_category(figure_name),
                subcategory="Figures",
                labels=report_labels(figure_name),
            ),
        log:
            f"logs/figures/{figure_name}.log",
        localrule: True
        conda:
            "../../envs/softmax-bottleneck.yaml"
        params:
            name=figure_name,
        shell:
            "python -m softmax_bottleneck figure {params.name} --summary-dir results/summary "
            "--out reports/figures/{params.name} > {log} 2>&1"
