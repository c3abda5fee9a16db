"""Figure 2: Press' rank vs test perplexity over the GSS (c, k) grid (E4), beside the paper's digitised points."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from softmax_bottleneck.analysis.stats import t_quantile
from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import pearson, read_runs
from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import (
    PAGE,
    degenerate,
    empty_panel,
    legend_below,
    limits,
    new_figure,
    note,
    plain_ticks,
)
from softmax_bottleneck.report.reported import DATASETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def fit_line(x, y, level: float = 0.95):
    """Least-squares line and the confidence band of its mean: ``(xs, fit, lower, upper)`` (NaN band if n < 3):
    fit ± t_{(1+level)/2, n-2} · s · √(1/n + (x - x̄)² / Sxx)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    xs = np.linspace(x.min(), x.max(), 100)
    slope, intercept = np.polyfit(x, y, 1)
    fit = intercept + slope * xs
    if n < 3:
        return xs, fit, np.full_like(xs, np.nan), np.full_like(xs, np.nan)
    resid = y - (intercept + slope * x)
    s = math.sqrt(float(resid @ resid) / (n - 2))
    sxx = float(((x - x.mean()) ** 2).sum())
    se = s * np.sqrt(1.0 / n + (xs - x.mean()) ** 2 / sxx)
    t = t_quantile(0.5 + level / 2, n - 2)
    return xs, fit, fit - t * se, fit + t * se


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Do the ranges of ``a`` and ``b`` overlap (so both fit on one axis)?"""
    if len(a) == 0 or len(b) == 0:
        return True
    lo, hi = max(a.min(), b.min()), min(a.max(), b.max())
    span = max(a.max() - a.min(), b.max() - b.min(), 1e-12)
    return hi >= lo - 0.1 * span


@paper_figure(
    "figure2",
    requires=["gss_grid.csv"],
    caption="Figure 2: Press' rank against test ppl over the GSS (c, k) grid (E4), PTB and WT2",
    report="**Figure 2.** Press' rank against test perplexity for every point of the GSS (c, k) grid (E4: PTB 9 × 8, "
    "WT2 9 × 4 at paper scale, ET-ASGD, authors' seed), the perplexity axis reversed as the paper draws it (lower "
    "perplexity to the right, so a negative r rises), with a least-squares line, its 95 % confidence band and the "
    'Pearson r with its sign ("r undefined" with the reason when there are fewer than 3 points or a constant); the '
    "paper's digitised points in grey with its r (the magnitude it prints, with the sign of its points), on their "
    "own grey axes when ours lie elsewhere; one panel per dataset.",
)
def figure2(summary_dir) -> Figure:
    from matplotlib.ticker import MaxNLocator

    runs = read_runs(summary_dir, "gss_grid.csv")
    paper = reported.load("figure2_points")
    reported_r = reported.load("figure2_pearson").set_index(["dataset", "subset"])["signed_r"]
    fig = new_figure(PAGE, 3.6)
    axes = fig.subplots(1, 2)
    missing = []
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        sel = runs[(runs["dataset"] == ds)].dropna(subset=["test_ppl", "press_rank"])
        pts = paper[paper["dataset"] == ds]
        x, y = sel["test_ppl"].to_numpy(float), sel["press_rank"].to_numpy(float)
        px, py = pts["test_ppl"].to_numpy(float), pts["press_rank"].to_numpy(float)
        r_paper = reported_r.get((ds, "all"), math.nan)
        paper_label = f"paper (digitised), r = {r_paper:+.2f}"
        if _overlap(x, px) and _overlap(y, py):
            ax.scatter(px, py, s=8, color="0.7", alpha=0.6, lw=0, label=paper_label)
        else:  # our small-scale runs live elsewhere: the paper's points get their own (grey, top/right) axes
            axp = ax.inset_axes([0, 0, 1, 1], zorder=0.5)
            axp.patch.set_visible(False)
            axp.scatter(px, py, s=8, color="0.7", alpha=0.6, lw=0)
            axp.invert_xaxis()
            axp.xaxis.tick_top()
            axp.yaxis.tick_right()
            axp.tick_params(colors="0.6", labelsize=6)
            plain_ticks(axp)
            for spine in axp.spines.values():
                spine.set_visible(False)
            ax.scatter([], [], s=8, color="0.7", label=paper_label + " (grey axes)")
        if len(sel):
            why = degenerate(x, y)
            r_text = f"r = {pearson(x, y)[0]:+.2f}" if why is None else f"r undefined: {why}"
            ax.scatter(x, y, s=12, color=variants.color("gss"), zorder=3, label=f"ours (n = {len(sel)}), {r_text}")
            if len(sel) >= 2 and np.ptp(x) > 0:
                xs, fit, lo, hi = fit_line(x, y)
                ax.plot(xs, fit, color="k", lw=1.0, label="least squares")
                if np.isfinite(lo).all():
                    ax.fill_between(xs, lo, hi, color="k", alpha=0.12, lw=0, label="95% confidence")
            if len(x) and np.ptp(x) == 0:
                ax.set_xlim(limits(x))
            if len(y) and np.ptp(y) == 0:
                ax.set_ylim(limits(y))
        else:
            missing.append(f"{label} GSS grid")
            empty_panel(ax, f"no {label} runs")
        ax.invert_xaxis()
        ax.xaxis.set_major_locator(MaxNLocator(5))
        plain_ticks(ax)
        ax.set(xlabel="test perplexity (reversed, as in the paper)", ylabel="Press' rank", title=f"Trained on {label}")
        legend_below(ax, fontsize=6)
    note(fig, missing)
    return fig
