"""Shared parts of the figures: the style, one colour per variant, reading the summaries, notes on the figure."""

from __future__ import annotations

import logging

import pandas as pd
from matplotlib.figure import Figure

from softmax_bottleneck.report.tables import read_summary

log = logging.getLogger(__name__)

#: matplotlib rc parameters of every figure (the package's style; no matplotlibrc file needed)
STYLE: dict[str, object] = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "axes.spines.top": True,
    "axes.spines.right": True,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "standard",
    "pdf.fonttype": 3,
    "pdf.compression": 6,
    "path.simplify": True,
    "svg.hashsalt": "softmax-bottleneck",
    "image.interpolation": "nearest",
}


def note(fig: Figure, missing: list[str]) -> None:
    """Footnote listing what could not be drawn (small-scale runs)."""
    if missing:
        text = "not available: " + "; ".join(missing)
        fig.text(0.005, 0.005, text, fontsize=6, color="0.4", ha="left", va="bottom", wrap=True)
        log.info("%s", text)


def empty_panel(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.5")


def read_runs(summary_dir, name: str) -> pd.DataFrame:
    frame = read_summary(summary_dir, name)
    for col in ("dataset", "variant", "seed_kind", "seed"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object)
    for col in ("test_ppl", "train_ppl", "press_rank", "n_experts", "dropoutl", "parameters"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame


def one_per(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One run per value of ``key`` (authors' seed first, then lowest seed), sorted by ``key``."""
    if frame.empty:
        return frame
    frame = frame.assign(_pref=(frame["seed_kind"] != "authors").astype(int))
    frame = frame.sort_values(["_pref", "seed"], kind="mergesort").drop_duplicates(key)
    return frame.sort_values(key, kind="mergesort").drop(columns="_pref")


def read_spectra(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "spectra.csv")
    for col in ("dataset", "variant"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object)
    for col in ("index", "sigma", "sigma_normalised"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame
