"""The claims page's rows beyond the paper's t-tests and correlations (report/claims/figure3.py, plugins.py):

* Figure 3's observation, a deterministic check on one's own models read from ``top5.csv`` as the workflow's writer
  summarises it: it holds on SM Table 2's predictions, fails naming the contexts where only a high-rank layer hits
  (without the NT-ASGD MoC: Yang et al.'s #4 and #6, as the paper's grid shows), and has no verdict without the
  qualitative outputs; a plug-in's top-5 model changes nothing;
* a plug-in layer's own rows (the project's statements, no paper value): its test perplexity and log-P rank against
  Softmax's per dataset where it has runs, each able to fail both ways, with every row of the paper's layers unchanged;
  its name, user-controlled, escaped on every page.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_claims import _exact, paper_study, top5

from softmax_bottleneck.cli import main
from softmax_bottleneck.report import reported
from softmax_bottleneck.report.claims import page
from softmax_bottleneck.report.claims.differences import MARGIN
from softmax_bottleneck.report.claims.figure3 import HIGH_RANK, LOW_RANK, Contexts, EveryContext
from softmax_bottleneck.report.claims.plugins import RULES
from softmax_bottleneck.report.claims.rules import CONSISTENT, NOT_CONSISTENT, UNDECIDED, Groups, Sample
from softmax_bottleneck.report.summaries import collect_top5

PAPER_LAYERS = LOW_RANK + HIGH_RANK


@pytest.fixture(scope="module")
def paper_dir(tmp_path_factory) -> Path:
    return paper_study(tmp_path_factory.mktemp("paper-study-rows"))


def copy_of(study: Path, folder: Path) -> Path:
    folder.mkdir()
    for file in study.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def decided(folder: Path) -> dict[str, page.Decision]:
    return {d.claim.name: d for d in page.decide_all(folder)}


# --------------------------------------------------------------------------------------------- Figure 3
def test_the_top5_summary_names_the_model_behind_each_display_name(tmp_path):
    """The writer records each model's dataset, variant and schedule (what the claim tells layers by); a record
    without them leaves the columns empty."""
    sm2 = reported.load("sm_table2")
    own = sm2[sm2["model"] == "MoC*"].drop(columns="model")
    own.to_csv(tmp_path / "moc.csv", index=False)
    frame = collect_top5(
        [
            {"model": "MoC*", "dataset": "ptb", "variant": "moc", "schedule": "nt", "csv": str(tmp_path / "moc.csv")},
            {"model": "Other", "csv": str(tmp_path / "moc.csv")},
        ]
    )
    first = frame[frame["model"] == "MoC*"]
    assert len(first) == 18 and set(first["variant"]) == {"moc"} and set(first["schedule"]) == {"nt"}
    assert frame.loc[frame["model"] == "Other", ["dataset", "variant", "schedule"]].isna().all().all()


def test_figure3_holds_on_sm_table_2s_predictions(paper_dir):
    d = decided(paper_dir)["figure3_ptb"]
    assert d.verdict == CONSISTENT and d.estimate.n == 18 and d.estimate.failed == ()
    assert d.claim.rule.ours_text(d.estimate) == "holds in 18 of 18 contexts (10 with a high-rank hit)"
    assert d.power_text == "descriptive"  # deterministic: printed as the page prints its descriptive rules


def test_figure3_fails_naming_the_contexts_where_only_a_high_rank_layer_hits(paper_dir, tmp_path):
    """Without the NT-ASGD MoC, MoS is alone at Yang et al.'s #4 and #6 (the paper's own grid): not consistent."""
    folder = copy_of(paper_dir, tmp_path / "study")
    sm2 = reported.load("sm_table2")
    top5(folder, PAPER_LAYERS, rows=sm2[sm2["model"] != "MoC*"])
    d = decided(folder)["figure3_ptb"]
    assert d.verdict == NOT_CONSISTENT and d.estimate.failed == ("Yang et al.'s #4", "Yang et al.'s #6")
    assert d.claim.rule.ours_text(d.estimate) == (
        "holds in 16 of 18 contexts (10 with a high-rank hit); not in Yang et al.'s #4, Yang et al.'s #6"
    )
    # the paper's grid says so too: MoC* is its only low-rank hit there
    hits = reported.load("figure3_hits").query("group == 'Yang' and number in (4, 6) and hit == 1")
    assert set(hits["model"]) == {"MoS", "MoS*", "MoC*"}


def test_figure3_has_no_verdict_without_the_qualitative_outputs(paper_dir, tmp_path):
    """No top5.csv, or one written before it named each model's variant: no context to decide on ("too few runs")."""
    folder = copy_of(paper_dir, tmp_path / "none")
    (folder / "top5.csv").unlink()
    d = decided(folder)["figure3_ptb"]
    assert d.verdict == page.TOO_FEW and d.estimate.n == 0 and d.claim.rule.ours_text(d.estimate) == "—"
    older = copy_of(paper_dir, tmp_path / "older")
    pd.read_csv(older / "top5.csv").drop(columns=["dataset", "variant", "schedule"]).to_csv(older / "top5.csv")
    assert decided(older)["figure3_ptb"].verdict == page.TOO_FEW


