"""Seeds before GPU-days: for every claim that rests on a t-test or a correlation, the smallest effect its n detects
at 80 % power and the n the paper's effect needs (``claims --seeds``; :mod:`softmax_bottleneck.analysis.power`).

The spread is ours where our runs of the claim are at the paper's scale and number at least 2, else the paper's (its
SDs; before anything runs, always the paper's); a rank that stays low is planned at the paper's mean and SD, as the
page's power. A claim on no test (a trend over K, Figure 3's contexts) has no row, nor has a plug-in layer's (the
project's statement: no paper's effect); the table names those it leaves out.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from softmax_bottleneck.analysis import power
from softmax_bottleneck.report.claims.differences import MARGIN, DifferenceRule, Equivalent, NotBetter, spread
from softmax_bottleneck.report.claims.page import Decision
from softmax_bottleneck.report.claims.rules import NoAssociation, RInInterval, StaysLow, Weak
from softmax_bottleneck.report.tables.cells import MISSING

HEADER = (
    f"Seeds before GPU-days: two-sided tests (one-sided where the rule's test is) at α = {power.ALPHA}, power "
    f"{power.POWER}; for a claim of no difference or of not better, the n from which the test of the margin decides "
    "with that power (such a test has no smallest effect: —); for a weak correlation, the n from which its interval "
    "lies inside ±0.5; never below the claim's minimum. The spread is ours where our runs are at the paper's scale, "
    "else the paper's."
)


#: where the spread comes from
SOURCES = {True: "ours", False: "the paper's"}


def _at_least(needed: int | None, minimum: int) -> int | None:
    """The n a claim needs: what its test needs, but never below the claim's minimum (below it: "too few runs")."""
    return None if needed is None else max(needed, minimum)


def _count(n: int | None, unit: str) -> str:
    return f"> {power.MAX_RUNS:,}" if n is None else f"{n:,} {unit}"


def _row(d: Decision, use_ours: bool) -> dict | None:
    """The seeds row of one decided claim (None for a rule on no test); the spread from ``evidence``."""
    claim, rule, paper = d.claim, d.claim.rule, d.paper.evidence
    evidence = d.evidence if use_ours else paper
    row = {"id": claim.name, "claim": claim.label, "test": rule.test}
    if isinstance(rule, DifferenceRule):
        if rule.paired:  # the differences of the pairs, one sample
            n, sd, n2 = len(evidence.a), spread(evidence), None
            effect = float(np.mean(np.subtract(paper.a, paper.b)))
        else:
            n, sd, n2 = evidence.a.n, spread(evidence), evidence.b.n
            effect = paper.a.mean - paper.b.mean
        smallest = power.detectable_difference(sd, n, n2, paired=rule.paired)
        margin = isinstance(rule, Equivalent | NotBetter)
        if margin:  # the n from which the margin's test decides with power 0.8; it has no smallest effect
            of_n = power.equivalence_power if isinstance(rule, Equivalent) else power.noninferiority_power
            needed = power.runs_for_power(lambda k: of_n(effect, MARGIN, sd, k, paired=rule.paired))
        else:
            needed = power.seeds_needed(abs(effect), sd, paired=rule.paired)
        return row | {
            "spread": f"s = {sd:.3g} ({SOURCES[use_ours]})",
            "n": f"{min(n, n2 or n)} {claim.unit}",
            "smallest effect at 80 % power": MISSING if margin or math.isnan(smallest) else f"Δ = {smallest:.3g}",
            "the paper's effect": f"Δ = {effect:+.3g}".replace("-", "−"),  # signed, as on the page
            "n for the paper's effect": _count(_at_least(needed, claim.min_n), claim.unit),
        }
    if isinstance(rule, RInInterval | NoAssociation | Weak):
        sides = 1 if isinstance(rule, NoAssociation) else 2  # NoAssociation: its test's power for the paper's r
        smallest = power.detectable_correlation(evidence.n, sides=sides)
        r = d.paper.value
        against = isinstance(rule, NoAssociation) and (r > 0) != (rule.direction == "greater")
        if isinstance(rule, Weak):  # the points from which the interval lies inside ±0.5 with power 0.8
            needed = power.runs_for_power(lambda k: rule.power(k, d.paper), start=4)
        else:
            needed = power.points_needed(r, sides=sides)
        return row | {
            "spread": "—",
            "n": f"{evidence.n} {claim.unit}",
            "smallest effect at 80 % power": MISSING if math.isnan(smallest) else f"r = ±{smallest:.2f}",
            "the paper's effect": f"r = {r:+.2f}".replace("-", "−"),
            "n for the paper's effect": "— (the paper's r lies on the other side)"
            if against
            else _count(_at_least(needed, claim.min_n), claim.unit),
        }
    if isinstance(rule, StaysLow):  # the interval's top below the midpoint, at the paper's mean and SD
        needed = power.runs_for_power(lambda k: rule.power(k, d.paper))
        bound = rule.estimate(paper).bound
        return row | {
            "spread": f"s = {paper.target.sd:.3g} (the paper's)",
            "n": f"{d.estimate.n} {claim.unit}",
            "smallest effect at 80 % power": MISSING,
            "the paper's effect": f"mean rank {paper.target.mean:,.0f}, midpoint {bound:,.0f}",
            "n for the paper's effect": _count(_at_least(needed, claim.min_n), claim.unit),
        }
    return None


def seeds_table(decisions: list[Decision], ours: bool = True) -> pd.DataFrame:
    """One row per claim on a test (see the module docstring); ``ours``: the decisions come from our summaries."""
    rows = []
    for d in decisions:
        if d.claim.project:  # a plug-in layer's row: no paper's effect to plan for
            continue
        use_ours = ours and d.comparable and d.estimate.n >= 2
        row = _row(d, use_ours)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows)


def seeds_markdown(table: pd.DataFrame, asked: list[str] = ()) -> str:
    """The table, then the claims of ``asked`` it has no row for (they rest on no test: nothing to plan)."""
    body = table.to_markdown(index=False, disable_numparse=True) if len(table) else "(no claim rests on a test)"
    listed = set(table["id"]) if len(table) else set()
    left = [name for name in asked if name not in listed]
    tail = f"\n\nNo row (no test to plan seeds for): {', '.join(left)}." if left else ""
    return f"{HEADER}\n\n{body}{tail}\n"
