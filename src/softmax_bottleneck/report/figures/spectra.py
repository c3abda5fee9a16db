"""Figure 7 and SM Figures 2-5: singular values of the test log-P matrices (E11), raw and normalised."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.figures.common import empty_panel, note, read_spectra
from softmax_bottleneck.report.reported import DATASETS


def _spectrum_panel(ax, frame: pd.DataFrame, ds: str, *, normalised: bool, missing: list[str]) -> None:
    label = DATASETS[ds]
    sub = frame[frame["dataset"] == ds]
    drawn, last = 0, 0.0
    paper = reported.paper_order("table6")  # Figure 7 shows the models of Table 6, in its order
    for variant in [v for v in variants.ordered(paper, frame["variant"]) if v in paper or v in set(sub["variant"])]:
        curve = sub[sub["variant"] == variant].sort_values("index", kind="mergesort")
        if curve.empty:
            missing.append(f"{label} {variants.display(variant)}")
            continue
        if normalised:
            curve = curve[curve["index"] < 500]
            y = curve["sigma_normalised"].to_numpy(float)
            if np.isnan(y).all():
                y = curve["sigma"].to_numpy(float) / np.nanmax(curve["sigma"].to_numpy(float))
            x = curve["index"].to_numpy(float)
        else:
            curve = curve[curve["sigma"] > 0]
            x, y = curve["index"].to_numpy(float), curve["sigma"].to_numpy(float)
        ax.plot(x, y, color=variants.color(variant), lw=1.0, label=variants.display(variant))
        drawn += 1
        last = max(last, float(x.max()) if len(x) else 0.0)
    if normalised:
        # the paper shows the first 500 indices; small-scale matrices may have fewer singular values
        ax.set(ylim=(0, 0.2), xlim=(0, 500 if last >= 499 or not drawn else last), ylabel=r"$\sigma_i / \sigma_{\max}$")
    else:
        ax.set_yscale("log")
        ax.set_ylabel(r"singular value $\sigma_i$")
    ax.set(xlabel="index i", title=f"Trained on {label}")
    if drawn:
        ax.legend(loc="upper right")
    else:
        empty_panel(ax)


def spectra_figure(summary_dir, datasets: tuple[str, ...], *, normalised: bool) -> Figure:
    frame = read_spectra(summary_dir)
    fig = Figure(figsize=(3.5 * len(datasets), 3.0))
    axes = np.atleast_1d(fig.subplots(1, len(datasets)))
    missing: list[str] = []
    for ax, ds in zip(axes, datasets, strict=True):
        _spectrum_panel(ax, frame, ds, normalised=normalised, missing=missing)
    note(fig, missing)
    fig.subplots_adjust(left=0.16 if len(datasets) == 1 else 0.09, right=0.97, bottom=0.16, top=0.9, wspace=0.3)
    return fig
