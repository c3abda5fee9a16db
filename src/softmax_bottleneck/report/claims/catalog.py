"""The paper's conclusions as claims, each declared once (the claims' registry, as :mod:`..tables.catalog` is the
tables'): what it says and where (the paper's words and its table or figure), the summary rows it reads, how its
statistic is built from them, the paper's value and the rule that decides, with the fewest runs the rule needs.

The claims are expanded from the paper's own numbers (``data/reported``): one per dataset of the paper's table, one per
model the paper tests. Every claim reads only the paper's output layers, named: a plug-in layer never changes the
verdict on a claim about the paper's layers. Here Figure 2 and Tables 1-5; the sweeps of MoS and the claims across
output layers in :mod:`.sweeps_and_layers`, Figure 3's observation in :mod:`.figure3`. A plug-in layer's own rows
(the project's, not the paper's) are made from the study's runs by :mod:`.plugins`. The page (:mod:`.page`), the
preview's rows, the seeds table (:mod:`.seeds`), the simulation (:mod:`.operating`), the workflow's inputs and
docs/claims.md all read :data:`CLAIMS`.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.claims.claim import (
    MIN_GRID_POINTS,
    MIN_SEEDS,
    PAPER_ALL_SEEDS,
    PAPER_RANDOM_SEEDS,
    Claim,
    in_dataset,
    of,
    paper_group,
)
from softmax_bottleneck.report.claims.claim import display as _display
from softmax_bottleneck.report.claims.differences import Differs, Equivalent, NotBetter
from softmax_bottleneck.report.claims.evidence import Basis
from softmax_bottleneck.report.claims.figure3 import figure3
from softmax_bottleneck.report.claims.rules import (
    ALPHA,
    Contrast,
    Groups,
    Paper,
    Points,
    RInInterval,
    Rule,
    Sample,
    StaysLow,
    Weak,
)
from softmax_bottleneck.report.claims.sweeps_and_layers import sweeps_and_layers
from softmax_bottleneck.report.reported import DATASETS

__all__ = ["CLAIMS", "Claim", "REQUIRES"]


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
        points = window(in_dataset(reported.load("figure2_points"), ds))
        note = f"printed {rec['abs_r']:.2f} without its sign; the sign of its figure"
        return Paper(float(rec["signed_r"]), points, note=note)

    if whole:
        statement = "Press' rank and test perplexity correlate at about the paper's r over the GSS (c, k) grid"
        quote = "the Pearson correlation coefficient is ... around 0.50"
    else:
        statement = f"Press' rank and test perplexity correlate only weakly within test perplexity {lo:g}–{hi:g}"
        quote = "we can safely conclude that the correlation ... is fairly weak"
    return Claim(
        name=f"figure2_{'all' if whole else 'window'}_{ds}",
        dataset=ds,
        statement=statement,
        source="Figure 2",
        rule=RInInterval() if whole else Weak(),
        basis=(Basis("gss_grid.csv", ds, ("gss",)),),
        build=lambda frames: window(frames[0]),
        paper=paper,
        min_n=MIN_GRID_POINTS,
        unit="grid points",
        quote=quote,
    )


# --------------------------------------------------------------------------------------------- Tables 1, 2: rank
#: the model whose rank stays low (LMS-PLIF, Table 2) and its baseline; the others are Table 2's rows but these two
STAYS_LOW, BASELINE = "lms_plif", "softmax"


def _far_models() -> tuple[str, ...]:
    return tuple(v for v in reported.paper_order("main") if v not in (STAYS_LOW, BASELINE))


def _low_rank(dataset: str) -> Claim:
    far = _far_models()

    def build(frames) -> Contrast:
        main = frames[0]
        others = {v: of(main, v, "press_rank").mean for v in far}
        return Contrast(of(main, STAYS_LOW, "press_rank"), of(main, BASELINE, "press_rank").mean, others)

    def paper() -> Paper:
        main = in_dataset(reported.load("main"), dataset).set_index("variant")
        target = main.loc[STAYS_LOW]
        sample = Sample(float(target["press_rank_mean"]), float(target["press_rank_sd"]), PAPER_ALL_SEEDS)
        others = {v: float(main.loc[v, "press_rank_mean"]) for v in far}
        return Paper(sample.mean, Contrast(sample, float(main.loc[BASELINE, "press_rank_mean"]), others))

    return Claim(
        name=f"{STAYS_LOW}_rank_{dataset}",
        dataset=dataset,
        statement=f"{variants.display(STAYS_LOW)}'s log-P rank stays near {variants.display(BASELINE)}'s, far below "
        f"those of {', '.join(_display(far)[:-1])} and {_display(far)[-1]}",
        source="Tables 1, 2",
        rule=StaysLow(variants.display(BASELINE), _display(far)),
        basis=(Basis("main.csv", dataset, (BASELINE, STAYS_LOW, *far)),),
        build=build,
        paper=paper,
        min_n=MIN_SEEDS,
        unit="seeds",
        quote="the log P matrix produced by LMS-PLIF in fact has a fairly low rank",
    )


# --------------------------------------------------------------------------------------------- t-tests
def _t_test(
    name,
    dataset,
    statement,
    source,
    rule: Rule,
    a: Basis,
    b: Basis,
    paper: Callable[[], Paper],
    quote="",
    column="test_ppl",
    formalised=False,
) -> Claim:
    def build(frames) -> Groups:
        return Groups(Sample.of(frames[0][column]), Sample.of(frames[1][column]))

    return Claim(
        name,
        dataset,
        statement,
        source,
        rule,
        (a, b),
        build,
        paper,
        MIN_SEEDS,
        "seeds per model",
        quote=quote,
        formalised=formalised,
    )


def _sm1(dataset: str) -> pd.DataFrame:
    return in_dataset(reported.load("sm_table1"), dataset).set_index("variant")


def _against(rec: dict) -> Claim:
    """Table 2 / SM Table 1: one of the paper's models against Softmax over the random seeds."""
    ds, variant, p = rec["dataset"], rec["variant"], float(rec["p_value"])

    def paper() -> Paper:
        table = _sm1(ds)
        return Paper(p, Groups(paper_group(table.loc[variant]), paper_group(table.loc[BASELINE])))

    name, baseline = variants.display(variant), variants.display(BASELINE)
    lower = rec["test_ppl_mean"] < float(_sm1(ds).loc[BASELINE, "test_ppl_mean"])
    significant = p < ALPHA
    statement = (
        f"{name} reaches a significantly {'lower' if lower else 'higher'} test perplexity than {baseline}"
        if significant
        else f"{name}'s test perplexity does not differ from {baseline}'s"
    )
    quote = (
        "statistically significantly better than the Softmax model"
        if significant
        else "not statistically significantly better than the Softmax model, as the p-values are greater than 0.05"
    )
    return _t_test(
        f"table2_{variant}_{ds}",
        ds,
        statement,
        "Table 2, SM Table 1",
        Differs() if significant else Equivalent(),
        Basis("main.csv", ds, (variant,), seed_kind="random"),
        Basis("main.csv", ds, (BASELINE,), seed_kind="random"),
        paper,
        quote,
    )


#: LMS-PLIF against the high-rank models it beats: a high rank is not necessary (Table 1's text, SM Table 1)
HIGH_RANK_BEATEN = ("ss",)


def _beats_high_rank(dataset: str, other: str) -> Claim:
    def paper() -> Paper:
        table = _sm1(dataset)
        groups = Groups(paper_group(table.loc[STAYS_LOW]), paper_group(table.loc[other]))
        p = Differs().estimate(groups).p
        return Paper(p, groups, printed=False, note="computed from SM Table 1")

    return _t_test(
        f"table2_{STAYS_LOW}_{other}_{dataset}",
        dataset,
        f"{variants.display(STAYS_LOW)} reaches a significantly lower test perplexity than the high-rank "
        f"{variants.display(other)}: a high rank is not necessary",
        "Table 1 (text), SM Table 1",
        Differs(),
        Basis("main.csv", dataset, (STAYS_LOW,), seed_kind="random"),
        Basis("main.csv", dataset, (other,), seed_kind="random"),
        paper,
        "LMS-PLIF performs better than the baseline and SS",
        formalised=True,  # the paper tests LMS-PLIF against Softmax only; "significantly" is the project's test
    )


def _implicit_regularisation(dataset: str, column: str) -> Claim:
    """Table 3 against Table 2: LMS-PLIF† (slopes frozen) trains worse and tests better than Softmax."""
    frozen = in_dataset(reported.load("table3"), dataset).iloc[0]
    softmax = in_dataset(reported.load("main"), dataset).set_index("variant").loc[BASELINE]

    def paper() -> Paper:
        groups = Groups(paper_group(frozen, column, PAPER_ALL_SEEDS), paper_group(softmax, column, PAPER_ALL_SEEDS))
        return Paper(Differs().estimate(groups).p, groups, printed=False, note="from Tables 2, 3; n = 11 assumed")

    word = "training" if column == "train_ppl" else "test"
    higher = float(frozen[f"{column}_mean"]) > float(softmax[f"{column}_mean"])
    return _t_test(
        f"table3_{'train' if column == 'train_ppl' else 'test'}_{dataset}",
        dataset,
        f"{variants.display('lms_plif_frozen')} reaches a significantly {'higher' if higher else 'lower'} {word} "
        f"perplexity than {variants.display(BASELINE)} (implicit regularisation)",
        "Tables 2, 3",
        Differs(),
        Basis("frozen.csv", dataset, ("lms_plif_frozen",)),
        Basis("main.csv", dataset, (BASELINE,)),
        paper,
        "LMS-PLIF† has traded its performance on the training set for a small performance gain on its validation "
        "and test sets",
        column=column,
        formalised=True,  # the paper compares the two tables in words; the t-tests (n = 11 assumed) are the project's
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
        f"{variants.display('lms_plif')} is not better than {variants.display('lms_plif_frozen')} (its slopes "
        "frozen at initialisation)",
        "Table 4",
        NotBetter(),
        Basis("main.csv", ds, ("lms_plif",), seed_kind="random"),
        Basis("frozen.csv", ds, ("lms_plif_frozen",), seed_kind="random"),
        paper,
        "LMS-PLIF is not statistically significantly better than LMS-PLIF† on both the datasets",
    )


