"""The claims page (softmax_bottleneck.report.claims): the paper's conclusions decided by their stated rules.

* the paper's own numbers, fed through the claims code (directly, and as summaries of a paper-scale study whose
  statistics are the paper's), give "consistent" for every claim; the published p-values come back from
  ``ttest_ind_from_stats``;
* summaries built to contradict each claim give "not consistent" for it; too few runs give "too few runs"; runs
  without the paper's model size or epochs give "not comparable at this scale";
* a layer that is not the paper's enters the claims about any output layer, never one about a named model; the page
  escapes what a layer's name can hold; the preview counts each claim's runs in of those planned;
* the seeds table answers "how many seeds for claim X" from the paper's spreads before anything runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from softmax_bottleneck import presets
from softmax_bottleneck.analysis import power
from softmax_bottleneck.cli import main
from softmax_bottleneck.report import claims, reported
from softmax_bottleneck.report.claims import catalog, page, rules
from softmax_bottleneck.report.claims.seeds import seeds_table
from softmax_bottleneck.report.summaries import RUN_COLUMNS, WORDSIM_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
AUTHORS_SEED = {("ptb", "softmax"): 141, ("ptb", "mixture"): 28, ("wt2", "softmax"): 1881, ("wt2", "mixture"): 1881}
RANDOM_SEEDS = list(range(1001, 1011))


# --------------------------------------------------------------------------------------------- a paper-scale study
def _exact(mean: float, sd: float, n: int, rng) -> np.ndarray:
    """``n`` values whose sample mean and SD are exactly ``mean`` and ``sd``."""
    if n == 1 or sd == 0:
        return np.full(n, float(mean))
    z = rng.standard_normal(n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def _run(experiment, dataset, variant, schedule, seed, seed_kind, test_ppl, rank, **swept) -> dict:
    """One run-summary row at the paper's scale: the #Param and epochs of its preset."""
    hp = presets.resolve(dataset, variant, schedule, swept)
    row = dict.fromkeys(RUN_COLUMNS, math.nan)
    row.update(
        experiment=experiment,
        dataset=dataset,
        variant=variant,
        schedule=schedule,
        seed=seed,
        seed_kind=seed_kind,
        parameters=presets.parameter_count(hp, presets.VOCAB_SIZES[dataset]),
        train_ppl=test_ppl - 20,
        valid_ppl=test_ppl + 2,
        test_ppl=round(float(test_ppl), 6),
        seconds_per_epoch=60.0,
        epochs_run=hp["epochs"],
        press_rank=max(1, round(float(rank))),
        **swept,
    )
    return row


def _seeds(dataset, variant, test, rank, experiment, schedule="et", n_random=10, rng=None):
    """The authors' seed (first ``test``/``rank`` value) and ``n_random`` random seeds (the rest)."""
    family = presets.family(variant) if variant not in ("mos_fair", "softmax_fair_large") else "mixture"
    seeds = [(AUTHORS_SEED[dataset, family], "authors")] + [(s, "random") for s in RANDOM_SEEDS[:n_random]]
    return [
        _run(experiment, dataset, variant, schedule, seed, kind, t, r)
        for (seed, kind), t, r in zip(seeds, test, rank, strict=True)
    ]


