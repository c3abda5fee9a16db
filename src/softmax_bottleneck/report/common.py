"""What the tables and the figures share: reading the summaries, the statistics they quote, and their registry.

Every table and figure of the paper and its SM is one registration, next to its builder::

    @paper_table("table2", requires=["main.csv"], caption="Table 2: ...", layout=table2_layout, report="...")
    def table2(summary_dir) -> pd.DataFrame: ...

(``paper_table`` in :mod:`.tables.catalog`, ``paper_figure`` in :mod:`.figures.catalog`, both a
:meth:`Registry.register`). The command line, the workflow's rules and inputs, the ``--list-rules`` descriptions and the
HTML report's captions are all read from these registrations.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from softmax_bottleneck import readback
from softmax_bottleneck.analysis.rank import EPSILONS
from softmax_bottleneck.presets import VOCAB_SIZES
from softmax_bottleneck.report import reported
from softmax_bottleneck.report.summaries import COVERAGE_COLUMNS, SOURCE_COLUMNS, TOP5_COLUMNS, TOP5_MODEL_COLUMNS
from softmax_bottleneck.study.summary_records import COVERAGE_SUMMARY, check_selection

log = logging.getLogger(__name__)

#: the ε-effective-rank columns of the summaries, one per ε of the analysis (1e-3, 1e-4, 1e-5)
EPS: list[str] = [f"erank_{e}" for e in EPSILONS]
PPL3: list[str] = ["train_ppl", "valid_ppl", "test_ppl"]


# --------------------------------------------------------------------------------------------- statistics
def _clean(values) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample sd via :func:`softmax_bottleneck.analysis.stats.mean_sd`; NaN where the sample is too small."""
    vals = _clean(values)
    if not vals:
        return math.nan, math.nan
    if len(vals) == 1:
        return vals[0], math.nan
    from softmax_bottleneck.analysis import stats

    mean, sd = stats.mean_sd(vals)
    return float(mean), float(sd)


def t_test(a, b) -> float:
    """Two-sided pooled-variance Student t-test p (:func:`..analysis.stats.student_t`); NaN if n < 2."""
    a, b = _clean(a), _clean(b)
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return math.nan
    from softmax_bottleneck.analysis import stats

    return float(stats.student_t(a, b))


def pearson(x, y) -> tuple[float, float]:
    """Pearson r and p (:func:`softmax_bottleneck.analysis.stats.pearson`); NaN for < 3 points or a constant input."""
    pairs = [(float(a), float(b)) for a, b in zip(x, y, strict=True) if pd.notna(a) and pd.notna(b)]
    if len(pairs) < 3:
        return math.nan, math.nan
    xs, ys = zip(*pairs, strict=True)
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return math.nan, math.nan
    from softmax_bottleneck.analysis import stats

    r, p = stats.pearson(list(xs), list(ys))
    return float(r), float(p)


def params_m(values) -> float:
    """Mean number of parameters, in millions (NaN if none)."""
    vals = _clean(values)
    return float(np.mean(vals)) / 1e6 if vals else math.nan


def fkey(value) -> float:
    """Float key that survives a CSV round trip (6 significant digits): the tolerant equality of swept values
    (K, dropoutl, c) between our summaries and the paper's numbers."""
    try:
        return float(f"{float(value):.6g}")
    except (TypeError, ValueError):
        return math.nan


# --------------------------------------------------------------------------------------------- inputs
def require_summaries(summary_dir, files: Sequence[str]) -> None:
    """FileNotFoundError naming the first of ``files`` missing from ``summary_dir`` (the caller names what needs it:
    the command line's ``table NAME: ...``, a preview's placeholder)."""
    for fname in files:
        path = Path(summary_dir) / fname
        if not os.path.lexists(path):  # a FIFO or a link is there: the reader names what it is
            raise FileNotFoundError(f"{path}: no such summary file")


#: the columns every run summary the workflow writes has, and the tables, figures and claims read: a file without
#: one (emptied, or a column cut out) would show every cell that reads it as "—", a run not made yet
RUN_REQUIRED = ("dataset", "variant", "schedule", "seed", "seed_kind", "train_ppl", "valid_ppl", "test_ppl",
                "press_rank")  # fmt: skip


#: the columns that tell one run of a run summary from another
RUN_IDENTITY = ("dataset", "variant", "schedule", "seed", "gss_c", "gss_k", "n_experts", "dropoutl")
#: the columns that tell one row of the word-similarity summary from another
WORDSIM_IDENTITY = ("dataset", "variant", "benchmark")
#: the columns that tell one row of the top-5 summary from another (a model's context)
TOP5_IDENTITY = ("model", "group", "number")


