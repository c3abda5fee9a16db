"""The claims page: every claim of :data:`~.catalog.CLAIMS` decided from the summaries, ours beside the paper's.

One row per claim: its statement, the paper's value, ours with its 95 % interval, n, the verdict and the table or
figure it comes from. Written as ``PREFIX.csv`` (tidy, full precision), ``PREFIX.md``, ``PREFIX.html`` (a section of
the HTML report) and ``PREFIX.tex``, each followed by the rules; the preview writes the same with, per claim, its runs
in of those planned.

A verdict is, in this order: **not comparable at this scale** where a run behind the claim lacks the paper's model size
or epochs (:func:`~.evidence.at_paper_scale`; the numbers are still shown, and what the rule reads on them); **too few
runs** where n is below the claim's minimum; **undefined** where the statistic does not exist (constant values); else
**consistent**, **not consistent** or **undecided** (the evidence at this n decides neither way) by the claim's rule
(:mod:`.rules`). Each row prints the rule's power at its n and, below 0.8, the n from which it would decide. After the
paper's claims, the rows of each plug-in layer with runs (:mod:`.plugins`: the project's statements, no paper value).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.report.claims.catalog import CLAIMS, Claim
from softmax_bottleneck.report.claims.evidence import Summaries, comparable
from softmax_bottleneck.report.claims.plugins import plugin_claims
from softmax_bottleneck.report.claims.rules import CONSISTENT, NOT_CONSISTENT, UNDECIDED, Estimate, Evidence, Paper
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.tables.render import html_page, latex_table, latex_text, markdown_page

TOO_FEW = "too few runs"
NOT_COMPARABLE = "not comparable at this scale"
UNDEFINED = "undefined"
#: every verdict, in the order of the page's tally
VERDICTS = (CONSISTENT, NOT_CONSISTENT, UNDECIDED, TOO_FEW, NOT_COMPARABLE, UNDEFINED)
#: the files of the page (``PREFIX.<ext>``)
FORMATS = ("csv", "md", "html", "tex")

CAPTION = (
    "The paper's conclusions, each decided by a rule stated before any run (docs/claims.md): the paper's value, ours "
    "with its 95 % interval, n, the verdict and the rule's power at this n (how likely the rule is to read "
    "consistent at this n were the paper's effect, from the paper's own numbers, true: a property of the rule and n, "
    "not of our runs). A verdict is one of: consistent; not "
    "consistent; undecided (the runs at this n decide neither way: the power column says how many would); too few "
    "runs (n below the rule's minimum); not comparable at this scale (a run without the paper's model size and "
    "epochs; beside it, what the rule reads on these runs: a check of the pipeline, not of the paper); undefined "
    '(constant values). A source marked "the project\'s statistic" is a claim the paper makes in '
    "words, its test this project's; \"the project's statement\" marks a row of a plug-in layer, which the paper does "
    "not have (no paper value)."
)


@dataclass(frozen=True)
class Decision:
    """One claim decided: our evidence and estimate, the paper's side, whether our runs are at the paper's scale."""

    claim: Claim
    evidence: Evidence
    estimate: Estimate
    paper: Paper
    comparable: bool
    verdict: str
    #: what the rule reads on these runs, were they at the paper's scale (the verdict, where they are)
    reading: str

    @property
    def power(self) -> float:
        """The rule's power at our n (NaN for a descriptive rule or below 2 runs)."""
        return self.claim.rule.power(self.estimate.n, self.paper) if self.estimate.n >= 2 else float("nan")

    @property
    def power_text(self) -> str:
        return self.claim.rule.power_text(self.estimate.n, self.paper, self.claim.unit, self.claim.min_n)


def verdict(claim: Claim, estimate: Estimate, paper: Paper, at_scale: bool) -> str:
    """The verdict of the module docstring, in its order."""
    if not at_scale:
        return NOT_COMPARABLE
    if estimate.n < claim.min_n:
        return TOO_FEW
    decided = claim.rule.verdict(estimate, paper)
    return UNDEFINED if decided is None else decided


def decide(claim: Claim, evidence: Evidence, at_scale: bool = True) -> Decision:
    """``claim`` decided on ``evidence`` (ours, or the paper's own to check that the paper agrees with itself)."""
    estimate = claim.rule.estimate(evidence)
    paper = claim.paper()
    decided = verdict(claim, estimate, paper, at_scale)
    reading = decided if at_scale else verdict(claim, estimate, paper, True)
    return Decision(claim, evidence, estimate, paper, at_scale, decided, reading)


