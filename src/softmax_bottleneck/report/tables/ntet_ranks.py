"""NT-ASGD vs ET-ASGD and the ranks of the authors'-seed models (E2, E3, E11): paper Tables 1 and 6, SM Tables
10, 11, 17 and 18."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import EPS, PPL3, one_run_per, read_runs, read_summary
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare, order_rows


# --------------------------------------------------------------------------------------------- the paper's layout
def _reported_rank(row) -> str:
    """The original papers' rank; ``N/A`` where the paper prints it (LMS-PLIF's paper reports none), ``—`` for a model
    the paper's Table 1 does not have."""
    value = row["rank_original_papers"]
    if row["variant"] not in reported.paper_order("table1"):
        return cells.MISSING
    return cells.NOT_APPLICABLE if cells.missing(value) else cells.integer(value)


def table1_layout(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1 as printed: one column per model, rows = rank and ppl difference, original papers' and ours."""
    rows = [
        ("rank, reported in the original papers", _reported_rank),
        ("rank, ours (this paper's)", cells.both("press_rank", cells.integer)),
        ("ppl difference, reported in the original papers", lambda r: cells.two(r["ppl_diff_original_papers"])),
        ("ppl difference, ours (this paper's)", cells.both("ppl_diff", cells.two)),
    ]
    models = [cells.key("variant")(r) for _, r in table.iterrows()]
    out = {"metric": [label for label, _ in rows]}
    for model, (_, r) in zip(models, table.iterrows(), strict=True):
        out[model] = [cell(r) for _, cell in rows]
    return pd.DataFrame(out)


def table6_layout(table: pd.DataFrame) -> pd.DataFrame:
    """Table 6 (SM Tables 17, 18): dataset, model, Press' rank, ε-effective ranks for ε = 10⁻³, 10⁻⁴, 10⁻⁵."""
    return cells.layout(
        table,
        [
            ("dataset", cells.key("dataset")),
            ("model", cells.key("variant")),
            ("Press' rank", cells.both("press_rank", cells.integer)),
            *[(cells.epsilon(e), cells.both(e, cells.integer)) for e in EPS],
        ],
        merge=["dataset"],
    )


def ntet_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Tables 10, 11: schedule, model, #Param, train/valid/test ppl, rank."""
    return cells.layout(
        table,
        [
            ("schedule", cells.key("schedule")),
            ("model", cells.key("variant")),
            ("#Param", cells.both("parameters_m", cells.params)),
            ("train", cells.both("train_ppl", cells.two)),
            ("valid", cells.both("valid_ppl", cells.two)),
            ("test", cells.both("test_ppl", cells.two)),
            ("rank", cells.both("press_rank", cells.integer)),
        ],
        merge=["schedule"],
    )


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "table1",
    requires=["ntet.csv"],
    runs=[{"dataset": ["ptb"], "schedule": ["et"]}, {"dataset": ["ptb"], "variant": ["mos"]}],
    caption="Table 1 (PTB): Press' rank and test-ppl gain over Softmax (Softmax − model), ET-ASGD authors' seed; MoS "
    "rank from its NT-ASGD run as in the paper; every other model of E2 (e.g. GSS, MoC, a plug-in layer) after the "
    "paper's, with — for the paper's values.",
    layout=table1_layout,
    report="**Table 1** (PTB). Press' rank of the test log-P matrix and test-perplexity gain over the Softmax "
    "baseline (baseline ppl − model ppl) for SS, LMS-PLIF and MoS, ours next to this paper's and to the values "
    "reported in the original papers, then every other model whose E2 runs exist (GSS, MoC, a plug-in layer), ours "
    "alone. Runs: E2, authors' seed, ET-ASGD (the MoS rank from its NT-ASGD run, as in the paper).",
)
def table1(summary_dir) -> pd.DataFrame:
    runs = one_run_per(read_runs(summary_dir, "ntet.csv"), ["dataset", "schedule", "variant"])
    runs = runs[runs["dataset"] == "ptb"]

    def get(variant, schedule, col):
        sel = runs[(runs["variant"] == variant) & (runs["schedule"] == schedule)]
        return float(sel[col].iloc[0]) if len(sel) else math.nan

    base = get("softmax", "et", "test_ppl")
    rows = []
    # SS, LMS-PLIF, MoS (the layers with an original paper), then every other model of E2 but the baseline
    present = [v for v in runs["variant"].dropna().unique() if v != "softmax"]
    for variant in variants.ordered(reported.paper_order("table1"), present):
        rank_schedule = "nt" if variant == "mos" else "et"
        rows.append(
            {
                "variant": variant,
                "press_rank": get(variant, rank_schedule, "press_rank"),
                "ppl_diff": base - get(variant, "et", "test_ppl"),
            }
        )
    ours = pd.DataFrame(rows, columns=["variant", "press_rank", "ppl_diff"])
    paper = reported.load("table1")
    table = compare(
        ours,
        paper,
        ["variant"],
        ["press_rank", "ppl_diff"],
        extra_paper=["rank_original_papers", "ppl_diff_original_papers"],
    )
    return table