def empty_cell(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value)


def check_once(frame: pd.DataFrame, path, identity: Sequence[str] = WORDSIM_IDENTITY) -> pd.DataFrame:
    """``frame`` when no two rows share the ``identity`` columns it has: a run (or a model's benchmark) counts once;
    :class:`~softmax_bottleneck.readback.ReadbackError` naming both rows otherwise (a repeated row would count as
    another seed: a mean's n and sd would be wrong)."""
    columns = [column for column in identity if column in frame.columns]
    if not columns or frame.empty:
        return frame
    keys = [tuple(row) for row in frame[columns].astype(str).itertuples(index=False)]
    seen: dict[tuple, int] = {}
    for second, key in enumerate(keys):
        if key not in seen:
            seen[key] = second
            continue
        first, shown = seen[key], frame.iloc[second]
        what = ", ".join(f"{column} {shown[column]}" for column in columns if not empty_cell(shown[column]))
        why = f"row {second + 1} repeats row {first + 1} ({what}): a run is counted once"
        raise readback.ReadbackError(path, f"{why}; rebuild the summary (snakemake) or remove the repeated row")
    return frame


def read_summary(
    summary_dir,
    name: str,
    *,
    text: Sequence[str] = (),
    numbers: Sequence[str] = (),
    required: Sequence[str] = (),
) -> pd.DataFrame:
    """Read ``summary_dir/name``; FileNotFoundError naming the file if it is absent; a binary or malformed file, an
    impossible number (a perplexity below 1, ...) or a file without a column of ``required`` is a
    :class:`~softmax_bottleneck.readback.ReadbackError` naming it (and its column and row). Every other column named
    in ``text`` (strings) or ``numbers`` (floats) is there, empty where the file lacks it (an older summary)."""
    path = Path(summary_dir) / name
    if not os.path.lexists(path):  # a FIFO or a link is there: the reader names what it is
        raise FileNotFoundError(f"summary file {path} not found")
    frame = readback.read_csv(path)
    if required and frame.columns.empty:
        raise readback.ReadbackError(path, "empty (no header): not a summary of the workflow; rebuild it (snakemake)")
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise readback.ReadbackError(
            path, f"no column {', '.join(missing)}: not a summary of the workflow (or one cut); rebuild it (snakemake)"
        )
    readback.check_columns(frame, path)
    for col in (*text, *numbers):
        if col not in frame.columns:
            frame[col] = pd.Series(dtype=object if col in text else float)
    return frame


def read_runs(summary_dir, name: str, extra: Sequence[str] = ()) -> pd.DataFrame:
    """A run summary (one row per run) with every column the tables and figures read, plus the numeric ``extra``
    ones (e.g. ``n_experts``); it must have :data:`RUN_REQUIRED`, another column it lacks is there, empty."""
    numbers = ["seed", "parameters", *PPL3, "seconds_per_epoch", "fused_runs", "press_rank", *EPS, *extra]
    text = ["dataset", "variant", "schedule", "seed_kind"]
    frame = read_summary(summary_dir, name, text=text, numbers=numbers, required=RUN_REQUIRED)
    _check_ranks_within_vocabulary(frame, Path(summary_dir) / name)
    return check_once(frame, Path(summary_dir) / name, RUN_IDENTITY)


def _check_ranks_within_vocabulary(frame: pd.DataFrame, path: Path) -> None:
    """A rank of a run's log-P matrix (rows × its dataset's vocabulary) is at most the vocabulary's size."""
    vocab = pd.to_numeric(frame["dataset"].map(VOCAB_SIZES), errors="coerce")
    for column in ("press_rank", *EPS):
        above = frame[column] > vocab
        if above.any():
            row = int(above.to_numpy().nonzero()[0][0])
            value, dataset = frame[column].iloc[row], frame["dataset"].iloc[row]
            why = f"is impossible (a rank of a {dataset} log-P matrix is at most its {VOCAB_SIZES[dataset]:,} words)"
            raise readback.ReadbackError(path, f"column {column}, row {row + 1}: {value:g} {why}")


