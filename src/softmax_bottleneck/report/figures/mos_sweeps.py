"""Figures 5 and 6: MoS vs the number of mixtures K and vs dropoutl (E8, E9; SM Tables 4, 5, 12).

Each figure has two rows: this reproduction on top, the paper's values (SM Tables 4, 5, 12) below, on the same
kind of axes; when both rows' values overlap, they share the y-range so the curves compare directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.common import read_runs
from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import (
    PAGE,
    empty_panel,
    legend_below,
    limits,
    new_figure,
    note,
    one_per,
    plain_ticks,
)
from softmax_bottleneck.report.reported import DATASETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PPL_COLOR, RANK_COLOR, TRAIN_COLOR = "#d62728", "#1f77b4", "#2ca02c"
OURS, PAPER = "this reproduction", "paper"


def _set_limits(ax, values, *, axis: str = "y", inverted: bool = False) -> None:
    lim = limits(values)
    if lim is not None:
        lo, hi = lim
        (ax.set_ylim if axis == "y" else ax.set_xlim)((hi, lo) if inverted else (lo, hi))


def _twin_panel(ax, x, ppl, rank, xlabel: str, *, ticks: list[str]) -> object:
    """Test ppl (red, inverted axis, as in the paper) and Press' rank (blue, right axis) against ``x``."""
    from matplotlib.ticker import MaxNLocator

    x, ppl, rank = (np.asarray(a, dtype=float) for a in (x, ppl, rank))
    ax2 = ax.twinx()
    ax.plot(x, ppl, "o-", color=PPL_COLOR, label="test ppl")
    ax2.plot(x, rank, "s--", color=RANK_COLOR, mfc="none", label="Press' rank")  # hollow: a coinciding ppl dot shows
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test perplexity", color=PPL_COLOR)
    ax2.set_ylabel("Press' rank", color=RANK_COLOR)
    _set_limits(ax, ppl, inverted=True)
    _set_limits(ax2, rank)
    _set_limits(ax, x, axis="x")
    ax.set_xticks(x, ticks)
    for a in (ax, ax2):
        plain_ticks(a)
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # a rank is whole: no tick at 5.5 or 6.6
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    legend_below(ax, handles, [h.get_label() for h in handles], ncols=2)
    return ax2


def _share_if_overlapping(a, b) -> None:
    """Give two y-axes the union of their ranges when their data overlap (paper scale), else leave them be."""
    (a0, a1), (b0, b1) = sorted(a.get_ylim()), sorted(b.get_ylim())
    if max(a0, b0) <= min(a1, b1):
        lo, hi = min(a0, b0), max(a1, b1)
        for ax in (a, b):
            inverted = ax.yaxis_inverted()
            ax.set_ylim((hi, lo) if inverted else (lo, hi))


def _dropoutl_ticks(values) -> list[str]:
    return ["0.00" if v == 0 else f"{v:g}" for v in values]


def _k_text(values) -> str:
    ks = sorted({int(k) for k in values if pd.notna(k)})
    return f" (K = {', '.join(map(str, ks))})" if ks else ""


@paper_figure(
    "figure5",
    requires=["mos_k.csv", "mos_dropoutl.csv"],
    runs=[{"dataset": ["wt2"]}],
    caption="Figure 5 (WT2, MoS): test ppl and Press' rank against K (E8) and dropoutl (E9)",
    report="**Figure 5** (WT2, MoS). Left: test perplexity (inverted axis) and Press' rank against the number of "
    "mixture components K (E8). Right: the same against dropoutl at the K that was run (15 at paper scale; E9). "
    "NT-ASGD, authors' seed. Top row: this reproduction; bottom row: the paper's values (SM Tables 5 and 12), on "
    "a shared y-range when they overlap ours.",
)
def figure5(summary_dir) -> Figure:
    """WT2 MoS: test ppl and Press' rank vs K (SM Table 5) and vs dropoutl (SM Table 12)."""
    k_runs = read_runs(summary_dir, "mos_k.csv", extra=["n_experts"])
    d_runs = read_runs(summary_dir, "mos_dropoutl.csv", extra=["n_experts", "dropoutl"])
    k_paper = reported.load("mos_k").query("dataset == 'wt2'").sort_values("n_experts")
    d_paper = reported.load("mos_dropoutl").query("dataset == 'wt2'").sort_values("dropoutl", ascending=False)
    fig = new_figure(PAGE, 6.0)
    axes = fig.subplots(2, 2)
    missing = []
    twins = {}
    k_sel = one_per(k_runs[k_runs["dataset"] == "wt2"].dropna(subset=["n_experts"]), "n_experts")
    if len(k_sel):
        ticks = [f"{k:g}" for k in k_sel["n_experts"]]
        twins[0, 0] = _twin_panel(
            axes[0, 0], k_sel["n_experts"], k_sel["test_ppl"], k_sel["press_rank"], "K", ticks=ticks
        )
    else:
        missing.append("WT2 MoS K sweep")
        empty_panel(axes[0, 0])
    axes[0, 0].set_title(f"{OURS}:\nWT2 MoS vs number of mixtures K")
    d_sel = one_per(d_runs[d_runs["dataset"] == "wt2"].dropna(subset=["dropoutl"]), "dropoutl")
    if len(d_sel):
        d_sel = d_sel.iloc[::-1]  # as in the paper: 0.290, 0.145, 0.000 from left to right
        x = d_sel["dropoutl"]
        twins[0, 1] = _twin_panel(
            axes[0, 1], x, d_sel["test_ppl"], d_sel["press_rank"], "dropoutl", ticks=_dropoutl_ticks(x)
        )
        axes[0, 1].invert_xaxis()
    else:
        missing.append("WT2 MoS dropoutl sweep")
        empty_panel(axes[0, 1])
    axes[0, 1].set_title(f"{OURS}:\nWT2 MoS{_k_text(d_sel['n_experts'])} vs dropoutl")
    twins[1, 0] = _twin_panel(
        axes[1, 0],
        k_paper["n_experts"],
        k_paper["test_ppl"],
        k_paper["press_rank"],
        "K",
        ticks=[f"{k:g}" for k in k_paper["n_experts"]],
    )
    axes[1, 0].set_title(f"{PAPER} (SM Table 5):\nWT2 MoS vs number of mixtures K")
    twins[1, 1] = _twin_panel(
        axes[1, 1],
        d_paper["dropoutl"],
        d_paper["test_ppl"],
        d_paper["press_rank"],
        "dropoutl",
        ticks=_dropoutl_ticks(d_paper["dropoutl"]),
    )
    axes[1, 1].invert_xaxis()
    axes[1, 1].set_title(f"{PAPER} (SM Table 12):\nWT2 MoS{_k_text(d_paper['n_experts'])} vs dropoutl")
    for col in (0, 1):
        if (0, col) in twins:
            _share_if_overlapping(axes[0, col], axes[1, col])
            _share_if_overlapping(twins[0, col], twins[1, col])
    note(fig, missing)
    return fig


