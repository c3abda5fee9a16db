"""What a claim is (:class:`Claim`), the fewest runs each kind is decided on, and the helpers the catalog builds claims
with (the paper's seeds, a model's sample, the rows of one dataset)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from softmax_bottleneck.report import variants
from softmax_bottleneck.report.claims.evidence import Basis, Summaries
from softmax_bottleneck.report.claims.rules import Evidence, Paper, Rule, Sample
from softmax_bottleneck.report.reported import DATASETS

#: the fewest runs each kind of claim is decided on (below: "too few runs"), declared with the rules
MIN_SEEDS = 5  # seeds per model of a t-test (the paper: 10, 11)
MIN_GRID_POINTS = 10  # GSS grid points of a correlation (the paper: 70 and 35; 51 and 26 in its windows)
MIN_MODELS = 5  # output layers of a claim across models (the paper: 5 in Table 2, 6 in SM Table 3)
MIN_PAIRED_MODELS = 4  # output layers trained with both schedules (the paper: 6)
MIN_SWEEP = 3  # values of a sweep (K: 6 on PTB, 3 on WT2; MoS's dropout: 3)
MIN_BENCHMARKS = 5  # word-similarity benchmarks both models have (the paper: 13)
MIN_CONTEXTS = 18  # Figure 3's contexts with a high-rank and a low-rank model's top 5: every one (the paper: 18)

#: the paper's seeds per model behind its t-tests (random seeds) and its means ± SD (all seeds, Tables 2, 3)
PAPER_RANDOM_SEEDS = 10
PAPER_ALL_SEEDS = 11


@dataclass(frozen=True)
class Claim:
    """One conclusion of the paper on one dataset.

    ``statement`` and ``quote`` (the paper's words), ``source`` (its table or figure); ``build`` makes our evidence
    from the rows of each ``basis`` (in its order); ``paper`` gives the paper's value and evidence; ``rule`` decides;
    ``min_n`` is the least ``n`` of the rule's estimate (counted in ``unit``) it decides on; ``formalised``: the
    paper says it in words and the statistic is this project's; ``project``: the statement is this project's, not
    the paper's (a plug-in layer's row: no paper value); both said on the page."""

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
    quote: str = ""
    formalised: bool = False
    project: bool = False

    def rows(self, summaries: Summaries) -> list[pd.DataFrame]:
        """The summary rows of each basis."""
        return [summaries.rows(basis) for basis in self.basis]

    @property
    def label(self) -> str:
        """``PTB: <statement>``."""
        return f"{DATASETS.get(self.dataset, self.dataset)}: {self.statement}"


def of(frame: pd.DataFrame, variant: str, column: str) -> Sample:
    """The sample of ``column`` over ``variant``'s rows."""
    return Sample.of(frame.loc[frame["variant"] == variant, column])


def display(names) -> tuple[str, ...]:
    return tuple(variants.display(v) for v in names)


def in_dataset(frame: pd.DataFrame, dataset: str, **equal) -> pd.DataFrame:
    """The rows of ``dataset`` whose columns equal ``equal``."""
    keep = frame["dataset"] == dataset
    for key, value in equal.items():
        keep &= frame[key] == value
    return frame[keep]


def paper_group(row, column: str = "test_ppl", n: int = PAPER_RANDOM_SEEDS) -> Sample:
    """A model's sample as the paper prints it: ``<column>_mean``, ``<column>_sd`` and ``n`` seeds."""
    return Sample(float(row[f"{column}_mean"]), float(row[f"{column}_sd"]), n)
