"""Figures 5 and 6: MoS vs the number of mixtures K and vs dropoutl (E8, E9; SM Tables 4, 5, 12)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from softmax_bottleneck.report.figures.common import empty_panel, note, one_per, read_runs
from softmax_bottleneck.report.reported import DATASETS


def _twin_panel(ax, x, ppl, rank, xlabel: str, xticks) -> None:
    ax2 = ax.twinx()
    ax.plot(x, ppl, "o-", color="#d62728", label="test ppl")
    ax2.plot(x, rank, "s--", color="#1f77b4", label="Press' rank")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test perplexity", color="#d62728")
    ax2.set_ylabel("Press' rank", color="#1f77b4")
    ax.invert_yaxis()
    ax.set_xticks(list(xticks))
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="best")


def figure5(summary_dir) -> Figure:
    k_runs = read_runs(summary_dir, "mos_k.csv")
    d_runs = read_runs(summary_dir, "mos_dropoutl.csv")
    fig = Figure(figsize=(7.0, 3.0))
    axes = fig.subplots(1, 2)
    missing = []
    k_sel = one_per(k_runs[k_runs["dataset"] == "wt2"].dropna(subset=["n_experts"]), "n_experts")
    if len(k_sel):
        _twin_panel(
            axes[0], k_sel["n_experts"], k_sel["test_ppl"], k_sel["press_rank"], "K (mixtures)", k_sel["n_experts"]
        )
    else:
        missing.append("WT2 MoS K sweep")
        empty_panel(axes[0])
    axes[0].set_title("WT2 MoS: number of mixtures")
    d_sel = one_per(d_runs[d_runs["dataset"] == "wt2"].dropna(subset=["dropoutl"]), "dropoutl")
    if len(d_sel):
        d_sel = d_sel.iloc[::-1]  # paper: 0.290, 0.145, 0.000 from left to right
        _twin_panel(axes[1], d_sel["dropoutl"], d_sel["test_ppl"], d_sel["press_rank"], "dropoutl", d_sel["dropoutl"])
        axes[1].invert_xaxis()
    else:
        missing.append("WT2 MoS dropoutl sweep")
        empty_panel(axes[1])
    axes[1].set_title("WT2 MoS (K = 15): dropout on the MoS layer")
    note(fig, missing)
    fig.subplots_adjust(left=0.09, right=0.91, bottom=0.16, top=0.9, wspace=0.55)
    return fig


def figure6(summary_dir) -> Figure:
    runs = read_runs(summary_dir, "mos_k.csv")
    fig = Figure(figsize=(7.0, 3.0))
    axes = fig.subplots(1, 2)
    missing = []
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        sel = one_per(runs[runs["dataset"] == ds].dropna(subset=["n_experts"]), "n_experts")
        ax.set_title(f"MoS on {label}", pad=16)
        if sel.empty:
            missing.append(f"{label} MoS K sweep")
            empty_panel(ax)
            continue
        k = sel["n_experts"].to_numpy(float)
        ax.plot(k, sel["train_ppl"], "o-", color="#2ca02c", label="train")
        ax.plot(k, sel["test_ppl"], "s-", color="#d62728", label="test")
        ax.set(xlabel="K (mixtures)", ylabel="perplexity")
        ax.set_xticks(k, [f"{v:g}" for v in k])
        top = ax.secondary_xaxis("top")
        top.set_xticks(k, [f"{p / 1e6:.2f}M" if pd.notna(p) else "" for p in sel["parameters"]], fontsize=5)
        ax.legend(loc="best")
    note(fig, missing)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.84, wspace=0.3)
    return fig