def _perplexity_panel(ax, k, train, test, params_m, title: str) -> None:
    """Train (green) and test (red) perplexity vs K, with #Param (M) on the top axis (Figure 6)."""
    k = np.asarray(k, dtype=float)
    ax.plot(k, train, "o-", color=TRAIN_COLOR, label="train")
    ax.plot(k, test, "s-", color=PPL_COLOR, label="test")
    ax.set(xlabel="K (mixtures)", ylabel="perplexity")
    _set_limits(ax, np.concatenate([np.asarray(train, float), np.asarray(test, float)]))
    _set_limits(ax, k, axis="x")
    ax.set_xticks(k, [f"{v:g}" for v in k])
    plain_ticks(ax)
    top = ax.secondary_xaxis("top")
    top.set_xticks(k, _spaced_labels(k, [f"{p:.2f}M" if pd.notna(p) else "" for p in params_m]))
    top.set_xlabel("#Param")
    ax.set_title(title)
    legend_below(ax, ncols=2)


def _spaced_labels(x, labels: list[str], min_gap: float = 0.15) -> list[str]:
    """Blank the labels that would touch the previous shown one (gap < ``min_gap`` of the x-range), as the
    paper labels only K = 1, 10, 20 of PTB's sweep."""
    x = np.asarray(x, dtype=float)
    span = float(np.ptp(x)) if len(x) > 1 else 1.0
    out, last = [], None
    for xi, label in zip(x, labels, strict=True):
        if last is None or xi - last >= min_gap * span or xi == x[-1]:
            out.append(label)
            last = xi
        else:
            out.append("")
    if len(out) > 1 and out[-1] and out[-2] and x[-1] - x[-2] < min_gap * span:
        out[-2] = ""
    return out


@paper_figure(
    "figure6",
    requires=["mos_k.csv"],
    caption="Figure 6: MoS train and test ppl against the number of mixtures K (E8), PTB and WT2",
    report="**Figure 6.** Train and test perplexity of MoS against the number of mixture components K (#parameters on "
    "the top axis), PTB and WT2 (E8). Top row: this reproduction; bottom row: the paper's values (SM Tables 4, "
    "5), on a shared y-range when they overlap ours.",
)
def figure6(summary_dir) -> Figure:
    """MoS train and test perplexity vs K on PTB and WT2 (SM Tables 4, 5), #Param on the top axis."""
    runs = read_runs(summary_dir, "mos_k.csv", extra=["n_experts"])
    paper = reported.load("mos_k")
    fig = new_figure(PAGE, 6.0)
    axes = fig.subplots(2, 2)
    missing = []
    for col, (ds, label) in enumerate(DATASETS.items()):
        sel = one_per(runs[runs["dataset"] == ds].dropna(subset=["n_experts"]), "n_experts")
        if sel.empty:
            missing.append(f"{label} MoS K sweep")
            empty_panel(axes[0, col])
            axes[0, col].set_title(f"{OURS}: MoS on {label}")
        else:
            params = sel["parameters"] / 1e6
            _perplexity_panel(
                axes[0, col], sel["n_experts"], sel["train_ppl"], sel["test_ppl"], params, f"{OURS}: MoS on {label}"
            )
        ref = paper[paper["dataset"] == ds].sort_values("n_experts")
        table = "SM Table 4" if ds == "ptb" else "SM Table 5"
        _perplexity_panel(
            axes[1, col],
            ref["n_experts"],
            ref["train_ppl"],
            ref["test_ppl"],
            ref["parameters_m"],
            f"{PAPER} ({table}): MoS on {label}",
        )
        if not sel.empty:
            _share_if_overlapping(axes[0, col], axes[1, col])
    note(fig, missing)
    return fig
