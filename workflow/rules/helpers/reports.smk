# Tables and figures of workflow/rules/reports.smk and their report metadata.

import shlex

from softmax_bottleneck.report import figures as paper_figures
from softmax_bottleneck.report import tables as paper_tables

TABLE_REQUIRES = dict(paper_tables.REQUIRES)
FIGURE_REQUIRES = dict(paper_figures.REQUIRES)
TABLES = list(TABLE_REQUIRES)
FIGURES = list(FIGURE_REQUIRES)
#: longest rule description shown by `snakemake --list-rules`
DESCRIPTION_LENGTH = 120
#: what each figure shows, in one line (the tables' lines are the package's table captions)
FIGURE_DESCRIPTIONS = {
    "figure1": "Figure 1: the GSS building blocks PL and P̃L (Eq. 2-3), an illustration",
    "figure2": "Figure 2: Press' rank against test ppl over the GSS (c, k) grid (E4), PTB and WT2",
    "figure3": "Figure 3 (PTB): is the true token in each model's top-5 at the 18 contexts (E5)",
    "figure4": "Figure 4: pairwise wins of the models' embeddings on 13 word-similarity benchmarks (E6)",
    "figure5": "Figure 5 (WT2, MoS): test ppl and Press' rank against K (E8) and dropoutl (E9)",
    "figure6": "Figure 6: MoS train and test ppl against the number of mixtures K (E8), PTB and WT2",
    "figure7": "Figure 7: normalised singular values of the test log-P matrices, first 500 (E11)",
    "sm_figure2": "SM Figure 2 (PTB): singular values of the test log-P matrices, log scale, all indices",
    "sm_figure3": "SM Figure 3 (PTB): normalised singular values of the test log-P matrices, first 500",
    "sm_figure4": "SM Figure 4 (WT2): singular values of the test log-P matrices, log scale, all indices",
    "sm_figure5": "SM Figure 5 (WT2): normalised singular values of the test log-P matrices, first 500",
}


def summary_files(names):
    return [f"{RESULTS}/summary/{name}" for name in names]


def table_outputs(name):
    return [f"{REPORTS}/tables/{name}.{ext}" for ext in ("csv", "md", "html")]


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


def banner_option(wildcards):
    """``--banner '<report_banner>'`` of ``table``/``figure``, or nothing (``report_banner: null``).

    A parameter of the table and figure rules only, so changing it re-renders them and nothing else.
    """
    banner = config["report_banner"]
    return f"--banner {shlex.quote(banner)}" if banner else ""


def item_description(name):
    """One line on what a table or figure shows (``snakemake --list-rules``): the table's caption from
    the package, or the figure's line of :data:`FIGURE_DESCRIPTIONS`."""
    text = paper_tables.CAPTIONS.get(name) or FIGURE_DESCRIPTIONS.get(name)
    if text and len(text) > DESCRIPTION_LENGTH:
        text = text[: DESCRIPTION_LENGTH - 2].rsplit(" ", 1)[0] + " …"
    return text


def describe_rule(name):
    """Set the description that ``snakemake --list-rules`` prints for a table or figure rule (the
    rules are made in a loop, where a docstring cannot name the item)."""
    description = item_description(name)
    if description:  # else the loop's generic docstring stays
        workflow.get_rule(name).docstring = description