def test_a_models_context_counts_once(paper_dir, tmp_path):
    folder = copy_of(paper_dir, tmp_path / "study")
    frame = pd.read_csv(folder / "top5.csv")
    pd.concat([frame, frame.head(1)]).to_csv(folder / "top5.csv", index=False)
    with pytest.raises(SystemExit, match=r"top5\.csv: row \d+ repeats row 1 \(model GSS, group Ours, number 1\)"):
        main(["claims", "--summary-dir", str(folder), "--out", str(tmp_path / "claims")])


def test_a_plug_ins_top5_model_enters_no_claim_about_the_papers_layers(paper_dir, tmp_path):
    """A plug-in model alone right where every paper layer is wrong (the authors' #2) changes nothing."""
    folder = copy_of(paper_dir, tmp_path / "study")
    frame = pd.read_csv(folder / "top5.csv")
    new = frame[frame["model"] == "SS"].assign(model="Toy", variant="toy_layer", hit=1)
    pd.concat([frame, new]).to_csv(folder / "top5.csv", index=False)
    assert decided(folder)["figure3_ptb"].estimate == decided(paper_dir)["figure3_ptb"].estimate


def test_the_rule_counts_only_contexts_with_both_kinds_of_layer():
    rule = EveryContext(("Softmax",), ("SS",))
    fine = Contexts(("a", "b", "c"), (True, False, True), (True, False, True))
    assert rule.estimate(fine).value == 0 and rule.judge(rule.estimate(fine), None) == CONSISTENT
    alone = Contexts(("a", "b"), (True, True), (False, True))
    assert rule.estimate(alone).failed == ("a",) and rule.judge(rule.estimate(alone), None) == NOT_CONSISTENT
    assert math.isnan(rule.estimate(Contexts((), (), ())).value)


def test_figure3_is_undecided_where_no_high_rank_layer_hits_anywhere(paper_dir, tmp_path):
    """Before, models that never had the true token in a high-rank layer's top 5 read "consistent" (18 of 18 contexts
    held, none could fail: the small scale's tiny models hit in 1 of 18). Now undecided, saying why."""
    rule = EveryContext(("Softmax",), ("SS",))
    nothing = rule.estimate(Contexts(("a", "b"), (False, False), (True, False)))
    assert nothing.value == 0 and nothing.tested == 0 and rule.judge(nothing, None) == UNDECIDED
    assert rule.ours_text(nothing) == "no high-rank layer hits in any of 2 contexts: nothing to check"
    one = rule.estimate(Contexts(("a", "b"), (True, False), (True, False)))
    assert (
        rule.judge(one, None) == CONSISTENT
        and rule.ours_text(one) == "holds in 2 of 2 contexts (1 with a high-rank hit)"
    )
    folder = copy_of(paper_dir, tmp_path / "study")  # the whole page: every high-rank model misses everywhere
    frame = pd.read_csv(folder / "top5.csv")
    frame.loc[frame["variant"].isin(HIGH_RANK), "hit"] = 0
    frame.to_csv(folder / "top5.csv", index=False)
    assert decided(folder)["figure3_ptb"].verdict == UNDECIDED