def spectra_models(summary_dir, datasets: tuple[str, ...]) -> pd.DataFrame:
    """The (dataset, variant) pairs of the spectra analysis (``spectra.csv``): the models of Table 6 and Figure 7."""
    frame = read_summary(summary_dir, "spectra.csv", required=["dataset", "variant"])
    frame = frame[["dataset", "variant"]].drop_duplicates()
    return frame[frame["dataset"].isin(datasets)].reset_index(drop=True)


def rank_table(summary_dir, datasets: tuple[str, ...]) -> pd.DataFrame:
    """Table 6 (SM Tables 17, 18): Press' and ε-effective ranks of the ET-ASGD authors'-seed runs (``ntet.csv``).

    Rows: the paper's models in its order, then every other model of the spectra analysis (the paper shows the
    same models in Table 6 and Figure 7), in registry order.
    """
    runs = read_runs(summary_dir, "ntet.csv")
    runs = runs[(runs["schedule"] == "et") & runs["dataset"].isin(datasets)]
    runs = one_run_per(runs, ["dataset", "variant"])
    paper = reported.load("table6")
    paper = paper[paper["dataset"].isin(datasets)]
    shown = pd.concat([paper[["dataset", "variant"]], spectra_models(summary_dir, datasets)]).drop_duplicates()
    runs = shown.merge(runs, on=["dataset", "variant"], how="left")
    return order_rows(compare(runs, paper, ["dataset", "variant"], ["press_rank", *EPS]), paper)


@paper_table(
    "table6",
    requires=["ntet.csv", "spectra.csv"],
    runs=[{"schedule": ["et"]}],
    caption="Table 6 (= SM Tables 17, 18): Press' rank and ε-effective ranks, ET-ASGD authors'-seed models.",
    layout=table6_layout,
    report="**Table 6** (= SM Tables 17, 18). Press' rank and ε-effective ranks (ε = 10⁻³, 10⁻⁴, 10⁻⁵) of the test "
    "log-P matrices of the ET-ASGD authors'-seed models (E11), the models of Figure 7; PTB and WT2. Output layers "
    "other than the paper's (e.g. a plug-in layer) follow the paper's, with — for the paper's values.",
)
def table6(summary_dir) -> pd.DataFrame:
    return rank_table(summary_dir, ("ptb", "wt2"))


@paper_table(
    "sm_table17",
    requires=["ntet.csv", "spectra.csv"],
    runs=[{"dataset": ["ptb"], "schedule": ["et"]}],
    caption="SM Table 17 (PTB half of Table 6): Press' rank and ε-effective ranks.",
    layout=table6_layout,
    report="**SM Table 17** (PTB). Press' rank and ε-effective ranks of the ET-ASGD authors'-seed models (the PTB "
    "half of Table 6). Output layers other than the paper's (e.g. a plug-in layer) follow the paper's, with — for "
    "the paper's values.",
)
def sm_table17(summary_dir) -> pd.DataFrame:
    return rank_table(summary_dir, ("ptb",))


@paper_table(
    "sm_table18",
    requires=["ntet.csv", "spectra.csv"],
    runs=[{"dataset": ["wt2"], "schedule": ["et"]}],
    caption="SM Table 18 (WT2 half of Table 6): Press' rank and ε-effective ranks.",
    layout=table6_layout,
    report="**SM Table 18** (WT2). Press' rank and ε-effective ranks of the ET-ASGD authors'-seed models (the WT2 "
    "half of Table 6). Output layers other than the paper's (e.g. a plug-in layer) follow the paper's, with — for "
    "the paper's values.",
)
def sm_table18(summary_dir) -> pd.DataFrame:
    return rank_table(summary_dir, ("wt2",))


def ntet_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = read_runs(summary_dir, "ntet.csv")
    runs = one_run_per(runs[runs["dataset"] == dataset], ["schedule", "variant"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("ntet")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    table = compare(runs, paper, ["schedule", "variant"], ["parameters_m", *PPL3, "press_rank"])
    return order_rows(table, paper, groups=("schedule",))


@paper_table(
    "sm_table10",
    requires=["ntet.csv"],
    runs=[{"dataset": ["ptb"]}],
    caption="SM Table 10 (PTB): NT-ASGD vs ET-ASGD, authors' seed.",
    layout=ntet_layout,
    report="**SM Table 10** (PTB). NT-ASGD (non-monotone trigger) against ET-ASGD (switch after the configured epoch) "
    "for Softmax, SS, GSS, LMS-PLIF, MoS and MoC, authors' seed (E2): #parameters, perplexities and Press' rank. "
    "Output layers other than the paper's (e.g. a plug-in layer) follow the paper's, with — for the paper's "
    "values.",
)
def sm_table10(summary_dir) -> pd.DataFrame:
    return ntet_table(summary_dir, "ptb")


@paper_table(
    "sm_table11",
    requires=["ntet.csv"],
    runs=[{"dataset": ["wt2"]}],
    caption="SM Table 11 (WT2): NT-ASGD vs ET-ASGD, authors' seed.",
    layout=ntet_layout,
    report="**SM Table 11** (WT2). NT-ASGD against ET-ASGD for Softmax, SS, GSS, LMS-PLIF, MoS and MoC, authors' seed "
    "(E2): #parameters, perplexities and Press' rank. Output layers other than the paper's (e.g. a plug-in layer) "
    "follow the paper's, with — for the paper's values.",
)
def sm_table11(summary_dir) -> pd.DataFrame:
    return ntet_table(summary_dir, "wt2")
