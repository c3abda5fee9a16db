"""The main comparison (E1, E7): paper Tables 2, 3, 4 and SM Table 1."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.tables.common import (
    PPL3,
    compare,
    key_groups,
    mean_sd,
    mean_sd_columns,
    mean_sd_rows,
    order_rows,
    params_m,
    read_runs,
    t_test,
)


def table2(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "main.csv")
    paper = reported.load("main")
    keys = ["dataset", "variant"]
    quantities = [*PPL3, "press_rank"]
    rows = []
    for ds, var in key_groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        row = {"dataset": ds, "variant": var, "n_runs": len(sel)}
        row["parameters_m"] = params_m(sel["parameters"])
        row["seconds_per_epoch"] = mean_sd(sel["seconds_per_epoch"])[0] if "seconds_per_epoch" in sel else math.nan
        for q in quantities:
            row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(sel[q])
        base = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax") & (runs["seed_kind"] == "random")]
        mine = sel[sel["seed_kind"] == "random"]
        row["p_value"] = math.nan if var == "softmax" else t_test(mine["test_ppl"], base["test_ppl"])
        rows.append(row)
    ours = pd.DataFrame(
        rows, columns=[*keys, "n_runs", "parameters_m", "seconds_per_epoch", *mean_sd_columns(quantities), "p_value"]
    )
    values = ["parameters_m", "seconds_per_epoch", *mean_sd_columns(quantities), "p_value"]
    return order_rows(compare(ours, paper, keys, values, extra_ours=["n_runs"]), paper)


def sm_table1(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "main.csv")
    runs = runs[runs["seed_kind"] == "random"]
    paper = reported.load("sm_table1")
    keys = ["dataset", "variant"]
    rows = []
    for ds, var in key_groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        base = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax")]
        mean, sd = mean_sd(sel["test_ppl"])
        p = math.nan if var == "softmax" else t_test(sel["test_ppl"], base["test_ppl"])
        rows.append(
            {"dataset": ds, "variant": var, "n_runs": len(sel), "test_ppl_mean": mean, "test_ppl_sd": sd, "p_value": p}
        )
    ours = pd.DataFrame(rows, columns=[*keys, "n_runs", "test_ppl_mean", "test_ppl_sd", "p_value"])
    table = compare(ours, paper, keys, ["test_ppl_mean", "test_ppl_sd", "p_value"], extra_ours=["n_runs"])
    return order_rows(table, paper)


def table3(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "frozen.csv")
    paper = reported.load("table3")
    keys = ["dataset", "variant"]
    rows = mean_sd_rows(runs, keys, PPL3, key_groups(paper, runs, keys=keys))
    for row in rows:
        row["n_runs"] = int(((runs["dataset"] == row["dataset"]) & (runs["variant"] == row["variant"])).sum())
    ours = pd.DataFrame(rows, columns=[*keys, *mean_sd_columns(PPL3), "n_runs"])
    return order_rows(compare(ours, paper, keys, mean_sd_columns(PPL3), extra_ours=["n_runs"]), paper)


def table4(summary_dir) -> pd.DataFrame:
    main = read_runs(summary_dir, "main.csv")
    frozen = read_runs(summary_dir, "frozen.csv")
    both = pd.concat([main[main["variant"] == "lms_plif"], frozen[frozen["variant"] == "lms_plif_frozen"]])
    both = both[both["seed_kind"] == "random"]
    paper = reported.load("table4")
    rows = []
    for (ds,) in key_groups(paper, both, keys=["dataset"]):
        sel = both[both["dataset"] == ds]
        a = sel[sel["variant"] == "lms_plif"]["test_ppl"]
        b = sel[sel["variant"] == "lms_plif_frozen"]["test_ppl"]
        row = {"dataset": ds, "n_runs_lms_plif": len(a), "n_runs_lms_plif_frozen": len(b)}
        row["lms_plif_test_ppl_mean"], row["lms_plif_test_ppl_sd"] = mean_sd(a)
        row["lms_plif_frozen_test_ppl_mean"], row["lms_plif_frozen_test_ppl_sd"] = mean_sd(b)
        row["p_value"] = t_test(a, b)
        rows.append(row)
    values = [c for c in paper.columns if c != "dataset"]
    ours = pd.DataFrame(rows, columns=["dataset", "n_runs_lms_plif", "n_runs_lms_plif_frozen", *values])
    return compare(ours, paper, ["dataset"], values, extra_ours=["n_runs_lms_plif", "n_runs_lms_plif_frozen"])
