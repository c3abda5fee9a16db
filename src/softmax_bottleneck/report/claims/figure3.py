"""Figure 3's observation as a claim (SM Table 2; E5): in every context where one of the paper's high-rank layers has
the true next token among its top-5 predictions, one of its low-rank layers has too.

A deterministic check on one's own models (one model per layer and schedule, the authors' seed): no seeds, no
inference, no power. It fails naming the contexts in which only a high-rank layer hits. The models are those of
``top5.csv``, each known by its ``variant`` (the summary records the model behind each display name); a plug-in
layer's model there is read by no claim about the paper's layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.claims.claim import MIN_CONTEXTS, Claim, display
from softmax_bottleneck.report.claims.evidence import TOP5, Basis
from softmax_bottleneck.report.claims.rules import (
    CONSISTENT,
    NOT_CONSISTENT,
    UNDECIDED,
    Estimate,
    Paper,
    Rule,
    _note,
)
from softmax_bottleneck.report.common import as_hit
from softmax_bottleneck.report.reported import FIGURE3_GROUP_LABELS, FIGURE3_GROUPS
from softmax_bottleneck.report.tables import cells

#: the paper's low-rank layers: Softmax and MoC at the bound d + 2 (SM Tables 10, 11), LMS-PLIF "fairly low" (Table 2)
LOW_RANK = ("softmax", "lms_plif", "moc")
#: the paper's high-rank layers (Tables 1, 2: thousands, up to the vocabulary)
HIGH_RANK = ("ss", "gss", "mos")
#: Figure 3 is PTB's (SM Table 2)
DATASET = "ptb"


@dataclass(frozen=True)
class Contexts:
    """Per context (named ``Yang et al.'s #4``, ...), whether any high-rank and any low-rank layer hits."""

    names: tuple[str, ...]
    high: tuple[bool, ...]
    low: tuple[bool, ...]

    @property
    def n(self) -> int:
        return len(self.names)


def contexts(frame: pd.DataFrame) -> Contexts:
    """The contexts of ``frame`` (rows ``variant, group, number, hit``) in which at least one high-rank and one
    low-rank layer have a known hit, in Figure 3's order."""
    frame = frame.assign(hit=frame["hit"].map(as_hit), number=pd.to_numeric(frame["number"], errors="coerce"))
    frame = frame[frame["group"].isin(FIGURE3_GROUPS)].dropna(subset=["hit", "number"])
    names, high, low = [], [], []
    for (group, number), rows in sorted(
        frame.groupby(["group", "number"]), key=lambda item: (FIGURE3_GROUPS.index(item[0][0]), item[0][1])
    ):
        hits_high = rows.loc[rows["variant"].isin(HIGH_RANK), "hit"]
        hits_low = rows.loc[rows["variant"].isin(LOW_RANK), "hit"]
        if hits_high.empty or hits_low.empty:
            continue
        names.append(f"{FIGURE3_GROUP_LABELS[group]} #{int(number)}")
        high.append(bool(hits_high.max()))
        low.append(bool(hits_low.max()))
    return Contexts(tuple(names), tuple(high), tuple(low))


class EveryContext(Rule):
    """Consistent when every context in which a high-rank layer hits has a low-rank hit too, and there is such a
    context; not consistent where only a high-rank layer hits (naming the contexts); undecided where no high-rank layer
    hits anywhere (the check cannot fail). Deterministic."""

    name = "a low-rank hit wherever a high-rank layer hits"
    power_means = "deterministic: one model per layer and schedule, nothing to infer"
    opposite = "a context in which only a high-rank layer hits"

    def __init__(self, low: tuple[str, ...], high: tuple[str, ...]):
        self.text = (
            "Per context of Figure 3 (SM Table 2's 18 on PTB), whether any of the paper's high-rank layers "
            f"({', '.join(high)}) and any of its low-rank layers ({', '.join(low)}), ET- or NT-ASGD, has the true "
            "next token among its top-5 predictions; consistent when every context in which a high-rank layer hits "
            "has a low-rank hit too, else not consistent, naming the contexts where only a high-rank layer hits; "
            "undecided where no high-rank layer hits in any context (nothing could fail). Deterministic: one model per "
            "layer and schedule, no seeds, nothing to infer."
        )

    def estimate(self, evidence: Contexts) -> Estimate:
        if evidence.n == 0:
            return Estimate(math.nan, n=0)
        failed = tuple(
            name for name, h, lo in zip(evidence.names, evidence.high, evidence.low, strict=True) if h and not lo
        )
        return Estimate(float(len(failed)), n=evidence.n, failed=failed, tested=sum(evidence.high))

    def judge(self, ours: Estimate, paper: Paper) -> str:
        if ours.value:
            return NOT_CONSISTENT
        return CONSISTENT if ours.tested else UNDECIDED

    def sample(self, paper: Paper, truth: str, n: int, rng) -> Contexts:
        ev = paper.evidence
        names, high, low = ev.names[:n], list(ev.high[:n]), list(ev.low[:n])
        if truth != "paper":  # one context where a high-rank layer hits and no low-rank one does
            i = int(rng.integers(len(names)))
            high[i], low[i] = True, False
        return Contexts(names, tuple(high), tuple(low))

    def ours_text(self, est: Estimate) -> str:
        if cells.missing(est.value):
            return cells.MISSING
        if not est.tested:
            return f"no high-rank layer hits in any of {est.n} contexts: nothing to check"
        text = f"holds in {est.n - int(est.value)} of {est.n} contexts ({est.tested} with a high-rank hit)"
        return text + (f"; not in {', '.join(est.failed)}" if est.failed else "")

    def paper_text(self, paper: Paper) -> str:
        return f"{self.ours_text(self.estimate(paper.evidence))}{_note(paper)}"


def _papers_hits() -> pd.DataFrame:
    """Figure 3's grid (SM Table 2) with each model's variant: its display name in the registry, ``*`` for NT-ASGD
    (Yang et al.'s own ``**`` rows left out, as SM Table 2's comparison does)."""
    hits = reported.load("figure3_hits")
    hits = hits[~hits["model"].str.endswith("**")]
    by_display = {variants.display(v): v for v in LOW_RANK + HIGH_RANK}
    return hits.assign(variant=hits["model"].str.rstrip("*").map(by_display))


def figure3() -> Claim:
    """The claim of Figure 3 (the module docstring)."""
    layers = LOW_RANK + HIGH_RANK
    rule = EveryContext(display(LOW_RANK), display(HIGH_RANK))

    def paper() -> Paper:
        evidence = contexts(_papers_hits())
        return Paper(rule.estimate(evidence).value, evidence, printed=False, note="from Figure 3's grid")

    return Claim(
        f"figure3_{DATASET}",
        DATASET,
        "Wherever a high-rank layer has the true token in its top 5, a low-rank layer has too: a high rank is not "
        "needed to predict it",
        "Figure 3, SM Table 2",
        rule,
        # the runs behind the models (the authors' seed, both schedules) are read for the scale check
        (Basis(TOP5, DATASET, layers), Basis("ntet.csv", DATASET, layers, seed_kind="authors")),
        lambda frames: contexts(frames[0]),
        paper,
        MIN_CONTEXTS,
        "contexts",
        quote="there is always a low-rank model that is able to get the true token among its top-5 predictions, in "
        "addition to a high-rank model if any",
    )
