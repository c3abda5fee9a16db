"""The rules on a difference of test perplexity (Tables 2, 3, 4, 5; SM Tables 1, 10, 11), each able to fail both ways.

The difference Δ = a − b comes from Student's pooled t-test on means, SDs and sizes (``ttest_ind_from_stats``, the
paper's test: it gives back SM Table 1's and Table 4's printed p's with n = 10) or from the paired t-test over output
layers (``ttest_rel``), with its standard error SE and ν degrees of freedom. Three claims, three rules:

* :class:`Differs`, "significantly lower / higher": consistent when p < 0.05 with the paper's sign; not consistent
  when p < 0.05 with the other sign, or when our 90 % interval lies inside ±b, b the smaller of :data:`MARGIN` and
  half the paper's |Δ| (no difference worth the name, and less than half the paper's: :func:`no_effect_band`); else
  undecided. Power: the t-test's at the paper's Δ and SD.
* :class:`Equivalent`, "no significant difference": two one-sided tests (TOST) of ±:data:`MARGIN`: consistent when
  the 90 % interval lies inside ±m; not consistent when it lies wholly beyond +m or −m; else undecided.
* :class:`NotBetter`, "not significantly better" (lower is better): consistent when the 90 % interval's lower end is
  above −m (a one-sided test in the claim's direction: a is not better by the margin; a worse a is consistent); not
  consistent when its upper end is below −m; else undecided.

The margin, declared before any run: 0.2 perplexity, about 0.35 % of PTB's test perplexity (57) and 0.3 % of WT2's
(65): inside the range of gains the paper itself calls "very minimal" (0.20 % and 0.43 %, GSS and SS on WT2) and
below every gain it presents as an improvement of substance (MoS: 3.8 %, 4.1 %).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from softmax_bottleneck.analysis import power, stats
from softmax_bottleneck.report.claims.rules import (
    ALPHA,
    CONFIDENCE,
    CONSISTENT,
    NOT_CONSISTENT,
    UNDECIDED,
    Estimate,
    Groups,
    Pairs,
    Paper,
    Rule,
    Sample,
    _interval,
    _note,
    _p,
    _signed,
)

#: the margin of "no difference" and "not better", in test perplexity (see the module docstring)
MARGIN = 0.2


def spread(evidence) -> float:
    """The SD of a difference's test and power: the pooled SD of two samples, or the SD of the pairs' differences."""
    if isinstance(evidence, Pairs):
        return Sample.of(np.subtract(evidence.a, evidence.b)).sd
    a, b = evidence.a, evidence.b
    if a.n + b.n <= 2:
        return math.nan
    pooled = ((a.n - 1) * (a.sd if a.n > 1 else 0) ** 2 + (b.n - 1) * (b.sd if b.n > 1 else 0) ** 2) / (a.n + b.n - 2)
    return math.sqrt(pooled)


@functools.lru_cache(maxsize=1024)
def _paper_effect(rule: DifferenceRule, paper: Paper) -> tuple[float, float]:
    """:meth:`DifferenceRule.paper_effect`: the rule's estimate from the paper's own evidence, and its spread."""
    return rule.estimate(paper.evidence).value, spread(paper.evidence)


def interval(est: Estimate, level: float) -> tuple[float, float]:
    """The two-sided ``level`` interval of the difference: Δ ± t_{(1+level)/2, ν} · SE (``scipy.stats.t``)."""

    if math.isnan(est.se) or est.df < 1:
        return math.nan, math.nan
    half = stats.t_quantile((1 + level) / 2, est.df) * est.se
    return est.value - half, est.value + half


#: the interval of the one-sided tests at α = 0.05 (TOST and the test of "not better")
ONE_SIDED = 1 - 2 * ALPHA


def no_effect_band(effect: float) -> float:
    """The half-width b of "no difference" against a claimed difference ``effect``: the margin, or half the paper's
    |Δ| where that is smaller (GSS on WT2: Δ = −0.12, b = 0.06), so that a small claimed effect can be contradicted
    too: an interval inside ±b rules out every difference worth the name and at least half the paper's."""
    return min(MARGIN, abs(effect) / 2) if math.isfinite(effect) else math.nan  # no effect known: nothing inside