def read_wordsim(summary_dir) -> pd.DataFrame:
    """The word-similarity summary (E6, ``wordsim.csv``), its benchmarks named as the paper names them
    (:func:`~softmax_bottleneck.report.reported.normalise_benchmark`)."""
    frame = read_summary(
        summary_dir,
        "wordsim.csv",
        text=["dataset", "variant", "benchmark"],
        numbers=["pairs", "found", "not_found", "spearman"],
        required=["dataset", "variant", "benchmark", "spearman"],  # the pair counts came later
    )
    frame = check_once(frame, Path(summary_dir) / "wordsim.csv", WORDSIM_IDENTITY)
    return frame.assign(benchmark=frame["benchmark"].map(reported.normalise_benchmark))


def read_wordsim_coverage(summary_dir) -> pd.DataFrame:
    """The vocabularies' coverage of the word-similarity benchmarks (SM Table 13, ``wordsim_coverage.csv``), its
    benchmarks named as the paper names them; a benchmark counts once per dataset."""
    name = COVERAGE_SUMMARY
    frame = read_summary(summary_dir, name, text=["dataset", "benchmark"], required=COVERAGE_COLUMNS)
    frame = check_once(frame, Path(summary_dir) / name, ("dataset", "benchmark"))
    return frame.assign(benchmark=frame["benchmark"].map(reported.normalise_benchmark))


def read_top5(summary_dir) -> pd.DataFrame:
    """The top-5 summary (E5, ``top5.csv``) with every column of
    :data:`~softmax_bottleneck.report.summaries.TOP5_COLUMNS` (as text)."""
    later = {*TOP5_MODEL_COLUMNS, *SOURCE_COLUMNS}  # the models' dataset, variant and schedule, their source
    required = [column for column in TOP5_COLUMNS if column not in later]
    return read_summary(summary_dir, "top5.csv", text=TOP5_COLUMNS, required=required)


