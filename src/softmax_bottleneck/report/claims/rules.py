"""The decision rules of the claims, declared before any run is seen (docs/claims.md states each with an example).

A rule turns *evidence* (the numbers a claim rests on, ours from the summaries or the paper's from its tables) into an
:class:`Estimate` (the statistic, its 95 % interval, p, n; every statistic from ``scipy.stats`` through
:mod:`softmax_bottleneck.analysis.stats`), and says whether our estimate is consistent with the paper
(:meth:`consistent`). The evidence types:

* :class:`Points`: (x, y) pairs (a correlation, a trend);
* :class:`Groups`: two samples as mean, SD and n (a t-test; the paper publishes only these);
* :class:`Pairs`: paired values (a paired t-test);
* :class:`Contrast`: one model's sample against other models' means (a rank that stays low);
* :class:`Step`: two single runs and the seed-to-seed spread they are judged against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from softmax_bottleneck.analysis import stats
from softmax_bottleneck.report.tables import cells

#: the significance level of every rule, and the confidence of every interval
ALPHA = 0.05
CONFIDENCE = 0.95


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


@dataclass(frozen=True)
class Contrast:
    """One model's sample against a baseline's mean and the means of the models it should stay far from."""

    target: Sample
    baseline: float
    others: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """A quantity at two points of a sweep (one run each) and the seed-to-seed spread of one run."""

    before: float
    after: float
    spread: Sample


Evidence = Points | Groups | Pairs | Contrast | Step


@dataclass(frozen=True)
class Estimate:
    """What a rule computes from evidence: ``value`` (the statistic shown: r, Δ, mean rank, ρ), its 95 % interval
    [``low``, ``high``] (NaN where none exists), ``p`` (NaN where there is no test), ``n`` (what the rule's minimum
    counts) and ``bound`` (a rule's threshold computed from the evidence)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    n: int = 0
    bound: float = math.nan


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


# --------------------------------------------------------------------------------------------- the rules
class Rule:
    """A decision rule: its name, its statement (``text``, also in docs/claims.md) and what it computes."""

    name: str = ""
    text: str = ""
    #: the test :mod:`~softmax_bottleneck.analysis.power` plans seeds for (``None``: the claim rests on no test)
    test: str | None = None
    #: the fields of an :class:`Estimate` the rule decides on (NaN in one: the statistic is undefined)
    needs: tuple[str, ...] = ("value",)

    def estimate(self, evidence) -> Estimate:
        raise NotImplementedError

    def decide(self, ours: Estimate, paper: Paper) -> bool | None:
        """Whether ``ours`` is consistent with ``paper``; None where the statistic is undefined (constant values)."""
        if any(cells.missing(getattr(ours, key)) for key in self.needs):
            return None
        return bool(self.consistent(ours, paper))

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        raise NotImplementedError

    def ours_text(self, est: Estimate) -> str:
        raise NotImplementedError

    def paper_text(self, paper: Paper) -> str:
        raise NotImplementedError


class RInInterval(Rule):
    """Pearson's r of our points; consistent when the paper's r lies in our 95 % interval (Fisher's z)."""

    name = "r in our 95 % interval"
    text = (
        "Pearson's r of our points (scipy.stats.pearsonr) and its 95 % interval (Fisher's z, "
        "pearsonr(...).confidence_interval()); consistent when the paper's r lies in the interval."
    )
    test = "correlation"
    needs = ("low", "high")

    def estimate(self, evidence: Points) -> Estimate:
        n = evidence.n
        if n < 4 or len(set(evidence.x)) < 2 or len(set(evidence.y)) < 2:
            return Estimate(math.nan, n=n)
        r, low, high, p = stats.pearson_interval(evidence.x, evidence.y, CONFIDENCE)
        return Estimate(r, low, high, p, n)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        return ours.low <= paper.value <= ours.high

    def ours_text(self, est: Estimate) -> str:
        return f"r = {_r(est.value)}{_interval(est.low, est.high, _r)}"

    def paper_text(self, paper: Paper) -> str:
        return f"r = {_r(paper.value)}" + (f" ({paper.note})" if paper.note else "")


class SameSideOfAlpha(Rule):
    """Student's pooled t-test (two samples) or the paired t-test; consistent when our p is on the paper's side of
    0.05 and, where both are significant, our difference has the paper's sign."""

    needs = ("value", "p")

    def __init__(self, paired: bool = False):
        self.paired = paired
        self.name = "paired t-test, the paper's side of 0.05" if paired else "t-test, the paper's side of 0.05"
        self.test = "paired t" if paired else "t"
        how = (
            "the paired t-test over the units both sides have (scipy.stats.ttest_rel), the mean difference and its "
            "95 % interval"
            if paired
            else "Student's two-sided t-test with pooled variances from the means, SDs and sizes "
            "(scipy.stats.ttest_ind_from_stats, as the paper), the difference of the means and its 95 % interval"
        )
        self.text = (
            f"{how[0].upper()}{how[1:]}; consistent when our p is on the same side of 0.05 as the paper's and, where "
            "the paper's p < 0.05, our difference has the sign of the paper's."
        )

    def estimate(self, evidence) -> Estimate:
        if self.paired:
            n = len(evidence.a)
            if n < 2:
                return Estimate(math.nan, n=n)
            diff, low, high, p = stats.paired_difference(evidence.a, evidence.b, CONFIDENCE)
            return Estimate(diff, low, high, p, n)
        a, b = evidence.a, evidence.b
        n = min(a.n, b.n)
        if n < 2:
            return Estimate(a.mean - b.mean if n else math.nan, n=n)
        diff, low, high, p = stats.student_difference_from_stats(a.mean, a.sd, a.n, b.mean, b.sd, b.n, CONFIDENCE)
        return Estimate(diff, low, high, p, n)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        if paper.value >= ALPHA:
            return ours.p >= ALPHA
        paper_sign = math.copysign(1, self.estimate(paper.evidence).value)
        return ours.p < ALPHA and math.copysign(1, ours.value) == paper_sign

    def ours_text(self, est: Estimate) -> str:
        return f"Δ = {_signed(est.value)}{_interval(est.low, est.high, _signed)}, p = {_p(est.p)}"

    def paper_text(self, paper: Paper) -> str:
        diff = self.estimate(paper.evidence).value
        text = f"Δ = {_signed(diff)}, p = {_p(paper.value)}"
        return text + (f" ({paper.note})" if paper.note else "")


class NoAssociation(Rule):
    """A one-sided test of Pearson's r in the direction a claim denies; consistent when it is not significant."""

    needs = ("value", "p")

    def __init__(self, direction: str, meaning: str):
        self.direction, self.meaning = direction, meaning  # "greater" (r > 0) or "less" (r < 0)
        sign = "positive" if direction == "greater" else "negative"
        self.name = f"no significant {sign} r"
        self.test = f"correlation, one-sided ({sign})"
        self.text = (
            f"Pearson's r across the models (scipy.stats.pearsonr) with its two-sided 95 % interval, and the "
            f"one-sided p-value of r {'>' if direction == 'greater' else '<'} 0 (alternative='{direction}': "
            f"{meaning}); consistent when p ≥ 0.05."
        )

    def estimate(self, evidence: Points) -> Estimate:
        n = evidence.n
        if n < 4 or len(set(evidence.x)) < 2 or len(set(evidence.y)) < 2:
            return Estimate(math.nan, n=n)
        r, low, high, p = stats.pearson_interval(evidence.x, evidence.y, CONFIDENCE, alternative=self.direction)
        return Estimate(r, low, high, p, n)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        return ours.p >= ALPHA

    def ours_text(self, est: Estimate) -> str:
        return f"r = {_r(est.value)}{_interval(est.low, est.high, _r)}, one-sided p = {_p(est.p)}"

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        return f"r = {_r(paper.value)}, one-sided p = {_p(est.p)}" + (f" ({paper.note})" if paper.note else "")


class StaysLow(Rule):
    """A model's mean rank stays near the baseline's: the top of its 95 % interval below the midpoint between the
    baseline's mean and the lowest mean of the other models."""

    name = "interval below the midpoint"
    needs = ("high", "bound")

    def __init__(self, baseline: str, others: tuple[str, ...]):
        far = f"{', '.join(others[:-1])} and {others[-1]}" if len(others) > 1 else others[0]
        self.text = (
            "The mean of the model's Press' ranks over its seeds and its 95 % interval (Student's t, "
            f"scipy.stats.t.interval); consistent when the interval's top lies below the midpoint between {baseline}'s "
            f"mean rank (its bound d + 2) and the lowest mean rank of {far}: closer to {baseline}'s than to any of "
            "theirs."
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
        return Estimate(target.mean, low, high, n=target.n, bound=(evidence.baseline + min(others)) / 2)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        return ours.high < ours.bound

    def ours_text(self, est: Estimate) -> str:
        text = f"{_rank(est.value)}{_interval(est.low, est.high, _rank)}"
        return text + ("" if cells.missing(est.bound) else f"; midpoint {_rank(est.bound)}")

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        text = f"{cells.integer(paper.value)}; midpoint {cells.integer(est.bound)}"
        return text + (f" ({paper.note})" if paper.note else "")


#: the Spearman ρ from which a rank "rises" with a swept value
RISING = 0.8


class Rises(Rule):
    """Spearman's ρ between a swept value and a quantity; consistent when ρ ≥ :data:`RISING`."""

    name = f"Spearman ρ ≥ {RISING}"
    text = (
        f"Spearman's ρ between the swept value and Press' rank over the sweep's runs (scipy.stats.spearmanr; one run "
        f"per value, so no interval); consistent when ρ ≥ {RISING} (with 3 values: every step rises)."
    )

    def estimate(self, evidence: Points) -> Estimate:
        if evidence.n < 3 or len(set(evidence.y)) < 2:
            return Estimate(math.nan, n=evidence.n)
        return Estimate(stats.spearman(evidence.x, evidence.y), n=evidence.n)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        return ours.value >= RISING

    def ours_text(self, est: Estimate) -> str:
        return f"ρ = {_r(est.value)}"

    def paper_text(self, paper: Paper) -> str:
        return f"ρ = {_r(paper.value)}" + (f" ({paper.note})" if paper.note else "")


class NoGainBeyondNoise(Rule):
    """The change between two single runs, against the spread of one run; consistent when it is no significant
    improvement (a fall beyond the 95 % band of the difference of two runs)."""

    name = "no fall beyond seed noise"
    needs = ("high",)
    text = (
        "The change Δ of test perplexity between the last two values of the sweep (one run each) and its 95 % "
        "interval Δ ± t_{0.975, n−1} · s · √2, s the SD of the same model's test perplexity over the n seeds of "
        "the main comparison (scipy.stats.t); consistent when the interval reaches 0 or above: no improvement "
        "beyond the seed-to-seed noise."
    )

    def estimate(self, evidence: Step) -> Estimate:
        s = evidence.spread
        if cells.missing(evidence.before) or cells.missing(evidence.after) or s.n < 2:
            return Estimate(math.nan, n=s.n if not cells.missing(evidence.after) else 0)
        from scipy import stats as sps

        diff = evidence.after - evidence.before
        half = float(sps.t.ppf((1 + CONFIDENCE) / 2, s.n - 1)) * s.sd * math.sqrt(2)
        return Estimate(diff, diff - half, diff + half, n=s.n)

    def consistent(self, ours: Estimate, paper: Paper) -> bool:
        return ours.high >= 0

    def ours_text(self, est: Estimate) -> str:
        return f"Δ = {_signed(est.value)}{_interval(est.low, est.high, _signed)}"

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        return f"Δ = {_signed(paper.value)}{_interval(est.low, est.high, _signed)}" + (
            f" ({paper.note})" if paper.note else ""
        )


__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "Contrast",
    "Estimate",
    "Evidence",
    "Groups",
    "NoAssociation",
    "NoGainBeyondNoise",
    "Pairs",
    "Paper",
    "Points",
    "RISING",
    "RInInterval",
    "Rises",
    "Rule",
    "SameSideOfAlpha",
    "Sample",
    "StaysLow",
    "Step",
]
