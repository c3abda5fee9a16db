"""Figure 3: is the true next token among the top-5 predictions, 8 models × 18 contexts (E5, SM Table 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import as_hit, read_top5
from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import PAGE, footnote, new_figure, note
from softmax_bottleneck.report.reported import FIGURE3_GROUP_LABELS, FIGURE3_GROUPS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
            grid[models.index(rec["model"]), FIGURE3_GROUPS.index(rec["group"]) * 6 + number - 1] = as_hit(rec["hit"])
    return grid


def _draw_grid(ax, grid: np.ndarray, models: list[str], title: str) -> None:
    # 0 = miss (black), 1 = hit (light), 2 = not available (grey)
    from matplotlib.colors import ListedColormap

    codes = np.where(np.isnan(grid), 2, grid)
    cmap = ListedColormap(["#111111", "#f2e8b8", "#bbbbbb"])
    ax.imshow(codes, cmap=cmap, vmin=0, vmax=2, aspect="equal")
    ax.set_yticks(range(len(models)), models)
    ax.set_xticks(range(18), [str(i % 6 + 1) for i in range(18)])
    for boundary in (5.5, 11.5):
        ax.axvline(boundary, color="w", lw=2)
    for i, group in enumerate(FIGURE3_GROUPS):  # the SM's "Ours" are the paper authors' contexts
        ax.text(i * 6 + 2.5, -0.9, FIGURE3_GROUP_LABELS[group], ha="center", va="bottom", fontsize=7)
    ax.set_title(title, pad=14)
    ax.tick_params(length=0)


@paper_figure(
    "figure3",
    requires=["top5.csv"],
    caption="Figure 3 (PTB): is the true token in each model's top-5 at the 18 contexts (E5)",
    report="**Figure 3** (PTB). Whether the true next token is among each model's top-5 predictions at the 18 test "
    "contexts (Yang et al.'s, the paper authors' — \"Ours\" in the SM —, random), for GSS, LMS-PLIF, MoC, MoC*, "
    "MoS, MoS*, SS and Softmax in the paper's (alphabetical) order, then other output layers (E5); this "
    "reproduction beside the paper's grid (SM Table 2).",
)
def figure3(summary_dir) -> Figure:
    ours = read_top5(summary_dir)
    models = variants.ordered_models(reported.paper_order("figure3_hits", "model"), ours["model"].dropna().astype(str))
    fig = new_figure(PAGE, 0.8 + 0.175 * len(models), compress=True)  # a row per model; titles, group names and ticks
    axes = fig.subplots(1, 2)
    grid = _hit_grid(ours, models)
    _draw_grid(axes[0], grid, models, "this reproduction")
    _draw_grid(axes[1], _hit_grid(reported.load("figure3_hits"), models), models, "paper (SM Table 2)")
    missing = [m for i, m in enumerate(models) if np.isnan(grid[i]).all()]
    footnote(
        fig,
        "columns: Yang et al.'s, the paper authors' and random contexts; "
        "light: true token in the top-5; black: not; grey: not available",
        color="black",
    )
    note(fig, [f"ours for {', '.join(missing)}"] if missing else [])
    return fig
