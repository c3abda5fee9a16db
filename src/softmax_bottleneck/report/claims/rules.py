"""The decision rules of the claims, declared before any run is seen (docs/claims.md states each with an example).

A rule turns *evidence* (the numbers a claim rests on, ours from the summaries or the paper's from its tables) into an
:class:`Estimate` (the statistic, its 95 % interval, p, n; every statistic from ``scipy.stats`` through
:mod:`softmax_bottleneck.analysis.stats`) and a verdict (:meth:`Rule.judge`): **consistent**, **not consistent**, or
**undecided** where the evidence at this n can decide neither way (a rule never says "consistent" from an absence of
evidence). Each rule states its power at a given n (:meth:`Rule.power`: how likely it is to decide for the paper's
claim when the paper's effect is true) and draws evidence under the paper's truth or the opposite one for the
simulation of :mod:`.operating`. The differences of perplexity (t-tests, margins) are in :mod:`.differences`; here
the evidence types, the base rule and the rules on correlations, ranks and sweeps. The evidence types:

* :class:`Points`: (x, y) pairs (a correlation, a trend);
* :class:`Groups`: two samples as mean, SD and n (a t-test; the paper publishes only these);
* :class:`Pairs`: paired values (a paired t-test);
* :class:`Contrast`: one model's sample against other models' means (a rank that stays low).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from softmax_bottleneck.analysis import stats
from softmax_bottleneck.analysis.power import ALPHA, correlation_power
from softmax_bottleneck.analysis.power import POWER as DECIDING_POWER
from softmax_bottleneck.report.tables import cells

#: the confidence of every interval (1 − ALPHA, the significance level of every rule); below DECIDING_POWER a rule
#: that found nothing says "undecided"
CONFIDENCE = 1 - ALPHA

CONSISTENT = "consistent"
NOT_CONSISTENT = "not consistent"
UNDECIDED = "undecided"
#: the truths the simulation draws studies from (:meth:`Rule.sample`)
TRUTHS = ("paper", "opposite")


# --------------------------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class Sample:
    """A sample as mean, sample SD and size (the paper's tables print only these)."""

    mean: float
    sd: float
    n: int

    @classmethod
    def of(cls, values) -> Sample:
        """The sample of ``values`` (NaN dropped): mean, SD (ddof = 1; NaN below 2 values), n."""
        vals = [float(v) for v in values if not cells.missing(v)]
        if not vals:
            return cls(math.nan, math.nan, 0)
        mean, sd = stats.mean_sd(vals)
        return cls(mean, sd, len(vals))


@dataclass(frozen=True)
class Points:
    """Points (x, y), each named (a model, a grid point)."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    names: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.x)


@dataclass(frozen=True)
class Groups:
    """Two samples compared by Student's pooled t-test: ``a`` − ``b``."""

    a: Sample
    b: Sample


@dataclass(frozen=True)
class Pairs:
    """Paired values (a, b), one pair per named unit (the output layers of SM Tables 10, 11)."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    names: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.a)


@dataclass(frozen=True)
class Contrast:
    """One model's sample against a baseline's mean and the means of the models it should stay far from."""

    target: Sample
    baseline: float
    others: dict[str, float] = field(default_factory=dict)


Evidence = Points | Groups | Pairs | Contrast


@dataclass(frozen=True)
class Estimate:
    """What a rule computes from evidence: ``value`` (the statistic shown: r, Δ, mean rank, ρ), its 95 % interval
    [``low``, ``high``] (NaN where none exists), ``p`` (NaN where there is no test), ``n`` (what the rule's minimum
    counts), ``bound`` (a rule's threshold computed from the evidence), for a difference its standard error ``se``
    and degrees of freedom ``df``, and for a deterministic check the units it fails at (``failed``, named on the
    page) and the units at which it could fail (``tested``)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    n: int = 0
    bound: float = math.nan
    se: float = math.nan
    df: float = math.nan
    failed: tuple[str, ...] = ()
    tested: int = 0


@dataclass(frozen=True)
class Paper:
    """The paper's side of a claim: ``value`` (what the rule compares ours with: its r, its p, ...), whether the paper
    prints it (``printed``; else it is computed from the paper's tables by the same code), a ``note`` shown beside
    it, and the paper's ``evidence`` (its own numbers, from which the same rule estimates the paper's statistic)."""

    value: float
    evidence: Evidence
    printed: bool = True
    note: str = ""


def _r(value: float) -> str:
    return cells.MISSING if cells.missing(value) else f"{value:+.2f}".replace("-", "−")


def _p(value: float) -> str:
    return cells.MISSING if cells.missing(value) else cells.sci(value)


def _interval(low: float, high: float, fmt) -> str:
    return "" if cells.missing(low) or cells.missing(high) else f" [{fmt(low)}, {fmt(high)}]"


def _rank(value: float) -> str:
    return cells.integer(value).replace("-", "−")


def _signed(value: float) -> str:
    return cells.MISSING if cells.missing(value) else f"{value:+.2f}".replace("-", "−")


def _note(paper: Paper) -> str:
    return f" ({paper.note})" if paper.note else ""


def _bivariate(r: float, n: int, rng) -> Points:
    """``n`` points of a standard bivariate normal law with correlation ``r``."""
    import numpy as np

    x = rng.standard_normal(n)
    y = r * x + math.sqrt(max(0.0, 1 - r * r)) * rng.standard_normal(n)
    return Points(tuple(np.asarray(x, float)), tuple(np.asarray(y, float)))


# --------------------------------------------------------------------------------------------- the rules
class Rule:
    """A decision rule: its name, its statement (``text``, also in docs/claims.md) and what it computes."""

    name: str = ""
    text: str = ""
    #: the test :mod:`~softmax_bottleneck.analysis.power` plans seeds for (``None``: the claim rests on no test)
    test: str | None = None
    #: the fields of an :class:`Estimate` the rule decides on (NaN in one: the statistic is undefined)
    needs: tuple[str, ...] = ("value",)
    #: what "power" means for this rule, and the truth the simulation opposes to the paper's
    power_means: str = ""
    opposite: str = ""

    def estimate(self, evidence) -> Estimate:
        raise NotImplementedError

    def verdict(self, ours: Estimate, paper: Paper) -> str | None:
        """:data:`CONSISTENT`, :data:`NOT_CONSISTENT` or :data:`UNDECIDED`; None where the statistic is undefined."""
        if any(cells.missing(getattr(ours, key)) for key in self.needs):
            return None
        return self.judge(ours, paper)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        raise NotImplementedError

    def power(self, n: int, paper: Paper) -> float:
        """How likely the rule is to decide for the claim at ``n`` when the paper's effect is true (NaN: a
        descriptive rule, which tests nothing)."""
        return math.nan

    def power_text(self, n: int, paper: Paper, unit: str, minimum: int = 2) -> str:
        """``power 0.23 (0.8 from 17 seeds per model)``, or what the rule says instead of a power; the n it names is
        at least the claim's ``minimum`` (below it the claim reads "too few runs", whatever the power). Below 2 runs
        there is no power, only the n that would decide: ``—; 0.8 from 5 seeds per model``."""
        from softmax_bottleneck.analysis import power

        start = max(2, minimum, min(n, 4))
        value = self.power(n if n >= 2 else start, paper)  # below 2 runs: whether the rule has a power at all
        if cells.missing(value):
            return "descriptive" if n >= 2 else "—"
        needed = power.runs_for_power(lambda k: self.power(k, paper), DECIDING_POWER, start=start)
        if n < 2:
            return f"—; {DECIDING_POWER:g} from {needed:,} {unit}" if needed else "—"
        more = (
            ""
            if value >= DECIDING_POWER
            else (f"; {DECIDING_POWER:g} from {needed:,} {unit}" if needed else f"; below {DECIDING_POWER:g} at any n")
        )
        return f"power {value:.2f}{more}"

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Evidence:
        """Evidence of ``n`` runs (seeds, points, ...) drawn under ``truth`` ("paper": the paper's own effect and
        spread; "opposite": :attr:`opposite`)."""
        raise NotImplementedError

    def ours_text(self, est: Estimate) -> str:
        raise NotImplementedError

    def paper_text(self, paper: Paper) -> str:
        raise NotImplementedError


#: the |r| from which a correlation is not "weak" (Figure 2's "around 0.50": the paper's "fairly weak" is below it)
MODERATE_R = 0.5


def _fisher(r: float) -> float:
    return math.atanh(max(-0.999999, min(0.999999, r)))


class RInInterval(Rule):
    """Pearson's r of our points; consistent when the paper's r lies in our 95 % interval (Fisher's z) and our n
    would tell the paper's r from no correlation, undecided when it would not, not consistent otherwise."""

    name = "r in our 95 % interval"
    text = (
        "Pearson's r of our points (scipy.stats.pearsonr) and its 95 % interval (Fisher's z, "
        "pearsonr(...).confidence_interval()); not consistent when the paper's r lies outside the interval; "
        "consistent when it lies inside and n points tell the paper's r from r = 0 with power ≥ 0.8 (Fisher's z: "
        "Φ(|atanh r| √(n − 3) − 1.96)), else undecided."
    )
    test = "correlation"
    needs = ("low", "high")
    power_means = "the chance that n points tell the paper's r from no correlation"
    opposite = "no correlation (r = 0)"

    def estimate(self, evidence: Points) -> Estimate:
        n = evidence.n
        if n < 4 or len(set(evidence.x)) < 2 or len(set(evidence.y)) < 2:
            return Estimate(math.nan, n=n)
        r, low, high, p = stats.pearson_interval(evidence.x, evidence.y, CONFIDENCE)
        return Estimate(r, low, high, p, n)

    def power(self, n: int, paper: Paper) -> float:
        return correlation_power(paper.value, n)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if not ours.low <= paper.value <= ours.high:
            return NOT_CONSISTENT
        return CONSISTENT if self.power(ours.n, paper) >= DECIDING_POWER else UNDECIDED

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Points:
        return _bivariate(paper.value if truth == "paper" else 0.0, n, rng)

    def ours_text(self, est: Estimate) -> str:
        return f"r = {_r(est.value)}{_interval(est.low, est.high, _r)}"

    def paper_text(self, paper: Paper) -> str:
        return f"r = {_r(paper.value)}{_note(paper)}"


class Weak(Rule):
    """A weak correlation: consistent when our 95 % interval of r lies inside ±:data:`MODERATE_R`, not consistent
    when it lies wholly beyond, undecided when it straddles the bound."""

    name = f"r inside ±{MODERATE_R}"
    text = (
        f"Pearson's r of our points and its 95 % interval (Fisher's z); consistent when the interval lies inside "
        f'±{MODERATE_R} (the paper\'s "around 0.50" is where "weak" ends), not consistent when it lies wholly '
        f"beyond ±{MODERATE_R}, else undecided."
    )
    test = "correlation"
    needs = ("low", "high")
    power_means = f"the chance that n points at the paper's r give an interval inside ±{MODERATE_R}"
    opposite = "a correlation of r = ±0.7 (the sign of the paper's)"

    estimate = RInInterval.estimate

    def power(self, n: int, paper: Paper) -> float:
        from scipy import stats as sps

        if n < 4:
            return math.nan
        se, edge = 1 / math.sqrt(n - 3), math.atanh(MODERATE_R)
        half = sps.norm.ppf(1 - ALPHA / 2) * se
        if half >= edge:
            return 0.0
        z = _fisher(paper.value)
        return float(sps.norm.cdf((edge - half - z) / se) - sps.norm.cdf((-edge + half - z) / se))

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if -MODERATE_R < ours.low and ours.high < MODERATE_R:
            return CONSISTENT
        if ours.low > MODERATE_R or ours.high < -MODERATE_R:
            return NOT_CONSISTENT
        return UNDECIDED

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Points:
        return _bivariate(paper.value if truth == "paper" else math.copysign(0.7, paper.value), n, rng)

    ours_text = RInInterval.ours_text
    paper_text = RInInterval.paper_text


class NoAssociation(Rule):
    """A one-sided test of Pearson's r in the direction a claim denies: not consistent when significant; consistent
    when not and n points detect a moderate r (:data:`MODERATE_R`) in that direction with power ≥ 0.8; else
    undecided."""

    needs = ("value", "p")

    def __init__(self, direction: str, meaning: str):
        self.direction, self.meaning = direction, meaning  # "greater" (r > 0) or "less" (r < 0)
        sign = "positive" if direction == "greater" else "negative"
        self.name = f"no significant {sign} r"
        self.test = f"correlation, one-sided ({sign})"
        self.power_means = f"the chance that n points detect r = {'+' if direction == 'greater' else '−'}{MODERATE_R}"
        self.opposite = f"r = {'+' if direction == 'greater' else '−'}{MODERATE_R} (the association the claim denies)"
        self.text = (
            f"Pearson's r across the models (scipy.stats.pearsonr) with its two-sided 95 % interval, and the "
            f"one-sided p-value of r {'>' if direction == 'greater' else '<'} 0 (alternative='{direction}': "
            f"{meaning}); not consistent when p < 0.05; consistent when p ≥ 0.05 and n detects a {sign} r of "
            f"{MODERATE_R} with power ≥ 0.8 (n ≥ 24); else undecided (an absence of evidence is no evidence)."
        )

    def estimate(self, evidence: Points) -> Estimate:
        n = evidence.n
        if n < 4 or len(set(evidence.x)) < 2 or len(set(evidence.y)) < 2:
            return Estimate(math.nan, n=n)
        r, low, high, p = stats.pearson_interval(evidence.x, evidence.y, CONFIDENCE, alternative=self.direction)
        return Estimate(r, low, high, p, n)

    def power(self, n: int, paper: Paper) -> float:
        return correlation_power(MODERATE_R, n, sides=1)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if ours.p < ALPHA:
            return NOT_CONSISTENT
        return CONSISTENT if self.power(ours.n, paper) >= DECIDING_POWER else UNDECIDED

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Points:
        denied = MODERATE_R if self.direction == "greater" else -MODERATE_R
        return _bivariate(paper.value if truth == "paper" else denied, n, rng)

    def ours_text(self, est: Estimate) -> str:
        return f"r = {_r(est.value)}{_interval(est.low, est.high, _r)}, one-sided p = {_p(est.p)}"

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        return f"r = {_r(paper.value)}, one-sided p = {_p(est.p)}{_note(paper)}"


class StaysLow(Rule):
    """A model's mean rank stays near the baseline's: the top of its 95 % interval below the geometric midpoint
    between the baseline's mean and the lowest mean of the other models (ranks live on a ratio scale)."""

    name = "interval below the geometric midpoint"
    test = "Student's t interval of the mean, its top"
    needs = ("high", "bound")
    power_means = "the chance that the interval's top falls below the midpoint at the paper's mean and SD"

    def __init__(self, baseline: str, others: tuple[str, ...]):
        far = f"{', '.join(others[:-1])} and {others[-1]}" if len(others) > 1 else others[0]
        self.opposite = f"a mean rank at the lowest of {far}'s"
        self.text = (
            "The mean of the model's Press' ranks over its seeds and its 95 % interval (Student's t, "
            "scipy.stats.t.interval, its bottom no lower than rank 1); consistent when the interval's top lies below "
            f"the geometric midpoint √(a · b) between {baseline}'s mean rank a (its bound d + 2) and the lowest mean "
            f"rank b of {far}; not consistent when the interval's bottom lies above it; else undecided. A coarse "
            f"ordinal check: closer to {baseline}'s rank than to any of theirs, on the ratio scale of ranks."
        )

    def estimate(self, evidence: Contrast) -> Estimate:
        target = evidence.target
        others = [v for v in evidence.others.values() if not cells.missing(v)]
        if target.n < 2 or cells.missing(evidence.baseline) or not others:
            return Estimate(target.mean, n=target.n if others and not cells.missing(evidence.baseline) else 0)
        low, high = (
            (target.mean, target.mean)
            if target.sd == 0
            else stats.mean_interval(target.mean, target.sd, target.n, CONFIDENCE)
        )
        bound = math.sqrt(max(evidence.baseline, 1.0) * max(min(others), 1.0))
        # no rank is below 1: the interval meets that edge (its coverage kept); the verdict is the same, as bound ≥ 1
        return Estimate(target.mean, max(low, 1.0), high, n=target.n, bound=bound)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if ours.high < ours.bound:
            return CONSISTENT
        return NOT_CONSISTENT if ours.low > ours.bound else UNDECIDED

    def power(self, n: int, paper: Paper) -> float:
        from scipy import stats as sps

        target, bound = paper.evidence.target, self.estimate(paper.evidence).bound
        if n < 2 or cells.missing(bound) or not target.sd > 0:
            return math.nan
        # P(x̄ + t·s/√n < bound) = P(T′ > t), T′ ~ nct(n − 1, (bound − μ)√n/σ)
        critical = stats.t_quantile((1 + CONFIDENCE) / 2, n - 1)
        return float(sps.nct.sf(critical, n - 1, (bound - target.mean) * math.sqrt(n) / target.sd))

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Contrast:
        ev = paper.evidence
        mean = ev.target.mean if truth == "paper" else min(ev.others.values())
        return Contrast(Sample.of(rng.normal(mean, ev.target.sd, n)), ev.baseline, ev.others)

    def ours_text(self, est: Estimate) -> str:
        text = f"{_rank(est.value)}{_interval(est.low, est.high, _rank)}"
        return text + ("" if cells.missing(est.bound) else f"; midpoint {_rank(est.bound)}")

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        return f"{cells.integer(paper.value)}; midpoint {cells.integer(est.bound)}{_note(paper)}"