def paper_study(
    folder: Path,
    *,
    n_random: int = 10,
    grid_points: int | None = None,
    k_values: int | None = None,
    models: int | None = None,
    seed: int = 0,
) -> Path:
    """Summaries of a paper-scale study whose statistics are the paper's: per model, 10 random seeds with exactly
    SM Table 1's (Table 4's, Table 5's) mean and SD of test perplexity and, with the authors' seed, about Table 2's
    Press' ranks; the GSS grid = Figure 2's digitised points; the K sweep, NT/ET runs and word similarity = SM Tables
    4, 5, 10, 11 and 3. ``n_random``, ``grid_points``, ``k_values``, ``models``: fewer runs."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    main, sm1, t4, t3 = (reported.load(n) for n in ("main", "sm_table1", "table4", "table3"))
    rows = []
    for rec in main.to_dict("records"):
        ds, var = rec["dataset"], rec["variant"]
        if models is not None and var not in reported.paper_order("main")[:models]:
            continue
        random = sm1[(sm1["dataset"] == ds) & (sm1["variant"] == var)].iloc[0]
        test = [rec["test_ppl_mean"], *_exact(random["test_ppl_mean"], random["test_ppl_sd"], n_random, rng)]
        rank = _exact(rec["press_rank_mean"], rec["press_rank_sd"], n_random + 1, rng)
        rows += _seeds(ds, var, test, rank, "main", n_random=n_random)
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "main.csv", index=False)
    rows = []
    for rec in t4.to_dict("records"):
        ds = rec["dataset"]
        authors = t3.loc[t3["dataset"] == ds, "test_ppl_mean"].iloc[0]
        test = [
            authors,
            *_exact(rec["lms_plif_frozen_test_ppl_mean"], rec["lms_plif_frozen_test_ppl_sd"], n_random, rng),
        ]
        rows += _seeds(ds, "lms_plif_frozen", test, [500] * (n_random + 1), "frozen", n_random=n_random)
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "frozen.csv", index=False)
    ntet = reported.load("ntet")
    keep = reported.paper_order("ntet")[:models] if models is not None else reported.paper_order("ntet")
    rows = [
        _run(
            "ntet",
            r["dataset"],
            r["variant"],
            r["schedule"],
            AUTHORS_SEED[r["dataset"], presets.family(r["variant"])],
            "authors",
            r["test_ppl"],
            r["press_rank"],
        )
        for r in ntet.to_dict("records")
        if r["variant"] in keep
    ]
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "ntet.csv", index=False)
    rows = []
    points = reported.load("figure2_points")
    for ds in ("ptb", "wt2"):
        pts = points[points["dataset"] == ds].head(grid_points)
        grid = [(c / 2, k / 4) for c in range(-4, 5) for k in range(5, 13)]  # distinct (c, k), as the paper's PTB grid
        rows += [
            _run(
                "gss_grid",
                ds,
                "gss",
                "et",
                AUTHORS_SEED[ds, "softmax"],
                "authors",
                p["test_ppl"],
                p["press_rank"],
                gss_c=c,
                gss_k=k,
            )
            for p, (c, k) in zip(pts.to_dict("records"), grid, strict=False)
        ]
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "gss_grid.csv", index=False)
    mos_k = reported.load("mos_k")
    rows = [
        _run(
            "mos_k",
            r["dataset"],
            "mos",
            "nt",
            AUTHORS_SEED[r["dataset"], "mixture"],
            "authors",
            r["test_ppl"],
            r["press_rank"],
            n_experts=int(r["n_experts"]),
        )
        for ds in ("ptb", "wt2")
        for r in mos_k[mos_k["dataset"] == ds].tail(k_values or len(mos_k)).to_dict("records")
    ]
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "mos_k.csv", index=False)
    t5 = reported.load("table5")
    rows = []
    for rec in t5.to_dict("records"):
        test = [rec["test_ppl_mean"], *_exact(rec["test_ppl_mean"], rec["test_ppl_sd"], n_random, rng)]
        rows += _seeds("ptb", rec["variant"], test, [300] * (n_random + 1), "fair", n_random=n_random)[1:]
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "fair.csv", index=False)
    ws = reported.load("wordsim").merge(reported.load("wordsim_coverage"), on=["dataset", "benchmark"])
    ws = ws[ws["variant"].isin(keep)]
    ws = ws.assign(found=ws["pairs"] - ws["not_found"], layer_source="", older_source=None)
    ws[WORDSIM_COLUMNS].to_csv(folder / "wordsim.csv", index=False)
    return folder


def verdicts(summary_dir: Path, names=None) -> dict[str, str]:
    return {d.claim.name: d.verdict for d in page.decide_all(summary_dir, names)}


@pytest.fixture(scope="module")
def paper_dir(tmp_path_factory) -> Path:
    return paper_study(tmp_path_factory.mktemp("paper-study"))


# --------------------------------------------------------------------------------------------- the paper agrees
def test_the_papers_numbers_are_consistent_with_every_claim():
    decisions = page.decide_paper()
    assert {d.claim.name for d in decisions} == set(claims.CLAIMS)
    assert {d.claim.name: d.verdict for d in decisions} == dict.fromkeys(claims.CLAIMS, page.CONSISTENT)


def test_a_paper_scale_study_with_the_papers_statistics_is_consistent_everywhere(paper_dir):
    """The same, through the summaries: the strict readers, the basis rows, the scale check and the rules."""
    decisions = page.decide_all(paper_dir)
    assert all(d.comparable for d in decisions)
    assert {d.claim.name: d.verdict for d in decisions} == dict.fromkeys(claims.CLAIMS, page.CONSISTENT)
    by_name = {d.claim.name: d for d in decisions}
    # the t-tests see the paper's 10 random seeds, the grid the paper's digitised points
    assert by_name["table2_mos_ptb"].estimate.n == 10 and by_name["figure2_all_ptb"].estimate.n == 70
    assert by_name["table4_ptb"].estimate.p == pytest.approx(0.826, abs=5e-4)


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def test_the_published_p_values_come_back_from_the_papers_means_and_sds():
    """Where the paper prints only means and SDs, ``ttest_ind_from_stats`` (n = 10) gives back every printed p; the
    text's p = 0.62 of Table 5 is the one that does not follow from its table (0.39), and the page says so."""
    t_claims = [c for c in claims.CLAIMS.values() if isinstance(c.rule, rules.SameSideOfAlpha) and not c.rule.paired]
    assert len(t_claims) == 11
    for claim in t_claims:
        paper = claim.paper()
        computed = claim.rule.estimate(paper.evidence).p
        if claim.name == "table5_ptb":
            assert paper.value == 0.62 and _sig3(computed) == 0.389 and "0.39" in claim.rule.paper_text(paper)
        else:
            assert _sig3(computed) == paper.value, claim.name


