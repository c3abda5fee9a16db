"""NT-ASGD vs ET-ASGD and the ranks of the authors'-seed models (E2, E3, E11): paper Tables 1 and 6, SM Tables
10, 11, 17 and 18."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.tables.common import (
    EPS,
    PPL3,
    compare,
    one_run_per,
    order_rows,
    read_runs,
    read_summary,
)


def table1(summary_dir) -> pd.DataFrame:
    runs = one_run_per(read_runs(summary_dir, "ntet.csv"), ["dataset", "schedule", "variant"])
    runs = runs[runs["dataset"] == "ptb"]

    def get(variant, schedule, col):
        sel = runs[(runs["variant"] == variant) & (runs["schedule"] == schedule)]
        return float(sel[col].iloc[0]) if len(sel) else math.nan

    base = get("softmax", "et", "test_ppl")
    rows = []
    for variant in ("ss", "lms_plif", "mos"):
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
    frame = read_summary(summary_dir, "spectra.csv")
    if not {"dataset", "variant"} <= set(frame.columns):
        return pd.DataFrame(columns=["dataset", "variant"])
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


def ntet_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = read_runs(summary_dir, "ntet.csv")
    runs = one_run_per(runs[runs["dataset"] == dataset], ["schedule", "variant"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("ntet")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    table = compare(runs, paper, ["schedule", "variant"], ["parameters_m", *PPL3, "press_rank"])
    return order_rows(table, paper, groups=("schedule",))
