"""Statistics of the study: mean ± sample SD, unpaired Student t-test (Tables 2, 4), Pearson correlation (Figure 2),
and the 95 % intervals the claims page decides with (:mod:`softmax_bottleneck.report.claims`).

The paper's p-values (Table 2 / SM Table 1 vs Softmax, Table 4 LMS-PLIF vs LMS-PLIF†) are two-sided unpaired
t-tests with **pooled (equal) variances** over the 10 random-seed runs of each model (the authors'-seed run is
excluded). Every published p-value is reproduced to 3 significant digits by :func:`student_t_from_stats` from the
published means and SDs with n = 10; Welch's test would not (e.g. PTB MoS: Student 2.02e-15, Welch 1.89e-11).
Figure 2's correlations are Pearson's r. Every statistic comes from ``scipy.stats``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np


def _values(values: Sequence[float]) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError("no values")
    return a


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1; NaN for a single value)."""
    a = _values(values)
    sd = float(np.std(a, ddof=1)) if a.size > 1 else float("nan")
    return float(np.mean(a)), sd


def student_t(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the unpaired Student t-test with pooled variances (``equal_var=True``)."""
    from scipy import stats

    return float(stats.ttest_ind(_values(a), _values(b), equal_var=True).pvalue)


def student_t_from_stats(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> float:
    """Same test from summary statistics (means, sample SDs, sizes): ``scipy.stats.ttest_ind_from_stats``."""
    from scipy import stats

    return float(stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=True).pvalue)


def welch_t_from_stats(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> float:
    """Welch's unequal-variance version (not what the paper used; for comparison only)."""
    from scipy import stats

    return float(stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False).pvalue)


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Pearson's r and its two-sided p-value (``scipy.stats.pearsonr``)."""
    from scipy import stats

    res = stats.pearsonr(_values(x), _values(y))
    return float(res.statistic), float(res.pvalue)


# --------------------------------------------------------------------------------------------- intervals (claims)
@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile t_{q, df} (``scipy.stats.t.ppf``), kept per (q, df): the claims' simulations ask the same
    few thousands of times."""
    from scipy import stats

    return float(stats.t.ppf(q, df))


def pearson_interval(
    x: Sequence[float], y: Sequence[float], confidence: float = 0.95, alternative: str = "two-sided"
) -> tuple[float, float, float, float]:
    """Pearson's r, its two-sided ``confidence`` interval (Fisher's z: ``scipy.stats.pearsonr(...)``'s
    ``confidence_interval``) and the p-value of the test ``alternative`` (``two-sided``, ``greater``: r > 0,
    ``less``: r < 0)."""
    from scipy import stats

    xs, ys = _values(x), _values(y)
    two_sided = stats.pearsonr(xs, ys)
    interval = two_sided.confidence_interval(confidence_level=confidence)
    res = two_sided if alternative == "two-sided" else stats.pearsonr(xs, ys, alternative=alternative)
    return float(res.statistic), float(interval.low), float(interval.high), float(res.pvalue)


def student_difference_from_stats(
    m1: float, s1: float, n1: int, m2: float, s2: float, n2: int, confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """Difference of means m1 − m2, its ``confidence`` interval and the p-value of Student's pooled t-test, from
    summary statistics: Δ ± t_{(1+c)/2, n1+n2−2} · s_p √(1/n1 + 1/n2), s_p² = ((n1−1)s1² + (n2−1)s2²)/(n1+n2−2)
    (``scipy.stats.t``); p from ``scipy.stats.ttest_ind_from_stats`` (:func:`student_t_from_stats`)."""
    df = n1 + n2 - 2
    pooled = np.sqrt(((n1 - 1) * s1**2 + (n2 - 1) * s2**2) / df)
    half = t_quantile((1 + confidence) / 2, df) * pooled * np.sqrt(1 / n1 + 1 / n2)
    diff = m1 - m2
    return float(diff), float(diff - half), float(diff + half), student_t_from_stats(m1, s1, n1, m2, s2, n2)


def paired_difference(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """Mean of the differences a − b, its ``confidence`` interval and the two-sided p-value of the paired t-test
    (``scipy.stats.ttest_rel``)."""
    from scipy import stats

    xa, xb = _values(a), _values(b)
    res = stats.ttest_rel(xa, xb)
    interval = res.confidence_interval(confidence_level=confidence)
    return float(np.mean(xa - xb)), float(interval.low), float(interval.high), float(res.pvalue)


def mean_interval(mean: float, sd: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The ``confidence`` interval of a mean from summary statistics: mean ± t_{(1+c)/2, n−1} · sd/√n
    (``scipy.stats.t.interval``)."""
    from scipy import stats

    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sd / np.sqrt(n))
    return float(low), float(high)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation ρ (``scipy.stats.spearmanr``)."""
    from scipy import stats

    return float(stats.spearmanr(_values(x), _values(y)).statistic)