def _fair(dataset: str) -> Claim:
    """Table 5 and its text: MoS† against Softmax‡ at about the same number of parameters."""
    table = in_dataset(reported.load("table5"), dataset).set_index("variant")
    mos, softmax = table.index  # the paper's rows: MoS†, Softmax‡

    def paper() -> Paper:
        groups = Groups(paper_group(table.loc[mos]), paper_group(table.loc[softmax]))
        computed = Differs().estimate(groups).p
        return Paper(
            float(table.loc[mos, "p_value"]), groups, note=f"the text's p; Table 5's means and SDs give {computed:.2f}"
        )

    return _t_test(
        f"table5_{dataset}",
        dataset,
        f"At about the same size, {variants.display(mos)} is not better than {variants.display(softmax)}",
        "Table 5",
        NotBetter(),
        Basis("fair.csv", dataset, (mos,), seed_kind="random"),
        Basis("fair.csv", dataset, (softmax,), seed_kind="random"),
        paper,
        "MoS† is not statistically significantly better than Softmax‡, as the p-value is 0.62",
    )


# --------------------------------------------------------------------------------------------- the registry
def _claims() -> dict[str, Claim]:
    out: list[Claim] = []
    out += [_figure2(rec) for rec in reported.load("figure2_pearson").to_dict("records")]
    datasets = tuple(DATASETS)
    out += [_low_rank(ds) for ds in datasets]
    out += [_against(rec) for rec in reported.load("sm_table1").dropna(subset=["p_value"]).to_dict("records")]
    out += [_beats_high_rank(ds, other) for ds in datasets for other in HIGH_RANK_BEATEN]
    out += [_implicit_regularisation(ds, column) for ds in datasets for column in ("train_ppl", "test_ppl")]
    out += [_frozen(rec) for rec in reported.load("table4").to_dict("records")]
    out += [_fair(ds) for ds in reported.paper_order("table5", "dataset")]
    out += sweeps_and_layers()
    out.append(figure3())
    claims = {claim.name: claim for claim in out}
    if len(claims) != len(out):
        raise ValueError("two claims share a name")
    return claims


#: every claim, by name, in the paper's order (Figure 2, Tables 1-5, MoS's sweeps, across layers, then Figure 3)
CLAIMS: dict[str, Claim] = _claims()
#: the summary files the claims read
REQUIRES: tuple[str, ...] = tuple(dict.fromkeys(b.file for claim in CLAIMS.values() for b in claim.basis))
