"""Shared helpers of the tables: setting ours beside the paper (reading the summaries and the statistics are in
:mod:`softmax_bottleneck.report.common`).

Each table is a tidy DataFrame: key columns (``dataset``, ``variant`` ...), then for every reproduced quantity
``<q>_ours``, ``<q>_paper`` and ``<q>_diff`` (= ours − paper); "mean ± sd" quantities are split into
``<q>_mean_*`` and ``<q>_sd_*``. Rows follow the paper's table; rows we have but the paper has not are appended,
rows the paper has but we have not keep NaN in ``*_ours``. When our sample is too small for a statistic
(one seed, one point) the cell is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from softmax_bottleneck.report.common import mean_sd


# --------------------------------------------------------------------------------------------- comparison
def compare(
    ours: pd.DataFrame,
    paper: pd.DataFrame,
    keys: list[str],
    values: list[str],
    *,
    extra_ours: Sequence[str] = (),
    extra_paper: Sequence[str] = (),
    keep_ours_only: bool = True,
) -> pd.DataFrame:
    """Side-by-side ``<v>_ours, <v>_paper, <v>_diff`` for every ``v`` in ``values``, joined on ``keys``.

    Rows in the paper's order, then (if ``keep_ours_only``) rows only we have. ``extra_*`` columns are carried
    through unchanged (ours take precedence on the paper-less rows).
    """
    ours = ours.copy()
    paper = paper.copy()
    for frame in (ours, paper):
        for col in [*keys, *values]:
            if col not in frame.columns:
                frame[col] = math.nan
    o = ours[[*keys, *extra_ours, *values]].rename(columns={v: f"{v}_ours" for v in values})
    p = paper[[*keys, *extra_paper, *values]].rename(columns={v: f"{v}_paper" for v in values})
    o = o.drop_duplicates(keys)
    merged = p.merge(o, on=keys, how="left", suffixes=("", "_from_ours"))
    if keep_ours_only and not o.empty:
        known = pd.MultiIndex.from_frame(p[keys].astype(object)) if not p.empty else None
        mask = [known is None or tuple(row) not in known for row in o[keys].astype(object).itertuples(index=False)]
        extra = o[np.array(mask, dtype=bool)]
        if not extra.empty:
            merged = pd.concat([merged, extra], ignore_index=True)
    columns = [*keys, *dict.fromkeys([*extra_paper, *extra_ours])]
    for v in values:
        merged[f"{v}_ours"] = pd.to_numeric(merged[f"{v}_ours"], errors="coerce")
        merged[f"{v}_paper"] = pd.to_numeric(merged[f"{v}_paper"], errors="coerce")
        merged[f"{v}_diff"] = merged[f"{v}_ours"] - merged[f"{v}_paper"]
        columns += [f"{v}_ours", f"{v}_paper", f"{v}_diff"]
    return merged[columns].reset_index(drop=True)


def mean_sd_rows(frame: pd.DataFrame, keys: list[str], quantities: list[str], groups) -> list[dict]:
    rows = []
    for key_values in groups:
        sel = frame
        for k, v in zip(keys, key_values, strict=True):
            sel = sel[sel[k] == v]
        row = dict(zip(keys, key_values, strict=True))
        for q in quantities:
            row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(sel[q]) if q in sel else (math.nan, math.nan)
        rows.append(row)
    return rows


def mean_sd_columns(quantities: list[str]) -> list[str]:
    return [f"{q}_{s}" for q in quantities for s in ("mean", "sd")]


def key_groups(*frames: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """Key combinations present in any of ``frames`` (first-seen order)."""
    seen: dict[tuple, None] = {}
    for frame in frames:
        if frame.empty:
            continue
        for row in frame[keys].itertuples(index=False):
            seen[tuple(row)] = None
    return list(seen)


def order_rows(
    table: pd.DataFrame,
    paper: pd.DataFrame,
    *,
    groups: Sequence[str] = ("dataset",),
    variant_columns: Sequence[str] = ("variant",),
) -> pd.DataFrame:
    """``table``'s rows grouped as the paper groups them, each group's variants in the paper's order, then the
    variants the paper lacks in registry order (:func:`softmax_bottleneck.report.variants.ordered`).

    Groups (e.g. datasets) keep their first-seen order; rows that tie keep theirs (stable sort).
    """
    from softmax_bottleneck.report import variants

    if table.empty:
        return table
    keys = []
    for col in groups:
        first_seen = {v: i for i, v in enumerate(dict.fromkeys(table[col].tolist()))}
        keys.append(table[col].map(first_seen))
    for col in variant_columns:
        paper_order = list(dict.fromkeys(paper[col].dropna().tolist())) if col in paper.columns else []
        position = variants.rank(paper_order, table[col].dropna().tolist())
        keys.append(table[col].map(position))
    order = np.lexsort([k.to_numpy(dtype=float) for k in reversed(keys)])
    return table.iloc[order].reset_index(drop=True)
