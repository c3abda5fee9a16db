"""Figure 4: on how many word-similarity benchmarks each model's embedding beats each other's (E6, SM Table 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import read_wordsim
from softmax_bottleneck.report.figures.catalog import paper_figure
from softmax_bottleneck.report.figures.common import PAGE, empty_panel, new_figure, note
from softmax_bottleneck.report.reported import DATASETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@paper_figure(
    "figure4",
    requires=["wordsim.csv"],
    caption="Figure 4: pairwise wins of the models' embeddings on 13 word-similarity benchmarks (E6)",
    report="**Figure 4.** Pairwise comparison of the learned embeddings on 13 word-similarity benchmarks: cell (i, j) "
    "is the number of benchmarks on which model i's Spearman ρ beats model j's, the paper's count in brackets "
    "(E6); models in the paper's order (GSS, LMS-PLIF, MoC, MoS, SS, Softmax), then other output layers; PTB and "
    "WT2 panels.",
)
def figure4(summary_dir) -> Figure:
    import matplotlib

    ws = read_wordsim(summary_dir)
    paper = reported.load("figure4")
    fig = new_figure(PAGE, 3.3, compress=True)
    axes = fig.subplots(1, 2)
    missing = []
    cmap = matplotlib.colormaps["viridis"]
    shown = None
    for ax, (ds, label) in zip(axes, DATASETS.items(), strict=True):
        matrix = reported.figure4_matrix(ws, ds)
        ax.set_title(f"{label}: row beats column (ours; paper in brackets)", fontsize=7)
        if matrix.empty:
            missing.append(f"{label} word similarity")
            empty_panel(ax)
            continue
        n_bench = ws[ws["dataset"] == ds]["benchmark"].nunique()
        values = matrix.to_numpy(float)
        shown = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0, vmax=max(n_bench, 1))
        names = [variants.display(v) for v in matrix.index]
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
        absent = [variants.display(v) for v in reported.paper_order("figure4", "row_variant") if v not in matrix.index]
        if absent:
            missing.append(f"{label} {', '.join(absent)}")
        if n_bench != 13:
            missing.append(f"{label}: only {n_bench} of 13 benchmarks")
    if shown is not None:
        bar = fig.colorbar(shown, ax=list(axes), shrink=0.8, aspect=25, pad=0.02)
        bar.set_label("benchmarks on which the row model wins (ours)", fontsize=7)
        bar.ax.tick_params(labelsize=6)
    note(fig, missing)
    return fig
