"""Every table of the paper and its SM, rebuilt from the summary CSVs and set beside the reported numbers.

Each table is a tidy DataFrame: key columns (``dataset``, ``variant`` ...), then for every reproduced quantity
``<q>_ours``, ``<q>_paper`` and ``<q>_diff`` (= ours − paper); "mean ± sd" quantities are split into
``<q>_mean_*`` and ``<q>_sd_*``. Rows follow the paper's table; rows we have but the paper has not are appended,
rows the paper has but we have not keep NaN in ``*_ours``. When our sample is too small for a statistic
(one seed, one point) the cell is NaN.

Command line::

    python -m softmax_bottleneck table NAME --summary-dir results/summary --out reports/tables/NAME

writes ``NAME.csv`` and ``NAME.md`` (Markdown with a one-line caption), atomically.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.report import reported
from softmax_bottleneck.report.reported import DATASETS, DISPLAY, MAIN_VARIANTS

log = logging.getLogger(__name__)

#: table name -> summary files (under the summary folder) it reads
REQUIRES: dict[str, list[str]] = {
    "table1": ["ntet.csv"],
    "table2": ["main.csv"],
    "table3": ["frozen.csv"],
    "table4": ["main.csv", "frozen.csv"],
    "table5": ["fair.csv"],
    "table6": ["ntet.csv"],
    "sm_table1": ["main.csv"],
    "sm_table2": ["top5.csv"],
    "sm_table3": ["wordsim.csv"],
    "sm_table4": ["mos_k.csv"],
    "sm_table5": ["mos_k.csv"],
    "sm_table10": ["ntet.csv"],
    "sm_table11": ["ntet.csv"],
    "sm_table12": ["mos_dropoutl.csv"],
    "sm_table13": ["wordsim.csv"],
    "sm_table14": ["robustness.csv"],
    "sm_table15": ["robustness.csv"],
    "sm_table16": ["robustness.csv"],
    "sm_table17": ["ntet.csv"],
    "sm_table18": ["ntet.csv"],
    "figure2_pearson": ["gss_grid.csv"],
    "figure4_wins": ["wordsim.csv"],
}

#: one-line captions of the Markdown renderings
CAPTIONS: dict[str, str] = {
    "table1": "Table 1 (PTB): Press' rank and test-ppl gain over Softmax (Softmax − model), ET-ASGD authors' seed; "
    "MoS rank from its NT-ASGD run as in the paper.",
    "table2": "Table 2: main comparison, ET-ASGD, mean ± sd over all seeds; p-value of a Student t-test "
    "(random seeds) vs Softmax.",
    "table3": "Table 3: LMS-PLIF† (frozen slopes), mean ± sd over all seeds.",
    "table4": "Table 4: test ppl of LMS-PLIF vs LMS-PLIF† over the random seeds, Student t-test.",
    "table5": "Table 5 (PTB): fair comparison MoS† vs Softmax‡, mean ± sd; p-value (MoS† row) of a Student t-test "
    "(the paper's p = 0.62 is from its text).",
    "table6": "Table 6 (= SM Tables 17, 18): Press' rank and ε-effective ranks, ET-ASGD authors'-seed models.",
    "sm_table1": "SM Table 1: test ppl over the random seeds only, p-value of a Student t-test vs Softmax.",
    "sm_table2": "SM Table 2 (PTB): top-5 next-word predictions at the 18 contexts and whether the true token is "
    "among them.",
    "sm_table3": "SM Table 3: Spearman ρ of the tied embeddings on 13 word-similarity benchmarks.",
    "sm_table4": "SM Table 4 (PTB): MoS vs the number of mixtures K (NT-ASGD, authors' seed).",
    "sm_table5": "SM Table 5 (WT2): MoS vs the number of mixtures K (NT-ASGD, authors' seed).",
    "sm_table10": "SM Table 10 (PTB): NT-ASGD vs ET-ASGD, authors' seed.",
    "sm_table11": "SM Table 11 (WT2): NT-ASGD vs ET-ASGD, authors' seed.",
    "sm_table12": "SM Table 12: MoS (K = 15) vs dropout on the MoS layer (dropoutl).",
    "sm_table13": "SM Table 13: benchmark pairs with a word missing from the vocabulary.",
    "sm_table14": "SM Table 14: robustness of Press' rank, Algorithm 1 (reconstruction noise).",
    "sm_table15": "SM Table 15: robustness of Press' rank, Algorithm 2 (additive Gaussian noise of scale c).",
    "sm_table16": "SM Table 16: Press' rank vs ε-effective rank of the noisy matrices of Algorithm 2.",
    "sm_table17": "SM Table 17 (PTB half of Table 6): Press' rank and ε-effective ranks.",
    "sm_table18": "SM Table 18 (WT2 half of Table 6): Press' rank and ε-effective ranks.",
    "figure2_pearson": "Figure 2 (text): Pearson correlation of test ppl and Press' rank over the GSS grid "
    "(paper: magnitudes; r_digitised = from the figure's digitised points).",
    "figure4_wins": "Figure 4: number of the 13 benchmarks on which the row model's ρ beats the column model's.",
}

_EPS = ["erank_1e-3", "erank_1e-4", "erank_1e-5"]
_PPL3 = ["train_ppl", "valid_ppl", "test_ppl"]


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
def read_summary(summary_dir, name: str) -> pd.DataFrame:
    """Read ``summary_dir/name``; FileNotFoundError naming the file if it is absent."""
    path = Path(summary_dir) / name
    if not path.is_file():
        raise FileNotFoundError(f"summary file {path} not found")
    try:
        return reported.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _runs(summary_dir, name: str) -> pd.DataFrame:
    frame = read_summary(summary_dir, name)
    needed = ["dataset", "variant", "schedule", "seed", "seed_kind", "parameters", *_PPL3, "press_rank", *_EPS]
    for col in needed:
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object if col in ("dataset", "variant", "schedule", "seed_kind") else float)
    return frame


def _single(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
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


def _params_m(values) -> float:
    vals = _clean(values)
    return float(np.mean(vals)) / 1e6 if vals else math.nan


def _fkey(value) -> float:
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


def _mean_sd_rows(frame: pd.DataFrame, keys: list[str], quantities: list[str], groups) -> list[dict]:
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


def _ms(quantities: list[str]) -> list[str]:
    return [f"{q}_{s}" for q in quantities for s in ("mean", "sd")]


def _groups(*frames: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """Key combinations present in any of ``frames`` (first-seen order)."""
    seen: dict[tuple, None] = {}
    for frame in frames:
        if frame.empty:
            continue
        for row in frame[keys].itertuples(index=False):
            seen[tuple(row)] = None
    return list(seen)


# --------------------------------------------------------------------------------------------- tables
def _table1(summary_dir) -> pd.DataFrame:
    runs = _single(_runs(summary_dir, "ntet.csv"), ["dataset", "schedule", "variant"])
    runs = runs[runs["dataset"] == "ptb"]

    def get(variant, schedule, col):
        sel = runs[(runs["variant"] == variant) & (runs["schedule"] == schedule)]
        return float(sel[col].iloc[0]) if len(sel) else math.nan

    base = get("softmax", "et", "test_ppl")
    rows = []
    for variant in ("ss", "lms_plif", "mos"):
        rank_schedule = "nt" if variant == "mos" else "et"
        rows.append(
            {
                "variant": variant,
                "press_rank": get(variant, rank_schedule, "press_rank"),
                "ppl_diff": base - get(variant, "et", "test_ppl"),
            }
        )
    ours = pd.DataFrame(rows, columns=["variant", "press_rank", "ppl_diff"])
    paper = reported.load("table1")
    table = compare(
        ours,
        paper,
        ["variant"],
        ["press_rank", "ppl_diff"],
        extra_paper=["rank_original_papers", "ppl_diff_original_papers"],
    )
    return table


def _table2(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "main.csv")
    paper = reported.load("main")
    keys = ["dataset", "variant"]
    quantities = [*_PPL3, "press_rank"]
    rows = []
    for ds, var in _groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        row = {"dataset": ds, "variant": var, "n_runs": len(sel)}
        row["parameters_m"] = _params_m(sel["parameters"])
        row["seconds_per_epoch"] = mean_sd(sel["seconds_per_epoch"])[0] if "seconds_per_epoch" in sel else math.nan
        for q in quantities:
            row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(sel[q])
        base = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax") & (runs["seed_kind"] == "random")]
        mine = sel[sel["seed_kind"] == "random"]
        row["p_value"] = math.nan if var == "softmax" else t_test(mine["test_ppl"], base["test_ppl"])
        rows.append(row)
    ours = pd.DataFrame(
        rows, columns=[*keys, "n_runs", "parameters_m", "seconds_per_epoch", *_ms(quantities), "p_value"]
    )
    values = ["parameters_m", "seconds_per_epoch", *_ms(quantities), "p_value"]
    return compare(ours, paper, keys, values, extra_ours=["n_runs"])


def _sm_table1(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "main.csv")
    runs = runs[runs["seed_kind"] == "random"]
    paper = reported.load("sm_table1")
    keys = ["dataset", "variant"]
    rows = []
    for ds, var in _groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        base = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax")]
        mean, sd = mean_sd(sel["test_ppl"])
        p = math.nan if var == "softmax" else t_test(sel["test_ppl"], base["test_ppl"])
        rows.append(
            {"dataset": ds, "variant": var, "n_runs": len(sel), "test_ppl_mean": mean, "test_ppl_sd": sd, "p_value": p}
        )
    ours = pd.DataFrame(rows, columns=[*keys, "n_runs", "test_ppl_mean", "test_ppl_sd", "p_value"])
    return compare(ours, paper, keys, ["test_ppl_mean", "test_ppl_sd", "p_value"], extra_ours=["n_runs"])


def _table3(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "frozen.csv")
    paper = reported.load("table3")
    keys = ["dataset", "variant"]
    rows = _mean_sd_rows(runs, keys, _PPL3, _groups(paper, runs, keys=keys))
    for row in rows:
        row["n_runs"] = int(((runs["dataset"] == row["dataset"]) & (runs["variant"] == row["variant"])).sum())
    ours = pd.DataFrame(rows, columns=[*keys, *_ms(_PPL3), "n_runs"])
    return compare(ours, paper, keys, _ms(_PPL3), extra_ours=["n_runs"])


def _table4(summary_dir) -> pd.DataFrame:
    main = _runs(summary_dir, "main.csv")
    frozen = _runs(summary_dir, "frozen.csv")
    both = pd.concat([main[main["variant"] == "lms_plif"], frozen[frozen["variant"] == "lms_plif_frozen"]])
    both = both[both["seed_kind"] == "random"]
    paper = reported.load("table4")
    rows = []
    for (ds,) in _groups(paper, both, keys=["dataset"]):
        sel = both[both["dataset"] == ds]
        a = sel[sel["variant"] == "lms_plif"]["test_ppl"]
        b = sel[sel["variant"] == "lms_plif_frozen"]["test_ppl"]
        row = {"dataset": ds, "n_runs_lms_plif": len(a), "n_runs_lms_plif_frozen": len(b)}
        row["lms_plif_test_ppl_mean"], row["lms_plif_test_ppl_sd"] = mean_sd(a)
        row["lms_plif_frozen_test_ppl_mean"], row["lms_plif_frozen_test_ppl_sd"] = mean_sd(b)
        row["p_value"] = t_test(a, b)
        rows.append(row)
    values = [c for c in paper.columns if c != "dataset"]
    ours = pd.DataFrame(rows, columns=["dataset", "n_runs_lms_plif", "n_runs_lms_plif_frozen", *values])
    return compare(ours, paper, ["dataset"], values, extra_ours=["n_runs_lms_plif", "n_runs_lms_plif_frozen"])


def _table5(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "fair.csv")
    paper = reported.load("table5")
    keys = ["dataset", "variant"]
    rows = []
    for ds, var in _groups(paper, runs, keys=keys):
        sel = runs[(runs["dataset"] == ds) & (runs["variant"] == var)]
        row = {"dataset": ds, "variant": var, "n_runs": len(sel), "parameters_m": _params_m(sel["parameters"])}
        for q in _PPL3:
            row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(sel[q])
        other = runs[(runs["dataset"] == ds) & (runs["variant"] == "softmax_fair_large")]
        rnd = sel["seed_kind"] == "random"
        row["p_value"] = (
            t_test(sel[rnd]["test_ppl"], other[other["seed_kind"] == "random"]["test_ppl"])
            if var == "mos_fair"
            else math.nan
        )
        rows.append(row)
    values = ["parameters_m", *_ms(_PPL3), "p_value"]
    ours = pd.DataFrame(rows, columns=[*keys, "n_runs", *values])
    return compare(ours, paper, keys, values, extra_ours=["n_runs"])


def _rank_table(summary_dir, datasets: tuple[str, ...]) -> pd.DataFrame:
    runs = _runs(summary_dir, "ntet.csv")
    runs = runs[(runs["schedule"] == "et") & runs["variant"].isin(MAIN_VARIANTS) & runs["dataset"].isin(datasets)]
    runs = _single(runs, ["dataset", "variant"])
    paper = reported.load("table6")
    paper = paper[paper["dataset"].isin(datasets)]
    return compare(runs, paper, ["dataset", "variant"], ["press_rank", *_EPS])


def _ntet_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = _runs(summary_dir, "ntet.csv")
    runs = _single(runs[runs["dataset"] == dataset], ["schedule", "variant"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("ntet")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    return compare(runs, paper, ["schedule", "variant"], ["parameters_m", *_PPL3, "press_rank"])


def _mos_k_table(summary_dir, dataset: str) -> pd.DataFrame:
    runs = _runs(summary_dir, "mos_k.csv")
    runs = runs[runs["dataset"] == dataset]
    if "n_experts" not in runs:
        runs["n_experts"] = math.nan
    runs = _single(runs.assign(n_experts=runs["n_experts"].map(_fkey)), ["n_experts"])
    runs = runs.assign(parameters_m=runs["parameters"] / 1e6)
    paper = reported.load("mos_k")
    paper = paper[paper["dataset"] == dataset].drop(columns="dataset")
    paper = paper.assign(n_experts=paper["n_experts"].map(_fkey))
    return compare(runs, paper, ["n_experts"], ["parameters_m", "train_ppl", "test_ppl", "press_rank"])


def _sm_table12(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "mos_dropoutl.csv")
    if "dropoutl" not in runs:
        runs["dropoutl"] = math.nan
    runs = _single(runs.assign(dropoutl=runs["dropoutl"].map(_fkey)), ["dataset", "dropoutl"])
    paper = reported.load("mos_dropoutl")
    paper = paper.assign(dropoutl=paper["dropoutl"].map(_fkey))
    return compare(runs, paper, ["dataset", "dropoutl"], ["train_ppl", "test_ppl", "press_rank"])


def _wordsim(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "wordsim.csv")
    for col in ("dataset", "variant", "benchmark", "pairs", "found", "not_found", "spearman"):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame.assign(benchmark=frame["benchmark"].map(reported.normalise_benchmark))


def _sm_table3(summary_dir) -> pd.DataFrame:
    ours = _wordsim(summary_dir)
    paper = reported.load("wordsim")
    order = {v: i for i, v in enumerate(("softmax", "ss", "gss", "lms_plif", "mos", "moc"))}
    bench = {b: i for i, b in enumerate(reported.BENCHMARKS)}
    paper = paper.assign(_d=paper["dataset"], _b=paper["benchmark"].map(bench), _v=paper["variant"].map(order))
    paper = paper.sort_values(["_d", "_b", "_v"], kind="mergesort").drop(columns=["_d", "_b", "_v"])
    return compare(ours, paper, ["dataset", "benchmark", "variant"], ["spearman"])


def _sm_table13(summary_dir) -> pd.DataFrame:
    frame = _wordsim(summary_dir)
    rows = []
    for (ds, bench), sel in frame.groupby(["dataset", "benchmark"], sort=False):
        counts = sel[["pairs", "not_found"]].drop_duplicates()
        if len(counts) > 1:
            log.warning("%s %s: models disagree on pairs/not_found: %s", ds, bench, counts.values.tolist())
        rows.append(
            {"dataset": ds, "benchmark": bench, "pairs": sel["pairs"].iloc[0], "not_found": sel["not_found"].iloc[0]}
        )
    ours = pd.DataFrame(rows, columns=["dataset", "benchmark", "pairs", "not_found"])
    return compare(ours, reported.load("wordsim_coverage"), ["dataset", "benchmark"], ["pairs", "not_found"])


def _robustness(summary_dir) -> pd.DataFrame:
    frame = read_summary(summary_dir, "robustness.csv")
    for col in ("algorithm", "iteration_or_c", "press_rank", "error", *_EPS):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=float)
    return frame


def _robustness_pair(summary_dir, algorithm: int, table: str, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our rows of one robustness algorithm and the paper's rows of ``table``, keyed by ``key`` (§9.4)."""

    def keyed(frame):
        frame = frame.rename(columns={"iteration_or_c": key})
        return frame.assign(**{key: frame[key].map(_fkey)})

    ours = _robustness(summary_dir)
    paper = reported.load("robustness")
    return keyed(ours[ours["algorithm"] == algorithm]), keyed(paper[paper["table"] == table])


