"""Shared helpers of the tables: statistics, reading the summaries, and setting ours beside the paper.

Each table is a tidy DataFrame: key columns (``dataset``, ``variant`` ...), then for every reproduced quantity
``<q>_ours``, ``<q>_paper`` and ``<q>_diff`` (= ours − paper); "mean ± sd" quantities are split into
``<q>_mean_*`` and ``<q>_sd_*``. Rows follow the paper's table; rows we have but the paper has not are appended,
rows the paper has but we have not keep NaN in ``*_ours``. When our sample is too small for a statistic
(one seed, one point) the cell is NaN.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from softmax_bottleneck.report import reported

log = logging.getLogger(__name__)

EPS = ["erank_1e-3", "erank_1e-4", "erank_1e-5"]
PPL3 = ["train_ppl", "valid_ppl", "test_ppl"]


# --------------------------------------------------------------------------------------------- statistics
def _clean(values) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample sd via :func:`softmax_bottleneck.analysis.stats.mean_sd`; NaN where the sample is too small."""
    vals = _clean(values)
    if not vals:
        return math.nan, math.nan
    if len(vals) == 1:
        return vals[0], math.nan
    from softmax_bottleneck.analysis import stats

    mean, sd = stats.mean_sd(vals)
    return float(mean), float(sd)


def t_test(a, b) -> float:
    """Two-sided pooled-variance Student t-test p (:func:`..analysis.stats.student_t`); NaN if n < 2."""
    a, b = _clean(a), _clean(b)
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return math.nan
    from softmax_bottleneck.analysis import stats

    return float(stats.student_t(a, b))


def pearson(x, y) -> tuple[float, float]:
    """Pearson r and p (:func:`softmax_bottleneck.analysis.stats.pearson`); NaN for < 3 points or a constant input."""
    pairs = [(float(a), float(b)) for a, b in zip(x, y, strict=True) if pd.notna(a) and pd.notna(b)]
    if len(pairs) < 3:
        return math.nan, math.nan
    xs, ys = zip(*pairs, strict=True)
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return math.nan, math.nan
    from softmax_bottleneck.analysis import stats

    r, p = stats.pearson(list(xs), list(ys))
    return float(r), float(p)


# --------------------------------------------------------------------------------------------- inputs
def require_summaries(what: str, summary_dir, files: Sequence[str]) -> None:
    """FileNotFoundError naming the first of ``files`` missing from ``summary_dir`` (``what`` needs them)."""
    for fname in files:
        path = Path(summary_dir) / fname
        if not path.is_file():
            raise FileNotFoundError(f"{what} needs summary file {path}, which does not exist")


def read_summary(summary_dir, name: str) -> pd.DataFrame:
    """Read ``summary_dir/name``; FileNotFoundError naming the file if it is absent."""
    path = Path(summary_dir) / name
    if not path.is_file():
        raise FileNotFoundError(f"summary file {path} not found")
    try:
        return reported.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def read_runs(summary_dir, name: str, extra: Sequence[str] = ()) -> pd.DataFrame:
    """A run summary (one row per run) with every column the tables and figures read, plus the numeric ``extra``
    ones (e.g. ``n_experts``); a column the file lacks is there, empty (small-scale runs)."""
    frame = read_summary(summary_dir, name)
    needed = ["dataset", "variant", "schedule", "seed", "seed_kind", "parameters", *PPL3, "press_rank", *EPS, *extra]
    for col in needed:
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object if col in ("dataset", "variant", "schedule", "seed_kind") else float)
    return frame


def one_run_per(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One run per key combination: the authors'-seed run if there is one, else the lowest seed."""
    if frame.empty:
        return frame
    order = frame.assign(_pref=(frame["seed_kind"] != "authors").astype(int))
    order = order.sort_values(["_pref", "seed"], kind="mergesort")
    dup = order.duplicated(keys)
    if dup.any():
        log.warning(
            "several runs for %s; keeping the authors'-seed / lowest seed", order.loc[dup, keys].values.tolist()
        )
    return order[~dup].drop(columns="_pref")


def as_hit(value) -> float:
    """A top-5 hit flag as 1.0 / 0.0 (NaN if absent or unreadable): ``True``/``False``, 1/0 (also ``"1.0"``),
    ``"yes"``/``"no"``, ``"y"``/``"n"``, any case; Figure 3 and SM Table 2 read it alike."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "y"):
            return 1.0
        if text in ("false", "no", "n"):
            return 0.0
        try:
            value = float(text)
        except ValueError:
            return math.nan
    if value is None or pd.isna(value):
        return math.nan
    return float(value) if float(value) in (0.0, 1.0) else math.nan


def params_m(values) -> float:
    vals = _clean(values)
    return float(np.mean(vals)) / 1e6 if vals else math.nan


def fkey(value) -> float:
    """Float key that survives a CSV round trip (6 significant digits)."""
    try:
        return float(f"{float(value):.6g}")
    except (TypeError, ValueError):
        return math.nan


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
