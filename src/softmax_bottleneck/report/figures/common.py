"""Shared parts of the figures: the style, one colour per variant, reading the summaries, notes on the figure."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from softmax_bottleneck.report.common import one_run_per, read_summary

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


def one_per(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One run per value of ``key`` (:func:`~softmax_bottleneck.report.common.one_run_per`), sorted by it."""
    return one_run_per(frame, [key]).sort_values(key, kind="mergesort")


def read_spectra(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "spectra.csv")
    for col in ("dataset", "variant"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object)
    for col in ("index", "sigma", "sigma_normalised"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame


# --------------------------------------------------------------------------------------------- axes from the data
def plain_ticks(ax) -> None:
    """No offset or scientific tick labels (a constant axis otherwise reads like ``1e−12+2``)."""
    for axis in (ax.xaxis, ax.yaxis):
        formatter = axis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            formatter.set_useOffset(False)
            formatter.set_scientific(False)


def limits(values, *, pad: float = 0.08) -> tuple[float, float] | None:
    """Axis limits that show every finite value with a margin; a constant gets ±5 % (at least ±0.5)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    lo, hi = float(values.min()), float(values.max())
    if hi - lo == 0:
        half = max(abs(lo) * 0.05, 0.5)
        return lo - half, hi + half
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


def degenerate(x, y=None) -> str | None:
    """Why a correlation or a fit of ``x`` (and ``y``) is undefined: too few points or a constant; None if fine."""
    arrays = [np.asarray(a, dtype=float) for a in (x, y) if a is not None]
    n = min(int(np.isfinite(a).sum()) for a in arrays)
    if n == 0:
        return "no points"
    if n < 3:
        return f"only {n} point{'s' if n > 1 else ''}"
    if any(np.ptp(a[np.isfinite(a)]) == 0 for a in arrays):
        return "constant values"
    return None


# --------------------------------------------------------------------------------------------- banner
BANNER_HEIGHT = 0.3  # inches added at the top of a figure for its banner


def add_banner(fig: Figure, text: str) -> None:
    """Red bold ``text`` across the top of ``fig`` (e.g. "small scale — pipeline check, not the paper").

    The figure grows by :data:`BANNER_HEIGHT` and its axes keep their size, so nothing is covered.
    """
    width, height = fig.get_size_inches()
    scale = height / (height + BANNER_HEIGHT)
    fig.set_size_inches(width, height + BANNER_HEIGHT)
    for ax in fig.axes:
        if ax.get_axes_locator() is not None:  # insets and secondary axes follow their parent
            continue
        box = ax.get_position()
        ax.set_position([box.x0, box.y0 * scale, box.width, box.height * scale])
    for artist in fig.texts:
        x, y = artist.get_position()
        artist.set_position((x, y * scale))
    fig.text(
        0.5,
        1 - 0.5 * BANNER_HEIGHT / (height + BANNER_HEIGHT),
        text,
        ha="center",
        va="center",
        color="#c00000",
        fontsize=9,
        fontweight="bold",
    )
