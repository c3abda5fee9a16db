"""Statistics of the study: mean ± sample SD, unpaired Student t-test (Tables 2, 4), Pearson correlation (Figure 2).

The paper's p-values (Table 2 / SM Table 1 vs Softmax, Table 4 LMS-PLIF vs LMS-PLIF†) are two-sided unpaired
t-tests with **pooled (equal) variances** over the 10 random-seed runs of each model (the authors'-seed run is
excluded). Every published p-value is reproduced to 3 significant digits by :func:`student_t_from_stats` from the
published means and SDs with n = 10; Welch's test would not (e.g. PTB MoS: Student 2.02e-15, Welch 1.89e-11).
Figure 2's correlations are Pearson's r.
"""

from __future__ import annotations

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
