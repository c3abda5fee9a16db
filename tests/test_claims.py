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
import yaml

from softmax_bottleneck import presets
from softmax_bottleneck.analysis import power
from softmax_bottleneck.cli import main
from softmax_bottleneck.report import claims, reported
from softmax_bottleneck.report.claims import catalog, differences, page
from softmax_bottleneck.report.claims.seeds import seeds_table
from softmax_bottleneck.report.summaries import RUN_COLUMNS, TOP5_COLUMNS, WORDSIM_COLUMNS, collect_top5

ROOT = Path(__file__).resolve().parents[1]
AUTHORS_SEED = {("ptb", "softmax"): 141, ("ptb", "mixture"): 28, ("wt2", "softmax"): 1881, ("wt2", "mixture"): 1881}
RANDOM_SEEDS = list(range(1001, 1011))
DS = ("ptb", "wt2")


# --------------------------------------------------------------------------------------------- a paper-scale study
def _exact(mean: float, sd: float, n: int, rng) -> np.ndarray:
    """``n`` values whose sample mean and SD are exactly ``mean`` and ``sd``."""
    if n == 1 or sd == 0:
        return np.full(n, float(mean))
    z = rng.standard_normal(n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def _run(experiment, dataset, variant, schedule, seed, seed_kind, test_ppl, rank, train=None, erank=None, **swept):
    """One run-summary row at the paper's scale: the #Param and epochs of its preset (``train``: its training
    perplexity, else 20 below the test's; ``erank``: its ε-effective rank at 10⁻³)."""
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
        train_ppl=test_ppl - 20 if train is None else round(float(train), 6),
        valid_ppl=test_ppl + 2,
        test_ppl=round(float(test_ppl), 6),
        seconds_per_epoch=60.0,
        epochs_run=hp["epochs"],
        press_rank=max(1, round(float(rank))),
        **({"erank_1e-3": erank} if erank is not None else {}),
        **swept,
    )
    return row


def _seeds(dataset, variant, test, rank, experiment, schedule="et", n_random=10, train=None, erank=None):
    """The authors' seed (first ``test``/``rank``/``train`` value) and ``n_random`` random seeds (the rest)."""
    family = presets.family(variant) if variant not in ("mos_fair", "softmax_fair_large") else "mixture"
    seeds = [(AUTHORS_SEED[dataset, family], "authors")] + [(s, "random") for s in RANDOM_SEEDS[:n_random]]
    train = [None] * len(seeds) if train is None else train
    return [
        _run(experiment, dataset, variant, schedule, seed, kind, t, r, train=tr, erank=erank)
        for (seed, kind), t, r, tr in zip(seeds, test, rank, train, strict=True)
    ]


