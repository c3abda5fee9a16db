"""The claims over MoS's sweeps (its number of mixtures K, its latent dropout) and across the paper's output layers
(rank against perplexity, word similarity, the two schedules, the ε-effective rank of Table 6).

A claim across layers reads the paper's layers only, named on the page; where the paper states the conclusion in
words and the statistic is this project's (a Pearson r across layers), the claim says so (``formalised``).
"""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.claims.claim import (
    MIN_BENCHMARKS,
    MIN_MODELS,
    MIN_PAIRED_MODELS,
    MIN_SWEEP,
    Claim,
    display,
    in_dataset,
)
from softmax_bottleneck.report.claims.descriptive import FarBelow, MostWins, Trend
from softmax_bottleneck.report.claims.differences import DiffersForEach
from softmax_bottleneck.report.claims.evidence import WORDSIM, Basis
from softmax_bottleneck.report.claims.rules import NoAssociation, Pairs, Paper, Points, Rule
from softmax_bottleneck.report.common import fkey, one_run_per
from softmax_bottleneck.report.reported import DATASETS

MOS, MOC = "mos", "moc"


# --------------------------------------------------------------------------------------------- MoS's sweeps
def _sweep(frame: pd.DataFrame, swept: str, *columns: str) -> pd.DataFrame:
    """One run per value of ``swept`` (the authors' seed, else the lowest), ascending, where ``columns`` are known."""
    frame = one_run_per(frame.assign(**{swept: frame[swept].map(fkey)}), [swept])
    return frame.dropna(subset=[swept, *columns]).sort_values(swept)


def _gap(frame: pd.DataFrame) -> pd.Series:
    return frame["test_ppl"].astype(float) - frame["train_ppl"].astype(float)


#: the sweeps' claims: name, statement, swept column, x and y of the trend (a column or a function of the runs), the
#: sign of the trend, the paper's words
SWEEP_CLAIMS = (
    (
        "mos_k_rank",
        "MoS's log-P rank rises with its number of mixtures K",
        "n_experts",
        "n_experts",
        "press_rank",
        1,
        "increasing the number of mixtures K lead to an increase in the rank",
    ),
    (
        "mos_k_rank_ppl",
        "Over K, MoS's test perplexity falls as its log-P rank rises (rank and performance correlate positively)",
        "n_experts",
        "press_rank",
        "test_ppl",
        -1,
        "observed a positive correlation between the rank of the log P matrix and test performance",
    ),
    (
        "mos_k_gap",
        "MoS's generalisation gap (test − training perplexity) widens with K: more capacity, more overfitting",
        "n_experts",
        "n_experts",
        _gap,
        1,
        "increasing K actually increases the capacity ... which results in a wider generalization gap",
    ),
    (
        "mos_dropout",
        "Over MoS's latent dropout (K = 15), its log-P rank and its test perplexity rise together: the higher rank "
        "comes with the worse perplexity, a by-product",
        "dropoutl",
        "press_rank",
        "test_ppl",
        1,
        "observe a negative correlation between the rank of the log P matrix and test performance. Hence, we think "
        "that the rank of the log P matrix being high is just a by-product",
    ),
)


def _column(frame: pd.DataFrame, how) -> pd.Series:
    return how(frame) if callable(how) else frame[how].astype(float)


def _one_run_sd(dataset: str, how) -> float:
    """One run's SD of a sweep's quantity: MoS's SD over its seeds in Table 2 (K = 15); 0 for the swept value itself;
    the gap's from its two perplexities' taken as independent, an upper bound (they likely move together over seeds):
    its pass rate on the page is then a lower bound."""
    row = in_dataset(reported.load("main"), dataset).set_index("variant").loc[MOS]
    if callable(how):  # the gap: test − training perplexity
        return float((row["test_ppl_sd"] ** 2 + row["train_ppl_sd"] ** 2) ** 0.5)
    return float(row[f"{how}_sd"]) if f"{how}_sd" in row.index else 0.0


def _trend(dataset: str, name, statement, swept, x, y, sign, quote) -> Claim:
    table_name = "mos_dropoutl" if swept == "dropoutl" else "mos_k"
    needed = [c for c in ("press_rank", "test_ppl", "train_ppl") if c in (x, y) or callable(y)]

    def points(frame: pd.DataFrame) -> Points:
        return Points(tuple(_column(frame, x)), tuple(_column(frame, y)))

    rule = Trend(sign, noise=(_one_run_sd(dataset, x), _one_run_sd(dataset, y)))

    def paper() -> Paper:
        pts = points(in_dataset(reported.load(table_name), dataset).sort_values(swept))
        return Paper(rule.estimate(pts).value, pts, printed=False, note="from the SM's table")

    table = "SM Table 12, Figure 5 (right)" if swept == "dropoutl" else f"SM Table {4 if dataset == 'ptb' else 5}"
    figure = {"mos_k_rank": "", "mos_k_rank_ppl": ", Figure 5 (left)", "mos_k_gap": ", Figure 6"}.get(name, "")
    return Claim(
        f"{name}_{dataset}",
        dataset,
        statement,
        table + figure,
        rule,
        (Basis(f"{table_name}.csv", dataset, (MOS,)),),
        lambda frames: points(_sweep(frames[0], swept, *needed)),
        paper,
        MIN_SWEEP,
        "values of K" if swept == "n_experts" else "dropout values",
        quote=quote,
    )


