"""The claims' rules can fail both ways and say how likely they were to (report/claims/differences.py, rules.py,
descriptive.py, operating.py):

* "not better" holds for a worse result; "no difference" holds for a negligible gain however many seeds; five noisy
  seeds are "undecided", never "consistent";
* each rule's power is the share of "consistent" in studies simulated under the paper's truth (exact formulas
  against the simulation), but for the rules on whether a correlation exists (r in our interval, no association),
  whose power is the chance that n points detect an r and which say "consistent" only where it reaches 0.8;
* under the opposite truth, at the paper's n, no claim reads "consistent" more than 20 % of the time;
* ``claims --simulate`` is reproducible, and docs/claims.md's table is what it prints.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from softmax_bottleneck.analysis import power
from softmax_bottleneck.analysis.stats import mean_interval
from softmax_bottleneck.cli import main
from softmax_bottleneck.report.claims import CLAIMS, operating
from softmax_bottleneck.report.claims.descriptive import Trend, chance_of_trend
from softmax_bottleneck.report.claims.differences import MARGIN, Differs, Equivalent, NotBetter
from softmax_bottleneck.report.claims.page import TOO_FEW, decide, decide_paper
from softmax_bottleneck.report.claims.rules import (
    CONSISTENT,
    NOT_CONSISTENT,
    UNDECIDED,
    Contrast,
    Groups,
    NoAssociation,
    Pairs,
    Paper,
    Points,
    Sample,
    StaysLow,
)
from softmax_bottleneck.report.claims.seeds import seeds_table

ROOT = Path(__file__).resolve().parents[1]


def _verdict(rule, a: Sample, b: Sample, paper: Paper) -> str:
    return rule.verdict(rule.estimate(Groups(a, b)), paper)


def _paper(name: str) -> Paper:
    return CLAIMS[name].paper()


def test_a_worse_result_is_consistent_with_not_better_and_a_better_one_is_not():
    """Table 4, PTB: LMS-PLIF 1 perplexity *worse* than LMS-PLIF† is "not better" (the two-sided rule called it "not
    consistent"); 1 perplexity better is not consistent; 0.1 apart with SD 0.5 at 5 seeds decides nothing."""
    rule, paper = NotBetter(), _paper("table4_ptb")
    frozen = Sample(56.82, 0.09, 10)
    assert _verdict(rule, Sample(57.82, 0.11, 10), frozen, paper) == CONSISTENT
    assert _verdict(rule, Sample(55.82, 0.11, 10), frozen, paper) == NOT_CONSISTENT
    assert _verdict(rule, Sample(56.72, 0.5, 5), Sample(56.82, 0.5, 5), paper) == UNDECIDED


def test_a_negligible_gain_stays_consistent_with_no_difference_however_many_seeds():
    """SS against Softmax on PTB: a true gain of 0.05 perplexity measured on 200 seeds each is significant (p < 0.05:
    the paper's side of 0.05 flipped, and the old rule said "not consistent"), and inside the margin: consistent."""
    rule, paper = Equivalent(), _paper("table2_ss_ptb")
    a, b = Sample(57.03, 0.15, 200), Sample(57.08, 0.10, 200)
    assert rule.estimate(Groups(a, b)).p < 0.05
    assert _verdict(rule, a, b, paper) == CONSISTENT
    assert _verdict(rule, Sample(57.08 - 3 * MARGIN, 0.15, 10), b, paper) == NOT_CONSISTENT
    assert _verdict(rule, Sample(57.03, 1.0, 5), Sample(57.08, 1.0, 5), paper) == UNDECIDED


def test_a_significant_claim_is_undecided_at_low_power_and_contradicted_by_the_other_sign_or_no_gap():
    rule, paper = Differs(), _paper("table2_mos_ptb")  # MoS 2.20 below Softmax
    softmax = Sample(57.08, 0.10, 10)
    assert _verdict(rule, Sample(54.88, 0.20, 10), softmax, paper) == CONSISTENT
    assert _verdict(rule, Sample(58.00, 0.20, 10), softmax, paper) == NOT_CONSISTENT  # significantly higher
    assert _verdict(rule, Sample(57.06, 0.10, 10), softmax, paper) == NOT_CONSISTENT  # inside ±0.2: no gap
    assert _verdict(rule, Sample(56.5, 3.0, 5), Sample(57.08, 3.0, 5), paper) == UNDECIDED


@pytest.mark.parametrize("name", ["table2_gss_wt2", "table2_lms_plif_ss_wt2"])
def test_a_small_claimed_gain_is_contradicted_by_none_measured_on_many_seeds(name):
    """GSS against Softmax on WT2 (the paper's Δ = −0.12) and LMS-PLIF against SS (−0.20, −0.19999999999998863 in
    floating point): no gain at all, measured on 200 seeds each, rules out half the paper's gain. Before, both read
    "undecided" for ever: the no-difference branch needed the paper's |Δ| above the margin."""
    claim = CLAIMS[name]
    rule, paper = claim.rule, claim.paper()
    b = paper.evidence.b
    none = Sample(b.mean, b.sd, 200), Sample(b.mean, b.sd, 200)
    assert _verdict(rule, *none, paper) == NOT_CONSISTENT
    effect = rule.paper_effect(paper)[0]
    half = Sample(b.mean + effect / 2, b.sd, 10), Sample(b.mean, b.sd, 10)  # half the gain at the paper's n
    assert _verdict(rule, *half, paper) == UNDECIDED


def test_without_a_known_effect_no_interval_reads_as_no_difference():
    """A paper's Δ that is NaN (no paper value) leaves no band of "no difference": undecided, never "not consistent"
    (min(0.2, NaN) alone would have been 0.2)."""
    from softmax_bottleneck.report.claims.differences import no_effect_band

    assert math.isnan(no_effect_band(math.nan)) and no_effect_band(-0.12) == pytest.approx(0.06)
    assert no_effect_band(-2.2) == MARGIN
    unknown = Paper(math.nan, Groups(Sample(math.nan, math.nan, 0), Sample(57.08, 0.1, 10)))
    assert _verdict(Differs(), Sample(57.08, 0.1, 200), Sample(57.08, 0.1, 200), unknown) == UNDECIDED


def test_a_gain_for_all_layers_is_contradicted_by_one_layer_the_other_way():
    """SM Table 10's claim is "for all existing works": ET − NT of −1.5 on five layers and +0.3 on MoS is a
    significant mean (p = 0.01) and not consistent, naming MoS; the paper's six differences are consistent."""
    claim = CLAIMS["ntet_ptb"]
    rule, paper = claim.rule, claim.paper()
    assert rule.verdict(rule.estimate(paper.evidence), paper) == CONSISTENT
    one_other = Pairs((1.0,) * 5 + (3.3,), (2.5,) * 5 + (3.0,), ("Softmax", "SS", "GSS", "LMS-PLIF", "MoC", "MoS"))
    estimate = rule.estimate(one_other)
    assert estimate.p < 0.05 and estimate.failed == ("MoS",)
    assert rule.verdict(estimate, paper) == NOT_CONSISTENT and "not lower for MoS" in rule.ours_text(estimate)


def test_benchmarks_where_moc_ties_mos_count_as_at_least_as_good():
    """6 wins and 2 ties of 13: at least as good on 8 (consistent; before, 6 strict wins read "not consistent"); the
    sign test leaves the ties out (6 of 11) and is scipy's binomial test."""
    from scipy import stats as sps

    claim = CLAIMS["wordsim_moc_mos_ptb"]
    rule, paper = claim.rule, claim.paper()
    moc = (0.5,) * 6 + (0.3, 0.3) + (0.1,) * 5
    mos = (0.4,) * 6 + (0.3, 0.3) + (0.2,) * 5
    estimate = rule.estimate(Pairs(moc, mos))
    assert estimate.bound == 8 and rule.verdict(estimate, paper) == CONSISTENT
    assert estimate.p == pytest.approx(sps.binomtest(6, 11, 0.5, alternative="greater").pvalue)
    worse = rule.estimate(Pairs(moc[:6] + (0.2, 0.2) + moc[8:], mos))  # the two ties lost: 6 of 13
    assert rule.verdict(worse, paper) == NOT_CONSISTENT


def test_a_trend_of_three_with_one_flat_step_passes_and_the_text_says_so():
    """Ranks 13,229, 13,229, 13,230 over K = 10, 15, 20: ρ = 0.87, consistent, as the rule's text says (no step falls
    and at most one is flat); two flat steps are no trend at all."""
    rule, paper = CLAIMS["mos_k_rank_wt2"].rule, CLAIMS["mos_k_rank_wt2"].paper()
    flat_step = rule.estimate(Points((10.0, 15.0, 20.0), (13229.0, 13229.0, 13230.0)))
    assert flat_step.value == pytest.approx(math.sqrt(3) / 2) and rule.verdict(flat_step, paper) == CONSISTENT
    assert "at most one is flat" in rule.text
    assert math.isnan(rule.estimate(Points((10.0, 15.0, 20.0), (13229.0,) * 3)).value)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_a_random_orders_pass_chance_is_how_often_the_rule_passes_one(n):
    """The page's "a random order passes" is the share of the n! orders of n values that the rule itself calls
    consistent (through scipy's ρ, which returns 0.8 a bit low: 5 values with Σd² = 4 pass, as ρ ≥ 0.8 says)."""
    import itertools

    rule, paper = CLAIMS["mos_k_rank_wt2"].rule, CLAIMS["mos_k_rank_wt2"].paper()
    x = tuple(float(v) for v in range(n))
    verdicts = [rule.verdict(rule.estimate(Points(x, tuple(map(float, order)))), paper)
                for order in itertools.permutations(range(n))]  # fmt: skip
    assert verdicts.count(CONSISTENT) / len(verdicts) == pytest.approx(chance_of_trend(n))
    at_the_bound = rule.estimate(Points((0.0, 1.0, 2.0, 3.0, 4.0), (1.0, 0.0, 2.0, 4.0, 3.0)))  # Σd² = 4
    assert at_the_bound.value == pytest.approx(0.8) and rule.verdict(at_the_bound, paper) == CONSISTENT


@pytest.mark.parametrize(("name", "low", "high"), [("mos_k_gap_wt2", 0.30, 0.55), ("mos_k_rank_ptb", 0.95, 1.0)])
def test_a_trends_pass_rate_under_one_runs_noise_matches_an_independent_simulation(name, low, high):
    """The page's "the paper's values with one run's noise" against scipy's spearmanr over 3,000 studies of another
    seed (one run's SD: MoS's over its seeds in Table 2): within 0.03. WT2's gap widens by 0.9 ppl over K = 10, 15,
    20 where one run's gap has an SD of 0.5: a faithful reproduction passes less than half the time."""
    from scipy import stats as sps

    claim = CLAIMS[name]
    rule, paper = claim.rule, claim.paper()
    ev = paper.evidence
    rng = np.random.default_rng(5)
    passes = [
        rule.sign * sps.spearmanr(ev.x + rule.noise[0] * rng.standard_normal(ev.n),
                                  ev.y + rule.noise[1] * rng.standard_normal(ev.n)).statistic >= 0.8
        for _ in range(3000)
    ]  # fmt: skip
    rate = rule.noisy_pass_rate(paper, ev.n)
    assert abs(rate - np.mean(passes)) <= 0.03 and low <= rate <= high
    assert f"the paper's values with one run's noise: {rate:.0%}" in rule.power_text(ev.n, paper, claim.unit)


def test_the_n_a_claim_needs_is_never_below_its_minimum():
    """A gain of 3 SDs needs 4 seeds per model for the t-test's power 0.8, but below 5 the claim reads "too few runs":
    the page names 5 (before: "0.8 from 4"), and the seeds table names 5 for MoS against Softmax (its t-test: 2)."""
    claim = CLAIMS["table2_mos_ptb"]
    paper = Paper(1e-3, Groups(Sample(57.08 - 0.9, 0.3, 10), Sample(57.08, 0.3, 10)))
    assert power.seeds_needed(0.9, 0.3) == 4 and claim.rule.power(2, paper) < 0.8
    assert claim.rule.power_text(2, paper, claim.unit).endswith("0.8 from 4 seeds per model")
    assert claim.rule.power_text(2, paper, claim.unit, claim.min_n).endswith("0.8 from 5 seeds per model")
    table = seeds_table(decide_paper(), ours=False).set_index("id")
    assert power.seeds_needed(2.2, 0.197) == 2
    assert table.loc["table2_mos_ptb", "n for the paper's effect"] == "5 seeds per model"


def test_a_correlation_across_five_layers_is_undecided_never_consistent():
    """Five layers detect r = 0.5 with power 0.19: no r at all among them reads "undecided"; a significant r in the
    direction the claim denies reads "not consistent"; 40 layers without one read "consistent"."""
    rule, paper = NoAssociation("less", "a higher rank, a lower perplexity"), _paper("rank_ppl_ptb")
    flat = Points((1.0, 2.0, 3.0, 4.0, 5.0), (3.0, 1.0, 4.0, 1.0, 5.0))
    assert rule.verdict(rule.estimate(flat), paper) == UNDECIDED
    falling = Points((1.0, 2.0, 3.0, 4.0, 5.0), (5.0, 4.0, 3.0, 2.0, 1.1))
    assert rule.verdict(rule.estimate(falling), paper) == NOT_CONSISTENT
    rng = np.random.default_rng(3)
    many = Points(tuple(rng.standard_normal(40)), tuple(rng.standard_normal(40)))
    estimate = rule.estimate(many)
    assert estimate.p >= 0.05 and rule.power(40, paper) >= 0.8 and rule.verdict(estimate, paper) == CONSISTENT
    # the test is one-sided: a strong r the other way (a higher rank, a higher perplexity) is no sign of what the
    # claim denies, and its p is scipy's one-sided one (near 1), not the two-sided one (near 0)
    from scipy import stats as sps

    x = rng.standard_normal(40)
    rising = Points(tuple(x), tuple(x + 0.5 * rng.standard_normal(40)))
    estimate = rule.estimate(rising)
    one_sided = sps.pearsonr(rising.x, rising.y, alternative="less").pvalue
    assert estimate.value > 0.8 and estimate.p == pytest.approx(one_sided)
    assert estimate.p > 0.99 and rule.verdict(estimate, paper) == CONSISTENT


@pytest.mark.parametrize(
    ("name", "n"),
    [("table2_ss_ptb", 10), ("table4_wt2", 10), ("table4_ptb", 5), ("table2_gss_wt2", 10),
     ("figure2_window_ptb", 30), ("lms_plif_rank_ptb", 5)],
)  # fmt: skip
def test_a_rules_power_is_how_often_the_paper_s_truth_reads_consistent(name, n):
    """The exact power (TOST by integration, the one-sided test and the t-test by the noncentral t; a weak r's and a
    low rank's by Fisher's z and the noncentral t) against 4,000 studies simulated under the paper's values: within 3.5
    standard errors (claims whose two SDs are close: the power assumes the t-test's common SD)."""
    claim = CLAIMS[name]
    expected = claim.rule.power(n, claim.paper())
    studies = 4000
    found = operating.shares(claim, "paper", n, studies, np.random.default_rng(11))[CONSISTENT]
    assert abs(found - expected) <= 3.5 * math.sqrt(expected * (1 - expected) / studies) + 1e-3, (found, expected)


@pytest.mark.parametrize("sides", [1, 2])
def test_correlation_power_inverts_the_planning_answers(sides):
    """The power of n points at the smallest r they detect is the planning power; the fewest points a correlation
    needs are the first n whose power reaches it."""
    for n in (5, 11, 24, 51):
        r = power.detectable_correlation(n, sides=sides)
        assert power.correlation_power(r, n, sides=sides) == pytest.approx(power.POWER)
        assert power.correlation_power(-r, n, sides=sides) == pytest.approx(power.POWER)
    for r in (0.3, -0.5, 0.8):
        needed = power.points_needed(r, sides=sides)
        assert power.correlation_power(r, needed, sides=sides) >= power.POWER
        assert power.correlation_power(r, needed - 1, sides=sides) < power.POWER
    assert math.isnan(power.correlation_power(0.5, 3)) and power.correlation_power(1.0, 4) > 0.99


def test_tost_power_is_one_far_inside_the_margin_and_at_most_alpha_at_its_edge():
    assert power.equivalence_power(0.0, MARGIN, 0.01, 10) == pytest.approx(1.0)
    assert power.equivalence_power(MARGIN, MARGIN, 0.1, 10) <= 0.05 + 1e-9
    assert power.equivalence_power(0.0, MARGIN, 1.0, 5) < 1e-6  # the interval is almost always wider than the margin
    assert power.noninferiority_power(-MARGIN, MARGIN, 0.1, 10) == pytest.approx(0.05)


def test_under_the_opposite_truth_no_claim_reads_consistent_more_than_a_fifth_of_the_time():
    """At the paper's n (the study's planned runs): a descriptive trend by its exact chance over random orders, every
    other claim over 300 simulated studies (fixed seed)."""
    for name, claim in CLAIMS.items():
        n = operating.papers_n(claim)
        if isinstance(claim.rule, Trend):
            share = chance_of_trend(n)
        else:
            rng = np.random.default_rng([7, len(name)])
            share = operating.shares(claim, "opposite", n, 300, rng)[CONSISTENT]
        assert share <= 0.2, (name, share)


def test_the_simulation_is_reproducible_and_the_docs_print_it(capsys):
    """``claims --simulate`` twice gives the same table; a subset of claims gives the rows of the whole table, which
    docs/claims.md prints (2,000 studies, seed 1)."""
    args = ["claims", "--simulate", "--studies", "2000", "--seed", "1"]
    names = ("table4_wt2", "wordsim_moc_mos_ptb", "mos_k_gap_wt2")  # a trend: the paper's values with one run's noise
    for name in names:
        args += ["--claim", name]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    rows = [line for line in first.splitlines() if line.startswith("| ") and line.split("|")[1].strip() in names]
    assert len(rows) == 12
    docs = (ROOT / "docs" / "claims.md").read_text()
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert any([c.strip() for c in line.split("|")[1:-1]] == cells for line in docs.splitlines()), row


def test_the_simulation_refuses_a_bad_count(capsys):
    with pytest.raises(SystemExit):
        main(["claims", "--simulate", "--studies", "0"])
    assert "--studies" in capsys.readouterr().err


def test_figure3s_claim_asks_for_every_context_the_qualitative_analysis_reads():
    """The claim's minimum (``MIN_CONTEXTS``, declared with the rules, torch-free) is the number of SM Table 2's
    contexts that ``qualitative`` scores: one fewer context there and the claim could never be decided."""
    from softmax_bottleneck.analysis.qualitative import CONTEXTS
    from softmax_bottleneck.report.claims.claim import MIN_CONTEXTS

    assert MIN_CONTEXTS == len(CONTEXTS) == 18


def test_a_mean_ranks_interval_stops_at_rank_one_and_its_verdict_does_not_change():
    """Two seeds far apart give a t-interval reaching far below zero (the page showed a negative rank); it stops at 1,
    the lowest rank. The verdicts around the midpoint stay what the uncut interval gives."""
    rule = StaysLow("Softmax", ("MoS",))
    wide = rule.estimate(Contrast(Sample.of([40.0, 500.0]), 18.0, {"MoS": 900.0}))
    uncut_low, uncut_high = mean_interval(270.0, float(np.std([40.0, 500.0], ddof=1)), 2)
    assert uncut_low < 0 and wide.low == 1.0 and wide.high == uncut_high and wide.value == 270.0, uncut_low
    assert rule.judge(wide, None) == UNDECIDED and " [1, " in rule.ours_text(wide)
    low = rule.estimate(Contrast(Sample.of([20.0, 22.0, 25.0]), 18.0, {"MoS": 900.0}))
    assert low.low > 1.0 and rule.judge(low, None) == CONSISTENT  # √(18 · 900) = 127 lies above its interval
    high = rule.estimate(Contrast(Sample.of([880.0, 890.0, 900.0]), 18.0, {"MoS": 900.0}))
    assert rule.judge(high, None) == NOT_CONSISTENT


def test_below_two_runs_the_power_column_says_how_many_would_decide():
    """One seed per model (the small scale's Table 2 claims): no power, but the n the seeds table names (before: "—"
    alone, where the docs promise that n whenever the power is below 0.8)."""
    claim = CLAIMS["table2_mos_ptb"]
    decision = decide(claim, Groups(Sample(55.0, math.nan, 1), Sample(57.0, math.nan, 1)))
    assert math.isnan(decision.power) and decision.verdict == TOO_FEW
    needed = seeds_table(decide_paper(["table2_mos_ptb"]), ours=False).iloc[0]["n for the paper's effect"]
    assert decision.power_text == f"—; 0.8 from {needed}" == "—; 0.8 from 5 seeds per model"
    trend = CLAIMS["mos_k_rank_ptb"]  # a descriptive rule stays "—" below 2 values
    assert trend.rule.power_text(1, trend.paper(), trend.unit, trend.min_n) == "—"