def decide_all(summary_dir, names=None) -> list[Decision]:
    """Every claim (``names``: only these) decided from the summaries under ``summary_dir``, then (without ``names``)
    the rows of each plug-in layer with runs (:mod:`.plugins`)."""
    summaries = Summaries(summary_dir)
    claims = [claim for name, claim in CLAIMS.items() if names is None or name in names]
    claims += plugin_claims(summaries) if names is None else []
    out = []
    for claim in claims:
        rows = claim.rows(summaries)
        out.append(decide(claim, claim.build(rows), comparable(rows)))
    return out


def decide_paper(names=None) -> list[Decision]:
    """Every claim decided on the paper's own numbers as if they were ours (the paper's consistency with itself)."""
    return [decide(claim, claim.paper().evidence) for name, claim in CLAIMS.items() if names is None or name in names]


# --------------------------------------------------------------------------------------------- the page
def _n_text(d: Decision) -> str:
    unit = d.claim.unit
    if d.estimate.n == 1:  # "1 seed per model", "1 value of K"
        first, _, rest = unit.partition(" ")
        unit = " ".join(filter(None, [first.removesuffix("s"), rest]))
    text = f"{d.estimate.n} {unit}"
    names = getattr(d.evidence, "names", ())
    return f"{text} ({', '.join(names)})" if d.claim.unit == "models" and names else text


def _paper_statistic(d: Decision) -> float:
    """The paper's value of the statistic ``ours_value`` holds (its Δ, r, mean rank, ρ), from the paper's own numbers
    by the same rule; ``paper_value`` is the number the rule compares with (its r, or its p where the paper prints
    one)."""
    if d.claim.project:  # a plug-in layer's row: the paper has none
        return math.nan
    return d.claim.rule.estimate(d.paper.evidence).value


def tidy(decisions: list[Decision]) -> pd.DataFrame:
    """One row per claim, every number at full precision (``PREFIX.csv``)."""
    rows = []
    for d in decisions:
        c, est = d.claim, d.estimate
        rows.append(
            {
                "claim": c.name,
                "dataset": c.dataset,
                "source": c.source,
                "statement": c.statement,
                "quote": c.quote,
                "formalised": c.formalised,
                "project": c.project,
                "rule": c.rule.name,
                "paper_value": d.paper.value,
                "paper_statistic": _paper_statistic(d),
                "paper_printed": d.paper.printed,
                "paper": c.rule.paper_text(d.paper),
                "ours_value": est.value,
                "ours_low": est.low,
                "ours_high": est.high,
                "ours_p": est.p,
                "ours_bound": est.bound,
                "ours": c.rule.ours_text(est),
                "n": est.n,
                "min_n": c.min_n,
                "unit": c.unit,
                "n_text": _n_text(d),
                "comparable": d.comparable,
                "verdict": d.verdict,
                "rule_reading": d.reading,
                "power": d.power,
                "power_text": d.power_text,
            }
        )
    return pd.DataFrame(rows)


def _source(source: str, formalised: bool, project: bool) -> str:
    """The table or figure, marked where the statistic or the whole statement is this project's."""
    if project:
        return f"{source}; the project's statement"
    return f"{source}; the project's statistic" if formalised else source


def _verdict_text(verdict: str, reading: str) -> str:
    """The verdict; where it is "not comparable", what the rule reads on these runs beside it (a check of the
    pipeline at a small scale, never the paper's finding)."""
    return f"{verdict} (the rule on these runs: {reading})" if verdict == NOT_COMPARABLE else verdict


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The page's table (strings): claim, the paper's value, ours [95 % interval], n, verdict, power, source."""
    return pd.DataFrame(
        {
            "id": table["claim"],
            "claim": [
                f"{DATASETS.get(ds, ds)}: {s}" for ds, s in zip(table["dataset"], table["statement"], strict=True)
            ],
            "paper": table["paper"],
            "ours [95 % interval]": table["ours"],
            "n": table["n_text"],
            "verdict": [_verdict_text(*row) for row in zip(table["verdict"], table["rule_reading"], strict=True)],
            "power at this n": table["power_text"],
            "from": [_source(*row) for row in zip(table["source"], table["formalised"], table["project"], strict=True)],
        }
    )


def tally(table: pd.DataFrame) -> str:
    """``3 consistent, 1 not consistent, ...`` (the verdicts that occur, in :data:`VERDICTS`' order)."""
    counts = table["verdict"].value_counts()
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts) or "no claims"