def _sm_table14(summary_dir) -> pd.DataFrame:
    ours, paper = _robustness_pair(summary_dir, 1, "sm_table14", "iteration")
    return compare(ours, paper, ["iteration"], ["press_rank", "error"])


def _sm_table15(summary_dir) -> pd.DataFrame:
    ours, paper = _robustness_pair(summary_dir, 2, "sm_table15", "c")
    return compare(ours, paper, ["c"], ["press_rank"], extra_paper=["subtable"])


def _sm_table16(summary_dir) -> pd.DataFrame:
    ours, paper = _robustness_pair(summary_dir, 2, "sm_table16", "c")
    return compare(ours, paper, ["c"], ["press_rank", *_EPS], keep_ours_only=False)


def _top5_text(row) -> str:
    parts = []
    for i in range(1, 6):
        word, prob = row.get(f"word_{i}"), row.get(f"prob_{i}")
        if word is None or (isinstance(word, float) and math.isnan(word)):
            continue
        parts.append(f"{word} {float(prob):.2f}" if pd.notna(prob) else str(word))
    return ", ".join(parts)


def _top5_words(row) -> set[str]:
    return {str(row.get(f"word_{i}")) for i in range(1, 6) if pd.notna(row.get(f"word_{i}"))}


def _as_hit(value) -> float:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "y", "1", "1.0"):
            return 1.0
        if text in ("false", "no", "n", "0", "0.0"):
            return 0.0
        return math.nan
    return math.nan if pd.isna(value) else float(bool(value))


