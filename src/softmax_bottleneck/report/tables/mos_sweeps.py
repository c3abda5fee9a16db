"""The MoS sweeps (E8, E9): SM Tables 4 and 5 (number of mixtures K) and SM Table 12 (dropoutl)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.common import fkey, one_run_per, read_runs
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare


# --------------------------------------------------------------------------------------------- the paper's layout
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


# --------------------------------------------------------------------------------------------- the tables
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


def _mos_k_sm_table(number: int, dataset: str):
    """Register SM Table ``number``: :func:`mos_k_table` of ``dataset``."""
    label = DATASETS[dataset]
    return paper_table(
        f"sm_table{number}",
        requires=["mos_k.csv"],
        runs=[{"dataset": [dataset]}],
        caption=f"SM Table {number} ({label}): MoS vs the number of mixtures K (NT-ASGD, authors' seed).",
        layout=mos_k_layout,
        report=f"**SM Table {number}** ({label}). MoS with K mixture components (E8, NT-ASGD, authors' seed): "
        "#parameters, train and test perplexity, Press' rank.",
    )(partial(mos_k_table, dataset=dataset))


sm_table4 = _mos_k_sm_table(4, "ptb")
sm_table5 = _mos_k_sm_table(5, "wt2")


def _mixtures(table: pd.DataFrame | None) -> dict[str, str]:
    """SM Table 12's number of mixtures: the K that was run (the configuration's), beside the paper's."""
    paper = ", ".join(str(int(k)) for k in sorted(set(reported.load("mos_dropoutl")["n_experts"])))
    ours = [] if table is None else sorted({int(k) for k in table["n_experts"].dropna()})
    if not ours:
        return {"mixtures": f"K = {paper} in the paper"}
    text = ", ".join(map(str, ours))
    return {"mixtures": f"K = {text}, as in the paper" if text == paper else f"K = {text}; the paper's K = {paper}"}


@paper_table(
    "sm_table12",
    requires=["mos_dropoutl.csv"],
    caption="SM Table 12: MoS ({mixtures}) vs dropout on the MoS layer (dropoutl).",
    layout=sm_table12_layout,
    fill=_mixtures,
    report="**SM Table 12.** MoS (K = 15 at paper scale) with dropout on the MoS latent layer dropoutl ∈ {0.29, "
    "0.145, 0} (E9, NT-ASGD, authors' seed): train and test perplexity and Press' rank; PTB and WT2.",
)
def sm_table12(summary_dir) -> pd.DataFrame:
    runs = read_runs(summary_dir, "mos_dropoutl.csv", extra=["dropoutl", "n_experts"])
    runs = one_run_per(runs.assign(dropoutl=runs["dropoutl"].map(fkey)), ["dataset", "dropoutl"])
    paper = reported.load("mos_dropoutl")
    paper = paper.assign(dropoutl=paper["dropoutl"].map(fkey))
    table = compare(
        runs, paper, ["dataset", "dropoutl"], ["train_ppl", "test_ppl", "press_rank"], extra_ours=["n_experts"]
    )
    # per dataset (in the paper's order), dropoutl descending as printed: 0.29, 0.145, 0.00
    first_seen = {ds: i for i, ds in enumerate(dict.fromkeys(table["dataset"]))}
    order = table.assign(_ds=table["dataset"].map(first_seen), _d=-table["dropoutl"])
    return table.loc[order.sort_values(["_ds", "_d"], kind="mergesort").index].reset_index(drop=True)
