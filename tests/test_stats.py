"""Statistics (spec §11.2): the published p-values follow from the published means/SDs (n = 10, Student)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from softmax_bottleneck.analysis import stats

# Inputs from the spec (§14): SM Table 1 (test ppl over the 10 random seeds, p vs Softmax) and paper Table 4
# (LMS-PLIF vs LMS-PLIF†). (label, mean1, sd1, mean2, sd2, published p)
SM_TABLE1_PTB_SOFTMAX = (57.08, 0.10)
SM_TABLE1_WT2_SOFTMAX = (64.63, 0.09)
PUBLISHED = [
    ("PTB SS", *SM_TABLE1_PTB_SOFTMAX, 57.03, 0.15, 3.92e-1),
    ("PTB GSS", *SM_TABLE1_PTB_SOFTMAX, 57.02, 0.13, 2.62e-1),
    ("PTB LMS-PLIF", *SM_TABLE1_PTB_SOFTMAX, 56.81, 0.11, 1.91e-5),
    ("PTB MoS", *SM_TABLE1_PTB_SOFTMAX, 54.88, 0.26, 2.02e-15),
    ("WT2 SS", *SM_TABLE1_WT2_SOFTMAX, 64.35, 0.18, 3.46e-4),
    ("WT2 GSS", *SM_TABLE1_WT2_SOFTMAX, 64.51, 0.13, 2.74e-2),
    ("WT2 LMS-PLIF", *SM_TABLE1_WT2_SOFTMAX, 64.15, 0.17, 2.98e-7),
    ("WT2 MoS", *SM_TABLE1_WT2_SOFTMAX, 61.97, 0.43, 2.04e-13),
    ("Table 4 PTB", 56.81, 0.11, 56.82, 0.09, 8.26e-1),
    ("Table 4 WT2", 64.15, 0.17, 64.30, 0.17, 6.41e-2),
]


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


@pytest.mark.parametrize("row", PUBLISHED, ids=[r[0] for r in PUBLISHED])
def test_published_p_values_reproduced(row):
    _, m1, s1, m2, s2, p = row
    assert _sig3(stats.student_t_from_stats(m1, s1, 10, m2, s2, 10)) == p


def test_welch_would_differ():
    m1, s1 = SM_TABLE1_PTB_SOFTMAX
    welch = stats.welch_t_from_stats(m1, s1, 10, 54.88, 0.26, 10)
    assert _sig3(welch) == 1.89e-11
    assert _sig3(stats.student_t_from_stats(m1, s1, 10, 54.88, 0.26, 10)) == 2.02e-15


def test_mean_sd_sample():
    m, s = stats.mean_sd([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and s == pytest.approx(np.sqrt(5 / 3))
    assert np.isnan(stats.mean_sd([7.0])[1])
    with pytest.raises(ValueError):
        stats.mean_sd([])


def test_student_t_raw_matches_from_stats():
    rng = np.random.default_rng(0)
    a, b = rng.normal(57.0, 0.1, 10), rng.normal(56.9, 0.15, 10)
    (ma, sa), (mb, sb) = stats.mean_sd(a), stats.mean_sd(b)
    p = stats.student_t(a, b)
    assert p == pytest.approx(stats.student_t_from_stats(ma, sa, 10, mb, sb, 10), rel=1e-10)
    assert p == pytest.approx(sps.ttest_ind(a, b, equal_var=True).pvalue, rel=1e-12)


def test_pearson():
    x = np.arange(10.0)
    y = 2 * x + np.sin(x)
    r, p = stats.pearson(x, y)
    ref = sps.pearsonr(x, y)
    assert r == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
    assert stats.pearson([1, 2, 3], [3, 2, 1])[0] == pytest.approx(-1.0)


def test_the_intervals_of_a_difference_and_a_mean_are_scipys():
    """The 95 % intervals the claims page prints, against scipy's own: Student's pooled t from summary statistics
    (ttest_ind on samples with those statistics), the paired t (ttest_rel), a mean's t interval."""
    ours = stats
    rng = np.random.default_rng(4)
    a, b = rng.normal(57.0, 0.4, 10), rng.normal(56.2, 0.7, 7)
    diff, low, high, p = ours.student_difference_from_stats(a.mean(), a.std(ddof=1), 10, b.mean(), b.std(ddof=1), 7)
    student = sps.ttest_ind(a, b)
    assert (low, high) == pytest.approx(tuple(student.confidence_interval(0.95)))
    assert p == pytest.approx(student.pvalue)
    assert diff == pytest.approx(a.mean() - b.mean())
    c = a[:7] + rng.normal(0.3, 0.2, 7)
    diff, low, high, p = ours.paired_difference(c, a[:7])
    paired = sps.ttest_rel(c, a[:7])
    assert (low, high) == pytest.approx(tuple(paired.confidence_interval(0.95)))
    assert p == pytest.approx(paired.pvalue)
    # two runs: t_{0.975, 1} = 12.706 (a table's value), so the interval is the mean ± 12.706 · sd / √2
    low, high = ours.mean_interval(270.0, 10.0, 2)
    half = 12.7062 * 10 / np.sqrt(2)
    assert (low, high) == pytest.approx((270.0 - half, 270.0 + half), rel=1e-5)
