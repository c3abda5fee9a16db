"""Figure 1: the two-piece linear function PL(x; c, k) of LMS-PLIF and its smooth version (paper Eqs. 2, 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import PAGE, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pl(x, c: float, k: float):
    """Two-piece linear PL(x; c, k) = x for x > c, k(x − c) + c otherwise (paper Eq. 2)."""
    x = np.asarray(x, dtype=float)
    return np.where(x > c, x, k * (x - c) + c)


def pl_smooth(x, c: float, k: float):
    """Smooth P̃L(x; c, k) = k(x − c) + c − (k − 1)·softplus(x − c) (paper Eq. 3)."""
    x = np.asarray(x, dtype=float)
    return k * (x - c) + c - (k - 1) * np.logaddexp(0.0, x - c)


@paper_figure(
    "figure1",
    requires=[],
    caption="Figure 1: the GSS building blocks PL and P̃L (Eq. 2-3), an illustration",
    report="**Figure 1.** The GSS building blocks PL(x; c, k) and P̃L(x; c, k) of Eq. (2)-(3) for (c, k) = (2, 4) and "
    "(0, 2) on [−6, 6] (an illustration; no trained model).",
)
def figure1(summary_dir) -> Figure:
    fig = new_figure(PAGE, 2.9)
    axes = fig.subplots(1, 2)
    x = np.linspace(-6, 6, 601)
    for ax, (c, k) in zip(axes, [(2.0, 4.0), (0.0, 2.0)], strict=True):
        ax.plot(x, x, color="0.8", lw=0.8, label="identity")
        ax.plot(x, pl(x, c, k), "--", color="#1f77b4", label=r"$\mathrm{PL}(x; c, k)$")
        ax.plot(x, pl_smooth(x, c, k), "-", color="#d62728", label=r"$\widetilde{\mathrm{PL}}(x; c, k)$")
        ax.set(xlim=(-6, 6), ylim=(-6, 6), xlabel="x", title=f"(c, k) = ({c:g}, {k:g})")
        ax.axhline(0, color="0.9", lw=0.5, zorder=0)
        ax.axvline(0, color="0.9", lw=0.5, zorder=0)
        ax.legend(loc="upper left")
    return fig