def _sm_table2(summary_dir) -> pd.DataFrame:
    ours = read_summary(summary_dir, "top5.csv")
    from softmax_bottleneck.report.summaries import TOP5_COLUMNS

    for col in TOP5_COLUMNS:
        if col not in ours.columns:
            ours[col] = pd.Series(dtype=object)
    paper = reported.load("sm_table2")
    paper = paper[~paper["model"].str.endswith("**")]  # Yang et al.'s own numbers: nothing to reproduce
    keys = ["model", "group", "number"]
    ours = ours.assign(number=pd.to_numeric(ours["number"], errors="coerce"), hit=ours["hit"].map(_as_hit))
    ours = ours.dropna(subset=["number"]).astype({"number": "int64"}).drop_duplicates(keys)
    table = compare(
        ours,
        paper,
        keys,
        ["token_index", "hit"],
        extra_paper=["true_token"],
    )
    o_idx = ours.set_index(keys)
    p_idx = paper.set_index(keys)
    top_ours, top_paper, overlap = [], [], []
    for key in table[keys].itertuples(index=False):
        key = tuple(key)
        o = o_idx.loc[key].to_dict() if key in o_idx.index else None
        p = p_idx.loc[key].to_dict() if key in p_idx.index else None
        top_ours.append(_top5_text(o) if o else "")
        top_paper.append(_top5_text(p) if p else "")
        overlap.append(len(_top5_words(o) & _top5_words(p)) if o and p else math.nan)
    missing_token = table["true_token"].isna()
    if missing_token.any():
        table.loc[missing_token, "true_token"] = [
            o_idx.loc[tuple(k)]["true_token"] for k in table.loc[missing_token, keys].itertuples(index=False)
        ]
    table.insert(4, "top5_ours", top_ours)
    table.insert(5, "top5_paper", top_paper)
    table.insert(6, "top5_overlap", overlap)
    return table