# --------------------------------------------------------------------------------------------- plug-in layers
@pytest.fixture
def toy_layer(monkeypatch):
    """A layer registered outside the package (this test module), dropped afterwards."""
    from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    cls = type("ToyLayer", (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
    register_output_layer("toy_layer", display="Toy", family="softmax")(cls)
    return "toy_layer"


def add_runs(folder: Path, variant: str, shifts: dict[str, float], rank: float = 3000.0, sd: float = 0.12) -> None:
    """The layer's runs in main.csv, as Softmax's (its family's sizes and seeds; the layer adds no parameter) with 10
    random seeds at Softmax's mean test perplexity plus ``shifts[dataset]`` and ranks about ``rank``, and its runs in
    the other summaries the claims about the paper's layers read (as SS's)."""
    frame = pd.read_csv(folder / "main.csv")
    rng = np.random.default_rng(5)
    parts = [frame]
    for ds, shift in shifts.items():
        runs = frame[(frame["dataset"] == ds) & (frame["variant"] == "softmax")]
        runs = runs.sort_values("seed_kind")  # the authors' seed, then the random ones
        mean = runs.loc[runs["seed_kind"] == "random", "test_ppl"].mean() + shift
        test = [mean, *_exact(mean, sd, len(runs) - 1, rng)]
        parts.append(runs.assign(variant=variant, test_ppl=test, press_rank=_exact(rank, 200, len(runs), rng).round()))
    pd.concat(parts).to_csv(folder / "main.csv", index=False)
    for file in ("ntet.csv", "wordsim.csv"):
        frame = pd.read_csv(folder / file)
        pd.concat([frame, frame[frame["variant"] == "ss"].assign(variant=variant)]).to_csv(folder / file, index=False)


def test_a_plug_in_layer_gets_its_own_rows_and_every_paper_row_stays(paper_dir, tmp_path, toy_layer):
    """Toy 0.5 below Softmax on PTB (consistent), 1 above on WT2 (not consistent), its rank far above (consistent):
    its own rows, after the paper's, the project's statements with no paper value; the paper's rows as without it."""
    folder = copy_of(paper_dir, tmp_path / "study")
    add_runs(folder, toy_layer, {"ptb": -0.5, "wt2": 1.0})
    before, after = decided(paper_dir), decided(folder)
    assert list(after)[: len(before)] == list(before)
    for name, d in before.items():
        ours = after[name]
        assert (ours.verdict, ours.estimate, ours.power_text, ours.paper) == (
            d.verdict,
            d.estimate,
            d.power_text,
            d.paper,
        )
    rows = {name: d for name, d in after.items() if name not in before}
    assert {name: d.verdict for name, d in rows.items()} == {
        "plugin_toy_layer_ppl_ptb": CONSISTENT,
        "plugin_toy_layer_rank_ptb": CONSISTENT,
        "plugin_toy_layer_ppl_wt2": NOT_CONSISTENT,
        "plugin_toy_layer_rank_wt2": CONSISTENT,
    }
    ppl = rows["plugin_toy_layer_ppl_ptb"]
    assert ppl.estimate.n == 10 and ppl.estimate.value == pytest.approx(-0.5) and ppl.comparable
    assert ppl.power_text.startswith("power ") and rows["plugin_toy_layer_rank_ptb"].estimate.n == 11
    table = page.write(list(after.values()), tmp_path / "page" / "claims").set_index("claim")
    shown = table.loc[list(rows)]
    assert shown["project"].all() and shown["paper_value"].isna().all() and (shown["paper"] == "—").all()
    assert not table.loc[list(before), "project"].any()
    markdown = (tmp_path / "page" / "claims.md").read_text()
    assert "PTB: Toy reaches a significantly lower test perplexity than Softmax" in markdown
    rows_shown = [line for line in markdown.splitlines() if line.startswith("| plugin_")]
    assert len(rows_shown) == 4 and all("the project's statement" in line for line in rows_shown)


def test_a_plug_in_only_on_one_dataset_has_rows_only_there(paper_dir, tmp_path, toy_layer):
    folder = copy_of(paper_dir, tmp_path / "study")
    add_runs(folder, toy_layer, {"wt2": 0.0})
    rows = [name for name in decided(folder) if name.startswith("plugin_")]
    assert rows == ["plugin_toy_layer_ppl_wt2", "plugin_toy_layer_rank_wt2"]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (Sample(56.5, 0.1, 10), Sample(57.0, 0.1, 10), CONSISTENT),  # lower
        (Sample(58.0, 0.1, 10), Sample(57.0, 0.1, 10), NOT_CONSISTENT),  # significantly higher
        (Sample(57.0, 0.05, 200), Sample(57.0, 0.05, 200), NOT_CONSISTENT),  # a tie: inside the margin
        (Sample(56.5, 2.0, 5), Sample(57.0, 2.0, 5), UNDECIDED),  # five noisy seeds
    ],
)
def test_the_perplexity_row_can_fail_both_ways(a, b, expected):
    rule = RULES["test_ppl"]
    estimate = rule.estimate(Groups(a, b))
    assert rule.verdict(estimate, page.Paper(math.nan, Groups(a, b))) == expected


