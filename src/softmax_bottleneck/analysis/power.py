"""Statistical power of the study's tests, for planning seeds before GPU-days are spent.

For a two-sided test at level α (0.05) and power 1 − β (0.8):

* **Student's t-test**, two samples with pooled variances (Tables 2, 4, 5) or paired (SM Tables 10, 11): with ν
  degrees of freedom and noncentrality δ = effect / SE, power = P(T′ > t_{1−α/2,ν}) + P(T′ < −t_{1−α/2,ν}),
  T′ ~ noncentral t(ν, δ) (``scipy.stats.nct``); two samples: ν = n₁ + n₂ − 2, SE = s·√(1/n₁ + 1/n₂), s the
  common SD; paired: ν = n − 1, SE = s/√n, s the SD of the differences.
* **the one-sided tests of a margin m** (a claim of "not better": the lower (1 − α) bound of Δ above −m, a
  non-inferiority test; "no difference": both bounds inside ±m, two one-sided tests, TOST): non-inferiority power =
  P(T′ > t_{1−α,ν}), T′ ~ noncentral t(ν, (Δ + m)/SE); TOST power integrates, over the χ² law of the sample
  variance, the normal probability that Δ̂ ± t_{1−α,ν}·ŜE lies inside ±m (``scipy.integrate.quad``), exact;
* **Pearson's r** (Figure 2, the correlations across models): Fisher's z, atanh(r) ~ N(atanh(ρ), 1/(n − 3)), so
  power = Φ(|atanh ρ|·√(n − 3) − z_{1−α/k}) for a k-sided test (``scipy.stats.norm``).

:func:`detectable_difference` and :func:`detectable_correlation` give the smallest effect n runs detect with that
power; :func:`seeds_needed` and :func:`points_needed` the n an effect needs (``claims --seeds``).
"""

from __future__ import annotations

import math

from softmax_bottleneck.analysis.stats import t_quantile

#: the level of every test and planning answer, and the power from which a rule that found nothing may say so (the
#: claims' rules decide at both)
ALPHA = 0.05
POWER = 0.8
#: the most runs :func:`seeds_needed` looks at; an effect that needs more is answered with None
MAX_RUNS = 1_000_000


def t_power(
    effect: float, sd: float, n1: int, n2: int | None = None, *, paired: bool = False, alpha: float = ALPHA
) -> float:
    """Power of the two-sided Student t-test to detect a difference ``effect`` (two samples of ``n1`` and ``n2``
    runs with common SD ``sd``; ``paired``: ``n1`` pairs whose differences have SD ``sd``)."""
    from scipy import stats

    df, se = _t_frame(sd, n1, n2, paired)
    if df < 1 or not sd > 0:
        return math.nan
    critical = t_quantile(1 - alpha / 2, df)
    delta = abs(effect) / se
    value = float(stats.nct.sf(critical, df, delta) + stats.nct.cdf(-critical, df, delta))
    if math.isnan(value):  # scipy's nct fails far in the tail (δ in the tens): the power is 1 to any precision shown
        value = float(stats.norm.sf(critical - delta) + stats.norm.cdf(-critical - delta))
    return value


def detectable_difference(
    sd: float, n1: int, n2: int | None = None, *, paired: bool = False, power: float = POWER, alpha: float = ALPHA
) -> float:
    """The smallest difference the t-test detects with ``power`` (:func:`t_power` solved for the effect,
    ``scipy.optimize.brentq``); NaN where the test cannot run (fewer than 2 runs, no spread)."""
    from scipy import optimize

    if math.isnan(t_power(sd, sd, n1, n2, paired=paired, alpha=alpha)):
        return math.nan
    high = sd
    while t_power(high, sd, n1, n2, paired=paired, alpha=alpha) < power:
        high *= 2
    return float(optimize.brentq(lambda e: t_power(e, sd, n1, n2, paired=paired, alpha=alpha) - power, 0.0, high))


def _t_frame(sd: float, n1: int, n2: int | None, paired: bool) -> tuple[int, float]:
    """Degrees of freedom and standard error of the difference (see the module docstring)."""
    if paired:
        return n1 - 1, sd / math.sqrt(n1)
    n2 = n1 if n2 is None else n2
    return n1 + n2 - 2, sd * math.sqrt(1 / n1 + 1 / n2)