def one_run_per(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One run per key combination: the authors'-seed run if there is one, else the lowest seed."""
    if frame.empty:
        return frame
    order = frame.assign(_pref=(frame["seed_kind"] != "authors").astype(int))
    order = order.sort_values(["_pref", "seed"], kind="mergesort")
    dup = order.duplicated(keys)
    if dup.any():
        log.warning(
            "several runs for %s; keeping the authors'-seed / lowest seed", order.loc[dup, keys].values.tolist()
        )
    return order[~dup].drop(columns="_pref")


def as_hit(value) -> float:
    """A top-5 hit flag as 1.0 / 0.0 (NaN if absent or unreadable): ``True``/``False``, 1/0 (also ``"1.0"``),
    ``"yes"``/``"no"``, ``"y"``/``"n"``, any case; Figure 3 and SM Table 2 read it alike."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "y"):
            return 1.0
        if text in ("false", "no", "n"):
            return 0.0
        try:
            value = float(text)
        except ValueError:
            return math.nan
    if value is None or pd.isna(value):
        return math.nan
    return float(value) if float(value) in (0.0, 1.0) else math.nan


# --------------------------------------------------------------------------------------------- the registry
#: longest rule description shown by ``snakemake --list-rules``
DESCRIPTION_LENGTH = 120

_NAME = re.compile(r"^(sm_)?(table|figure)(\d+)(_[a-z0-9_]+)?$")

#: the HTML report's second paragraph under every table / figure (``{name}``: the item's name)
REPORT_TAILS: dict[str, str] = {
    "table": "Each cell shows our value and, in brackets, the paper's (— where there is none), in the paper's layout "
    "and rounding (``reports/tables/{name}.md`` and ``{name}.html``); ``{name}.csv`` holds every value at full "
    "precision, with ours − paper.",
    "figure": "Drawn from the summary tables under ``results/summary/`` (``reports/figures/{name}.pdf`` is the vector "
    "version).",
}


@dataclass(frozen=True)
class PaperItem:
    """One table or figure of the paper or its SM: how to build it, from which summaries, and how to describe it.

    ``caption`` is the one line printed with the table (Markdown / HTML / LaTeX) and by ``snakemake --list-rules``;
    its ``{fields}``, if any, are filled by ``fill(table)`` from the built table (what was run, e.g. the K of SM
    Table 12), and by ``fill(None)`` where there is no table. ``report`` is the paragraph (reStructuredText) of the
    workflow's HTML report; ``layout`` (tables only) lays the tidy comparison table out as the paper prints it.
    ``shows``: the variants whose results a table without a ``variant`` column shows (``()`` for none: SM Table 13's
    vocabulary counts), for its older-source notes (:mod:`~softmax_bottleneck.report.layer_sources`); None: every
    variant of the summaries it reads. ``runs``: the runs of those summaries it reads, where not all (alternatives of
    ``{field: values}``, :func:`softmax_bottleneck.study.summary_records.selected`): the workflow builds it from its
    own summaries of those runs alone, so that building it trains nothing else.
    """

    kind: str  # "table" or "figure"
    name: str
    build: Callable[[Path], Any]
    requires: tuple[str, ...]
    caption: str
    report: str
    layout: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    fill: Callable[[pd.DataFrame | None], dict[str, str]] | None = None
    shows: tuple[str, ...] | None = None
    runs: tuple[dict[str, tuple[str, ...]], ...] | None = None

    def caption_for(self, table: pd.DataFrame | None) -> str:
        """The caption of ``table`` (this item built from some summaries); ``None``: of no particular build."""
        return self.caption.format(**self.fill(table)) if self.fill else self.caption

    @property
    def label(self) -> str:
        """``Table 2``, ``SM Figure 5``, ``Figure 2 pearson``: the item's label in the HTML report."""
        sm, kind, number, rest = _NAME.match(self.name).groups()
        return ("SM " if sm else "") + f"{kind.title()} {number}" + (rest or "").replace("_", " ")

    @property
    def category(self) -> str:
        """The item's category in the HTML report: the paper or its supplementary material."""
        return "Supplementary material" if self.name.startswith("sm_") else "Paper"

    @property
    def description(self) -> str:
        """The caption cut to :data:`DESCRIPTION_LENGTH` characters at a word (``snakemake --list-rules``)."""
        text = self.caption_for(None)
        if len(text) > DESCRIPTION_LENGTH:
            text = text[: DESCRIPTION_LENGTH - 2].rsplit(" ", 1)[0] + " …"
        return text

    @property
    def report_caption(self) -> str:
        """The HTML report's caption: :attr:`report`, then what the files hold (reStructuredText)."""
        return f"{self.report}\n\n{REPORT_TAILS[self.kind].format(name=self.name)}\n"


def paper_order(name: str) -> tuple:
    """Sort key of an item name: the paper's items, then the SM's, by number; a derived one (``figure2_pearson``)
    after the paper's tables, as its figure's text (tables before figures)."""
    sm, kind, number, rest = _NAME.match(name).groups()
    return (bool(rest), kind != "table", bool(sm), int(number), name)


class Registry:
    """The tables (or the figures) of the paper and its SM, each registered once with :meth:`register`."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, PaperItem] = {}

    def register(
        self,
        name: str,
        *,
        requires: Sequence[str],
        caption: str,
        report: str,
        layout: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
        fill: Callable[[pd.DataFrame | None], dict[str, str]] | None = None,
        shows: Sequence[str] | None = None,
        runs: Sequence[dict[str, Sequence[str]]] | None = None,
    ) -> Callable[[Callable], Callable]:
        """Decorator registering ``build(summary_dir)`` as the item ``name`` (see :class:`PaperItem`)."""
        if not _NAME.match(name):
            raise ValueError(f"{self.kind} name {name!r} must read like table2, sm_table12 or figure2_pearson")
        if (layout is None) != (self.kind == "figure"):
            raise ValueError(f"{self.kind} {name!r}: a table needs a layout, a figure has none")
        if not caption or not report:
            raise ValueError(f"{self.kind} {name!r}: needs a caption and a report paragraph")
        selection = check_selection(runs)

        def decorate(build: Callable) -> Callable:
            previous = self._items.get(name)
            if previous is not None and previous.build is not build:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            shown = None if shows is None else tuple(shows)
            self._items[name] = PaperItem(
                self.kind, name, build, tuple(requires), caption, report, layout, fill, shown, selection
            )
            return build

        return decorate

    def __getitem__(self, name: str) -> PaperItem:
        return self._items[name]

    def items(self) -> dict[str, PaperItem]:
        """Every registered item, by name, in the paper's order (:func:`paper_order`)."""
        return {name: self._items[name] for name in sorted(self._items, key=paper_order)}


def stamp_banner(stamp: str, done: int, planned: int, banner: str | None, counted: str = "runs") -> str:
    """The banner of a provisional table, figure or claims page: ``PROVISIONAL, <stamp>: n of N runs in`` (or models,
    corpora: ``counted``), then the configuration's own banner."""
    text = f"PROVISIONAL, {stamp}: {done} of {planned} {counted} in"
    return f"{text} — {banner}" if banner else text