def paper_study(
    folder: Path,
    *,
    n_random: int = 10,
    grid_points: int | None = None,
    k_values: int | None = None,
    models: int | None = None,
    contexts: int | None = None,
    seed: int = 0,
) -> Path:
    """Summaries of a paper-scale study whose statistics are the paper's: per model, 10 random seeds with exactly
    SM Table 1's (Table 4's, Table 5's) mean and SD of test perplexity and, with the authors' seed, about Table 2's
    Press' ranks; the GSS grid = Figure 2's digitised points; the K sweep, NT/ET runs and word similarity = SM Tables
    4, 5, 10, 11, 12 and 3, Table 6's ε-effective ranks; every seed's training perplexity exactly Table 2's (3's)
    mean and SD; the top-5 predictions = SM Table 2's, summarised by the workflow's writer for the default
    configuration's models. ``n_random``, ``grid_points``, ``k_values`` (also the dropout values), ``models``,
    ``contexts`` (per model): fewer runs."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    main, sm1, t4, t3 = (reported.load(n) for n in ("main", "sm_table1", "table4", "table3"))
    t6 = reported.load("table6").set_index(["dataset", "variant"])
    rows = []
    for rec in main.to_dict("records"):
        ds, var = rec["dataset"], rec["variant"]
        if models is not None and var not in reported.paper_order("main")[:models]:
            continue
        random = sm1[(sm1["dataset"] == ds) & (sm1["variant"] == var)].iloc[0]
        test = [rec["test_ppl_mean"], *_exact(random["test_ppl_mean"], random["test_ppl_sd"], n_random, rng)]
        rank = _exact(rec["press_rank_mean"], rec["press_rank_sd"], n_random + 1, rng)
        train = _exact(rec["train_ppl_mean"], rec["train_ppl_sd"], n_random + 1, rng)
        erank = float(t6.loc[(ds, var), "erank_1e-3"])
        rows += _seeds(ds, var, test, rank, "main", n_random=n_random, train=train, erank=erank)
    pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / "main.csv", index=False)
    rows = []
    for rec in t4.to_dict("records"):
        ds = rec["dataset"]
        frozen = t3[t3["dataset"] == ds].iloc[0]
        test = [
            frozen["test_ppl_mean"],
            *_exact(rec["lms_plif_frozen_test_ppl_mean"], rec["lms_plif_frozen_test_ppl_sd"], n_random, rng),
        ]
        train = _exact(frozen["train_ppl_mean"], frozen["train_ppl_sd"], n_random + 1, rng)
        rows += _seeds(ds, "lms_plif_frozen", test, [500] * (n_random + 1), "frozen", n_random=n_random, train=train)
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
    for sweep, swept in (("mos_k", ("n_experts",)), ("mos_dropoutl", ("n_experts", "dropoutl"))):  # NT-ASGD MoS
        table = reported.load(sweep)
        rows = [
            _run(
                sweep,
                r["dataset"],
                "mos",
                "nt",
                AUTHORS_SEED[r["dataset"], "mixture"],
                "authors",
                r["test_ppl"],
                r["press_rank"],
                train=r["train_ppl"],
                **{key: (int if key == "n_experts" else float)(r[key]) for key in swept},
            )
            for ds in ("ptb", "wt2")
            for r in table[table["dataset"] == ds].tail(k_values or len(table)).to_dict("records")
        ]
        pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(folder / f"{sweep}.csv", index=False)
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
    top5(folder, keep, contexts)
    return folder


def top5(folder: Path, keep, contexts: int | None = None, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """``top5.csv`` as ``summarize --kind top5`` writes it: SM Table 2's predictions (or ``rows``, with its columns)
    of the default configuration's top-5 models whose variant is in ``keep`` (the first ``contexts`` of each)."""
    models = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["analysis"]["top5"]["models"]
    rows = reported.load("sm_table2") if rows is None else rows
    records = []
    for name, model in models.items():
        if model["variant"] not in keep or not (rows["model"] == name).any():
            continue
        csv = folder / f"top5-{len(records)}.csv"
        own = rows[rows["model"] == name].head(contexts).drop(columns="model")
        own.reindex(columns=[c for c in TOP5_COLUMNS if c in own.columns]).to_csv(csv, index=False)
        records.append({"model": name, "dataset": "ptb", **model, "csv": str(csv)})
    frame = collect_top5(records)
    for record in records:
        Path(record["csv"]).unlink()
    frame.to_csv(folder / "top5.csv", index=False)
    return frame


def verdicts(summary_dir: Path, names=None) -> dict[str, str]:
    return {d.claim.name: d.verdict for d in page.decide_all(summary_dir, names)}


@pytest.fixture(scope="module")
def paper_dir(tmp_path_factory) -> Path:
    return paper_study(tmp_path_factory.mktemp("paper-study"))


# --------------------------------------------------------------------------------------------- the paper agrees
#: the claims the paper's own numbers cannot decide (docs/claims.md says why for each)
UNDECIDED_ON_THE_PAPER = {
    "figure2_window_wt2",  # 26 points: the interval [−0.19, +0.55] reaches past ±0.5
    "table4_wt2",  # Δ = −0.15 at 10 seeds: the 90 % interval reaches −0.28, past the margin
    "wordsim_ptb",  # 6 layers detect r = 0.5 with power 0.24
    "wordsim_wt2",
    "rank_ppl_ptb",  # 5 layers: power 0.19
    "rank_ppl_wt2",
}