def rules_lines(decisions: list[Decision]) -> list[tuple[str, str]]:
    """(rule name, its statement and the claims' minimum n) for each rule the decisions use, in first use."""
    out: dict[str, str] = {}
    for d in decisions:
        minimum = f"too few runs below {d.claim.min_n} {d.claim.unit}"
        text = out.get(d.claim.rule.name)
        if text is None:
            out[d.claim.rule.name] = f"{d.claim.rule.text} Minimum: {minimum}"
        elif minimum not in text:
            out[d.claim.rule.name] = f"{text}; {minimum}"
    return [(name, text + ".") for name, text in out.items()]


def _markdown(frame, table, rules, banner) -> str:
    page = markdown_page("claims", frame, f"{CAPTION} Verdicts: {tally(table)}.", banner)
    return page + "\n**Rules**\n\n" + "".join(f"* **{name}**: {text}\n" for name, text in rules)


def _html(frame, table, rules, banner) -> str:
    page = html_page("claims", frame, f"{CAPTION} Verdicts: {tally(table)}.", banner)
    items = "".join(f"<li><b>{html.escape(name)}</b>: {html.escape(text)}</li>\n" for name, text in rules)
    return page.replace("</body>", f"<p><b>Rules</b></p>\n<ul>\n{items}</ul>\n</body>", 1)


def _latex(frame, table, rules, banner) -> str:
    body = latex_table(frame, f"{CAPTION} Verdicts: {tally(table)}.", "tab:claims", banner)
    items = "".join(f"  \\item \\textbf{{{latex_text(name)}}}: {latex_text(text)}\n" for name, text in rules)
    return f"{body}\\paragraph{{Rules}}\n\\begin{{itemize}}\n{items}\\end{{itemize}}\n"


def write(decisions: list[Decision], out_prefix, banner: str | None = None, extra: dict | None = None) -> pd.DataFrame:
    """Write the page of ``decisions`` (``PREFIX.csv``, ``.md``, ``.html``, ``.tex``) atomically; ``extra``: columns
    added to both the tidy and the shown table (the preview's runs in). Returns the tidy table."""
    table = tidy(decisions)
    frame = display(table)
    for column, values in (extra or {}).items():
        table[column] = values
        frame[column] = values
    rules = rules_lines(decisions)
    prefix = str(out_prefix)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(table.to_csv(index=False, lineterminator="\n"), prefix + ".csv")
    atomic_write_text(_markdown(frame, table, rules, banner), prefix + ".md")
    atomic_write_text(_html(frame, table, rules, banner), prefix + ".html")
    atomic_write_text(_latex(frame, table, rules, banner), prefix + ".tex")
    return table


# --------------------------------------------------------------------------------------------- the preview's
def planned_runs(claim: Claim, planned: dict[str, list[tuple[dict, bool]]]) -> dict[tuple[str, int], bool]:
    """The planned runs behind ``claim`` ((summary file, position) → whether it is in): those of its basis files that
    its basis rows select."""
    return {
        (basis.file, i): there
        for basis in claim.basis
        for i, (record, there) in enumerate(planned.get(basis.file, ()))
        if basis.matches(record)
    }


def render_preview(summary_dir, out_prefix, found: dict, stamp: str, config_banner: str | None) -> str:
    """The provisional page from the preview's summaries (``found``: summary file → its kind, the planned inputs,
    each with a ``record`` and ``keys``, and which are in), with a column ``runs in`` (n of N) per claim, stamped
    provisional with the distinct runs in of those the claims read; returns ``rendered``."""
    from softmax_bottleneck.report.common import stamp_banner

    planned = {
        file: [({**p.record, **p.keys}, there) for p, there in zip(inputs, present, strict=True)]
        for file, (_, inputs, present) in found.items()
    }
    decisions = decide_all(summary_dir)
    runs = [planned_runs(d.claim, planned) for d in decisions]
    every = {key: there for claim_runs in runs for key, there in claim_runs.items()}
    banner = stamp_banner(stamp, sum(every.values()), len(every), config_banner)
    counts = [f"{sum(claim_runs.values())} of {len(claim_runs)}" for claim_runs in runs]
    write(decisions, out_prefix, banner, extra={"runs in": counts})
    return "rendered"
