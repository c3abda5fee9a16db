"""Figure 7 and SM Figures 2-5: singular values of the test log-P matrices (E11), raw and normalised.

* SM Figures 2 (PTB) and 4 (WT2): raw singular values σ_i, log scale, every index.
* Figure 7 and SM Figures 3 (PTB), 5 (WT2): σ_i / σ_max over the first 500 indices, y clipped to [0, 0.2].
  When our matrices have fewer singular values, or their tail lies far below 0.2 (small-scale runs), the axes
  are scaled to the data instead and the panel says so.

The models are the paper's (Table 6: Softmax, SS, GSS, LMS-PLIF, MoS) in its order, then every other model of
the spectra analysis in registry order. A triangle on the top edge marks the paper's Press' rank of each model
(Table 6) where it falls inside the x-range; the others are listed under the figure.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import (
    COLUMN,
    PAGE,
    empty_panel,
    footnote,
    legend_below,
    new_figure,
    note,
    plain_ticks,
    read_spectra,
    sci,
    small_ticks,
)
from softmax_bottleneck.report.reported import DATASETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Figure 7's window (and SM Figures 3, 5): the first 500 indices, σ_i / σ_max up to 0.2
PAPER_INDICES, PAPER_YMAX = 500, 0.2


def _curves(frame: pd.DataFrame, ds: str, *, normalised: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``variant -> (index, value)`` of one dataset, in the figure's order (missing paper models map to None)."""
    sub = frame[frame["dataset"] == ds]
    paper = reported.paper_order("table6")  # Figure 7 shows the models of Table 6, in its order
    present = set(sub["variant"])
    out = {}
    for variant in [v for v in variants.ordered(paper, sub["variant"]) if v in paper or v in present]:
        curve = sub[sub["variant"] == variant].sort_values("index", kind="mergesort")
        if curve.empty:
            out[variant] = None
            continue
        x = curve["index"].to_numpy(float)
        sigma = curve["sigma"].to_numpy(float)
        if normalised:
            y = curve["sigma_normalised"].to_numpy(float)
            if np.isnan(y).all() and np.nanmax(sigma, initial=0) > 0:
                y = sigma / np.nanmax(sigma)
            keep = x < PAPER_INDICES
        else:
            y = sigma
            keep = sigma > 0  # log scale
        keep &= np.isfinite(y)
        out[variant] = (x[keep], y[keep])
    return out


def _normalised_window(curves) -> tuple[float, float, str | None]:
    """(x_max, y_max, note): the paper's [0, 500] × [0, 0.2], or the data's when ours are shorter or flatter."""
    xs = [x for x, _ in curves if len(x)]
    last = max((float(x.max()) for x in xs), default=float(PAPER_INDICES - 1))
    tails = [y[x >= 1] for x, y in curves]
    tail_max = max((float(t.max()) for t in tails if len(t)), default=PAPER_YMAX)
    y_max = PAPER_YMAX if tail_max >= 0.5 * PAPER_YMAX else max(1.1 * tail_max, 1e-12)
    # the last index where some curve is still visible (above 1 % of the window's height)
    visible = [x[y >= 0.01 * y_max] for x, y in curves]
    reach = max((float(v.max()) for v in visible if len(v)), default=last)
    x_max = float(min(last, max(1.15 * reach, 10.0)))
    if last >= PAPER_INDICES - 1 and x_max >= PAPER_INDICES - 1 and y_max == PAPER_YMAX:
        return float(PAPER_INDICES), PAPER_YMAX, None
    parts = []
    if x_max < PAPER_INDICES - 1:
        parts.append(f"first {x_max:.0f} indices")
    if y_max != PAPER_YMAX:
        parts.append(f"y up to {y_max:.2g}" if y_max >= 0.01 else f"y up to {sci(y_max)}")
    return x_max, y_max, "scaled to the data: " + ", ".join(parts) + " (paper: 500, 0.2)"


def _mark_paper_ranks(ax, ds: str, drawn: list[str], beyond: list[str]) -> bool:
    """Triangles on the top edge at the paper's Press' ranks (Table 6); names the ones outside the x-range."""
    table6 = reported.load("table6").query("dataset == @ds").set_index("variant")["press_rank"]
    lo, hi = sorted(ax.get_xlim())
    marked = False
    for variant in drawn:
        if variant not in table6.index:
            continue
        rank = float(table6[variant])
        if lo <= rank <= hi:
            ax.plot(
                [rank],
                [1.0],
                "v",
                color=variants.color(variant),
                ms=6,
                clip_on=False,
                transform=ax.get_xaxis_transform(),
                zorder=5,
            )
            marked = True
        else:
            beyond.append(f"{variants.display(variant)} {rank:,.0f}")
    return marked