def _expected_on_the_papers_numbers() -> dict[str, str]:
    return {name: page.UNDECIDED if name in UNDECIDED_ON_THE_PAPER else page.CONSISTENT for name in claims.CLAIMS}


def test_the_papers_numbers_are_consistent_with_every_claim_or_undecided_where_they_cannot_decide():
    decisions = page.decide_paper()
    assert {d.claim.name for d in decisions} == set(claims.CLAIMS)
    assert {d.claim.name: d.verdict for d in decisions} == _expected_on_the_papers_numbers()
    text = (ROOT / "docs" / "claims.md").read_text()
    section = text[text.index("## Undecided on the paper's own numbers") :]
    for name in UNDECIDED_ON_THE_PAPER:
        assert f"`{name}`" in section, name


def test_a_paper_scale_study_with_the_papers_statistics_is_consistent_everywhere(paper_dir):
    """The same, through the summaries: the strict readers, the basis rows, the scale check and the rules."""
    decisions = page.decide_all(paper_dir)
    assert all(d.comparable for d in decisions)
    assert {d.claim.name: d.verdict for d in decisions} == _expected_on_the_papers_numbers()
    by_name = {d.claim.name: d for d in decisions}
    # the t-tests see the paper's 10 random seeds, the grid the paper's digitised points
    assert by_name["table2_mos_ptb"].estimate.n == 10 and by_name["figure2_all_ptb"].estimate.n == 70
    assert by_name["table4_ptb"].estimate.p == pytest.approx(0.826, abs=5e-4)
    assert by_name["table3_train_ptb"].estimate.value == pytest.approx(37.16 - 33.91)
    assert by_name["table6_ptb"].estimate.value == pytest.approx(402 / 52)


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def test_the_published_p_values_come_back_from_sm_table_1s_and_table_4s_means_and_sds():
    """Where the paper prints only means and SDs, ``ttest_ind_from_stats`` (n = 10) on SM Table 1's and Table 4's
    gives back every printed p; the text's p = 0.62 of Table 5 is the one that does not follow from its table (0.39),
    and the page says so."""
    t_claims = [
        c
        for c in claims.CLAIMS.values()
        if isinstance(c.rule, differences.DifferenceRule) and not c.rule.paired and c.paper().printed
    ]
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
    elif name.startswith("table2_"):  # a gap the other way where the paper found one, a clear gap where it had none
        variant, other = claim.basis[0].variants[0], claim.basis[1].variants[0]  # noqa: F841 (read by the query)
        significant = isinstance(claim.rule, differences.Differs)
        shift = 1.0 if significant else -1.0
        runs = pd.read_csv(folder / "main.csv").query("dataset == @ds and variant == @other")["test_ppl"]
        _edit(
            folder,
            "main.csv",
            {"dataset": ds, "variant": variant},
            test_ppl=lambda f: f["test_ppl"] - f["test_ppl"].mean() + runs.mean() + shift,
        )
    elif name.startswith("table3_"):  # LMS-PLIF† training better than Softmax, testing worse
        column = "train_ppl" if "train" in name else "test_ppl"
        shift = -5.0 if "train" in name else 2.0
        _edit(folder, "frozen.csv", {"dataset": ds}, **{column: lambda f: f[column] + shift})
    elif name.startswith("table4"):  # the frozen slopes clearly worse
        _edit(folder, "frozen.csv", {"dataset": ds}, test_ppl=lambda f: f["test_ppl"] + 1.0)
    elif name.startswith("table5"):  # MoS† clearly better
        _edit(folder, "fair.csv", {"variant": "mos_fair"}, test_ppl=lambda f: f["test_ppl"] - 1.0)
    elif name.startswith("mos_k_rank_ppl"):  # perplexity rising with the rank over K
        _edit(folder, "mos_k.csv", {"dataset": ds}, test_ppl=lambda f: 50 + f["press_rank"] / 1000)
    elif name.startswith("mos_k_rank"):  # rank falling with K
        _edit(folder, "mos_k.csv", {"dataset": ds}, press_rank=lambda f: 9999 - 400 * f["n_experts"])
    elif name.startswith("mos_k_gap"):  # the gap narrowing as K grows
        _edit(folder, "mos_k.csv", {"dataset": ds}, train_ppl=lambda f: f["test_ppl"] - 30 + f["n_experts"])
    elif name.startswith("mos_dropout"):  # perplexity falling as the rank rises
        _edit(folder, "mos_dropoutl.csv", {"dataset": ds}, test_ppl=lambda f: 90 - f["press_rank"] / 1000)
    elif name.startswith("table6"):  # a slow decay: the effective rank half of Press' rank
        _edit(folder, "main.csv", {"dataset": ds}, **{"erank_1e-3": lambda f: f["press_rank"] // 2})
    elif name.startswith("wordsim_moc_mos"):  # MoS better than MoC on every benchmark
        moc = pd.read_csv(folder / "wordsim.csv").query("dataset == @ds and variant == 'moc'")
        _edit(
            folder,
            "wordsim.csv",
            {"dataset": ds, "variant": "mos"},
            spearman=lambda f: f["benchmark"].map(moc.set_index("benchmark")["spearman"]) + 0.05,
        )
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
    elif name.startswith("figure3"):  # a context only a high-rank layer gets right (none does in the authors' #2)
        _edit(folder, "top5.csv", {"model": "SS", "group": "Ours", "number": 2}, hit=1)
    elif name.startswith("ntet"):  # NT-ASGD better than ET-ASGD
        _edit(folder, "ntet.csv", {"dataset": ds, "schedule": "nt"}, test_ppl=lambda f: f["test_ppl"] - 2.0)
    else:
        raise AssertionError(f"no contradiction for {name}")


@pytest.mark.parametrize("name", list(claims.CLAIMS))
def test_a_study_built_to_contradict_a_claim_is_not_consistent_with_it(paper_dir, tmp_path, name):
    """Every claim can fail: the study is edited the other way (a gap where the paper found none, the other sign,
    a trend reversed, a slow decay, MoS ahead of MoC) and the claim's verdict is "not consistent"."""
    folder = tmp_path / "study"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    _contradict(claims.CLAIMS[name], folder)
    assert verdicts(folder, {name}) == {name: page.NOT_CONSISTENT}


def test_too_few_runs(tmp_path):
    """Every claim below its minimum: 4 seeds per model, 9 grid points, 2 values of K and of the dropout, 3 output
    layers (so neither MoS nor MoC: no benchmark to compare them on), 17 of Figure 3's contexts."""
    folder = paper_study(tmp_path, n_random=3, grid_points=9, k_values=2, models=3, contexts=17)
    found = verdicts(folder)
    assert found == dict.fromkeys(claims.CLAIMS, page.TOO_FEW), {k: v for k, v in found.items() if v != page.TOO_FEW}


def test_runs_without_the_papers_size_or_epochs_are_not_comparable(paper_dir, tmp_path):
    """A study whose runs are smaller (or shorter) than the paper's: every verdict says so, the numbers stay."""
    for change in ({"parameters": lambda f: f["parameters"] // 100}, {"epochs_run": 6}):
        folder = tmp_path / next(iter(change))
        folder.mkdir()
        for file in paper_dir.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
            if file.name not in ("wordsim.csv", "top5.csv"):  # model summaries: their runs' files carry the scale
                _edit(folder, file.name, {}, **change)
        decisions = page.decide_all(folder)
        assert {d.verdict for d in decisions} == {page.NOT_COMPARABLE}
        assert all(not math.isnan(d.estimate.value) for d in decisions)
        assert sum(d.claim.name.startswith("table2") and d.estimate.p < 0.05 for d in decisions) == 8
        # beside the verdict, what the rule reads on these runs: the paper's study's verdicts, the scale aside
        at_scale = {d.claim.name: d.verdict for d in page.decide_all(paper_dir)}
        assert {d.claim.name: d.reading for d in decisions} == at_scale and page.NOT_COMPARABLE not in at_scale.values()
        shown = page.display(page.tidy(decisions))["verdict"].tolist()
        assert shown == [f"not comparable at this scale (the rule on these runs: {at_scale[d.claim.name]})"
                         for d in decisions]  # fmt: skip


# --------------------------------------------------------------------------------------------- output layers
def test_a_layer_that_is_not_the_papers_changes_no_claim_about_the_papers_layers(paper_dir, tmp_path):
    """A new layer's runs (named with characters a page must escape, ranked like SS in every summary) enter no claim
    about the paper's layers: each reads the paper's layers only, so every verdict and estimate is the one without
    it; the names shown are the paper's, escaped on the page (the layer's own rows: tests/test_claims_rows.py)."""
    folder = tmp_path / "study"
    folder.mkdir()
    for file in paper_dir.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    layer = "<b>my|layer</b>"
    for file in ("main.csv", "ntet.csv"):
        frame = pd.read_csv(folder / file)
        new = frame[(frame["variant"] == "ss")].assign(variant=layer, press_rank=9_999, test_ppl=50.0)
        pd.concat([frame, new]).to_csv(folder / file, index=False)
    ws = pd.read_csv(folder / "wordsim.csv")
    new = ws[ws["variant"] == "ss"].assign(variant=layer, spearman=0.9)
    pd.concat([ws, new]).to_csv(folder / "wordsim.csv", index=False)
    before = {d.claim.name: d for d in page.decide_all(paper_dir)}
    decisions = {d.claim.name: d for d in page.decide_all(folder)}
    assert set(decisions) - set(before) == {f"plugin_{layer}_{what}_{ds}" for what in ("ppl", "rank") for ds in DS}
    for name, d in before.items():
        assert layer not in getattr(decisions[name].evidence, "names", ()), name
        assert decisions[name].verdict == d.verdict and decisions[name].estimate == d.estimate, name
    out = tmp_path / "page" / "claims"
    page.write(list(decisions.values()), out, banner="<i>a|b</i>")
    html = (out.parent / "claims.html").read_text()
    assert "<i>a|b</i>" not in html and "&lt;i&gt;a|b&lt;/i&gt;" in html
    assert "Softmax, SS, GSS, LMS-PLIF, MoS" in html


# --------------------------------------------------------------------------------------------- the page
def test_the_cli_writes_the_page_in_four_formats(paper_dir, tmp_path):
    prefix = tmp_path / "reports" / "claims"
    assert main(["claims", "--summary-dir", str(paper_dir), "--out", str(prefix), "--banner", "a mark"]) == 0
    table = pd.read_csv(f"{prefix}.csv")
    assert list(table["claim"]) == list(claims.CLAIMS)
    assert dict(zip(table["claim"], table["verdict"], strict=True)) == _expected_on_the_papers_numbers()
    # paper_statistic is the paper's value of the statistic in ours_value (the study here is built from the paper's
    # means and SDs, rounded): Table 2's Δ of SS, where paper_value holds the p-value the paper prints
    assert np.allclose(table["paper_statistic"], table["ours_value"], rtol=0.06, atol=0.02)
    ss = table.set_index("claim").loc["table2_ss_ptb"]
    assert ss["paper_statistic"] == pytest.approx(-0.05) and ss["paper_value"] == pytest.approx(0.392)
    markdown = Path(f"{prefix}.md").read_text()
    undecided = len(UNDECIDED_ON_THE_PAPER)
    assert markdown.startswith("**a mark**")
    assert f"{len(claims.CLAIMS) - undecided} consistent, {undecided} undecided" in markdown
    # the power beside each verdict, on the page itself: undecided rows say from how many runs they would decide
    assert "power at this n" in markdown and "power 0.16; 0.8 from 144 seeds per model" in markdown
    for rule in {c.rule.name for c in claims.CLAIMS.values()}:  # the rules under the table, each once
        assert markdown.count(f"* **{rule}**") == 1, rule
    html = Path(f"{prefix}.html").read_text()
    assert html.count("<tr") == len(claims.CLAIMS) + 1 and "Rules" in html and "power 0.16" in html
    tex = Path(f"{prefix}.tex").read_text()
    assert "\\label{tab:claims}" in tex and "\\begin{itemize}" in tex and "power 0.16" in tex
    assert tex.isascii(), sorted({ch for ch in tex if not ch.isascii()})  # every symbol spelled in LaTeX


def test_the_cli_checks_the_paper_against_itself(tmp_path):
    """``claims --paper`` (docs/claims.md's command): the page of the paper's own numbers, every claim consistent
    or undecided where they cannot decide, said on top."""
    prefix = tmp_path / "reports" / "claims-paper"
    assert main(["claims", "--paper", "--out", str(prefix)]) == 0
    table = pd.read_csv(f"{prefix}.csv")
    assert dict(zip(table["claim"], table["verdict"], strict=True)) == _expected_on_the_papers_numbers()
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
    assert table.loc["rank_ppl_ptb", "runs in"] == "28 of 55"  # every paper layer's runs of main.csv on PTB
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
    rows = [line for line in out.splitlines()[4:] if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in rows] == list(table.index)  # one row per claim on a test
    left = [name for name in claims.CLAIMS if name not in table.index]  # named under the table, none lost
    assert out.splitlines()[-1] == f"No row (no test to plan seeds for): {', '.join(left)}."
    assert "figure3_ptb" in left and "mos_k_rank_ptb" in left
    assert main(["claims", "--seeds", "--claim", "table4_ptb", "--claim", "figure2_all_ptb"]) == 0
    out = capsys.readouterr().out
    assert "the paper's" in out and "table4_ptb" in out and "figure2_all_ptb" in out and "table4_wt2" not in out
    assert "No row" not in out
    # LMS-PLIF's rank (the interval's top below the midpoint), at the paper's mean 496 and SD 83: the n the page's
    # power column names ("0.8 from 5 seeds"), never below the claim's minimum
    rule, paper = claims.CLAIMS["lms_plif_rank_ptb"].rule, claims.CLAIMS["lms_plif_rank_ptb"].paper()
    needed = max(power.runs_for_power(lambda n: rule.power(n, paper)), claims.CLAIMS["lms_plif_rank_ptb"].min_n)
    assert table.loc["lms_plif_rank_ptb", "n for the paper's effect"] == f"{needed} seeds"
    assert table.loc["lms_plif_rank_ptb", "the paper's effect"] == "mean rank 496, midpoint 1,434"
    assert main(["claims", "--seeds", "--claim", "figure3_ptb"]) == 0  # before: an empty table, without a word
    assert capsys.readouterr().out.splitlines()[-1] == "No row (no test to plan seeds for): figure3_ptb."
    # LMS-PLIF against LMS-PLIF† (PTB): pooled s of 0.11 and 0.09, the paper's 0.01 ppl apart: "not better" is
    # decided with power 0.8 from the n where the one-sided test of the margin reaches it
    s = math.sqrt((0.11**2 + 0.09**2) / 2)
    assert table.loc["table4_ptb", "spread"] == f"s = {s:.3g} (the paper's)"
    needed = power.runs_for_power(lambda n: power.noninferiority_power(-0.01, differences.MARGIN, s, n))
    assert table.loc["table4_ptb", "n for the paper's effect"] == f"{needed:,} seeds per model"
    at = power.noninferiority_power
    assert at(-0.01, 0.2, s, needed) >= 0.8 > at(-0.01, 0.2, s, needed - 1)
    # MoS against Softmax (PTB), a t-test: the seeds its Δ needs (2), but never fewer than the claim's minimum
    assert table.loc["table2_mos_ptb", "n for the paper's effect"] == "5 seeds per model"
    assert table.loc["table2_ss_ptb", "the paper's effect"] == "Δ = −0.05"  # signed, as the page prints it
    assert table.loc["table4_ptb", "smallest effect at 80 % power"] == "—"  # a test of the margin has none
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
