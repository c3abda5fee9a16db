"""Every number the paper and its supplementary material (SM) report, as data.

The numbers live in ``data/reported/*.csv`` (see the README there for each file's source), read by
:mod:`softmax_bottleneck.paper_numbers` (``load`` and ``NAMES``, re-exported here); this module holds the
naming conventions shared by :mod:`softmax_bottleneck.report.tables` and
:mod:`softmax_bottleneck.report.figures`.
"""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.analysis import wordsim
from softmax_bottleneck.corpora import datasets, download
from softmax_bottleneck.paper_numbers import NAMES, load

__all__ = [
    "BENCHMARKS", "DATASETS", "NAMES", "figure4_matrix", "load", "normalise_benchmark", "paper_order",
]  # fmt: skip

#: dataset name -> display name
DATASETS: dict[str, str] = {name: corpus.display for name, corpus in datasets.DATASETS.items()}

#: column groups of Figure 3 and SM Table 2: Yang et al.'s contexts, the paper authors' own ("Ours" in the SM)
#: and random ones. The data keep the SM's names; figures show the labels of :data:`FIGURE3_GROUP_LABELS`.
FIGURE3_GROUPS: tuple[str, ...] = ("Yang", "Ours", "Random")
FIGURE3_GROUP_LABELS: dict[str, str] = {"Yang": "Yang et al.'s", "Ours": "the authors'", "Random": "random"}

#: SM name of the 13 word-similarity benchmarks -> file name, in the order of SM Tables 3 and 13 (the analysis's list)
BENCHMARKS: dict[str, str] = dict(wordsim.BENCHMARKS)

_BENCHMARK_LOOKUP: dict[str, str] = {}
for _name, _file in BENCHMARKS.items():
    # the SM name, the file name here, and the file's name in its source repository (``EN-...``, the download URL's)
    _upstream = download.FILES[f"word-sim/{_file}"].sources[0].url.rsplit("/", 1)[-1]
    for _key in (_name, _file, _upstream):
        for _form in (_key, _key.removesuffix(".txt")):
            _BENCHMARK_LOOKUP[_form.lower()] = _name


def normalise_benchmark(name: str) -> str:
    """SM name of a benchmark given its SM name or file name (with or without ``.txt``, any case).

    Unknown names are returned unchanged.
    """
    key = str(name).strip()
    return _BENCHMARK_LOOKUP.get(key.lower(), key)


def paper_order(name: str, column: str = "variant") -> tuple[str, ...]:
    """The values of ``column`` in the order the paper prints them in ``data/reported/<name>.csv`` (first seen)."""
    return tuple(dict.fromkeys(load(name)[column].dropna().astype(str)))


def figure4_matrix(wordsim: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Figure 4's "row beats column" counts from long Spearman data (columns dataset, variant, benchmark, spearman).

    Cell (i, j) = number of benchmarks where ρ_i > ρ_j strictly (Figure 4); only benchmarks where both models have
    a value count. The diagonal is NaN. Rows and columns: the paper's order (GSS, LMS-PLIF, MoC, MoS, SS, Softmax),
    then other variants in registry order; variants absent from the data are left out.
    """
    from softmax_bottleneck.report import variants

    sub = wordsim[wordsim["dataset"] == dataset].dropna(subset=["spearman"])
    if sub.empty:
        return pd.DataFrame(index=pd.Index([], name="row_variant"), columns=pd.Index([], name="col_variant"))
    wide = sub.pivot_table(index="benchmark", columns="variant", values="spearman", aggfunc="first")
    present = [v for v in variants.ordered(paper_order("figure4", "row_variant"), wide.columns) if v in wide.columns]
    out = pd.DataFrame(index=pd.Index(present, name="row_variant"), columns=present, dtype=float)
    out.columns.name = "col_variant"
    for i in present:
        for j in present:
            if i != j:
                both = wide[[i, j]].dropna()
                out.loc[i, j] = float((both[i] > both[j]).sum())
    return out