# --------------------------------------------------------------------------------------------- across output layers
def _model_points(x: pd.Series, y: pd.Series, order) -> Points:
    """Points (x, y) of the paper's models both series have, in the paper's order."""
    both = pd.concat([x.rename("x"), y.rename("y")], axis=1).dropna()
    models = [v for v in order if v in both.index]
    both = both.loc[models]
    return Points(tuple(both["x"].astype(float)), tuple(both["y"].astype(float)), display(models))


def _wide_rho(wordsim: pd.DataFrame, models) -> pd.DataFrame:
    """Spearman ρ per benchmark (rows) and model (columns), the benchmarks every one of ``models`` has."""
    wide = wordsim.pivot_table(index="benchmark", columns="variant", values="spearman", aggfunc="first")
    return wide[[m for m in models if m in wide.columns]].dropna(axis=1, how="all").dropna()


def _wordsim_r(dataset: str) -> Claim:
    order = reported.paper_order("ntet")  # SM Table 3's columns: Softmax, SS, GSS, LMS-PLIF, MoS, MoC

    def points(ntet: pd.DataFrame, wordsim: pd.DataFrame) -> Points:
        ranks = one_run_per(ntet, ["variant"]).set_index("variant")["press_rank"].astype(float).dropna()
        return _model_points(ranks, _wide_rho(wordsim, ranks.index).mean(), order)

    def paper() -> Paper:
        ntet = in_dataset(reported.load("ntet"), dataset, schedule="et").assign(seed_kind="authors", seed=0)
        pts = points(ntet, in_dataset(reported.load("wordsim"), dataset))
        return Paper(RULES["wordsim"].estimate(pts).value, pts, printed=False, note="from SM Tables 3, 10, 11")

    return Claim(
        f"wordsim_{dataset}",
        dataset,
        "Output layers of higher log-P rank do not learn better word embeddings (mean Spearman ρ over the "
        "word-similarity benchmarks)",
        "Figure 4, SM Table 3",
        RULES["wordsim"],
        (Basis("ntet.csv", dataset, order, schedule="et", seed_kind="authors"), Basis(WORDSIM, dataset, order)),
        lambda frames: points(*frames),
        paper,
        MIN_MODELS,
        "models",
        quote="a model which can produce a high-rank log P matrix does not necessarily learn better embeddings",
        formalised=True,
    )


def _moc_mos(dataset: str) -> Claim:
    def pairs(wordsim: pd.DataFrame) -> Pairs:
        wide = _wide_rho(wordsim, (MOC, MOS))
        if MOC not in wide.columns or MOS not in wide.columns:
            return Pairs((), ())
        return Pairs(tuple(wide[MOC]), tuple(wide[MOS]), tuple(wide.index))

    def paper() -> Paper:
        evidence = pairs(in_dataset(reported.load("wordsim"), dataset))
        return Paper(RULES["moc_mos"].estimate(evidence).value, evidence, printed=False, note="from SM Table 3")

    return Claim(
        f"wordsim_moc_mos_{dataset}",
        dataset,
        "The low-rank MoC learns word embeddings at least as good as the high-rank MoS's, on most benchmarks",
        "Figure 4, SM Table 3",
        RULES["moc_mos"],
        # the runs behind the embeddings (ET-ASGD, the authors' seed) are read for the scale check
        (
            Basis(WORDSIM, dataset, (MOC, MOS)),
            Basis("ntet.csv", dataset, (MOC, MOS), schedule="et", seed_kind="authors"),
        ),
        lambda frames: pairs(frames[0]),
        paper,
        MIN_BENCHMARKS,
        "benchmarks",
        quote="MoC ... better ... than that of MoS on 8 word similarity benchmarks"
        if dataset == "ptb"
        else "on the WT2 dataset ... 12 word similarity benchmarks",
    )


