"""Word similarity (E6): SM Tables 3 and 13 and the "row beats column" counts of Figure 4."""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import read_wordsim, read_wordsim_coverage
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare, order_rows
from softmax_bottleneck.study.summary_records import COVERAGE_SUMMARY


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


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "sm_table3",
    requires=["wordsim.csv"],
    caption="SM Table 3: Spearman ρ of the tied embeddings on 13 word-similarity benchmarks.",
    layout=sm_table3_layout,
    report="**SM Table 3.** Spearman's ρ between human similarity scores and cosine similarities of the learned "
    "(tied) embeddings on 13 word-similarity benchmarks, ET-ASGD authors'-seed models (E6); PTB and WT2. Output "
    "layers other than the paper's (e.g. a plug-in layer) follow the paper's, with — for the paper's values.",
)
def sm_table3(summary_dir) -> pd.DataFrame:
    ours = read_wordsim(summary_dir)
    paper = reported.load("wordsim")
    order = variants.rank([], paper["variant"])  # SM Table 3's columns: Softmax, SS, GSS, LMS-PLIF, MoS, MoC
    bench = {b: i for i, b in enumerate(reported.BENCHMARKS)}
    paper = paper.assign(_d=paper["dataset"], _b=paper["benchmark"].map(bench), _v=paper["variant"].map(order))
    paper = paper.sort_values(["_d", "_b", "_v"], kind="mergesort").drop(columns=["_d", "_b", "_v"])
    table = compare(ours, paper, ["dataset", "benchmark", "variant"], ["spearman"])
    return order_rows(table, paper, groups=("dataset", "benchmark"))


@paper_table(
    "sm_table13",
    requires=[COVERAGE_SUMMARY],
    caption="SM Table 13: benchmark pairs with a word missing from the vocabulary. WS-353 lists money–cash twice: "
    "352 distinct pairs, scored by the authors' code too (the SM prints the file's 353 lines).",
    layout=sm_table13_layout,
    shows=[],  # the vocabularies' counts, no model's result
    report="**SM Table 13.** Word-similarity benchmark pairs that cannot be scored because a word is missing from the "
    "PTB or WT2 vocabulary (a pair counts if either word is missing), counted from the corpora: no model is needed. "
    "WS-353 lists money–cash twice: 352 distinct pairs, as the authors' code scores them (the SM prints 353 lines).",
)
def sm_table13(summary_dir) -> pd.DataFrame:
    ours = read_wordsim_coverage(summary_dir)[["dataset", "benchmark", "pairs", "not_found"]]
    return compare(ours, reported.load("wordsim_coverage"), ["dataset", "benchmark"], ["pairs", "not_found"])


@paper_table(
    "figure4_wins",
    requires=["wordsim.csv"],
    caption="Figure 4: number of the 13 benchmarks on which the row model's ρ beats the column model's.",
    layout=figure4_wins_layout,
    report="**Figure 4, counts.** For each ordered pair of models, the number of the 13 word-similarity benchmarks on "
    "which the row model's Spearman ρ is strictly larger than the column model's (E6), ours next to the paper's "
    "heat-map values.",
)
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
