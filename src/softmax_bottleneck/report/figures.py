"""Every figure of the paper and its SM, drawn from the summary CSVs (spec §9.3, §10, §12–§14).

Figures are built with :class:`matplotlib.figure.Figure` (no pyplot, no global backend state) and saved with
the timestamps/software strings stripped, so the same inputs give byte-identical PDF and PNG files.
Every figure copes with small-scale data: missing datasets/models are noted on the figure, fewer points or
fewer singular values are drawn as they are; a missing summary file raises FileNotFoundError naming it.

Command line::

    python -m softmax_bottleneck figure NAME --summary-dir results/summary --out reports/figures/NAME

writes ``NAME.pdf`` and ``NAME.png`` atomically.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from softmax_bottleneck.atomic import atomic_path
from softmax_bottleneck.report import reported
from softmax_bottleneck.report.reported import DATASETS, DISPLAY, FIGURE3_GROUPS, FIGURE3_MODELS, MAIN_VARIANTS
from softmax_bottleneck.report.tables import pearson, read_summary

log = logging.getLogger(__name__)

#: figure name -> summary files (under the summary folder) it reads
REQUIRES: dict[str, list[str]] = {
    "figure1": [],
    "figure2": ["gss_grid.csv"],
    "figure3": ["top5.csv"],
    "figure4": ["wordsim.csv"],
    "figure5": ["mos_k.csv", "mos_dropoutl.csv"],
    "figure6": ["mos_k.csv"],
    "figure7": ["spectra.csv"],
    "sm_figure2": ["spectra.csv"],
    "sm_figure3": ["spectra.csv"],
    "sm_figure4": ["spectra.csv"],
    "sm_figure5": ["spectra.csv"],
}

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

#: one colour per variant (stable across figures)
COLORS: dict[str, str] = {
    "softmax": "#1f77b4",
    "ss": "#ff7f0e",
    "gss": "#2ca02c",
    "lms_plif": "#d62728",
    "mos": "#9467bd",
    "moc": "#8c564b",
    "lms_plif_frozen": "#e377c2",
    "mos_fair": "#7f7f7f",
    "softmax_fair_large": "#17becf",
}
_PDF_METADATA = {"CreationDate": None, "Creator": None, "Producer": None}
_PNG_METADATA = {"Software": None}


# --------------------------------------------------------------------------------------------- helpers
def _note(fig: Figure, missing: list[str]) -> None:
    """Footnote listing what could not be drawn (small-scale runs)."""
    if missing:
        text = "not available: " + "; ".join(missing)
        fig.text(0.005, 0.005, text, fontsize=6, color="0.4", ha="left", va="bottom", wrap=True)
        log.info("%s", text)


def _empty(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.5")


def _runs(summary_dir, name: str) -> pd.DataFrame:
    frame = read_summary(summary_dir, name)
    for col in ("dataset", "variant", "seed_kind", "seed"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object)
    for col in ("test_ppl", "train_ppl", "press_rank", "n_experts", "dropoutl", "parameters"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame


def _one_per(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One run per value of ``key`` (authors' seed first, then lowest seed), sorted by ``key``."""
    if frame.empty:
        return frame
    frame = frame.assign(_pref=(frame["seed_kind"] != "authors").astype(int))
    frame = frame.sort_values(["_pref", "seed"], kind="mergesort").drop_duplicates(key)
    return frame.sort_values(key, kind="mergesort").drop(columns="_pref")


def _spectra(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "spectra.csv")
    for col in ("dataset", "variant"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object)
    for col in ("index", "sigma", "sigma_normalised"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame


# --------------------------------------------------------------------------------------------- figure 1
def pl(x, c: float, k: float):
    """Two-piece linear PL(x; c, k) = x for x > c, k(x − c) + c otherwise (spec §4.3)."""
    x = np.asarray(x, dtype=float)
    return np.where(x > c, x, k * (x - c) + c)


def pl_smooth(x, c: float, k: float):
    """Smooth P̃L(x; c, k) = k(x − c) + c − (k − 1)·softplus(x − c) (spec §4.3)."""
    x = np.asarray(x, dtype=float)
    return k * (x - c) + c - (k - 1) * np.logaddexp(0.0, x - c)


def _figure1(summary_dir) -> Figure:
    fig = Figure(figsize=(6.4, 3.0))
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
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.25)
    return fig