def test_the_rank_row_decides_constant_ranks_exactly():
    """Ranks at Softmax's bound on every seed: the same rank (not consistent), no "undefined"; one above it on every
    seed: higher."""
    rule, softmax = RULES["press_rank"], Sample(402, 0.0, 10)
    for plugin, expected in ((Sample(402, 0.0, 10), NOT_CONSISTENT), (Sample(410, 0.0, 10), CONSISTENT)):
        paper = page.Paper(math.nan, Groups(plugin, softmax))
        assert page.verdict(_claim_of(rule), rule.estimate(paper.evidence), paper, True) == expected
        assert rule.power_text(10, paper, "seeds per model") == "exact: no spread over the seeds"
    noisy = page.Paper(math.nan, Groups(Sample(2000, 300, 10), Sample(402, 0, 10)))
    assert rule.power(10, noisy) > 0.95  # a rank twice Softmax's, detected at this spread
    assert RULES["test_ppl"].paper_effect(noisy)[0] == -MARGIN


def _claim_of(rule):
    from types import SimpleNamespace

    return SimpleNamespace(rule=rule, min_n=5)


def test_a_hostile_plug_in_name_is_escaped_on_every_page(paper_dir, tmp_path):
    """A layer name is the user's: ``<script>|x`` (no longer registered) gets its rows, shown as text everywhere."""
    folder = copy_of(paper_dir, tmp_path / "study")
    add_runs(folder, "<script>|x", {"ptb": -0.5})
    decisions = page.decide_all(folder)
    assert [d.claim.name for d in decisions if d.claim.project] == [
        "plugin_<script>|x_ppl_ptb",
        "plugin_<script>|x_rank_ptb",
    ]
    prefix = tmp_path / "page" / "claims"
    assert main(["claims", "--summary-dir", str(folder), "--out", str(prefix)]) == 0
    html = Path(f"{prefix}.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;|x" in html
    markdown = Path(f"{prefix}.md").read_text()
    assert "<script>" not in markdown and "\\<script\\>\\|x" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| id"))
    hostile = [line for line in markdown.splitlines() if "\\<script" in line]
    assert len(hostile) == 2
    for line in hostile:
        assert line.replace("\\|", "").count("|") == header.count("|")  # the name ends no cell
    tex = Path(f"{prefix}.tex").read_text()
    assert "<script>|x" not in tex and tex.isascii()
    csv = pd.read_csv(f"{prefix}.csv")
    assert "plugin_<script>|x_ppl_ptb" in set(csv["claim"])  # the tidy table keeps the name as it is