def _figure2_pearson(summary_dir) -> pd.DataFrame:
    runs = _runs(summary_dir, "gss_grid.csv")
    paper = reported.load("figure2_pearson")
    points = reported.load("figure2_points")
    rows = []
    for rec in paper.to_dict("records"):
        ds, lo, hi = rec["dataset"], rec["test_ppl_min"], rec["test_ppl_max"]

        def restrict(frame, ds=ds, lo=lo, hi=hi):
            frame = frame[frame["dataset"] == ds]
            if pd.notna(lo):
                frame = frame[(frame["test_ppl"] >= lo) & (frame["test_ppl"] <= hi)]
            return frame

        sel, dig = restrict(runs), restrict(points)
        r, p = pearson(sel["test_ppl"], sel["press_rank"])
        r_dig, _ = pearson(dig["test_ppl"], dig["press_rank"])
        rows.append(
            {
                **rec,
                "n_points": len(sel),
                "r": r,
                "p_value": p,
                "abs_r": abs(r),
                "r_digitised": r_dig,
                "n_digitised": len(dig),
            }
        )
    ours = pd.DataFrame(rows)
    keys = ["dataset", "subset"]
    return compare(
        ours,
        paper,
        keys,
        ["abs_r"],
        extra_paper=["test_ppl_min", "test_ppl_max"],
        extra_ours=["n_points", "r", "p_value", "r_digitised", "n_digitised"],
    )


