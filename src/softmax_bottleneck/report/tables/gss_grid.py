"""The GSS (c, k) grid (E4): the Pearson correlation of test perplexity and Press' rank quoted with Figure 2."""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.common import pearson, read_runs
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare


# --------------------------------------------------------------------------------------------- the paper's layout
def figure2_pearson_layout(table: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's text: |r| of test ppl and Press' rank over the GSS grid, all points and a restricted ppl range, and r
    with its sign (the paper's: the sign of its digitised points, ``signed_r``)."""

    def ppl_range(row) -> str:
        lo, hi = row.get("test_ppl_min"), row.get("test_ppl_max")
        return "all" if cells.missing(lo) else f"{cells.two(lo)}–{cells.two(hi)}"

    datasets = {d: i for i, d in enumerate(dict.fromkeys(table["dataset"]))}
    table = table.iloc[table["dataset"].map(datasets).argsort(kind="stable")]  # per dataset: all, then restricted
    return cells.layout(
        table,
        [
            ("dataset", cells.key("dataset")),
            ("test ppl range", ppl_range),
            ("abs(r)", cells.both("abs_r", cells.r2)),
            ("r", lambda row: cells.pair(cells.r2(row.get("r")), cells.r2(row.get("signed_r")))),
            ("p (ours)", cells.only("p_value", cells.scientific)),
            ("n (ours)", cells.only("n_points", cells.integer)),
            ("r of the paper's digitised points", cells.only("r_digitised", cells.r2)),
            ("n of the paper's digitised points", cells.only("n_digitised", cells.integer)),
        ],
        merge=["dataset"],
    )


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "figure2_pearson",
    requires=["gss_grid.csv"],
    caption="Figure 2 (text): Pearson correlation of test ppl and Press' rank over the GSS grid (the paper gives |r|; "
    "r takes the sign of the paper's digitised points, whose r the last columns give).",
    layout=figure2_pearson_layout,
    report="**Figure 2, correlations.** Pearson correlation between test perplexity and Press' rank over the GSS (c, "
    "k) grid (E4), over all grid points and over the paper's restricted perplexity ranges, ours next to the "
    "paper's 0.48 / 0.53 (0.24 / 0.21 restricted); r with its sign beside the paper's (−0.48 / −0.53: the sign of its "
    "digitised points, whose rank rises as perplexity falls).",
)
def figure2_pearson(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "gss_grid.csv")
    paper = reported.load("figure2_pearson")
    points = reported.load("figure2_points")
    rows = []
    for rec in paper.to_dict("records"):
        ds, lo, hi = rec["dataset"], rec["test_ppl_min"], rec["test_ppl_max"]

        def restrict(frame, ds=ds, lo=lo, hi=hi):
            frame = frame[frame["dataset"] == ds]
            if pd.notna(lo):
                frame = frame[(frame["test_ppl"] >= lo) & (frame["test_ppl"] <= hi)]
            return frame

        sel, dig = restrict(runs), restrict(points)
        r, p = pearson(sel["test_ppl"], sel["press_rank"])
        r_dig, _ = pearson(dig["test_ppl"], dig["press_rank"])
        rows.append(
            {
                **rec,
                "n_points": len(sel),
                "r": r,
                "p_value": p,
                "abs_r": abs(r),
                "r_digitised": r_dig,
                "n_digitised": len(dig),
            }
        )
    ours = pd.DataFrame(rows)
    keys = ["dataset", "subset"]
    return compare(
        ours,
        paper,
        keys,
        ["abs_r"],
        extra_paper=["test_ppl_min", "test_ppl_max", "signed_r"],
        extra_ours=["n_points", "r", "p_value", "r_digitised", "n_digitised"],
    )
