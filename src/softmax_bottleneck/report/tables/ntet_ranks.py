"""NT-ASGD vs ET-ASGD and the ranks of the authors'-seed models (E2, E3, E11): paper Tables 1 and 6, SM Tables
10, 11, 17 and 18."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.reported import MAIN_VARIANTS
from softmax_bottleneck.report.tables.common import EPS, PPL3, compare, one_run_per, read_runs


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


def rank_table(summary_dir, datasets: tuple[str, ...]) -> pd.DataFrame:
    runs = read_runs(summary_dir, "ntet.csv")
    runs = runs[(runs["schedule"] == "et") & runs["variant"].isin(MAIN_VARIANTS) & runs["dataset"].isin(datasets)]
    runs = one_run_per(runs, ["dataset", "variant"])
    paper = reported.load("table6")
    paper = paper[paper["dataset"].isin(datasets)]
    return compare(runs, paper, ["dataset", "variant"], ["press_rank", *EPS])


def ntet_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = read_runs(summary_dir, "ntet.csv")
    runs = one_run_per(runs[runs["dataset"] == dataset], ["schedule", "variant"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("ntet")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    return compare(runs, paper, ["schedule", "variant"], ["parameters_m", *PPL3, "press_rank"])
