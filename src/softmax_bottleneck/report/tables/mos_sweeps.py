"""The MoS sweeps (E8, E9): SM Tables 4 and 5 (number of mixtures K) and SM Table 12 (dropoutl)."""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.common import compare, fkey, one_run_per, read_runs


def mos_k_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = read_runs(summary_dir, "mos_k.csv", extra=["n_experts"])
    runs = runs[runs["dataset"] == dataset]
    runs = one_run_per(runs.assign(n_experts=runs["n_experts"].map(fkey)), ["n_experts"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("mos_k")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    paper = paper.assign(n_experts=paper["n_experts"].map(fkey))
    table = compare(runs, paper, ["n_experts"], ["parameters_m", "train_ppl", "test_ppl", "press_rank"])
    return table.sort_values("n_experts", kind="mergesort").reset_index(drop=True)  # K ascending, as printed


def sm_table12(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "mos_dropoutl.csv", extra=["dropoutl"])
    runs = one_run_per(runs.assign(dropoutl=runs["dropoutl"].map(fkey)), ["dataset", "dropoutl"])
    paper = reported.load("mos_dropoutl")
    paper = paper.assign(dropoutl=paper["dropoutl"].map(fkey))
    table = compare(runs, paper, ["dataset", "dropoutl"], ["train_ppl", "test_ppl", "press_rank"])
    # per dataset (in the paper's order), dropoutl descending as printed: 0.29, 0.145, 0.00
    first_seen = {ds: i for i, ds in enumerate(dict.fromkeys(table["dataset"]))}
    order = table.assign(_ds=table["dataset"].map(first_seen), _d=-table["dropoutl"])
    return table.loc[order.sort_values(["_ds", "_d"], kind="mergesort").index].reset_index(drop=True)


def mos_k_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Tables 4, 5: K, #Param, train ppl, test ppl, rank."""
    return cells.layout(
        table,
        [
            ("K", cells.key("n_experts", cells.integer)),
            ("#Param", cells.both("parameters_m", cells.params)),
            ("train ppl", cells.both("train_ppl", cells.two)),
            ("test ppl", cells.both("test_ppl", cells.two)),
            ("rank", cells.both("press_rank", cells.integer)),
        ],
    )


def sm_table12_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 12: dataset, dropoutl, train ppl, test ppl, rank."""
    return cells.layout(
        table,
        [
            ("dataset", cells.key("dataset")),
            ("dropoutl", cells.key("dropoutl", cells.value)),
            ("train ppl", cells.both("train_ppl", cells.two)),
            ("test ppl", cells.both("test_ppl", cells.two)),
            ("rank", cells.both("press_rank", cells.integer)),
        ],
        merge=["dataset"],
    )


LAYOUTS = {"sm_table4": mos_k_layout, "sm_table5": mos_k_layout, "sm_table12": sm_table12_layout}