def _spectrum_panel(ax, frame: pd.DataFrame, ds: str, *, normalised: bool, missing: list[str], notes: list[str]):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    label = DATASETS[ds]
    curves = _curves(frame, ds, normalised=normalised)
    drawn, panel_notes = [], []
    for variant, curve in curves.items():
        if curve is None or not len(curve[0]):
            missing.append(f"{label} {variants.display(variant)}")
            continue
        ax.plot(*curve, color=variants.color(variant), lw=1.0, label=variants.display(variant))
        drawn.append(variant)
    ax.set_xlabel("index i")
    ax.set_title(f"Trained on {label}", pad=9)  # room for the triangles on the top edge
    if not drawn:
        empty_panel(ax)
        return
    shown = [curves[v] for v in drawn]
    if normalised:
        x_max, y_max, scaled = _normalised_window(shown)
        ax.set(xlim=(0, x_max), ylim=(0, y_max), ylabel=r"$\sigma_i / \sigma_{\max}$")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # indices: never a tick label 12.5
        plain_ticks(ax)  # linear as the paper's
        if y_max < 0.01:  # a tiny window reads 2×10⁻⁵, not 0.000020 or an offset "1e−5" in the corner
            small_ticks(ax.yaxis)
        if scaled:
            panel_notes.append(scaled)
    else:
        ax.set_yscale("log")
        ax.set_ylabel(r"singular value $\sigma_i$")
        last = max(float(x.max()) for x, _ in shown)
        ax.set_xlim(0, max(last, 1.0))
    beyond: list[str] = []
    handles, names = ax.get_legend_handles_labels()
    if _mark_paper_ranks(ax, ds, drawn, beyond):
        handles.append(Line2D([], [], marker="v", ls="", color="0.3", ms=5))
        names.append("paper's Press' rank (Table 6)")
    if beyond:
        panel_notes.append(f"the paper's Press' ranks (Table 6), off the x-axis: {', '.join(beyond)}")
    if panel_notes:
        notes.append(f"{label}: " + "; ".join(panel_notes))
    legend_below(ax, handles, names, ncols=2, fontsize=6)


def spectra_figure(summary_dir, datasets: tuple[str, ...], *, normalised: bool) -> Figure:
    """One panel per dataset: a page wide for both datasets (Figure 7), a column wide for one (SM Figures 2-5)."""
    frame = read_spectra(summary_dir)
    fig = new_figure(PAGE if len(datasets) > 1 else COLUMN, 3.0)
    axes = np.atleast_1d(fig.subplots(1, len(datasets)))
    missing: list[str] = []
    notes: list[str] = []
    for ax, ds in zip(axes, datasets, strict=True):
        _spectrum_panel(ax, frame, ds, normalised=normalised, missing=missing, notes=notes)
    for text in notes:
        footnote(fig, text)
    note(fig, missing)
    return fig


@paper_figure(
    "figure7",
    requires=["spectra.csv"],
    caption="Figure 7: normalised singular values of the test log-P matrices, first 500 (E11)",
    report="**Figure 7.** Singular values of the test log-P matrices normalised by the largest one, first 500 "
    "indices, y clipped to [0, 0.2] as in the paper (scaled to the data, and said so under the figure, when our "
    "matrices have fewer singular values or a flatter tail), for Softmax, SS, GSS, LMS-PLIF and MoS, then other "
    "output layers (ET-ASGD, authors' seed, E11); PTB and WT2 panels. Triangles on the top edge mark the paper's "
    "Press' ranks (Table 6); those beyond the x-range are listed under the figure.",
)
def figure7(summary_dir) -> Figure:
    return spectra_figure(summary_dir, ("ptb", "wt2"), normalised=True)


#: (caption, report paragraph) of a one-dataset SM figure, after its "SM Figure N (PTB)": raw, normalised
_SM_TEXT = {
    False: (
        ": singular values of the test log-P matrices, log scale, all indices",
        ". Singular values of the test log-P matrices on a log scale, all indices, for Softmax, SS, GSS, LMS-PLIF and "
        "MoS, then other output layers (E11). Triangles on the top edge mark the paper's Press' ranks (Table 6). "
        "Press' rank counts the singular values above 0.5·√(m + n + 1)·ε·σ_max (ε of float32; m × n the matrix), each "
        "model's own σ_max: a tail far above another model's can still lie under its tolerance.",
    ),
    True: (
        ": normalised singular values of the test log-P matrices, first 500",
        ". Normalised singular values (σ / σ_max) of the test log-P matrices, first 500 indices, y clipped to [0, 0.2] "
        "as in the SM (scaled to the data, and said so, when ours are shorter or flatter), then other output layers "
        "(E11). Triangles mark the paper's Press' ranks (Table 6).",
    ),
}


def _sm_figure(number: int, ds: str, *, normalised: bool):
    """Register SM Figure ``number``: :func:`spectra_figure` of dataset ``ds`` alone, raw or normalised."""
    caption, report = _SM_TEXT[normalised]
    label = DATASETS[ds]
    return paper_figure(
        f"sm_figure{number}",
        requires=["spectra.csv"],
        runs=[{"dataset": [ds]}],
        caption=f"SM Figure {number} ({label}){caption}",
        report=f"**SM Figure {number}** ({label}){report}",
    )(partial(spectra_figure, datasets=(ds,), normalised=normalised))


sm_figure2 = _sm_figure(2, "ptb", normalised=False)
sm_figure3 = _sm_figure(3, "ptb", normalised=True)
sm_figure4 = _sm_figure(4, "wt2", normalised=False)
sm_figure5 = _sm_figure(5, "wt2", normalised=True)
