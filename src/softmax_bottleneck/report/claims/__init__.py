"""Does the study support the paper? Its conclusions as claims, each decided from the summaries by a rule stated
before any run (docs/claims.md).

* :mod:`.catalog`: the claims (statement, source, the summary rows read, the paper's value, the rule, the fewest runs);
* :mod:`.rules`: the decision rules and their statistics (``scipy.stats`` through
  :mod:`softmax_bottleneck.analysis.stats`);
* :mod:`.evidence`: the summary rows of a claim, and whether its runs are at the paper's scale;
* :mod:`.page`: the verdicts and the page (CSV, Markdown, HTML, LaTeX; the preview's, provisional);
* :mod:`.seeds`: the smallest effect each claim's n detects and the n the paper's effect needs;
* :mod:`.operating`: how often each verdict comes out under the paper's truth and the opposite one (simulated).

Command line::

    python -m softmax_bottleneck claims --summary-dir results/summary --out reports/claims
    python -m softmax_bottleneck claims --paper --out claims-paper      # the paper's own numbers as input
    python -m softmax_bottleneck claims --seeds [--summary-dir DIR] [--claim NAME ...]
    python -m softmax_bottleneck claims --simulate [--studies N] [--seed S] [--claim NAME ...]
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

from softmax_bottleneck.argtypes import positive_int_up_to
from softmax_bottleneck.atomic import write_error
from softmax_bottleneck.readback import ReadbackError
from softmax_bottleneck.report.claims.catalog import CLAIMS, REQUIRES
from softmax_bottleneck.report.claims.operating import MAX_STUDIES, simulate, simulation_markdown
from softmax_bottleneck.report.claims.page import FORMATS, decide_all, decide_paper, render_preview, tally, write
from softmax_bottleneck.report.claims.seeds import seeds_markdown, seeds_table

__all__ = ["CLAIMS", "FORMATS", "REQUIRES", "add_cli", "render_preview", "run_cli"]

log = logging.getLogger(__name__)


def add_cli(parser) -> None:
    parser.description = (
        "Decide each of the paper's conclusions from the summary CSVs by its stated rule: PREFIX.csv, .md, .html and "
        ".tex, one row per claim (statement, the paper's value, ours with its 95 % interval, n, verdict, source). "
        "--seeds prints instead, per claim on a test, the smallest effect its n detects and the seeds the paper's "
        "effect needs."
    )
    parser.add_argument("--summary-dir", metavar="DIR", help="folder of the summary CSVs (results/summary)")
    parser.add_argument(
        "--paper",
        action="store_true",
        help="decide on the paper's own numbers instead of summaries (the paper against itself)",
    )
    parser.add_argument("--out", metavar="PREFIX", help="output prefix: writes PREFIX.csv, .md, .html and .tex")
    parser.add_argument("--banner", default=None, metavar="TEXT", help="text shown in bold at the top")
    parser.add_argument(
        "--seeds",
        action="store_true",
        help="print the seeds table (Markdown) instead of writing the page; without --summary-dir "
        "(nothing run yet) from the paper's spreads",
    )
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="print, per claim, how often each verdict comes out over studies simulated from the paper's numbers "
        "and from the opposite truth, at the paper's n and at the claim's minimum",
    )
    parser.add_argument(
        "--studies",
        type=positive_int_up_to(MAX_STUDIES),
        default=2000,
        metavar="N",
        help="simulated studies per claim, truth and size (default 2000)",
    )
    parser.add_argument(
        "--seed", type=positive_int_up_to(2**32 - 1), default=1, metavar="S", help="the simulation's seed (default 1)"
    )
    parser.add_argument(
        "--claim",
        action="append",
        metavar="NAME",
        choices=list(CLAIMS),
        help=f"only this claim (repeatable), one of: {', '.join(CLAIMS)}",
    )


def run_cli(args) -> int:
    if args.paper and args.summary_dir:
        raise SystemExit("claims: give --summary-dir or --paper, not both")
    if args.summary_dir and not Path(args.summary_dir).is_dir():
        raise SystemExit(f"claims: --summary-dir {args.summary_dir}: no such folder (the study's results/summary)")
    if args.simulate and (args.seeds or args.summary_dir or args.paper or args.out):
        given = [f"--{o.replace('_', '-')}" for o in ("seeds", "summary_dir", "paper", "out") if getattr(args, o)]
        raise SystemExit(f"claims: --simulate draws its own studies and writes its table to stdout; drop "
                         f"{', '.join(given)}")  # fmt: skip
    names = set(args.claim) if args.claim else None
    if args.simulate:
        table = simulate(names, args.studies, args.seed)
        sys.stdout.write(simulation_markdown(table, args.studies, args.seed))
        return 0
    try:
        decisions = decide_all(args.summary_dir, names) if args.summary_dir else decide_paper(names)
    except (FileNotFoundError, ReadbackError) as err:
        raise SystemExit(f"claims: {err}") from None
    if args.seeds:
        asked = [d.claim.name for d in decisions if not d.claim.project]
        sys.stdout.write(seeds_markdown(seeds_table(decisions, ours=bool(args.summary_dir)), asked))
        return 0
    if not (args.summary_dir or args.paper):
        raise SystemExit("claims: the page needs its input: --summary-dir DIR (the study's results/summary) or --paper")
    if not args.out:
        raise SystemExit("claims: the page needs --out PREFIX (its .csv, .md, .html and .tex)")
    banner = args.banner
    if args.paper:
        banner = f"{banner} — " if banner else ""
        banner += "the paper's own numbers as input (the paper checked against itself)"
    try:
        table = write_whole(decisions, args.out, banner)
    except OSError as err:
        raise SystemExit(f"claims: --out {write_error(args.out, err)}") from None
    log.info("wrote %s.{%s}: %s", args.out, ",".join(FORMATS), tally(table))
    return 0


def out_prefix_problem(prefix: str) -> str | None:
    """Why ``--out PREFIX`` cannot name the page's files (PREFIX.csv, .md, .html, .tex), or None."""
    if prefix.endswith(("/", os.sep)) or Path(prefix).name in ("", ".", ".."):
        return "a prefix of file names (e.g. reports/claims), not a folder"
    for ext in FORMATS:
        target = Path(f"{prefix}.{ext}")
        if os.path.lexists(target) and (target.is_symlink() or not target.is_file()):
            return f"{target} is there and is not a regular file; remove it or choose another prefix"
    return None


def write_whole(decisions, prefix: str, banner: str | None):
    """The page written whole or not at all: its four files written beside their place, then moved into it."""
    problem = out_prefix_problem(prefix)
    if problem:
        raise SystemExit(f"claims: --out {prefix}: {problem}")
    folder = Path(prefix).parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".claims-") as scratch:
        table = write(decisions, Path(scratch) / "page", banner)
        for ext in FORMATS:
            os.replace(Path(scratch) / f"page.{ext}", f"{prefix}.{ext}")
    return table
