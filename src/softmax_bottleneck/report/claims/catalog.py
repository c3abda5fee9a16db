"""The paper's conclusions as claims, each declared once (the claims' registry, as :mod:`..tables.catalog` is the
tables'): what it says and where (the paper's table or figure), the summary rows it reads, how its statistic is built
from them, the paper's value and the rule that decides, with the fewest runs the rule needs.

The claims are expanded from the paper's own numbers (``data/reported``): one per dataset of the paper's table, one per
model the paper tests against Softmax. Claims about output layers in general (rank against perplexity across models,
word similarity, the two schedules) read every layer of their summaries, a plug-in's too; a claim about one of the
paper's models reads only that model. The page (:mod:`.page`), the preview's rows, the seeds table (:mod:`.seeds`),
the workflow's inputs and docs/claims.md all read :data:`CLAIMS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.claims.evidence import WORDSIM, Basis, Summaries
from softmax_bottleneck.report.claims.rules import (
    ALPHA,
    Contrast,
    Evidence,
    Groups,
    NoAssociation,
    NoGainBeyondNoise,
    Pairs,
    Paper,
    Points,
    RInInterval,
    Rises,
    Rule,
    SameSideOfAlpha,
    Sample,
    StaysLow,
    Step,
)
from softmax_bottleneck.report.common import fkey, one_run_per
from softmax_bottleneck.report.reported import DATASETS

#: the fewest runs each kind of claim is decided on (below: "too few runs"), declared with the rules
MIN_SEEDS = 5  # seeds per model of a t-test, or behind a seed-to-seed spread (the paper: 10, 11)
MIN_GRID_POINTS = 10  # GSS grid points of a correlation (the paper: 70 and 35; 50 and 26 in its windows)
MIN_MODELS = 5  # output layers of a correlation across models (the paper: 5 in Table 2, 6 in SM Table 3)
MIN_PAIRED_MODELS = 4  # output layers trained with both schedules (the paper: 6)
MIN_SWEEP = 3  # values of K (the paper: 6 on PTB, 3 on WT2)

#: the paper's seeds per model behind its t-tests (random seeds) and its means ± SD (all seeds, Table 2)
PAPER_RANDOM_SEEDS = 10
PAPER_ALL_SEEDS = 11


@dataclass(frozen=True)
class Claim:
    """One conclusion of the paper on one dataset (see the module docstring).

    ``build`` makes our evidence from the rows of each ``basis`` (in its order); ``paper`` gives the paper's value and
    evidence; ``rule`` decides; ``min_n`` is the least ``n`` of the rule's estimate (counted in ``unit``) it decides
    on; ``any_layer``: every output layer of the summaries enters (plug-ins too)."""

    name: str
    dataset: str
    statement: str
    source: str
    rule: Rule
    basis: tuple[Basis, ...]
    build: Callable[[list[pd.DataFrame]], Evidence]
    paper: Callable[[], Paper]
    min_n: int
    unit: str
    any_layer: bool = False

    def rows(self, summaries: Summaries) -> list[pd.DataFrame]:
        """The summary rows of each basis."""
        return [summaries.rows(basis) for basis in self.basis]

    @property
    def label(self) -> str:
        """``PTB: <statement>``."""
        return f"{DATASETS.get(self.dataset, self.dataset)}: {self.statement}"


# --------------------------------------------------------------------------------------------- helpers
def _of(frame: pd.DataFrame, variant: str, column: str) -> Sample:
    return Sample.of(frame.loc[frame["variant"] == variant, column])


def _display(names) -> tuple[str, ...]:
    return tuple(variants.display(v) for v in names)


def _in(frame: pd.DataFrame, dataset: str, **equal) -> pd.DataFrame:
    keep = frame["dataset"] == dataset
    for key, value in equal.items():
        keep &= frame[key] == value
    return frame[keep]


def _paper_group(row) -> Sample:
    return Sample(float(row["test_ppl_mean"]), float(row["test_ppl_sd"]), PAPER_RANDOM_SEEDS)


# --------------------------------------------------------------------------------------------- Figure 2
def _figure2(rec: dict) -> Claim:
    ds, lo, hi = rec["dataset"], rec["test_ppl_min"], rec["test_ppl_max"]
    whole = pd.isna(lo)

    def window(frame: pd.DataFrame) -> Points:
        frame = frame.dropna(subset=["test_ppl", "press_rank"])
        if not whole:
            frame = frame[(frame["test_ppl"] >= lo) & (frame["test_ppl"] <= hi)]
        return Points(tuple(frame["test_ppl"].astype(float)), tuple(frame["press_rank"].astype(float)))

    def paper() -> Paper:
        points = window(_in(reported.load("figure2_points"), ds))
        note = f"printed {rec['abs_r']:.2f} without its sign; the sign of its figure"
        return Paper(float(rec["signed_r"]), points, note=note)

    where = "over the GSS (c, k) grid" if whole else f"within test perplexity {lo:g}–{hi:g} on the GSS grid"
    return Claim(
        name=f"figure2_{'all' if whole else 'window'}_{ds}",
        dataset=ds,
        statement=f"Press' rank and test perplexity correlate weakly {where}",
        source="Figure 2",
        rule=RInInterval(),
        basis=(Basis("gss_grid.csv", ds, ("gss",)),),
        build=lambda frames: window(frames[0]),
        paper=paper,
        min_n=MIN_GRID_POINTS,
        unit="grid points",
    )


# --------------------------------------------------------------------------------------------- Tables 1, 2: rank
#: the model whose rank stays low, its baseline, and the paper's other models (Table 2's rows but these two)
LOW_RANK, BASELINE = "lms_plif", "softmax"


def _far_models() -> tuple[str, ...]:
    return tuple(v for v in reported.paper_order("main") if v not in (LOW_RANK, BASELINE))


def _low_rank(dataset: str) -> Claim:
    far = _far_models()

    def build(frames) -> Contrast:
        main = frames[0]
        others = {v: _of(main, v, "press_rank").mean for v in far}
        return Contrast(_of(main, LOW_RANK, "press_rank"), _of(main, BASELINE, "press_rank").mean, others)

    def paper() -> Paper:
        main = _in(reported.load("main"), dataset).set_index("variant")
        target = main.loc[LOW_RANK]
        sample = Sample(float(target["press_rank_mean"]), float(target["press_rank_sd"]), PAPER_ALL_SEEDS)
        others = {v: float(main.loc[v, "press_rank_mean"]) for v in far}
        return Paper(sample.mean, Contrast(sample, float(main.loc[BASELINE, "press_rank_mean"]), others))

    return Claim(
        name=f"{LOW_RANK}_rank_{dataset}",
        dataset=dataset,
        statement=f"{variants.display(LOW_RANK)}'s log-P rank stays near {variants.display(BASELINE)}'s bound d + 2, "
        f"far below those of {', '.join(_display(far)[:-1])} and {_display(far)[-1]}",
        source="Tables 1, 2",
        rule=StaysLow(variants.display(BASELINE), _display(far)),
        basis=(Basis("main.csv", dataset, (BASELINE, LOW_RANK, *far)),),
        build=build,
        paper=paper,
        min_n=MIN_SEEDS,
        unit="seeds",
    )


# --------------------------------------------------------------------------------------------- t-tests
def _t_test(name, dataset, statement, source, a: Basis, b: Basis, paper: Callable[[], Paper]) -> Claim:
    def build(frames) -> Groups:
        return Groups(Sample.of(frames[0]["test_ppl"]), Sample.of(frames[1]["test_ppl"]))

    return Claim(
        name, dataset, statement, source, SameSideOfAlpha(), (a, b), build, paper, MIN_SEEDS, "seeds per model"
    )


def _against_softmax(rec: dict) -> Claim:
    """Table 2 / SM Table 1: one of the paper's models against Softmax over the random seeds."""
    ds, variant, p = rec["dataset"], rec["variant"], float(rec["p_value"])

    def paper() -> Paper:
        table = _in(reported.load("sm_table1"), ds).set_index("variant")
        return Paper(p, Groups(_paper_group(table.loc[variant]), _paper_group(table.loc[BASELINE])))

    name, baseline = variants.display(variant), variants.display(BASELINE)
    lower = rec["test_ppl_mean"] < float(
        reported.load("sm_table1").set_index(["dataset", "variant"]).loc[(ds, BASELINE), "test_ppl_mean"]
    )
    statement = (
        f"{name} reaches a significantly {'lower' if lower else 'higher'} test perplexity than {baseline}"
        if p < ALPHA
        else f"{name}'s test perplexity does not differ significantly from {baseline}'s"
    )
    return _t_test(
        f"table2_{variant}_{ds}",
        ds,
        statement,
        "Table 2, SM Table 1",
        Basis("main.csv", ds, (variant,), seed_kind="random"),
        Basis("main.csv", ds, (BASELINE,), seed_kind="random"),
        paper,
    )


