"""Word similarity (E6): SM Tables 3 and 13 and the "row beats column" counts of Figure 4."""

from __future__ import annotations

import logging

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables import cells
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


# --------------------------------------------------------------------------------------------- the paper's layout
def sm_table3_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 3 as printed: one row per benchmark, one column per dataset and model (ρ, four decimals)."""
    cell = cells.both("spearman", cells.four)
    columns = list(dict.fromkeys(zip(table["dataset"], table["variant"], strict=True)))
    lookup = {(r["dataset"], r["variant"], r["benchmark"]): cell(r) for _, r in table.iterrows()}
    out = {"benchmark": list(dict.fromkeys(table["benchmark"]))}
    for ds, var in columns:
        header = f"{DATASETS.get(ds, ds)} {variants.display(var)}"
        out[header] = [lookup.get((ds, var, b), cells.MISSING) for b in out["benchmark"]]
    return pd.DataFrame(out)


def sm_table13_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 13 as printed: benchmark, # pairs, # not in PTB, # not in WT2."""
    benchmarks = list(dict.fromkeys(table["benchmark"]))
    datasets = list(dict.fromkeys(table["dataset"]))
    by = {(r["dataset"], r["benchmark"]): r for _, r in table.iterrows()}
    pairs = cells.both("pairs", cells.integer)
    out = {"benchmark": benchmarks, "# pairs": []}
    for b in benchmarks:
        texts = [pairs(by[ds, b]) for ds in datasets if (ds, b) in by]
        out["# pairs"].append(next((t for t in texts if not t.startswith(cells.MISSING)), texts[0]))
    for ds in datasets:
        cell = cells.both("not_found", cells.integer)
        out[f"# not in {DATASETS.get(ds, ds)}"] = [
            cell(by[ds, b]) if (ds, b) in by else cells.MISSING for b in benchmarks
        ]
    return pd.DataFrame(out)


def figure4_wins_layout(table: pd.DataFrame) -> pd.DataFrame:
    """Figure 4's matrices: per dataset, on how many benchmarks the row model's ρ beats the column model's."""
    cell = cells.both("wins", cells.integer)
    frames = []
    for ds in dict.fromkeys(table["dataset"]):
        sub = table[table["dataset"] == ds]
        models = variants.ordered(list(dict.fromkeys(sub["row_variant"])), sub["col_variant"])
        lookup = {(r["row_variant"], r["col_variant"]): cell(r) for _, r in sub.iterrows()}
        out = {"dataset": DATASETS.get(ds, ds), "row beats column": [variants.display(m) for m in models]}
        for col in models:
            out[variants.display(col)] = ["" if row == col else lookup.get((row, col), cells.MISSING) for row in models]
        frames.append(pd.DataFrame(out))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["dataset", "row beats column"])
    frame = frame.fillna(cells.MISSING)
    frame.loc[frame["dataset"].eq(frame["dataset"].shift()), "dataset"] = ""
    return frame


LAYOUTS = {"sm_table3": sm_table3_layout, "sm_table13": sm_table13_layout, "figure4_wins": figure4_wins_layout}