def _figure4_wins(summary_dir) -> pd.DataFrame:
    ws = _wordsim(summary_dir)
    rows = []
    for ds in DATASETS:
        matrix = reported.figure4_matrix(ws, ds)
        for i in matrix.index:
            for j in matrix.columns:
                if i != j:
                    rows.append({"dataset": ds, "row_variant": i, "col_variant": j, "wins": matrix.loc[i, j]})
    ours = pd.DataFrame(rows, columns=["dataset", "row_variant", "col_variant", "wins"])
    return compare(ours, reported.load("figure4"), ["dataset", "row_variant", "col_variant"], ["wins"])


TABLES: dict[str, Callable[[Path], pd.DataFrame]] = {
    "table1": _table1,
    "table2": _table2,
    "table3": _table3,
    "table4": _table4,
    "table5": _table5,
    "table6": lambda d: _rank_table(d, ("ptb", "wt2")),
    "sm_table1": _sm_table1,
    "sm_table2": _sm_table2,
    "sm_table3": _sm_table3,
    "sm_table4": lambda d: _mos_k_table(d, "ptb"),
    "sm_table5": lambda d: _mos_k_table(d, "wt2"),
    "sm_table10": lambda d: _ntet_table(d, "ptb"),
    "sm_table11": lambda d: _ntet_table(d, "wt2"),
    "sm_table12": _sm_table12,
    "sm_table13": _sm_table13,
    "sm_table14": _sm_table14,
    "sm_table15": _sm_table15,
    "sm_table16": _sm_table16,
    "sm_table17": lambda d: _rank_table(d, ("ptb",)),
    "sm_table18": lambda d: _rank_table(d, ("wt2",)),
    "figure2_pearson": _figure2_pearson,
    "figure4_wins": _figure4_wins,
}
assert set(TABLES) == set(REQUIRES) == set(CAPTIONS)


