"""Every table of the paper and its SM, rebuilt from the summary CSVs and set beside the reported numbers.

One module per experiment, each table registered next to its builder with
:func:`~softmax_bottleneck.report.tables.catalog.paper_table` (summaries read, caption, the paper's layout, the HTML
report's paragraph): :mod:`.main_comparison` (Tables 2, 3, 4, SM Table 1), :mod:`.ntet_ranks` (Tables 1, 6, SM Tables
10, 11, 17, 18), :mod:`.mos_sweeps` (SM Tables 4, 5, 12), :mod:`.fair` (Table 5), :mod:`.wordsim` (SM Tables 3, 13,
Figure 4's counts), :mod:`.qualitative` (SM Table 2), :mod:`.robustness` (SM Tables 14-16), :mod:`.gss_grid`
(Figure 2's Pearson r); :mod:`.common` holds the comparison helpers, :mod:`.cells` the paper's cell formats and
:mod:`.render` the Markdown/HTML rendering.

Command line::

    python -m softmax_bottleneck table NAME --summary-dir results/summary --out reports/tables/NAME

writes ``NAME.csv`` (tidy, full precision: ours, the paper's and their difference per quantity), ``NAME.md``,
``NAME.html`` and ``NAME.tex`` (the paper's layout, ``ours (paper)`` per cell, with the caption; LaTeX with
booktabs rules) and ``NAME.ours.tex`` (the same, ours alone), atomically.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.readback import ReadbackError
from softmax_bottleneck.report.common import mean_sd, pearson, read_summary, require_summaries, t_test
from softmax_bottleneck.report.layer_sources import shown_layers, summary_notes, with_notes
from softmax_bottleneck.report.tables import (  # noqa: F401  (each import registers its tables)
    fair,
    gss_grid,
    main_comparison,
    mos_sweeps,
    ntet_ranks,
    qualitative,
    robustness,
    wordsim,
)
from softmax_bottleneck.report.tables.catalog import REGISTRY, paper_table
from softmax_bottleneck.report.tables.common import compare
from softmax_bottleneck.report.tables.render import to_html, to_latex, to_markdown

__all__ = [
    "CAPTIONS",
    "REQUIRES",
    "TABLES",
    "add_cli",
    "build",
    "compare",
    "mean_sd",
    "paper_table",
    "pearson",
    "read_summary",
    "render",
    "run_cli",
    "t_test",
    "to_html",
    "to_latex",
    "to_markdown",
]

log = logging.getLogger(__name__)

#: table name -> its registration (:class:`~softmax_bottleneck.report.common.PaperItem`), in the paper's order
TABLES = REGISTRY.items()
#: table name -> summary files (under the summary folder) it reads
REQUIRES: dict[str, list[str]] = {name: list(item.requires) for name, item in TABLES.items()}
#: table name -> its one-line caption
CAPTIONS: dict[str, str] = {name: item.caption for name, item in TABLES.items()}


def build(name: str, summary_dir) -> pd.DataFrame:
    """Table ``name`` (see :data:`TABLES`) from the summary CSVs in ``summary_dir``."""
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; valid names: {', '.join(TABLES)}")
    require_summaries(summary_dir, TABLES[name].requires)
    return TABLES[name].build(Path(summary_dir))


def render(name: str, summary_dir, out_prefix, *, banner: str | None = None) -> pd.DataFrame:
    """Build table ``name`` and write ``<out_prefix>.csv`` (tidy, full precision), ``.md``, ``.html`` and ``.tex``
    (the paper's layout, with ``banner`` on top when given, and a note when an older source of a layer made some
    results, :mod:`~softmax_bottleneck.report.layer_sources`) and ``.ours.tex`` (ours alone), atomically."""
    table = build(name, summary_dir)
    shown = shown_layers(table, TABLES[name].shows)
    notes = summary_notes(summary_dir, TABLES[name].requires, shown)  # an older source of a layer it shows
    banner = with_notes(banner, notes)
    prefix = str(out_prefix)
    atomic_write_text(table.to_csv(index=False, lineterminator="\n"), prefix + ".csv")  # floats as repr: exact
    atomic_write_text(to_markdown(name, table, banner), prefix + ".md")
    atomic_write_text(to_html(name, table, banner), prefix + ".html")
    atomic_write_text(to_latex(name, table, banner=banner), prefix + ".tex")
    atomic_write_text(to_latex(name, table, paper=False, banner=banner), prefix + ".ours.tex")
    return table


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.description = (
        "Render one table of the paper or its SM from the summary CSVs, our values beside the paper's: "
        "PREFIX.csv (full precision), PREFIX.md, PREFIX.html and PREFIX.tex (the paper's layout), PREFIX.ours.tex "
        "(ours alone)."
    )
    parser.add_argument("name", metavar="NAME", choices=list(TABLES), help=f"the table, one of: {', '.join(TABLES)}")
    parser.add_argument("--summary-dir", required=True, help="folder of the summary CSVs (results/summary)")
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.csv, .md, .html, .tex and .ours.tex")
    parser.add_argument(
        "--banner", default=None, metavar="TEXT", help="text shown in bold at the top (e.g. a small-scale mark)"
    )


def run_cli(args) -> int:
    try:
        render(args.name, args.summary_dir, args.out, banner=args.banner)
    except (FileNotFoundError, ReadbackError) as err:
        raise SystemExit(f"table {args.name}: {err}") from None
    log.info("wrote %s.csv, .md, .html, .tex and .ours.tex", args.out)
    return 0