def _rank_perplexity(dataset: str) -> Claim:
    order = reported.paper_order("main")

    def build(frames) -> Points:
        means = frames[0].groupby("variant")[["press_rank", "test_ppl"]].mean()
        return _model_points(means["press_rank"], means["test_ppl"], order)

    def paper() -> Paper:
        main = in_dataset(reported.load("main"), dataset).set_index("variant")
        pts = _model_points(main["press_rank_mean"], main["test_ppl_mean"], order)
        return Paper(RULES["rank_ppl"].estimate(pts).value, pts, printed=False, note="from Table 2")

    return Claim(
        f"rank_ppl_{dataset}",
        dataset,
        "Across the paper's output layers, a higher log-P rank does not mean a lower test perplexity",
        "Tables 1, 2",
        RULES["rank_ppl"],
        (Basis("main.csv", dataset, order),),
        build,
        paper,
        MIN_MODELS,
        "models",
        quote="a higher rank does not seem to correlate with improved performance",
        formalised=True,
    )


def _schedules(dataset: str) -> Claim:
    order = reported.paper_order("ntet")

    def pairs(ntet: pd.DataFrame) -> Pairs:
        runs = one_run_per(ntet, ["variant", "schedule"]) if "seed_kind" in ntet else ntet
        wide = runs.pivot_table(index="variant", columns="schedule", values="test_ppl", aggfunc="first")
        wide = wide.reindex(columns=["et", "nt"]).dropna()
        models = [v for v in order if v in wide.index]
        return Pairs(tuple(wide.loc[models, "et"]), tuple(wide.loc[models, "nt"]), display(models))

    def paper() -> Paper:
        evidence = pairs(in_dataset(reported.load("ntet"), dataset))
        return Paper(
            RULES["schedules"].estimate(evidence).p,
            evidence,
            printed=False,
            note=f"from SM Table {10 if dataset == 'ptb' else 11}",
        )

    return Claim(
        f"ntet_{dataset}",
        dataset,
        "ET-ASGD reaches a lower test perplexity than NT-ASGD on every one of the paper's output layers (paired, "
        "ET − NT)",
        f"SM Table {10 if dataset == 'ptb' else 11}",
        RULES["schedules"],
        (Basis("ntet.csv", dataset, order, seed_kind="authors"),),
        lambda frames: pairs(frames[0]),
        paper,
        MIN_PAIRED_MODELS,
        "models",
        quote="ET-ASGD works better than NT-ASGD with n = 5 for all existing works that are based upon the AWD-LSTM",
    )


#: the ε of Table 6's claim (the paper's smallest)
TABLE6_EPSILON = "1e-3"


def _effective_rank(dataset: str) -> Claim:
    order = reported.paper_order("main")
    column = f"erank_{TABLE6_EPSILON}"

    def pairs(frame: pd.DataFrame) -> Pairs:
        frame = frame.dropna(subset=[column, "press_rank"]).set_index("variant")
        models = [v for v in order if v in frame.index]
        return Pairs(
            tuple(frame.loc[models, column].astype(float)),
            tuple(frame.loc[models, "press_rank"].astype(float)),
            display(models),
        )

    def paper() -> Paper:
        evidence = pairs(in_dataset(reported.load("table6"), dataset))
        return Paper(RULES["table6"].estimate(evidence).value, evidence, printed=False, note="from Table 6")

    return Claim(
        f"table6_{dataset}",
        dataset,
        "Every model's ε-effective rank (ε = 10⁻³) lies far below its Press' rank: Press' rank overestimates",
        "Table 6",
        RULES["table6"],
        (Basis("main.csv", dataset, order, seed_kind="authors"),),
        lambda frames: pairs(one_run_per(frames[0], ["variant"])),
        paper,
        MIN_MODELS,
        "models",
        quote="it seems that Press et al. (2007)'s rank is most likely an overestimate",
    )


#: the rules of the claims across output layers (one instance each, shared by both datasets)
RULES: dict[str, Rule] = {
    "wordsim": NoAssociation("greater", "a higher rank goes with a higher mean ρ"),
    "moc_mos": MostWins(variants.display(MOC), variants.display(MOS)),
    "rank_ppl": NoAssociation("less", "a higher rank goes with a lower perplexity"),
    "schedules": DiffersForEach(-1),  # ET − NT below 0 on every layer: "for all existing works"
    "table6": FarBelow("10⁻³"),
}


def sweeps_and_layers() -> list[Claim]:
    """The claims of this module, in the paper's order."""
    out = [
        _trend(ds, *spec)
        for spec in SWEEP_CLAIMS
        for ds in reported.paper_order("mos_k", "dataset")
        if spec[2] == "n_experts"
    ]
    out += [
        _trend(ds, *spec)
        for spec in SWEEP_CLAIMS
        if spec[2] == "dropoutl"
        for ds in reported.paper_order("mos_dropoutl", "dataset")
    ]
    for ds in DATASETS:
        out += [_effective_rank(ds), _wordsim_r(ds), _moc_mos(ds), _rank_perplexity(ds), _schedules(ds)]
    return out
