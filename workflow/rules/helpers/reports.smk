# Tables and figures of workflow/rules/reports.smk and their report metadata.

from softmax_bottleneck.report import figures as paper_figures
from softmax_bottleneck.report import tables as paper_tables

TABLE_REQUIRES = dict(paper_tables.REQUIRES)
FIGURE_REQUIRES = dict(paper_figures.REQUIRES)
TABLES = list(TABLE_REQUIRES)
FIGURES = list(FIGURE_REQUIRES)


def summary_files(names):
    return [f"{RESULTS}/summary/{name}" for name in names]


def table_outputs(name):
    return [f"{REPORTS}/tables/{name}.csv", f"{REPORTS}/tables/{name}.md"]


def figure_outputs(name):
    return [f"{REPORTS}/figures/{name}.pdf", f"{REPORTS}/figures/{name}.png"]


def all_reports():
    out = [path for name in TABLES for path in table_outputs(name)]
    out += [path for name in FIGURES for path in figure_outputs(name)]
    return out


def report_category(name):
    return "Supplementary material" if name.startswith("sm_") else "Paper"


def report_labels(name):
    kind, _, number = name.partition("_") if name.startswith("sm_") else ("", "", name)
    item = number if kind else name
    title = (
        item.replace("table", "Table ").replace("figure", "Figure ").replace("_", " ")
    )
    return {"item": ("SM " if kind else "") + title}


def summary_dir(wildcards):
    """This configuration's summary folder (also for items that read no summary, e.g. Figure 1)."""
    return f"{RESULTS}/summary"


def output_prefix(wildcards, output):
    """``<reports>/tables/NAME`` of ``NAME.csv``: the ``--out`` prefix of ``table``/``figure``."""
    return os.path.splitext(output[0])[0]