def _frozen(rec: dict) -> Claim:
    """Table 4: LMS-PLIF against LMS-PLIF† (slopes frozen) over the random seeds."""
    ds = rec["dataset"]

    def paper() -> Paper:
        def group(prefix):
            mean, sd = float(rec[f"{prefix}_test_ppl_mean"]), float(rec[f"{prefix}_test_ppl_sd"])
            return Sample(mean, sd, PAPER_RANDOM_SEEDS)

        return Paper(float(rec["p_value"]), Groups(group("lms_plif"), group("lms_plif_frozen")))

    return _t_test(
        f"table4_{ds}",
        ds,
        f"{variants.display('lms_plif')} is not significantly better than "
        f"{variants.display('lms_plif_frozen')} (its slopes frozen at initialisation)",
        "Table 4",
        Basis("main.csv", ds, ("lms_plif",), seed_kind="random"),
        Basis("frozen.csv", ds, ("lms_plif_frozen",), seed_kind="random"),
        paper,
    )


def _fair(dataset: str) -> Claim:
    """Table 5 and its text: MoS† against Softmax‡ at about the same number of parameters."""
    table = _in(reported.load("table5"), dataset).set_index("variant")
    mos, softmax = table.index  # the paper's rows: MoS†, Softmax‡

    def paper() -> Paper:
        groups = Groups(_paper_group(table.loc[mos]), _paper_group(table.loc[softmax]))
        computed = SameSideOfAlpha().estimate(groups).p
        return Paper(
            float(table.loc[mos, "p_value"]), groups, note=f"the text's p; Table 5's means and SDs give {computed:.2f}"
        )

    return _t_test(
        f"table5_{dataset}",
        dataset,
        f"At about the same size, {variants.display(mos)} is not significantly better than "
        f"{variants.display(softmax)}: MoS's advantage shrinks",
        "Table 5",
        Basis("fair.csv", dataset, (mos,), seed_kind="random"),
        Basis("fair.csv", dataset, (softmax,), seed_kind="random"),
        paper,
    )


