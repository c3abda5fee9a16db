"""Markdown rendering of a table: display names, ``mean ± sd`` cells, ``(ours)``/``(paper)``/``Δ`` headers."""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck.report import variants
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables.catalog import CAPTIONS

_LABELS = {
    "train_ppl": "train ppl",
    "valid_ppl": "valid ppl",
    "test_ppl": "test ppl",
    "press_rank": "Press' rank",
    "erank_1e-3": "ε=1e-3",
    "erank_1e-4": "ε=1e-4",
    "erank_1e-5": "ε=1e-5",
    "parameters_m": "#Param (M)",
    "seconds_per_epoch": "s/epoch",
    "p_value": "p-value",
    "ppl_diff": "ppl difference",
    "spearman": "Spearman ρ",
    "not_found": "# not found",
    "pairs": "# pairs",
    "abs_r": "|r|",
    "lms_plif_test_ppl": "LMS-PLIF test ppl",
    "lms_plif_frozen_test_ppl": "LMS-PLIF† test ppl",
    "hit": "hit",
    "token_index": "token index",
    "wins": "wins",
    "error": "error",
    "rank_original_papers": "rank (original papers)",
    "ppl_diff_original_papers": "ppl difference (original papers)",
    "row_variant": "row model",
    "col_variant": "column model",
    "variant": "model",
    "n_runs": "n",
    "r_digitised": "r (digitised)",
    "n_digitised": "n (digitised)",
    "n_points": "n",
    "n_runs_lms_plif": "n LMS-PLIF",
    "n_runs_lms_plif_frozen": "n LMS-PLIF†",
    "top5": "top-5",
    "top5_overlap": "top-5 overlap",
    "true_token": "true token",
}


def _fmt(col: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, str):
        return value
    value = float(value)
    if "p_value" in col:
        return f"{value:.2e}"
    if col.startswith("error"):
        return f"{value:.3g}"
    if "ppl" in col or "parameters_m" in col:
        return f"{value:.2f}"
    if "spearman" in col:
        return f"{value:.4f}"
    if col in ("abs_r", "r", "r_digitised"):
        return f"{value:.3f}"
    if col in ("c", "dropoutl", "test_ppl_min", "test_ppl_max"):
        return f"{value:g}"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):d}"
    return f"{value:.1f}"


def _label(base: str) -> str:
    return _LABELS.get(base, base.replace("_", " "))


def to_markdown(name: str, table: pd.DataFrame) -> str:
    """Human-readable rendering: display names, ``mean ± sd`` cells, ``(ours)``/``(paper)``/``Δ`` headers."""
    out: dict[str, list[str]] = {}
    cols = list(table.columns)
    used: set[str] = set()
    for col in cols:
        if col in used:
            continue
        values = table[col].tolist()
        if col in ("variant", "row_variant", "col_variant"):
            out[_label(col)] = [variants.display(v) if isinstance(v, str) else _fmt(col, v) for v in values]
        elif col == "dataset":
            out["dataset"] = [DATASETS.get(v, v) for v in values]
        elif col.endswith(("_ours", "_paper", "_diff")):
            base, _, src = col.rpartition("_")
            suffix = {"ours": " (ours)", "paper": " (paper)", "diff": ""}[src]
            if base.endswith("_mean") and f"{base[:-5]}_sd_{src}" in cols:
                q = base[:-5]
                sd_col = f"{q}_sd_{src}"
                used.add(sd_col)
                if src == "diff":
                    out[f"Δ {_label(q)}"] = [_fmt(q, m) for m in values]
                else:
                    out[f"{_label(q)}{suffix}"] = [
                        _fmt(q, m) if pd.isna(s) or pd.isna(m) else f"{_fmt(q, m)} ± {_fmt(q, s)}"
                        for m, s in zip(values, table[sd_col], strict=True)
                    ]
            elif base.endswith("_sd"):
                continue  # folded into the matching mean
            elif src == "diff" and base == "p_value":
                pass  # a difference of p-values means nothing to a reader; it stays in the CSV
            else:
                label = f"Δ {_label(base)}" if src == "diff" else f"{_label(base)}{suffix}"
                out[label] = [_fmt(base, v) for v in values]
        else:
            out[_label(col)] = [_fmt(col, v) for v in values]
        used.add(col)
    frame = pd.DataFrame(out)
    body = frame.to_markdown(index=False, disable_numparse=True) if len(frame) else "(no rows)"
    return f"**{name}** — {CAPTIONS[name]}\n\n{body}\n"
