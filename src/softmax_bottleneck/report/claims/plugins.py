"""A plug-in output layer's own rows: the project's statements, not the paper's (no paper value).

For each output layer that is not the paper's (registered outside the package, or no longer registered) with runs in
the study's ``main.csv``, per dataset where it has runs: does it reach a lower test perplexity than Softmax (random
seeds, as Table 2's t-tests), and, where its runs have ranks, a higher log-P rank (every seed, as Table 2's ranks)?
Each row reads the plug-in's and Softmax's runs only; no claim about the paper's layers reads a plug-in's runs, so
these rows change none of theirs.

:class:`AgainstSoftmax` decides them: Student's pooled t as :class:`~.differences.Differs`, in the statement's
direction, against a margin of no difference worth the name, its power at a declared effect (a gain of the margin in
perplexity; a log-P rank twice Softmax's) and our pooled SD.
"""

from __future__ import annotations

import math

import pandas as pd

from softmax_bottleneck import presets
from softmax_bottleneck.models.output_layers import RegistryError
from softmax_bottleneck.report import variants
from softmax_bottleneck.report.claims.claim import MIN_SEEDS, Claim
from softmax_bottleneck.report.claims.differences import MARGIN, ONE_SIDED, Differs, interval, spread
from softmax_bottleneck.report.claims.evidence import Basis, Summaries
from softmax_bottleneck.report.claims.rules import (
    ALPHA,
    CONSISTENT,
    NOT_CONSISTENT,
    UNDECIDED,
    Estimate,
    Groups,
    Paper,
    Sample,
    _interval,
    _p,
)
from softmax_bottleneck.report.tables import cells

#: the summary of the main comparison (E1), and the baseline every plug-in is compared with
MAIN, BASELINE = "main.csv", "softmax"
#: ranks are whole numbers: two layers whose 90 % interval of Δ lies inside ±1 have the same rank
RANK_MARGIN = 1.0


def _whole(value: float) -> str:
    """A signed difference of ranks: ``+4,577``, ``−12``."""
    return cells.MISSING if cells.missing(value) else f"{value:+,.0f}".replace("-", "−")


def is_papers(variant: str) -> bool:
    """Whether ``variant`` is one of the paper's (a built-in layer or E10's variants); an unregistered name is not."""
    try:
        return presets.variant_info(variant).paper
    except (ValueError, RegistryError):
        return False


class AgainstSoftmax(Differs):
    """A plug-in layer against Softmax on one quantity, the project's statement (``sign`` −1: lower, +1: higher):
    consistent when p < 0.05 with that sign; not consistent when p < 0.05 with the other, or when the 90 % interval
    of Δ lies inside ±``margin``; else undecided. Power: the t-test's at the declared effect (``effect``: the margin,
    or Softmax's own mean: twice its value) and our pooled SD. Constant values on both sides decide exactly."""

    opposite = "no difference (Δ = 0)"

    def __init__(self, quantity: str, sign: int, margin: float, effect: str):
        super().__init__()
        self.sign, self.margin, self.effect, self.quantity = sign, margin, effect, quantity
        word = "lower" if sign < 0 else "higher"
        self.name = f"t-test for a {word} {quantity} than Softmax's (the project's)"
        declared = f"a {word} value by {margin:g}" if effect == "margin" else "twice Softmax's value"
        self.power_means = f"the t-test's power at {declared} and our pooled SD"
        self.text = (
            f"Student's two-sided t-test with pooled variances (scipy.stats.ttest_ind_from_stats) of the plug-in "
            f"layer's {quantity} against Softmax's, the difference Δ and its 95 % interval; consistent when p < 0.05 "
            f"and Δ {'<' if sign < 0 else '>'} 0; not consistent when p < 0.05 the other way, or when the 90 % "
            f"interval of Δ lies inside ±{margin:g} (no difference worth the name); else undecided. Power at "
            f"{declared}. The project's statement: no paper value."
        )

    def estimate(self, evidence: Groups) -> Estimate:
        a, b = evidence.a, evidence.b
        if min(a.n, b.n) >= 2 and spread(evidence) == 0:  # every run the same on both sides: Δ is exact
            diff = a.mean - b.mean
            return Estimate(diff, diff, diff, 0.0 if diff else 1.0, min(a.n, b.n), se=0.0, df=a.n + b.n - 2)
        return super().estimate(evidence)

    def paper_effect(self, paper: Paper) -> tuple[float, float]:
        """The declared effect (in the statement's direction) and our pooled SD (``paper.evidence`` is ours)."""
        ours = paper.evidence
        size = self.margin if self.effect == "margin" else abs(ours.b.mean)
        return self.sign * size, spread(ours)

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if ours.p < ALPHA:
            return CONSISTENT if math.copysign(1, ours.value) == self.sign else NOT_CONSISTENT
        low, high = interval(ours, ONE_SIDED)
        return NOT_CONSISTENT if -self.margin < low and high < self.margin else UNDECIDED

    def power_text(self, n: int, paper: Paper, unit: str, minimum: int = 2) -> str:
        if spread(paper.evidence) == 0:
            return "exact: no spread over the seeds"
        return super().power_text(n, paper, unit, minimum)

    def ours_text(self, est: Estimate) -> str:
        if self.effect == "margin":
            return super().ours_text(est)
        return f"Δ = {_whole(est.value)}{_interval(est.low, est.high, _whole)}, p = {_p(est.p)}"

    def paper_text(self, paper: Paper) -> str:
        return cells.MISSING


RULES = {
    "test_ppl": AgainstSoftmax("test perplexity", -1, MARGIN, "margin"),
    "press_rank": AgainstSoftmax("log-P rank", +1, RANK_MARGIN, "double"),
}


def _claim(variant: str, dataset: str, column: str, summaries: Summaries) -> Claim:
    seeds = "random" if column == "test_ppl" else None
    basis = (Basis(MAIN, dataset, (variant,), seed_kind=seeds), Basis(MAIN, dataset, (BASELINE,), seed_kind=seeds))

    def build(frames) -> Groups:
        return Groups(Sample.of(frames[0][column]), Sample.of(frames[1][column]))

    evidence = build([summaries.rows(b) for b in basis])
    name, what = variants.display(variant), "test perplexity" if column == "test_ppl" else "log-P rank"
    statement = (
        f"{name} reaches a significantly lower test perplexity than Softmax"
        if column == "test_ppl"
        else f"{name}'s log-P rank is significantly higher than Softmax's"
    )
    return Claim(
        f"plugin_{variant}_{'ppl' if column == 'test_ppl' else 'rank'}_{dataset}",
        dataset,
        statement,
        f"a plug-in layer's {what} ({MAIN})",
        RULES[column],
        basis,
        build,
        lambda: Paper(math.nan, evidence, printed=False),
        MIN_SEEDS,
        "seeds per model",
        project=True,
    )


def plugin_claims(summaries: Summaries) -> list[Claim]:
    """The rows of every plug-in layer with runs in ``main.csv`` (module docstring), in registry order."""
    frame = summaries.frame(MAIN)
    present = [str(v) for v in frame["variant"].dropna().unique()]
    out = []
    for variant in variants.ordered((), [v for v in present if not is_papers(v)]):
        runs = frame[frame["variant"].astype(str) == variant]
        for dataset in [d for d in presets.DATASETS if (runs["dataset"] == d).any()]:
            out.append(_claim(variant, dataset, "test_ppl", summaries))
            ranks = pd.to_numeric(runs.loc[runs["dataset"] == dataset, "press_rank"], errors="coerce")
            if ranks.notna().any():
                out.append(_claim(variant, dataset, "press_rank", summaries))
    return out
