"""The descriptive rules: single runs per value or per model, no inference (a trend over a sweep, a ratio of ranks, a
count of benchmarks). Each says so on the page, with the chance that a random order passes where there is one."""

from __future__ import annotations

import math

from softmax_bottleneck.analysis import stats
from softmax_bottleneck.report.claims.rules import (
    CONSISTENT,
    NOT_CONSISTENT,
    Estimate,
    Pairs,
    Paper,
    Points,
    Rule,
    _note,
    _p,
    _r,
)
from softmax_bottleneck.report.tables import cells

#: the |Spearman ρ| from which a quantity "rises" (or falls) over a sweep
RISING = 0.8
#: a ρ within rounding of RISING is at it: ρ over n ranks is a ratio of integers, which scipy returns a last bit off
#: (5 values, Σd² = 4: ρ = 0.8 exactly, 0.7999999999999999 from spearmanr)
RISING_ROUNDING = 1e-9


def rises(rho, sign: int = 1):
    """Whether ``sign`` · ρ ≥ :data:`RISING` (ρ a number or an array), allowing for the rounding of ρ."""
    return sign * rho >= RISING - RISING_ROUNDING


def chance_of_trend(n: int, threshold: float = RISING) -> float:
    """The chance that a random order of ``n`` distinct values gives Spearman's ρ ≥ ``threshold`` (exact, over the
    n! orders; the sweeps have 3 to 6 values)."""
    import itertools

    if n < 3 or n > 8:
        return math.nan
    orders = list(itertools.permutations(range(n)))
    hits = sum(
        1 - 6 * sum((i - j) ** 2 for i, j in enumerate(o)) / (n * (n * n - 1)) >= threshold - RISING_ROUNDING
        for o in orders
    )
    return hits / len(orders)


#: the studies drawn for a trend's pass rate under the paper's values with one run's noise (fixed seed: the page is
#: the same on every rendering)
NOISY_STUDIES = 2000