def noninferiority_power(
    effect: float,
    margin: float,
    sd: float,
    n1: int,
    n2: int | None = None,
    *,
    paired: bool = False,
    alpha: float = ALPHA,
) -> float:
    """Power of the one-sided test that the difference is above −``margin`` (the lower (1 − α) bound of Δ̂ above
    −m) when the true difference is ``effect``: P(T′ > t_{1−α,ν}), T′ ~ nct(ν, (effect + m)/SE)."""
    from scipy import stats

    df, se = _t_frame(sd, n1, n2, paired)
    if df < 1 or not sd > 0:
        return math.nan
    return float(stats.nct.sf(t_quantile(1 - alpha, df), df, (effect + margin) / se))


def equivalence_power(
    effect: float,
    margin: float,
    sd: float,
    n1: int,
    n2: int | None = None,
    *,
    paired: bool = False,
    alpha: float = ALPHA,
) -> float:
    """Power of the two one-sided tests (TOST) of ±``margin`` when the true difference is ``effect``: the
    probability that Δ̂ ± t_{1−α,ν}·ŜE lies inside (−m, m), integrated over ŜE² = SE²·χ²_ν/ν
    (``scipy.integrate.quad`` over ``scipy.stats.chi2``); exact for normal samples with a common SD."""
    from scipy import integrate, stats

    df, se = _t_frame(sd, n1, n2, paired)
    if df < 1 or not sd > 0:
        return math.nan
    critical = t_quantile(1 - alpha, df)

    def inside(u: float) -> float:
        half = critical * se * math.sqrt(u / df)
        if half >= margin:
            return 0.0
        high, low = (margin - half - effect) / se, (-margin + half - effect) / se
        return float(stats.norm.cdf(high) - stats.norm.cdf(low)) * float(stats.chi2.pdf(u, df))

    top = df * (margin / (critical * se)) ** 2  # beyond it the interval is wider than the margin
    value, _ = integrate.quad(inside, 0.0, top, limit=200)
    return min(1.0, max(0.0, float(value)))


def runs_for_power(power_of, target: float = POWER, start: int = 2) -> int | None:
    """The fewest n ≥ ``start`` with ``power_of(n) ≥ target`` (``power_of`` grows with n); None where no n up to
    :data:`MAX_RUNS` reaches it."""

    def enough(n: int) -> bool:
        value = power_of(n)
        return not math.isnan(value) and value >= target

    low, high = start, start
    while not enough(high):
        low, high = high, high * 2
        if high > MAX_RUNS:
            return None
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return high


def seeds_needed(
    effect: float, sd: float, *, paired: bool = False, power: float = POWER, alpha: float = ALPHA
) -> int | None:
    """The fewest runs per model (``paired``: pairs) for which the t-test detects ``effect`` with ``power``; None
    where no n up to :data:`MAX_RUNS` does (an effect of 0) or the spread is unknown."""
    if not (sd > 0 and math.isfinite(effect)) or effect == 0:
        return None
    return runs_for_power(lambda n: t_power(effect, sd, n, paired=paired, alpha=alpha), power)


def _z(alpha: float, sides: int) -> float:
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / sides))


def correlation_power(r: float, n: int, *, sides: int = 2, alpha: float = ALPHA) -> float:
    """The power of ``n`` points to detect a correlation ``r`` (Fisher's z): Φ(|atanh r|·√(n − 3) − z_{1−α/k}), |r|
    taken at most 0.999999; NaN below 4 points."""
    from scipy import stats

    if n < 4:
        return math.nan
    return float(stats.norm.cdf(math.atanh(min(abs(r), 0.999999)) * math.sqrt(n - 3) - _z(alpha, sides)))


def detectable_correlation(n: int, *, sides: int = 2, power: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest |r| that ``n`` points detect with ``power`` (Fisher's z): tanh((z_{1−α/k} + z_{power}) / √(n − 3));
    NaN below 4 points."""
    from scipy import stats

    if n < 4:
        return math.nan
    return math.tanh((_z(alpha, sides) + float(stats.norm.ppf(power))) / math.sqrt(n - 3))


def points_needed(r: float, *, sides: int = 2, power: float = POWER, alpha: float = ALPHA) -> int | None:
    """The fewest points for which a correlation ``r`` is detected with ``power`` (Fisher's z):
    ⌈((z_{1−α/k} + z_{power}) / atanh|r|)²⌉ + 3; None for r = 0 or |r| ≥ 1."""
    from scipy import stats

    if not 0 < abs(r) < 1:
        return None
    return math.ceil(((_z(alpha, sides) + float(stats.norm.ppf(power))) / math.atanh(abs(r))) ** 2) + 3