# --------------------------------------------------------------------------------------------- figure 2
def fit_line(x, y, level: float = 0.95):
    """Least-squares line and the confidence band of its mean: ``(xs, fit, lower, upper)`` (NaN band if n < 3)."""
    from scipy import stats as sps

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
    t = sps.t.ppf(0.5 + level / 2, n - 2)
    return xs, fit, fit - t * se, fit + t * se


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Do the ranges of ``a`` and ``b`` overlap (so both fit on one axis)?"""
    if len(a) == 0 or len(b) == 0:
        return True
    lo, hi = max(a.min(), b.min()), min(a.max(), b.max())
    span = max(a.max() - a.min(), b.max() - b.min(), 1e-12)
    return hi >= lo - 0.1 * span


def _figure2(summary_dir) -> Figure:
    runs = _runs(summary_dir, "gss_grid.csv")
    paper = reported.load("figure2_points")
    reported_r = reported.load("figure2_pearson").set_index(["dataset", "subset"])["abs_r"]
    fig = Figure(figsize=(7.0, 3.2))
    axes = fig.subplots(1, 2)
    missing = []
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        sel = runs[(runs["dataset"] == ds)].dropna(subset=["test_ppl", "press_rank"])
        pts = paper[paper["dataset"] == ds]
        x, y = sel["test_ppl"].to_numpy(float), sel["press_rank"].to_numpy(float)
        px, py = pts["test_ppl"].to_numpy(float), pts["press_rank"].to_numpy(float)
        r_paper = reported_r.get((ds, "all"), math.nan)
        paper_label = f"paper (digitised), |r| = {r_paper:.2f}"
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
            for spine in axp.spines.values():
                spine.set_visible(False)
            ax.scatter([], [], s=8, color="0.7", label=paper_label + " (grey axes)")
        if len(sel):
            r, _ = pearson(x, y)
            ax.scatter(x, y, s=12, color=COLORS["gss"], zorder=3, label=f"ours (n = {len(sel)}), r = {r:.2f}")
            if len(sel) >= 2 and np.ptp(x) > 0:
                xs, fit, lo, hi = fit_line(x, y)
                ax.plot(xs, fit, color="k", lw=1.0, label="least squares")
                if np.isfinite(lo).all():
                    ax.fill_between(xs, lo, hi, color="k", alpha=0.12, lw=0, label="95% confidence")
        else:
            missing.append(f"{label} GSS grid")
            _empty(ax, f"no {label} runs")
        ax.invert_xaxis()
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.set(xlabel="test perplexity", ylabel="Press' rank", title=f"Trained on {label}")
        ax.legend(loc="lower right", frameon=True, framealpha=0.85, edgecolor="none", fontsize=6)
    _note(fig, missing)
    fig.subplots_adjust(left=0.09, right=0.95, bottom=0.16, top=0.86, wspace=0.35)
    return fig


# --------------------------------------------------------------------------------------------- figure 3
def _hit_value(value) -> float:
    if isinstance(value, str):
        return {"true": 1.0, "1": 1.0, "yes": 1.0, "false": 0.0, "0": 0.0, "no": 0.0}.get(value.strip().lower(), np.nan)
    return np.nan if pd.isna(value) else float(bool(value))


def _hit_grid(frame: pd.DataFrame, models: list[str]) -> np.ndarray:
    grid = np.full((len(models), 18), np.nan)
    for rec in frame.to_dict("records"):
        if rec.get("model") not in models or rec.get("group") not in FIGURE3_GROUPS:
            continue
        try:
            number = int(rec["number"])
        except (TypeError, ValueError):
            continue
        if 1 <= number <= 6:
            grid[models.index(rec["model"]), FIGURE3_GROUPS.index(rec["group"]) * 6 + number - 1] = _hit_value(
                rec["hit"]
            )
    return grid


def _draw_grid(ax, grid: np.ndarray, models: list[str], title: str) -> None:
    # 0 = miss (black), 1 = hit (light), 2 = not available (grey)
    codes = np.where(np.isnan(grid), 2, grid)
    cmap = ListedColormap(["#111111", "#f2e8b8", "#bbbbbb"])
    ax.imshow(codes, cmap=cmap, vmin=0, vmax=2, aspect="equal")
    ax.set_yticks(range(len(models)), models)
    ax.set_xticks(range(18), [str(i % 6 + 1) for i in range(18)])
    for boundary in (5.5, 11.5):
        ax.axvline(boundary, color="w", lw=2)
    for i, group in enumerate(FIGURE3_GROUPS):
        ax.text(i * 6 + 2.5, -0.9, group, ha="center", va="bottom", fontsize=7)
    ax.set_title(title, pad=14)
    ax.tick_params(length=0)


def _figure3(summary_dir) -> Figure:
    ours = read_summary(summary_dir, "top5.csv")
    for col in ("model", "group", "number", "hit"):
        if col not in ours.columns:
            ours[col] = pd.Series(dtype=object)
    models = list(FIGURE3_MODELS) + sorted(set(ours["model"].dropna().astype(str)) - set(FIGURE3_MODELS))
    fig = Figure(figsize=(7.0, 2.1 + 0.1 * max(len(models) - 8, 0)))
    axes = fig.subplots(1, 2)
    grid = _hit_grid(ours, models)
    _draw_grid(axes[0], grid, models, "ours")
    _draw_grid(axes[1], _hit_grid(reported.load("figure3_hits"), models), models, "paper (SM Table 2)")
    missing = [m for i, m in enumerate(models) if np.isnan(grid[i]).all()]
    fig.text(
        0.99,
        0.005,
        "light: true token in the top-5; black: not; grey: not available",
        ha="right",
        va="bottom",
        fontsize=6,
    )
    _note(fig, [f"ours for {', '.join(missing)}"] if missing else [])
    fig.subplots_adjust(left=0.09, right=0.99, bottom=0.1, top=0.83, wspace=0.2)
    return fig


# --------------------------------------------------------------------------------------------- figure 4
def _figure4(summary_dir) -> Figure:
    ws = read_summary(summary_dir, "wordsim.csv")
    for col in ("dataset", "variant", "benchmark", "spearman"):
        if col not in ws.columns:
            ws[col] = pd.Series(dtype=object if col != "spearman" else float)
    ws = ws.assign(benchmark=ws["benchmark"].map(reported.normalise_benchmark))
    paper = reported.load("figure4")
    fig = Figure(figsize=(7.0, 3.4))
    axes = fig.subplots(1, 2)
    missing = []
    cmap = matplotlib.colormaps["viridis"]
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        matrix = reported.figure4_matrix(ws, ds)
        ax.set_title(f"{label}: row beats column (ours; paper in brackets)", fontsize=7)
        if matrix.empty:
            missing.append(f"{label} word similarity")
            _empty(ax)
            continue
        n_bench = ws[ws["dataset"] == ds]["benchmark"].nunique()
        values = matrix.to_numpy(float)
        ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0, vmax=max(n_bench, 1))
        names = [DISPLAY.get(v, v) for v in matrix.index]
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names)
        lookup = paper[paper["dataset"] == ds].set_index(["row_variant", "col_variant"])["wins"]
        for i, row in enumerate(matrix.index):
            for j, col in enumerate(matrix.columns):
                if i == j:
                    continue
                ref = lookup.get((row, col))
                text = f"{values[i, j]:.0f}" + (f"\n({ref:.0f})" if ref is not None and pd.notna(ref) else "")
                shade = values[i, j] / max(n_bench, 1)
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color="k" if shade > 0.6 else "w")
        ax.tick_params(length=0)
        absent = [DISPLAY[v] for v in reported.FIGURE4_ORDER if v not in matrix.index]
        if absent:
            missing.append(f"{label} {', '.join(absent)}")
        if n_bench != 13:
            missing.append(f"{label}: only {n_bench} of 13 benchmarks")
    _note(fig, missing)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.2, top=0.9, wspace=0.35)
    return fig


# --------------------------------------------------------------------------------------------- figures 5, 6
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


def _figure5(summary_dir) -> Figure:
    k_runs = _runs(summary_dir, "mos_k.csv")
    d_runs = _runs(summary_dir, "mos_dropoutl.csv")
    fig = Figure(figsize=(7.0, 3.0))
    axes = fig.subplots(1, 2)
    missing = []
    k_sel = _one_per(k_runs[k_runs["dataset"] == "wt2"].dropna(subset=["n_experts"]), "n_experts")
    if len(k_sel):
        _twin_panel(
            axes[0], k_sel["n_experts"], k_sel["test_ppl"], k_sel["press_rank"], "K (mixtures)", k_sel["n_experts"]
        )
    else:
        missing.append("WT2 MoS K sweep")
        _empty(axes[0])
    axes[0].set_title("WT2 MoS: number of mixtures")
    d_sel = _one_per(d_runs[d_runs["dataset"] == "wt2"].dropna(subset=["dropoutl"]), "dropoutl")
    if len(d_sel):
        d_sel = d_sel.iloc[::-1]  # paper: 0.290, 0.145, 0.000 from left to right
        _twin_panel(axes[1], d_sel["dropoutl"], d_sel["test_ppl"], d_sel["press_rank"], "dropoutl", d_sel["dropoutl"])
        axes[1].invert_xaxis()
    else:
        missing.append("WT2 MoS dropoutl sweep")
        _empty(axes[1])
    axes[1].set_title("WT2 MoS (K = 15): dropout on the MoS layer")
    _note(fig, missing)
    fig.subplots_adjust(left=0.09, right=0.91, bottom=0.16, top=0.9, wspace=0.55)
    return fig


def _figure6(summary_dir) -> Figure:
    runs = _runs(summary_dir, "mos_k.csv")
    fig = Figure(figsize=(7.0, 3.0))
    axes = fig.subplots(1, 2)
    missing = []
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        sel = _one_per(runs[runs["dataset"] == ds].dropna(subset=["n_experts"]), "n_experts")
        ax.set_title(f"MoS on {label}", pad=16)
        if sel.empty:
            missing.append(f"{label} MoS K sweep")
            _empty(ax)
            continue
        k = sel["n_experts"].to_numpy(float)
        ax.plot(k, sel["train_ppl"], "o-", color="#2ca02c", label="train")
        ax.plot(k, sel["test_ppl"], "s-", color="#d62728", label="test")
        ax.set(xlabel="K (mixtures)", ylabel="perplexity")
        ax.set_xticks(k, [f"{v:g}" for v in k])
        top = ax.secondary_xaxis("top")
        top.set_xticks(k, [f"{p / 1e6:.2f}M" if pd.notna(p) else "" for p in sel["parameters"]], fontsize=5)
        ax.legend(loc="best")
    _note(fig, missing)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.84, wspace=0.3)
    return fig


# --------------------------------------------------------------------------------------------- spectra
def _spectrum_panel(ax, frame: pd.DataFrame, ds: str, *, normalised: bool, missing: list[str]) -> None:
    label = DATASETS[ds]
    sub = frame[frame["dataset"] == ds]
    drawn, last = 0, 0.0
    for variant in MAIN_VARIANTS:
        curve = sub[sub["variant"] == variant].sort_values("index", kind="mergesort")
        if curve.empty:
            missing.append(f"{label} {DISPLAY[variant]}")
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
        ax.plot(x, y, color=COLORS[variant], lw=1.0, label=DISPLAY[variant])
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
        _empty(ax)


def _spectra_figure(summary_dir, datasets: tuple[str, ...], *, normalised: bool) -> Figure:
    frame = _spectra(summary_dir)
    fig = Figure(figsize=(3.5 * len(datasets), 3.0))
    axes = np.atleast_1d(fig.subplots(1, len(datasets)))
    missing: list[str] = []
    for ax, ds in zip(axes, datasets, strict=True):
        _spectrum_panel(ax, frame, ds, normalised=normalised, missing=missing)
    _note(fig, missing)
    fig.subplots_adjust(left=0.16 if len(datasets) == 1 else 0.09, right=0.97, bottom=0.16, top=0.9, wspace=0.3)
    return fig


FIGURES: dict[str, Callable[[Path], Figure]] = {
    "figure1": _figure1,
    "figure2": _figure2,
    "figure3": _figure3,
    "figure4": _figure4,
    "figure5": _figure5,
    "figure6": _figure6,
    "figure7": lambda d: _spectra_figure(d, ("ptb", "wt2"), normalised=True),
    "sm_figure2": lambda d: _spectra_figure(d, ("ptb",), normalised=False),
    "sm_figure3": lambda d: _spectra_figure(d, ("ptb",), normalised=True),
    "sm_figure4": lambda d: _spectra_figure(d, ("wt2",), normalised=False),
    "sm_figure5": lambda d: _spectra_figure(d, ("wt2",), normalised=True),
}
assert set(FIGURES) == set(REQUIRES)


def build(name: str, summary_dir) -> Figure:
    """Figure ``name`` (see :data:`FIGURES`) from the summary CSVs in ``summary_dir``."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; valid names: {', '.join(FIGURES)}")
    for fname in REQUIRES[name]:
        path = Path(summary_dir) / fname
        if not path.is_file():
            raise FileNotFoundError(f"figure {name} needs summary file {path}, which does not exist")
    with matplotlib.rc_context(STYLE):
        return FIGURES[name](Path(summary_dir))


def render(name: str, summary_dir, out_prefix) -> None:
    """Draw figure ``name`` and write ``<out_prefix>.pdf`` and ``<out_prefix>.png`` atomically (deterministic)."""
    with matplotlib.rc_context(STYLE):
        fig = build(name, summary_dir)
        prefix = str(out_prefix)
        with atomic_path(prefix + ".pdf") as tmp:
            fig.savefig(tmp, format="pdf", metadata=_PDF_METADATA)
        with atomic_path(prefix + ".png") as tmp:
            fig.savefig(tmp, format="png", metadata=_PNG_METADATA)


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.add_argument("name", metavar="NAME", choices=list(FIGURES), help=f"one of: {', '.join(FIGURES)}")
    parser.add_argument("--summary-dir", required=True, help="folder of the summary CSVs (results/summary)")
    parser.add_argument("--out", required=True, help="output prefix; writes PREFIX.pdf and PREFIX.png")


def run_cli(args) -> int:
    render(args.name, args.summary_dir, args.out)
    log.info("wrote %s.pdf and %s.png", args.out, args.out)
    return 0