def build(name: str, summary_dir) -> pd.DataFrame:
    """Table ``name`` (see :data:`TABLES`) from the summary CSVs in ``summary_dir``."""
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; valid names: {', '.join(TABLES)}")
    for fname in REQUIRES[name]:
        path = Path(summary_dir) / fname
        if not path.is_file():
            raise FileNotFoundError(f"table {name} needs summary file {path}, which does not exist")
    return TABLES[name](Path(summary_dir))


# --------------------------------------------------------------------------------------------- Markdown
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
            out[_label(col)] = [DISPLAY.get(v, v) if isinstance(v, str) else _fmt(col, v) for v in values]
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


def render(name: str, summary_dir, out_prefix) -> pd.DataFrame:
    """Build table ``name`` and write ``<out_prefix>.csv`` and ``<out_prefix>.md`` atomically."""
    table = build(name, summary_dir)
    prefix = str(out_prefix)
    atomic_write_text(table.to_csv(index=False, lineterminator="\n", float_format="%.10g"), prefix + ".csv")
    atomic_write_text(to_markdown(name, table), prefix + ".md")
    return table


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.add_argument("name", metavar="NAME", choices=list(TABLES), help=f"one of: {', '.join(TABLES)}")
    parser.add_argument("--summary-dir", required=True, help="folder of the summary CSVs (results/summary)")
    parser.add_argument("--out", required=True, help="output prefix; writes PREFIX.csv and PREFIX.md")


def run_cli(args) -> int:
    render(args.name, args.summary_dir, args.out)
    log.info("wrote %s.csv and %s.md", args.out, args.out)
    return 0
