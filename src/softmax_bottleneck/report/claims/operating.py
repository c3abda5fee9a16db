"""The operating characteristics of the claims' rules, measured: studies simulated from the paper's own numbers (its
means, SDs, points and seed counts; a sweep's values each with one run's noise) and from the opposite truth (no effect
where the paper found one, an effect at the margin where it found none, ...: each rule's
:attr:`~.rules.Rule.opposite`), each decided by the claim's rule as the page decides ours; per claim, truth and size,
how often each verdict comes out (``claims --simulate``).

Sizes: the paper's own n (10 random seeds per model, its grid points, models and values of K: the study's planned
runs) and the claim's minimum (5 seeds per model, ...). Each (claim, truth, size) draws from its own generator,
seeded by ``--seed`` and the claim's name, so a subset of claims gives the same numbers as the whole table.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from softmax_bottleneck.report.claims.catalog import CLAIMS, Claim
from softmax_bottleneck.report.claims.figure3 import Contexts
from softmax_bottleneck.report.claims.page import TOO_FEW, UNDEFINED
from softmax_bottleneck.report.claims.rules import (
    CONSISTENT,
    NOT_CONSISTENT,
    TRUTHS,
    UNDECIDED,
    Contrast,
    Groups,
    Pairs,
    Points,
)

#: the verdicts a simulated study can get, in the table's order
OUTCOMES = (CONSISTENT, NOT_CONSISTENT, UNDECIDED, TOO_FEW, UNDEFINED)
#: the sizes simulated: the paper's own n, and the claim's minimum
SIZES = ("paper's n", "minimum")
#: the most studies a call may simulate per claim, truth and size
MAX_STUDIES = 100_000


def papers_n(claim: Claim) -> int:
    """The n of the paper's own evidence (seeds per model, points, models, values of K)."""
    evidence = claim.paper().evidence
    if isinstance(evidence, Groups):
        return min(evidence.a.n, evidence.b.n)
    if isinstance(evidence, Contrast):
        return evidence.target.n
    if isinstance(evidence, Points | Pairs | Contexts):
        return evidence.n
    raise TypeError(f"{claim.name}: no size for {type(evidence).__name__}")


def _generator(seed: int, claim: str, truth: str, size: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(f"{claim}/{truth}/{size}".encode())])


def shares(claim: Claim, truth: str, n: int, studies: int, rng) -> dict[str, float]:
    """The share of each verdict over ``studies`` studies of ``n`` drawn under ``truth``."""
    paper = claim.paper()
    counts = dict.fromkeys(OUTCOMES, 0)
    for _ in range(studies):
        estimate = claim.rule.estimate(claim.rule.sample(paper, truth, n, rng))
        if estimate.n < claim.min_n:
            counts[TOO_FEW] += 1
            continue
        counts[claim.rule.verdict(estimate, paper) or UNDEFINED] += 1
    return {key: value / studies for key, value in counts.items()}


def simulate(names=None, studies: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per claim, truth and size: n and the share of each verdict (see the module docstring)."""
    if not 1 <= studies <= MAX_STUDIES:
        raise ValueError(f"--studies {studies}: between 1 and {MAX_STUDIES:,}")
    rows = []
    for name, claim in CLAIMS.items():
        if names is not None and name not in names:
            continue
        sizes = {SIZES[0]: papers_n(claim), SIZES[1]: claim.min_n}
        for truth in TRUTHS:
            for size, n in sizes.items():
                found = shares(claim, truth, n, studies, _generator(seed, name, truth, size))
                what = "the paper's" if truth == "paper" else claim.rule.opposite
                rows.append({"id": name, "truth": what, "size": size, "n": n, **found})
    return pd.DataFrame(rows)


def simulation_markdown(table: pd.DataFrame, studies: int, seed: int) -> str:
    """The table as the docs print it: shares in per cent."""
    shown = table.copy()
    for outcome in OUTCOMES:
        shown[outcome] = [f"{100 * v:.1f} %" for v in shown[outcome]]
    header = (
        f"Operating characteristics: {studies:,} simulated studies per claim, truth and size (seed {seed}); the "
        "share of each verdict.\n\n"
    )
    return header + shown.to_markdown(index=False, disable_numparse=True) + "\n"
