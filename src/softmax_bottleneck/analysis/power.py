"""Statistical power of the study's tests, for planning seeds before GPU-days are spent.

For a two-sided test at level α (0.05) and power 1 − β (0.8):

* **Student's t-test**, two samples with pooled variances (Tables 2, 4, 5) or paired (SM Tables 10, 11): with ν
  degrees of freedom and noncentrality δ = effect / SE, power = P(T′ > t_{1−α/2,ν}) + P(T′ < −t_{1−α/2,ν}),
  T′ ~ noncentral t(ν, δ) (``scipy.stats.nct``); two samples: ν = n₁ + n₂ − 2, SE = s·√(1/n₁ + 1/n₂), s the
  common SD; paired: ν = n − 1, SE = s/√n, s the SD of the differences.
* **Pearson's r** (Figure 2, the correlations across models): Fisher's z, atanh(r) ~ N(atanh(ρ), 1/(n − 3)), so
  power = Φ(|atanh ρ|·√(n − 3) − z_{1−α/k}) for a k-sided test (``scipy.stats.norm``).

:func:`detectable_difference` and :func:`detectable_correlation` give the smallest effect n runs detect with that
power; :func:`seeds_needed` and :func:`points_needed` the n an effect needs (``claims --seeds``).
"""

from __future__ import annotations

import math

#: the level and the power of every planning answer (the claims' rules decide at α = 0.05)
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

    if paired:
        df, se = n1 - 1, sd / math.sqrt(n1)
    else:
        n2 = n1 if n2 is None else n2
        df, se = n1 + n2 - 2, sd * math.sqrt(1 / n1 + 1 / n2)
    if df < 1 or not sd > 0:
        return math.nan
    critical = stats.t.ppf(1 - alpha / 2, df)
    delta = abs(effect) / se
    return float(stats.nct.sf(critical, df, delta) + stats.nct.cdf(-critical, df, delta))


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


def seeds_needed(
    effect: float, sd: float, *, paired: bool = False, power: float = POWER, alpha: float = ALPHA
) -> int | None:
    """The fewest runs per model (``paired``: pairs) for which the t-test detects ``effect`` with ``power``; None
    where no n up to :data:`MAX_RUNS` does (an effect of 0) or the spread is unknown."""
    if not (sd > 0 and math.isfinite(effect)) or effect == 0:
        return None

    def enough(n: int) -> bool:
        return t_power(effect, sd, n, paired=paired, alpha=alpha) >= power

    low, high = 2, 2
    while not enough(high):
        low, high = high, high * 2
        if high > MAX_RUNS:
            return None
    while low < high:  # the power grows with n
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return high


def _z(alpha: float, sides: int) -> float:
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / sides))


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
