"""Word similarity (E6): SM Tables 3 and 13 and the "row beats column" counts of Figure 4."""

from __future__ import annotations

import logging

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables.common import compare, order_rows, read_summary

log = logging.getLogger(__name__)


def read_wordsim(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "wordsim.csv")
    for col in ("dataset", "variant", "benchmark", "pairs", "found", "not_found", "spearman"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame.assign(benchmark=frame["benchmark"].map(reported.normalise_benchmark))


def sm_table3(summary_dir) -> pd.DataFrame:
    ours = read_wordsim(summary_dir)
    paper = reported.load("wordsim")
    order = variants.rank([], paper["variant"])  # SM Table 3's columns: Softmax, SS, GSS, LMS-PLIF, MoS, MoC
    bench = {b: i for i, b in enumerate(reported.BENCHMARKS)}
    paper = paper.assign(_d=paper["dataset"], _b=paper["benchmark"].map(bench), _v=paper["variant"].map(order))
    paper = paper.sort_values(["_d", "_b", "_v"], kind="mergesort").drop(columns=["_d", "_b", "_v"])
    table = compare(ours, paper, ["dataset", "benchmark", "variant"], ["spearman"])
    return order_rows(table, paper, groups=("dataset", "benchmark"))


def sm_table13(summary_dir) -> pd.DataFrame:
    frame = read_wordsim(summary_dir)
    rows = []
    for (ds, bench), sel in frame.groupby(["dataset", "benchmark"], sort=False):
        counts = sel[["pairs", "not_found"]].drop_duplicates()
        if len(counts) > 1:
            log.warning("%s %s: models disagree on pairs/not_found: %s", ds, bench, counts.values.tolist())
        rows.append(
            {"dataset": ds, "benchmark": bench, "pairs": sel["pairs"].iloc[0], "not_found": sel["not_found"].iloc[0]}
        )
    ours = pd.DataFrame(rows, columns=["dataset", "benchmark", "pairs", "not_found"])
    return compare(ours, reported.load("wordsim_coverage"), ["dataset", "benchmark"], ["pairs", "not_found"])


def figure4_wins(summary_dir) -> pd.DataFrame:
    ws = read_wordsim(summary_dir)
    rows = []
    for ds in DATASETS:
        matrix = reported.figure4_matrix(ws, ds)
        for i in matrix.index:
            for j in matrix.columns:
                if i != j:
                    rows.append({"dataset": ds, "row_variant": i, "col_variant": j, "wins": matrix.loc[i, j]})
    ours = pd.DataFrame(rows, columns=["dataset", "row_variant", "col_variant", "wins"])
    paper = reported.load("figure4")
    table = compare(ours, paper, ["dataset", "row_variant", "col_variant"], ["wins"])
    return order_rows(table, paper, variant_columns=("row_variant", "col_variant"))
