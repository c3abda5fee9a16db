"""Every figure of the paper and its SM, drawn from the summary CSVs.

One module per experiment, each figure registered next to its builder with
:func:`~softmax_bottleneck.report.figures.catalog.paper_figure` (summaries read, caption, the HTML report's
paragraph): :mod:`.plif_curves` (Figure 1), :mod:`.gss_grid` (Figure 2), :mod:`.qualitative` (Figure 3),
:mod:`.wordsim` (Figure 4), :mod:`.mos_sweeps` (Figures 5, 6), :mod:`.spectra` (Figure 7, SM Figures 2-5);
:mod:`.common` holds the style, the colours and the shared helpers.

Figures are built with :class:`matplotlib.figure.Figure` (no pyplot, no global backend state) and saved with
the timestamps/software strings stripped, so the same inputs give byte-identical PDF and PNG files.
Every figure copes with small-scale data: missing datasets/models are noted on the figure, fewer points or
fewer singular values are drawn as they are; a missing summary file raises FileNotFoundError naming it.

Command line::

    python -m softmax_bottleneck figure NAME --summary-dir results/summary --out reports/figures/NAME

writes ``NAME.pdf`` and ``NAME.png`` atomically.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from softmax_bottleneck.atomic import atomic_path
from softmax_bottleneck.readback import ReadbackError
from softmax_bottleneck.report.common import require_summaries
from softmax_bottleneck.report.figures import (  # noqa: F401  (each import registers its figures)
    gss_grid,
    mos_sweeps,
    plif_curves,
    qualitative,
    spectra,
    wordsim,
)
from softmax_bottleneck.report.figures.catalog import REGISTRY, paper_figure
from softmax_bottleneck.report.figures.common import STYLE, WARNING_COLOUR, finish, footnote
from softmax_bottleneck.report.figures.gss_grid import fit_line
from softmax_bottleneck.report.figures.plif_curves import pl, pl_smooth
from softmax_bottleneck.report.layer_sources import summary_notes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FIGURES",
    "REQUIRES",
    "STYLE",
    "add_cli",
    "build",
    "fit_line",
    "paper_figure",
    "pl",
    "pl_smooth",
    "render",
    "run_cli",
    "save",
]

log = logging.getLogger(__name__)

#: figure name -> its registration (:class:`~softmax_bottleneck.report.common.PaperItem`), in the paper's order
FIGURES = REGISTRY.items()
#: figure name -> summary files (under the summary folder) it reads
REQUIRES: dict[str, list[str]] = {name: list(item.requires) for name, item in FIGURES.items()}

_PDF_METADATA = {"CreationDate": None, "Creator": None, "Producer": None}
_PNG_METADATA = {"Software": None}


def build(name: str, summary_dir, *, banner: str | None = None) -> Figure:
    """Figure ``name`` (see :data:`FIGURES`) from the summary CSVs in ``summary_dir``: its paper name on top ("SM
    Figure 2"), ``banner`` in red under it (not on a figure that reads no result, Figure 1's illustration), and a red
    note under the panels when an older source of a layer made some of its results
    (:mod:`~softmax_bottleneck.report.layer_sources`)."""
    import matplotlib

    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; valid names: {', '.join(FIGURES)}")
    require_summaries(summary_dir, FIGURES[name].requires)
    with matplotlib.rc_context(STYLE):
        fig = FIGURES[name].build(Path(summary_dir))
        for text in summary_notes(summary_dir, FIGURES[name].requires):
            footnote(fig, text, color=WARNING_COLOUR)
        return finish(fig, banner if FIGURES[name].requires else None, FIGURES[name].label)


def render(name: str, summary_dir, out_prefix, *, banner: str | None = None) -> None:
    """Draw figure ``name`` and write ``<out_prefix>.pdf`` and ``<out_prefix>.png`` atomically (deterministic)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        save(build(name, summary_dir, banner=banner), out_prefix)


def save(fig: Figure, out_prefix) -> None:
    """Write ``fig`` as ``<out_prefix>.pdf`` and ``<out_prefix>.png`` atomically, without timestamps or software
    strings (the same figure gives byte-identical files); call it within ``matplotlib.rc_context(STYLE)``."""
    prefix = str(out_prefix)
    with atomic_path(prefix + ".pdf") as tmp:
        fig.savefig(tmp, format="pdf", metadata=_PDF_METADATA)
    with atomic_path(prefix + ".png") as tmp:
        fig.savefig(tmp, format="png", metadata=_PNG_METADATA)


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.description = (
        "Draw one figure of the paper or its SM from the summary CSVs, with the paper's values where it reports "
        "them: PREFIX.pdf and PREFIX.png (byte-identical for the same inputs)."
    )
    parser.add_argument("name", metavar="NAME", choices=list(FIGURES), help=f"the figure, one of: {', '.join(FIGURES)}")
    parser.add_argument("--summary-dir", required=True, help="folder of the summary CSVs (results/summary)")
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.pdf and PREFIX.png")
    parser.add_argument(
        "--banner", default=None, metavar="TEXT", help="text shown in red across the top (e.g. a small-scale mark)"
    )


def run_cli(args) -> int:
    try:
        render(args.name, args.summary_dir, args.out, banner=args.banner)
    except (FileNotFoundError, ReadbackError) as err:
        raise SystemExit(f"figure {args.name}: {err}") from None
    log.info("wrote %s.pdf and %s.png", args.out, args.out)
    return 0