# --------------------------------------------------------------------------------------------- contradictions
def _edit(folder: Path, file: str, where: dict, **columns) -> None:
    frame = pd.read_csv(folder / file)
    rows = pd.Series(True, index=frame.index)
    for key, value in where.items():
        rows &= frame[key].isin(value if isinstance(value, list | tuple) else [value])
    assert rows.any(), (file, where)
    for column, value in columns.items():
        frame.loc[rows, column] = value(frame.loc[rows]) if callable(value) else value
    frame.to_csv(folder / file, index=False)


def _contradict(claim: catalog.Claim, folder: Path) -> None:
    """Edit the paper-scale study so that it contradicts ``claim`` (and only what the claim reads)."""
    ds, name = claim.dataset, claim.name
    if name.startswith("figure2"):  # rank rising steeply with perplexity: r near +1
        _edit(folder, "gss_grid.csv", {"dataset": ds}, press_rank=lambda f: (100 * f["test_ppl"]).round() - 5000)
    elif name.startswith("lms_plif_rank"):  # LMS-PLIF as high as SS
        _edit(folder, "main.csv", {"dataset": ds, "variant": "lms_plif"}, press_rank=lambda f: f["press_rank"] + 9000)
    elif name.startswith("table2_"):  # the paper's side of 0.05 turned: a gap where it had none, none where it had one
        variant = claim.basis[0].variants[0]
        significant = claim.paper().value < rules.ALPHA
        shift = 0.0 if significant else -1.0
        softmax = pd.read_csv(folder / "main.csv").query("dataset == @ds and variant == 'softmax'")["test_ppl"]
        _edit(
            folder,
            "main.csv",
            {"dataset": ds, "variant": variant},
            test_ppl=lambda f: f["test_ppl"] - f["test_ppl"].mean() + softmax.mean() + shift,
        )
    elif name.startswith("table4"):  # the frozen slopes clearly worse
        _edit(folder, "frozen.csv", {"dataset": ds}, test_ppl=lambda f: f["test_ppl"] + 1.0)
    elif name.startswith("table5"):  # MoS† clearly better
        _edit(folder, "fair.csv", {"variant": "mos_fair"}, test_ppl=lambda f: f["test_ppl"] - 1.0)
    elif name.startswith("mos_k_rank"):  # rank falling with K
        _edit(folder, "mos_k.csv", {"dataset": ds}, press_rank=lambda f: 9999 - 400 * f["n_experts"])
    elif name.startswith("mos_k_ppl"):  # a large gain at the last K
        last = pd.read_csv(folder / "mos_k.csv").query("dataset == @ds")["n_experts"].max()
        _edit(folder, "mos_k.csv", {"dataset": ds, "n_experts": last}, test_ppl=lambda f: f["test_ppl"] - 3.0)
    elif name.startswith("wordsim"):  # word similarity rising with the rank
        ranks = pd.read_csv(folder / "ntet.csv").query("dataset == @ds and schedule == 'et'").set_index("variant")
        top = ranks["press_rank"].max()
        _edit(
            folder,
            "wordsim.csv",
            {"dataset": ds},
            spearman=lambda f: 0.1 + 0.5 * f["variant"].map(ranks["press_rank"]) / top,
        )
    elif name.startswith("rank_ppl"):  # perplexity falling steeply with the rank
        _edit(folder, "main.csv", {"dataset": ds}, test_ppl=lambda f: 80 - f["press_rank"] / 1000 + f["test_ppl"] / 100)
    elif name.startswith("ntet"):  # NT-ASGD better than ET-ASGD
        _edit(folder, "ntet.csv", {"dataset": ds, "schedule": "nt"}, test_ppl=lambda f: f["test_ppl"] - 2.0)
    else:
        raise AssertionError(f"no contradiction for {name}")