class DifferenceRule(Rule):
    """The estimate, the spread and the sampling of every rule on a difference (see the module docstring)."""

    needs = ("value", "p")
    unit_of_n = "seeds per model"

    def __init__(self, paired: bool = False):
        self.paired = paired
        self.test = "paired t" if paired else "t"

    def estimate(self, evidence) -> Estimate:
        if isinstance(evidence, Pairs):
            n = evidence.n
            if n < 2:
                return Estimate(math.nan, n=n)
            diff, low, high, p = stats.paired_difference(evidence.a, evidence.b, CONFIDENCE)
            return Estimate(diff, low, high, p, n, se=spread(evidence) / math.sqrt(n), df=n - 1)
        a, b = evidence.a, evidence.b
        n = min(a.n, b.n)
        if n < 2:
            return Estimate(a.mean - b.mean if n else math.nan, n=n)
        diff, low, high, p = stats.student_difference_from_stats(a.mean, a.sd, a.n, b.mean, b.sd, b.n, CONFIDENCE)
        return Estimate(diff, low, high, p, n, se=spread(evidence) * math.sqrt(1 / a.n + 1 / b.n), df=a.n + b.n - 2)

    def paper_effect(self, paper: Paper) -> tuple[float, float]:
        """The paper's Δ and the SD its power is computed with (once per rule and paper: every simulated study of a
        claim is judged against the same paper)."""
        return _paper_effect(self, paper)

    def truth(self, paper: Paper, truth: str) -> float:
        """The true Δ a simulated study is drawn with."""
        raise NotImplementedError

    def sample(self, paper: Paper, truth: str, n: int, rng):
        delta = self.truth(paper, truth)
        ev = paper.evidence
        if isinstance(ev, Pairs):
            return Pairs(tuple(rng.normal(delta, spread(ev), n)), (0.0,) * n)
        a = Sample.of(rng.normal(ev.b.mean + delta, ev.a.sd, n))
        return Groups(a, Sample.of(rng.normal(ev.b.mean, ev.b.sd, n)))

    def ours_text(self, est: Estimate) -> str:
        return f"Δ = {_signed(est.value)}{_interval(est.low, est.high, _signed)}, p = {_p(est.p)}"

    def paper_text(self, paper: Paper) -> str:
        return f"Δ = {_signed(self.paper_effect(paper)[0])}, p = {_p(paper.value)}{_note(paper)}"


class Differs(DifferenceRule):
    """ "Significantly lower (higher)": see the module docstring."""

    power_means = "the t-test's power at the paper's Δ and SD"
    opposite = "no difference (Δ = 0)"

    def __init__(self, paired: bool = False):
        super().__init__(paired)
        self.name = "paired t-test in the paper's direction" if paired else "t-test in the paper's direction"
        how = (
            "The paired t-test over the units both sides have (scipy.stats.ttest_rel), the mean difference and its "
            "95 % interval"
            if paired
            else "Student's two-sided t-test with pooled variances from the means, SDs and sizes "
            "(scipy.stats.ttest_ind_from_stats, as the paper), the difference of the means and its 95 % interval"
        )
        self.text = (
            f"{how}; consistent when p < 0.05 with the paper's sign; not consistent when p < 0.05 with the other "
            f"sign, or when our 90 % interval lies inside ±b, b the smaller of {MARGIN} and half the paper's |Δ| (no "
            "difference worth the name, and less than half the paper's); else undecided."
        )

    def judge(self, ours: Estimate, paper: Paper) -> str:
        effect, _ = self.paper_effect(paper)
        if ours.p < ALPHA:
            return CONSISTENT if math.copysign(1, ours.value) == math.copysign(1, effect) else NOT_CONSISTENT
        low, high = interval(ours, ONE_SIDED)
        band = no_effect_band(effect)
        return NOT_CONSISTENT if -band < low and high < band else UNDECIDED

    def power(self, n: int, paper: Paper) -> float:
        effect, sd = self.paper_effect(paper)
        return power.t_power(effect, sd, n, paired=self.paired) if n >= 2 else math.nan

    def truth(self, paper: Paper, truth: str) -> float:
        return self.paper_effect(paper)[0] if truth == "paper" else 0.0


