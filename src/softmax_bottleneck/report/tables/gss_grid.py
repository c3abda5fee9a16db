"""The GSS (c, k) grid (E4): the Pearson correlation of test perplexity and Press' rank quoted with Figure 2."""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.tables.common import compare, pearson, read_runs


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
        extra_paper=["test_ppl_min", "test_ppl_max"],
        extra_ours=["n_points", "r", "p_value", "r_digitised", "n_digitised"],
    )