@pytest.mark.parametrize("name", list(claims.CLAIMS))
def test_a_study_built_to_contradict_a_claim_is_not_consistent_with_it(paper_dir, tmp_path, name):
    folder = tmp_path / "study"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    _contradict(claims.CLAIMS[name], folder)
    assert verdicts(folder, {name}) == {name: page.NOT_CONSISTENT}


def test_too_few_runs(tmp_path):
    """Every claim below its minimum: 4 seeds per model, 9 grid points, 2 values of K, 3 output layers."""
    folder = paper_study(tmp_path, n_random=3, grid_points=9, k_values=2, models=3)
    found = verdicts(folder)
    assert found == dict.fromkeys(claims.CLAIMS, page.TOO_FEW), {k: v for k, v in found.items() if v != page.TOO_FEW}


def test_runs_without_the_papers_size_or_epochs_are_not_comparable(paper_dir, tmp_path):
    """A study whose runs are smaller (or shorter) than the paper's: every verdict says so, the numbers stay."""
    for change in ({"parameters": lambda f: f["parameters"] // 100}, {"epochs_run": 6}):
        folder = tmp_path / next(iter(change))
        folder.mkdir()
        for file in paper_dir.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
            if file.name != "wordsim.csv":
                _edit(folder, file.name, {}, **change)
        decisions = page.decide_all(folder)
        assert {d.verdict for d in decisions} == {page.NOT_COMPARABLE}
        assert all(not math.isnan(d.estimate.value) for d in decisions)
        assert sum(d.claim.name.startswith("table2") and d.estimate.p < 0.05 for d in decisions) == 6


# --------------------------------------------------------------------------------------------- output layers
def test_a_layer_that_is_not_the_papers_enters_only_the_claims_about_any_layer(paper_dir, tmp_path):
    """A new layer's runs (named with characters a page must escape) join the correlations across layers and the
    schedules' comparison, and no claim about one of the paper's models; its name is escaped on the page."""
    folder = tmp_path / "study"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    layer = "<b>my|layer</b>"
    for file in ("main.csv", "ntet.csv"):
        frame = pd.read_csv(folder / file)
        new = frame[(frame["variant"] == "ss")].assign(variant=layer)
        pd.concat([frame, new]).to_csv(folder / file, index=False)
    ws = pd.read_csv(folder / "wordsim.csv")
    pd.concat([ws, ws[ws["variant"] == "ss"].assign(variant=layer)]).to_csv(folder / "wordsim.csv", index=False)
    decisions = {d.claim.name: d for d in page.decide_all(folder)}
    for name, d in decisions.items():
        names = getattr(d.evidence, "names", ())
        assert (layer in names) == d.claim.any_layer, name
        if not d.claim.any_layer:  # named claims read exactly the paper's rows: same verdict as without the layer
            assert d.verdict == page.CONSISTENT, name
    assert {n for n, d in decisions.items() if d.claim.any_layer} == {
        f"{kind}_{ds}" for kind in ("wordsim", "rank_ppl", "ntet") for ds in ("ptb", "wt2")
    }
    out = tmp_path / "page" / "claims"
    page.write(list(decisions.values()), out)
    html = (out.parent / "claims.html").read_text()
    assert layer not in html and "&lt;b&gt;my|layer&lt;/b&gt;" in html
    markdown = (out.parent / "claims.md").read_text()
    assert "<b>my\\|layer</b>" in markdown and "my|layer" not in markdown


# --------------------------------------------------------------------------------------------- the page
def test_the_cli_writes_the_page_in_four_formats(paper_dir, tmp_path):
    prefix = tmp_path / "reports" / "claims"
    assert main(["claims", "--summary-dir", str(paper_dir), "--out", str(prefix), "--banner", "a mark"]) == 0
    table = pd.read_csv(f"{prefix}.csv")
    assert list(table["claim"]) == list(claims.CLAIMS) and set(table["verdict"]) == {page.CONSISTENT}
    markdown = Path(f"{prefix}.md").read_text()
    assert markdown.startswith("**a mark**") and f"{len(claims.CLAIMS)} consistent" in markdown
    for rule in {c.rule.name for c in claims.CLAIMS.values()}:  # the rules under the table, each once
        assert markdown.count(f"* **{rule}**") == 1, rule
    html = Path(f"{prefix}.html").read_text()
    assert html.count("<tr") == len(claims.CLAIMS) + 1 and "Rules" in html
    tex = Path(f"{prefix}.tex").read_text()
    assert "\\label{tab:claims}" in tex and "\\begin{itemize}" in tex
    assert tex.isascii(), sorted({ch for ch in tex if not ch.isascii()})  # every symbol spelled in LaTeX


def test_the_cli_checks_the_paper_against_itself(tmp_path):
    """``claims --paper`` (docs/claims.md's command): the page of the paper's own numbers, every claim consistent,
    said on top."""
    prefix = tmp_path / "reports" / "claims-paper"
    assert main(["claims", "--paper", "--out", str(prefix)]) == 0
    assert set(pd.read_csv(f"{prefix}.csv")["verdict"]) == {page.CONSISTENT}
    assert Path(f"{prefix}.md").read_text().startswith("**the paper's own numbers as input")


def test_a_broken_summary_is_one_line_naming_the_file(paper_dir, tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    _edit(folder, "fair.csv", {"variant": "mos_fair"}, test_ppl=0.5)  # a perplexity below 1
    with pytest.raises(SystemExit, match=r"claims: .*fair\.csv: column test_ppl"):
        main(["claims", "--summary-dir", str(folder), "--out", str(tmp_path / "claims")])


def test_the_preview_counts_each_claims_runs_in_of_those_planned(paper_dir, tmp_path):
    """n of N per claim from the preview's planned inputs (half of main.csv's runs in), stamped provisional."""
    main_runs = pd.read_csv(paper_dir / "main.csv")
    planned = [
        SimpleNamespace(record={"experiment": "main", **row}, keys={})
        for row in main_runs[["dataset", "variant", "schedule", "seed", "seed_kind"]].to_dict("records")
    ]
    present = [i % 2 == 0 for i in range(len(planned))]
    found = {"main.csv": ("runs", planned, present)}
    prefix = tmp_path / "preview" / "claims"
    assert claims.render_preview(paper_dir, prefix, found, "2026-01-02 03:04", "small scale") == "rendered"
    table = pd.read_csv(f"{prefix}.csv").set_index("claim")
    # SS against Softmax reads the 10 random seeds of each: 20 planned, every other one in
    assert table.loc["table2_ss_ptb", "runs in"] == "10 of 20"
    assert table.loc["rank_ppl_ptb", "runs in"] == "28 of 55"  # every layer's runs of main.csv on PTB
    assert table.loc["ntet_ptb", "runs in"] == "0 of 0"  # ntet.csv is not in this preview's plan
    # on top: the distinct runs the claims read (every run of main.csv), each counted once
    assert Path(f"{prefix}.md").read_text().startswith("**PROVISIONAL, 2026-01-02 03:04: 55 of 110 runs in — small")


# --------------------------------------------------------------------------------------------- seeds
def test_seeds_from_our_runs_use_our_spread(paper_dir, tmp_path):
    """At the paper's scale our spread is used (here equal to the paper's by construction); below it, the paper's."""
    ours = seeds_table(page.decide_all(paper_dir)).set_index("id")
    s = math.sqrt((0.11**2 + 0.09**2) / 2)
    assert ours.loc["table4_ptb", "spread"] == f"s = {s:.3g} (ours)"
    assert ours.loc["ntet_ptb", "spread"].endswith("(ours)") and ours.loc["ntet_ptb", "n"] == "6 models"
    folder = tmp_path / "small"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    _edit(folder, "main.csv", {}, parameters=1000)
    small = seeds_table(page.decide_all(folder)).set_index("id")
    assert small.loc["table2_ss_ptb", "spread"].endswith("(the paper's)")
    assert small.loc["table4_ptb", "spread"] == f"s = {s:.3g} (the paper's)"


def test_seeds_before_anything_runs(capsys):
    """``claims --seeds`` with no summaries (docs/claims.md's commands): per claim on a test, from the paper's spreads,
    the smallest effect its n detects and the n the paper's effect needs (noncentral t; Fisher's z)."""
    table = seeds_table(page.decide_paper(), ours=False).set_index("id")
    assert main(["claims", "--seeds"]) == 0
    out = capsys.readouterr().out
    assert [line.split("|")[1].strip() for line in out.splitlines()[4:]] == list(table.index)  # one row per claim
    assert main(["claims", "--seeds", "--claim", "table4_ptb", "--claim", "figure2_all_ptb"]) == 0
    out = capsys.readouterr().out
    assert "the paper's" in out and "table4_ptb" in out and "figure2_all_ptb" in out and "table4_wt2" not in out
    assert "lms_plif_rank_ptb" not in table.index  # a rule without a test has no row
    # LMS-PLIF against LMS-PLIF† (PTB): pooled s of 0.11 and 0.09, the paper's 0.01 ppl apart
    s = math.sqrt((0.11**2 + 0.09**2) / 2)
    assert table.loc["table4_ptb", "spread"] == f"s = {s:.3g} (the paper's)"
    assert table.loc["table4_ptb", "n for the paper's effect"] == f"{power.seeds_needed(0.01, s):,} seeds per model"
    assert power.t_power(0.01, s, power.seeds_needed(0.01, s)) >= 0.8 > power.t_power(0.01, s, 10)
    assert table.loc["figure2_all_ptb", "n for the paper's effect"] == f"{power.points_needed(0.48)} grid points"


def test_power_matches_the_textbook_values():
    """Cohen's d = 1 needs 17 seeds per model (power 0.807); r = 0.3 needs 85 points; at n = 10 and s = 1 the
    smallest detectable difference is 1.32 (the inverse of the power function)."""
    assert power.seeds_needed(1.0, 1.0) == 17 and power.t_power(1.0, 1.0, 17) == pytest.approx(0.807, abs=1e-3)
    assert power.points_needed(0.3) == 85
    smallest = power.detectable_difference(1.0, 10)
    assert power.t_power(smallest, 1.0, 10) == pytest.approx(0.8) and smallest == pytest.approx(1.325, abs=1e-3)
    assert math.isnan(power.detectable_difference(1.0, 1)) and power.seeds_needed(0.0, 1.0) is None


# --------------------------------------------------------------------------------------------- docs
def test_docs_state_every_claim_and_rule():
    text = (ROOT / "docs" / "claims.md").read_text()
    for claim in claims.CLAIMS.values():
        assert f"`{claim.name}`" in text, claim.name
    for rule in {c.rule.name for c in claims.CLAIMS.values()}:
        assert rule in text, rule
    for verdict in page.VERDICTS:
        assert verdict in text, verdict
    assert "reports/claims.md" in (ROOT / "README.md").read_text()