class DiffersForEach(Differs):
    """:class:`Differs` over pairs, for a claim "for all" (ET-ASGD against NT-ASGD on every output layer): the mean
    difference significant with the claim's ``sign`` and every unit's difference with it too; a unit the other way
    (or level) makes a significant mean "not consistent", named on the page."""

    def __init__(self, sign: int):
        super().__init__(paired=True)
        self.sign = sign
        self.name = "paired t-test in the paper's direction, each unit too"
        self.text += (
            f" For a claim on every unit: consistent only when each unit's difference is "
            f"{'negative' if sign < 0 else 'positive'} too, else not consistent, naming the units. The power shown is "
            "the t-test's alone: requiring every unit takes off what claims --simulate shows (about 5 points at the "
            "paper's numbers)."
        )

    def estimate(self, evidence) -> Estimate:
        est = super().estimate(evidence)
        names = evidence.names or tuple(f"#{i + 1}" for i in range(evidence.n))
        other = tuple(u for u, a, b in zip(names, evidence.a, evidence.b, strict=False) if (a - b) * self.sign <= 0)
        return dataclasses.replace(est, failed=other)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        verdict = super().judge(ours, paper)
        return NOT_CONSISTENT if verdict == CONSISTENT and ours.failed else verdict

    def ours_text(self, est: Estimate) -> str:
        word = "lower" if self.sign < 0 else "higher"
        return super().ours_text(est) + (f"; not {word} for {', '.join(est.failed)}" if est.failed else "")


class _Margin(DifferenceRule):
    def ours_text(self, est: Estimate) -> str:
        low, high = interval(est, ONE_SIDED)
        shown = _interval(low, high, _signed)  # none where a side has a single run
        return f"Δ = {_signed(est.value)}{', 90 %' + shown if shown else ''}, p = {_p(est.p)}"


class Equivalent(_Margin):
    """ "No significant difference": TOST of ±:data:`MARGIN` (see the module docstring)."""

    name = f"equivalence within ±{MARGIN} (TOST)"
    power_means = f"the chance that TOST shows |Δ| < {MARGIN} when the paper's Δ and SD are true"
    opposite = f"a difference at the margin (|Δ| = {MARGIN}, the paper's sign)"
    text = (
        f"Student's pooled t from the means, SDs and sizes; two one-sided tests at α = 0.05 of a margin of ±{MARGIN} "
        f"test perplexity (TOST): consistent when the 90 % interval of Δ lies inside ±{MARGIN}, not consistent when "
        f"it lies wholly above +{MARGIN} or below −{MARGIN}, else undecided."
    )

    def judge(self, ours: Estimate, paper: Paper) -> str:
        low, high = interval(ours, ONE_SIDED)
        if -MARGIN < low and high < MARGIN:
            return CONSISTENT
        return NOT_CONSISTENT if low > MARGIN or high < -MARGIN else UNDECIDED

    def power(self, n: int, paper: Paper) -> float:
        effect, sd = self.paper_effect(paper)
        return power.equivalence_power(effect, MARGIN, sd, n, paired=self.paired) if n >= 2 else math.nan

    def truth(self, paper: Paper, truth: str) -> float:
        effect = self.paper_effect(paper)[0]
        return effect if truth == "paper" else math.copysign(MARGIN, effect)


class NotBetter(_Margin):
    """ "Not significantly better" (lower is better): the one-sided test of −:data:`MARGIN` (module docstring)."""

    name = f"not better by {MARGIN} (one-sided)"
    power_means = f"the chance that the test shows Δ > −{MARGIN} when the paper's Δ and SD are true"
    opposite = f"better by the margin (Δ = −{MARGIN})"
    text = (
        f"Student's pooled t from the means, SDs and sizes; the one-sided test at α = 0.05 in the claim's direction: "
        f"consistent when the 90 % interval's lower end lies above −{MARGIN} (not better by the margin; a worse "
        f"result is consistent too), not consistent when its upper end lies below −{MARGIN} (better beyond the "
        "margin), else undecided."
    )

    def judge(self, ours: Estimate, paper: Paper) -> str:
        low, high = interval(ours, ONE_SIDED)
        if low > -MARGIN:
            return CONSISTENT
        return NOT_CONSISTENT if high < -MARGIN else UNDECIDED

    def power(self, n: int, paper: Paper) -> float:
        effect, sd = self.paper_effect(paper)
        return power.noninferiority_power(effect, MARGIN, sd, n, paired=self.paired) if n >= 2 else math.nan

    def truth(self, paper: Paper, truth: str) -> float:
        return self.paper_effect(paper)[0] if truth == "paper" else -MARGIN
