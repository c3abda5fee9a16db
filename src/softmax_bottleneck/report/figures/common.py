"""Shared parts of the figures: the style and sizes, the layout (notes under the panels, a banner on top), the tick
notation, reading the summaries.

Every figure is one or two columns of a paper wide (:data:`COLUMN`, :data:`PAGE`), laid out by matplotlib's
constrained layout so that nothing is drawn outside the canvas, with its fonts embedded as TrueType (Type 42).
"""

from __future__ import annotations

import logging
import math
import textwrap
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.report.common import one_run_per, read_summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "pdf.compression": 6,
    "path.simplify": True,
    "svg.hashsalt": "softmax-bottleneck",
    "image.interpolation": "nearest",
}


#: width of a one-column and of a two-column (page-wide) figure, in inches
COLUMN, PAGE = 3.3, 7.0

NOTE_SIZE = 6  # points: the notes under a figure
_MARGIN = 0.04  # inches: around the notes and the banner


def new_figure(width: float, height: float, *, compress: bool = False) -> Figure:
    """A figure ``width`` × ``height`` inches (the panels; notes and a banner add their own height), laid out by
    constrained layout (``compress``: close the gaps around fixed-aspect panels, e.g. heat maps)."""
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    return Figure(figsize=(width, height), layout=ConstrainedLayoutEngine(compress=compress))


#: the colour of what warns on a figure: its banner, a note that an older source of a layer made some results
#: (report/layer_sources.py), the provisional stamp of a preview
WARNING_COLOUR = "#c00000"


def footnote(fig: Figure, text: str, *, color: str = "0.35") -> None:
    """A note under the panels (wrapped to the figure's width when :func:`finish` lays the figure out)."""
    if text:
        fig._softmax_bottleneck_notes = [*getattr(fig, "_softmax_bottleneck_notes", []), (text, color)]


def note(fig: Figure, missing: list[str]) -> None:
    """Footnote listing what could not be drawn (small-scale runs)."""
    if missing:
        text = "not available: " + "; ".join(missing)
        footnote(fig, text, color="0.4")
        log.info("%s", text)


def legend_below(ax, *args, ncols: int = 1, fontsize: float = 7, **kwargs):
    """The legend of ``ax`` under its x label, off the data (constrained layout makes room for it)."""
    return ax.legend(
        *args, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=ax.transAxes, ncols=ncols,
        fontsize=fontsize, borderaxespad=34 / fontsize, **kwargs,
    )  # fmt: skip


def empty_panel(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.5")


def one_per(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One run per value of ``key`` (:func:`~softmax_bottleneck.report.common.one_run_per`), sorted by it."""
    return one_run_per(frame, [key]).sort_values(key, kind="mergesort")


def read_spectra(summary_dir) -> pd.DataFrame:
    columns = ["index", "sigma", "sigma_normalised"]
    return read_summary(summary_dir, "spectra.csv", text=["dataset", "variant"], numbers=columns,
                        required=["dataset", "variant", *columns])  # fmt: skip


# --------------------------------------------------------------------------------------------- axes from the data
def plain_ticks(ax) -> None:
    """No offset or scientific tick labels (a constant axis otherwise reads like ``1e−12+2``)."""
    from matplotlib.ticker import ScalarFormatter

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


# --------------------------------------------------------------------------------------------- ticks
def _power_of_ten(v: float, exponent: int) -> str:
    mantissa = f"{v / 10.0**exponent:.2g}"
    return f"{mantissa}×10{str(exponent).translate(_SUPERSCRIPT)}"


def sci(v: float) -> str:
    """``5.7×10⁻⁵`` (two significant figures): a small number in a note, as the tables print p-values."""
    return _power_of_ten(v, math.floor(math.log10(abs(v)))) if v else "0"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def small_ticks(axis) -> None:
    """Tick labels of an axis whose values are all below 0.01 (e.g. σ_i / σ_max against ε) as ``4×10⁻⁵``, one
    power of ten for the whole axis (the largest tick's), never ``0.000040`` or an offset in the corner."""
    from matplotlib.ticker import FuncFormatter

    def fmt(value, _pos=None) -> str:
        if value == 0:
            return "0"
        top = max(abs(t) for t in axis.get_view_interval())
        return _power_of_ten(value, math.floor(math.log10(top)) if top > 0 else 0)

    axis.set_major_formatter(FuncFormatter(fmt))


# --------------------------------------------------------------------------------------------- layout
BANNER_HEIGHT = 0.22  # inches added at the top of a figure for each line of its label and banner


def finish(fig: Figure, banner: str | None = None, label: str | None = None) -> Figure:
    """Lay ``fig`` out: its notes (:func:`footnote`) wrapped under the panels; on top ``label`` (the paper's name of
    the figure, "SM Figure 2", in bold at the left) and ``banner`` in red bold across the figure, a line each of its
    lines (e.g. "small scale — pipeline check, not the paper"). The figure grows by their height, so the panels
    keep their size and nothing is covered; constrained layout places the panels in the rest."""
    width, height = fig.get_size_inches()
    per_line = int(width * 72 / (NOTE_SIZE * 0.58))  # characters of the notes' font per line
    notes = [(textwrap.fill(text, per_line), color) for text, color in getattr(fig, "_softmax_bottleneck_notes", [])]
    line = NOTE_SIZE * 1.25 / 72
    below = sum((text.count("\n") + 1) * line for text, _ in notes) + (_MARGIN * (len(notes) + 1) if notes else 0)
    top = [(label, "left", "0.1")] if label else []
    top += [(text, "center", WARNING_COLOUR) for text in (banner.split("\n") if banner else [])]
    above = BANNER_HEIGHT * len(top) + (_MARGIN if top else 0.0)
    total = height + below + above
    fig.set_size_inches(width, total)
    y = _MARGIN
    for text, color in reversed(notes):
        fig.text(0.005, y / total, text, fontsize=NOTE_SIZE, color=color, ha="left", va="bottom", linespacing=1.25)
        y += (text.count("\n") + 1) * line + _MARGIN
    for i, (text, align, color) in enumerate(top):
        y = total - _MARGIN - (i + 0.5) * BANNER_HEIGHT
        fig.text(0.01 if align == "left" else 0.5, y / total, text, ha=align, va="center", color=color, fontsize=9,
                 fontweight="bold")  # fmt: skip
    fig.get_layout_engine().set(rect=(0, below / total, 1, height / total))
    fig.draw_without_rendering()  # lay out once: the ticks then fit the panels' final size when the figure is saved
    return fig
