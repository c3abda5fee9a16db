"""The fair comparison MoS† vs Softmax‡ (E10): paper Table 5."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.common import PPL3, mean_sd, params_m, read_runs, t_test
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare, key_groups, mean_sd_columns, order_rows


# --------------------------------------------------------------------------------------------- the paper's layout
def table5_layout(table: pd.DataFrame) -> pd.DataFrame:
    """Table 5's columns: model, train/valid/test ppl; #Param from its caption, p-value from the paper's text."""
    return cells.layout(
        table,
        [
            ("model", cells.key("variant")),
            ("#Param", cells.both("parameters_m", cells.params)),
            ("train ppl", cells.both_mean_sd("train_ppl", cells.two)),
            ("valid ppl", cells.both_mean_sd("valid_ppl", cells.two)),
            ("test ppl", cells.both_mean_sd("test_ppl", cells.two)),
            ("p-value", cells.p_value("softmax_fair_large", cells.two)),
            ("n", cells.only("n_runs", cells.integer)),
        ],
    )


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "table5",
    requires=["fair.csv"],
    caption="Table 5 (PTB): fair comparison MoS† vs Softmax‡, mean ± sd; p-value (MoS† row) of a Student t-test (the "
    "paper's p = 0.62 is from its text).",
    layout=table5_layout,
    report="**Table 5** (PTB). Fair comparison (E10): MoS† (d = d' = 280) against Softmax‡ (d = d' = 340) at about "
    "17.5M parameters, train / validation / test perplexity over the random seeds, with a Student t-test. The "
    "two-stage hyper-parameter search of SM Tables 7-8 is not rerun; both models use SM Table 9's final values.",
)
def table5(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "fair.csv")
    paper = reported.load("table5")
    keys = ["dataset", "variant"]
    rows = []
    for ds, var in key_groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        row = {"dataset": ds, "variant": var, "n_runs": len(sel), "parameters_m": params_m(sel["parameters"])}
        for q in PPL3:
            row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(sel[q])
        other = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax_fair_large")]
        rnd = sel["seed_kind"] == "random"
        row["p_value"] = (
            t_test(sel[rnd]["test_ppl"], other[other["seed_kind"] == "random"]["test_ppl"])
            if var == "mos_fair"
            else math.nan
        )
        rows.append(row)
    values = ["parameters_m", *mean_sd_columns(PPL3), "p_value"]
    ours = pd.DataFrame(rows, columns=[*keys, "n_runs", *values])
    return order_rows(compare(ours, paper, keys, values, extra_ours=["n_runs"]), paper)