class Trend(Rule):
    """Spearman's ρ over a sweep (one run per value): consistent when ρ ≥ :data:`RISING` (``sign`` +1) or
    ρ ≤ −:data:`RISING` (``sign`` −1), not consistent otherwise. Descriptive: one run per value, no inference;
    the page prints the chance that a random order passes and, where ``noise`` gives one run's SD of x and y (the
    paper's SD over seeds), how often the paper's own values pass once each carries that noise."""

    power_means = "descriptive: the chance that a random order passes is printed instead"
    opposite = "no trend (the values in a random order)"

    def __init__(self, sign: int = 1, noise: tuple[float, float] = (0.0, 0.0)):
        self.sign, self.noise = sign, (float(noise[0]), float(noise[1]))
        self.name = f"Spearman ρ ≥ {RISING}" if sign > 0 else f"Spearman ρ ≤ −{RISING}"
        self.text = (
            "Spearman's ρ between the two quantities the claim names (K and Press' rank, Press' rank and test "
            "perplexity, ...) over the sweep's runs (scipy.stats.spearmanr; one run per value, so "
            f"no interval); consistent when ρ {'≥' if sign > 0 else '≤ −'}{RISING} (with 3 values: no step "
            f"{'falls' if sign > 0 else 'rises'} and at most one is flat), else not consistent. Descriptive: a random "
            "order of 3 values passes with chance 1/6, of 6 values 0.03; the paper's values with one run's noise "
            "(its SD over seeds) pass as often as the page says."
        )

    def estimate(self, evidence: Points) -> Estimate:
        if evidence.n < 3 or len(set(evidence.y)) < 2 or len(set(evidence.x)) < 2:
            return Estimate(math.nan, n=evidence.n)
        return Estimate(stats.spearman(evidence.x, evidence.y), n=evidence.n)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        return CONSISTENT if rises(ours.value, self.sign) else NOT_CONSISTENT

    def power_text(self, n: int, paper: Paper, unit: str, minimum: int = 2) -> str:
        if n < 2:  # no trend to speak of
            return "—"
        chance = chance_of_trend(n)
        text = "descriptive" if cells.missing(chance) else f"descriptive; a random order passes: {chance:.2g}"
        noisy = self.noisy_pass_rate(paper, n if n >= 3 else paper.evidence.n)
        return text if cells.missing(noisy) else f"{text}; the paper's values with one run's noise: {noisy:.0%}"

    def noisy_pass_rate(self, paper: Paper, n: int) -> float:
        """The share of :data:`NOISY_STUDIES` studies of the paper's last ``n`` values, each x and y with one run's
        normal noise (``noise``), that pass (NaN without noise or below 3 values)."""
        import numpy as np
        from scipy import stats as sps

        ev = paper.evidence
        x, y = np.asarray(ev.x[-n:], float), np.asarray(ev.y[-n:], float)
        if len(x) < 3 or not any(self.noise):
            return math.nan
        rng = np.random.default_rng(0)
        xs = x + self.noise[0] * rng.standard_normal((NOISY_STUDIES, len(x)))
        ys = y + self.noise[1] * rng.standard_normal((NOISY_STUDIES, len(y)))
        rx, ry = sps.rankdata(xs, axis=1), sps.rankdata(ys, axis=1)
        rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
        rho = (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        return float(np.mean(rises(rho, self.sign)))

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Points:
        """The paper's last ``n`` values, each with one run's noise (``noise``), or in a random order."""
        ev = paper.evidence
        x, y = ev.x[-n:], ev.y[-n:]
        if truth != "paper":
            return Points(x, tuple(rng.permutation(y)))
        return Points(
            tuple(v + self.noise[0] * rng.standard_normal() for v in x) if self.noise[0] else x,
            tuple(v + self.noise[1] * rng.standard_normal() for v in y) if self.noise[1] else y,
        )

    def ours_text(self, est: Estimate) -> str:
        return f"ρ = {_r(est.value)}"

    def paper_text(self, paper: Paper) -> str:
        return f"ρ = {_r(paper.value)}{_note(paper)}"


#: how far below Press' rank an ε-effective rank must lie to be "far below" (the paper's smallest ratio: 7.7)
FAR_BELOW = 4


class FarBelow(Rule):
    """Every model's ε-effective rank (``a``) far below its Press' rank (``b``): consistent when each ratio b/a is at
    least :data:`FAR_BELOW`. Descriptive, one run per model."""

    name = f"every ratio ≥ {FAR_BELOW}"
    needs = ("value",)
    power_means = "descriptive"
    opposite = "a slow decay: an ε-effective rank half of Press' rank"

    def __init__(self, epsilon: str):
        self.text = (
            f"The ratio of Press' rank to the ε-effective rank at ε = {epsilon} (the fewest singular values holding "
            f"all but ε of the spectrum, SM §5) of each model (the authors' seed); consistent when the smallest ratio "
            f"is at least {FAR_BELOW}, else not consistent. Descriptive: one run per model."
        )

    def estimate(self, evidence: Pairs) -> Estimate:
        ratios = [b / a for a, b in zip(evidence.a, evidence.b, strict=True) if a > 0 and not cells.missing(b)]
        return Estimate(min(ratios) if ratios else math.nan, n=len(ratios))

    def judge(self, ours: Estimate, paper: Paper) -> str:
        return CONSISTENT if ours.value >= FAR_BELOW else NOT_CONSISTENT

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Pairs:
        ev = paper.evidence
        a = ev.a if truth == "paper" else tuple(b / 2 for b in ev.b)
        return Pairs(a[:n], ev.b[:n], ev.names[:n])

    def ours_text(self, est: Estimate) -> str:
        return cells.MISSING if cells.missing(est.value) else f"smallest ratio {est.value:.1f}"

    def paper_text(self, paper: Paper) -> str:
        return f"smallest ratio {paper.value:.1f}{_note(paper)}"


class MostWins(Rule):
    """A count over benchmarks: consistent when ``a`` is at least as good as ``b`` (its ρ above or equal) on at least
    half of the benchmarks both have, not consistent otherwise. Descriptive (the benchmarks are fixed; one run per
    model); a sign test of ``a`` against ``b`` on the benchmarks without a tie is shown beside it."""

    name = "at least half of the benchmarks"
    needs = ("value",)
    power_means = "descriptive"
    opposite = "MoS better on each benchmark with probability 0.8"

    def __init__(self, a: str, b: str):
        self.text = (
            f"The number of word-similarity benchmarks on which {a}'s Spearman ρ is at least {b}'s (above or equal), "
            f"of those both have; consistent when it is at least half, else not consistent. Descriptive: the "
            f"benchmarks are fixed and each model is one run. Shown beside it, the project's sign test of {a} above "
            f"{b} on the benchmarks without a tie (one-sided binomial; the paper has no test)."
        )

    def estimate(self, evidence: Pairs) -> Estimate:
        from scipy import stats as sps

        n = evidence.n
        if n == 0:
            return Estimate(math.nan, n=0)
        as_good = sum(a >= b for a, b in zip(evidence.a, evidence.b, strict=True))
        above = sum(a > b for a, b in zip(evidence.a, evidence.b, strict=True))
        untied = sum(a != b for a, b in zip(evidence.a, evidence.b, strict=True))
        p = float(sps.binomtest(above, untied, 0.5, alternative="greater").pvalue) if untied else math.nan
        return Estimate(as_good / n, p=p, n=n, bound=as_good)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        return CONSISTENT if ours.value >= 0.5 else NOT_CONSISTENT

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Pairs:
        share = paper.value if truth == "paper" else 0.2
        wins = rng.random(n) < share
        return Pairs(tuple(1.0 if w else 0.0 for w in wins), (0.5,) * n)

    def ours_text(self, est: Estimate) -> str:
        if cells.missing(est.value):
            return cells.MISSING
        return f"{int(est.bound)} of {est.n} (sign test, ties left out: p = {_p(est.p)})"

    def paper_text(self, paper: Paper) -> str:
        est = self.estimate(paper.evidence)
        return f"{int(est.bound)} of {est.n} (sign test, ties left out: p = {_p(est.p)}){_note(paper)}"