# --------------------------------------------------------------------------------------------- MoS's K
MOS = "mos"


def _sweep(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """One run per K (the authors' seed, else the lowest), K ascending, where ``column`` is known."""
    frame = one_run_per(frame.assign(n_experts=frame["n_experts"].map(fkey)), ["n_experts"])
    return frame.dropna(subset=["n_experts", column]).sort_values("n_experts")


def _k_table(dataset: str) -> pd.DataFrame:
    return _in(reported.load("mos_k"), dataset).sort_values("n_experts")


def _k_source(dataset: str) -> str:
    return f"SM Table {4 if dataset == 'ptb' else 5}, Figure {6 if dataset == 'ptb' else '5, 6'}"


def _k_rank(dataset: str) -> Claim:
    def build(frames) -> Points:
        runs = _sweep(frames[0], "press_rank")
        return Points(tuple(runs["n_experts"].astype(float)), tuple(runs["press_rank"].astype(float)))

    def paper() -> Paper:
        table = _k_table(dataset)
        points = Points(tuple(table["n_experts"].astype(float)), tuple(table["press_rank"].astype(float)))
        return Paper(Rises().estimate(points).value, points, printed=False, note="from the SM's ranks")

    return Claim(
        f"mos_k_rank_{dataset}",
        dataset,
        f"{variants.display(MOS)}'s log-P rank rises with its number of mixtures K",
        _k_source(dataset),
        Rises(),
        (Basis("mos_k.csv", dataset, (MOS,)),),
        build,
        paper,
        MIN_SWEEP,
        "values of K",
    )


def _k_ppl(dataset: str) -> Claim:
    def build(frames) -> Step:
        runs = _sweep(frames[0], "test_ppl")
        spread = Sample.of(frames[1]["test_ppl"])
        if len(runs) < 2:
            return Step(float("nan"), float("nan"), spread)
        return Step(float(runs["test_ppl"].iloc[-2]), float(runs["test_ppl"].iloc[-1]), spread)

    table = _k_table(dataset)
    ks = [int(k) for k in table["n_experts"]]

    def paper() -> Paper:
        main = _in(reported.load("main"), dataset).set_index("variant").loc[MOS]
        before, after = (float(v) for v in table["test_ppl"].iloc[-2:])
        spread = Sample(float(main["test_ppl_mean"]), float(main["test_ppl_sd"]), PAPER_ALL_SEEDS)
        return Paper(
            after - before, Step(before, after, spread), printed=False, note=f"K = {ks[-2]} → {ks[-1]}; s from Table 2"
        )

    return Claim(
        f"mos_k_ppl_{dataset}",
        dataset,
        f"{variants.display(MOS)}'s test perplexity stops improving at large K (the last step, K = "
        f"{ks[-2]} → {ks[-1]} in the paper)",
        _k_source(dataset),
        NoGainBeyondNoise(),
        (Basis("mos_k.csv", dataset, (MOS,)), Basis("main.csv", dataset, (MOS,))),
        build,
        paper,
        MIN_SEEDS,
        "seeds behind s",
    )


# --------------------------------------------------------------------------------------------- across output layers
def _model_points(x: pd.Series, y: pd.Series, paper_order) -> Points:
    """Points (x, y) of the models both series have, in the paper's order then the registry's."""
    both = pd.concat([x.rename("x"), y.rename("y")], axis=1).dropna()
    order = [v for v in variants.ordered(paper_order, both.index) if v in both.index]
    both = both.loc[order]
    return Points(tuple(both["x"].astype(float)), tuple(both["y"].astype(float)), _display(order))


def _mean_rho(wordsim: pd.DataFrame, models) -> pd.Series:
    """Each model's mean Spearman ρ over the benchmarks every one of ``models`` (that has any ρ) has."""
    wide = wordsim.pivot_table(index="benchmark", columns="variant", values="spearman", aggfunc="first")
    wide = wide[[m for m in models if m in wide.columns]].dropna(axis=1, how="all").dropna()
    return wide.mean()


def _wordsim(dataset: str) -> Claim:
    order = reported.paper_order("ntet")  # SM Table 3's columns: Softmax, SS, GSS, LMS-PLIF, MoS, MoC

    def points(ntet: pd.DataFrame, wordsim: pd.DataFrame) -> Points:
        ranks = one_run_per(ntet, ["variant"]).set_index("variant")["press_rank"].astype(float).dropna()
        return _model_points(ranks, _mean_rho(wordsim, ranks.index), order)

    def paper() -> Paper:
        ntet = _in(reported.load("ntet"), dataset, schedule="et").assign(seed_kind="authors", seed=0)
        pts = points(ntet, _in(reported.load("wordsim"), dataset))
        return Paper(RULES["wordsim"].estimate(pts).value, pts, printed=False, note="from SM Tables 3, 10, 11")

    return Claim(
        f"wordsim_{dataset}",
        dataset,
        "Output layers of higher log-P rank do not learn better word embeddings (mean Spearman ρ over the "
        "word-similarity benchmarks)",
        "Figure 4, SM Table 3",
        RULES["wordsim"],
        (Basis("ntet.csv", dataset, schedule="et", seed_kind="authors"), Basis(WORDSIM, dataset)),
        lambda frames: points(*frames),
        paper,
        MIN_MODELS,
        "models",
        any_layer=True,
    )


def _rank_perplexity(dataset: str) -> Claim:
    order = reported.paper_order("main")

    def build(frames) -> Points:
        means = frames[0].groupby("variant")[["press_rank", "test_ppl"]].mean()
        return _model_points(means["press_rank"], means["test_ppl"], order)

    def paper() -> Paper:
        main = _in(reported.load("main"), dataset).set_index("variant")
        pts = _model_points(main["press_rank_mean"], main["test_ppl_mean"], order)
        return Paper(RULES["rank_ppl"].estimate(pts).value, pts, printed=False, note="from Table 2")

    return Claim(
        f"rank_ppl_{dataset}",
        dataset,
        "Across output layers, a higher log-P rank does not mean a lower test perplexity",
        "Table 2",
        RULES["rank_ppl"],
        (Basis("main.csv", dataset),),
        build,
        paper,
        MIN_MODELS,
        "models",
        any_layer=True,
    )


def _schedules(dataset: str) -> Claim:
    order = reported.paper_order("ntet")

    def pairs(ntet: pd.DataFrame) -> Pairs:
        runs = one_run_per(ntet, ["variant", "schedule"]) if "seed_kind" in ntet else ntet
        wide = runs.pivot_table(index="variant", columns="schedule", values="test_ppl", aggfunc="first")
        wide = wide.reindex(columns=["et", "nt"]).dropna()
        models = [v for v in variants.ordered(order, wide.index) if v in wide.index]
        return Pairs(tuple(wide.loc[models, "et"]), tuple(wide.loc[models, "nt"]), _display(models))

    def paper() -> Paper:
        evidence = pairs(_in(reported.load("ntet"), dataset))
        return Paper(
            RULES["schedules"].estimate(evidence).p,
            evidence,
            printed=False,
            note=f"from SM Table {10 if dataset == 'ptb' else 11}",
        )

    return Claim(
        f"ntet_{dataset}",
        dataset,
        "ET-ASGD reaches a lower test perplexity than NT-ASGD across output layers (paired, ET − NT)",
        f"SM Table {10 if dataset == 'ptb' else 11}",
        RULES["schedules"],
        (Basis("ntet.csv", dataset, seed_kind="authors"),),
        lambda frames: pairs(frames[0]),
        paper,
        MIN_PAIRED_MODELS,
        "models",
        any_layer=True,
    )


#: the rules of the claims across output layers (one instance each, shared by both datasets)
RULES: dict[str, Rule] = {
    "wordsim": NoAssociation("greater", "a higher rank goes with a higher mean ρ"),
    "rank_ppl": NoAssociation("less", "a higher rank goes with a lower perplexity"),
    "schedules": SameSideOfAlpha(paired=True),
}


# --------------------------------------------------------------------------------------------- the registry
def _claims() -> dict[str, Claim]:
    out: list[Claim] = []
    out += [_figure2(rec) for rec in reported.load("figure2_pearson").to_dict("records")]
    datasets = tuple(DATASETS)
    out += [_low_rank(ds) for ds in datasets]
    out += [_against_softmax(rec) for rec in reported.load("sm_table1").dropna(subset=["p_value"]).to_dict("records")]
    out += [_frozen(rec) for rec in reported.load("table4").to_dict("records")]
    out += [_fair(ds) for ds in reported.paper_order("table5", "dataset")]
    k_datasets = reported.paper_order("mos_k", "dataset")
    out += [make(ds) for ds in k_datasets for make in (_k_rank, _k_ppl)]
    out += [make(ds) for ds in datasets for make in (_wordsim, _rank_perplexity, _schedules)]
    claims = {claim.name: claim for claim in out}
    if len(claims) != len(out):
        raise ValueError("two claims share a name")
    return claims


#: every claim, by name, in the paper's order (Figure 2, Tables 1-2, 4, 5, SM Tables 4-5, then across layers)
CLAIMS: dict[str, Claim] = _claims()
#: the summary files the claims read
REQUIRES: tuple[str, ...] = tuple(dict.fromkeys(b.file for claim in CLAIMS.values() for b in claim.basis))
