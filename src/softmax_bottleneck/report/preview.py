"""Provisional tables and figures while the study runs (``preview``; ``snakemake preview``).

Every table and figure of the paper and its SM (and each configured sweep's) is rendered by its own builder
(:mod:`.tables`, :mod:`.figures`, :mod:`.sweeps`) from summaries of the runs finished so far and the analyses done
so far, collected by :mod:`.summaries` as the workflow collects the final ones:

* ``<results>/preview/summary/NAME.csv``: the summaries;
* ``<reports>/preview/tables/NAME.{csv,md,html,tex}``: each table in the paper's layout with a last column
  ``n of N seeds`` (``runs`` where a row is not one model, ``models`` for the analyses' reference models): how many of
  the runs behind that row's cells are in; the CSV is the tidy table with ``finished``, ``planned`` and
  ``provisional`` (the date) added;
* ``<reports>/preview/figures/NAME.{pdf,png}``: each figure, its note saying how many runs it draws on;
* ``<reports>/preview/claims.{csv,md,html,tex}``: the claims page (:mod:`.claims`), each claim's runs in of N;

(``<results>``, ``<reports>``: :func:`~softmax_bottleneck.study.runs.output_roots`). Every file is stamped
provisional with the date and time, on top. Nothing but files is read: no training or analysis is started or waited
for. A table or figure none of whose runs is in yet says so in its files instead of failing, and so does one its
builder cannot make from the partial data (naming why). Once every run is finished and analysed, the preview's
numbers are the final tables'.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_write_csv, atomic_write_text
from softmax_bottleneck.report import claims, figures, summaries, sweeps, tables
from softmax_bottleneck.report.common import fkey, require_summaries, stamp_banner
from softmax_bottleneck.report.figures.common import (
    COLUMN,
    STYLE,
    WARNING_COLOUR,
    empty_panel,
    finish,
    footnote,
    new_figure,
)
from softmax_bottleneck.report.progress import PREVIEW
from softmax_bottleneck.report.tables.cells import missing
from softmax_bottleneck.report.tables.render import LEGEND, display_frame, html_page, latex_table, markdown_page
from softmax_bottleneck.study.runs import SWEEP_PREFIX, Run, Study, output_roots
from softmax_bottleneck.study.summary_records import COVERAGE_SUMMARY, FILE_KEYS, coverage_records, summary_records

log = logging.getLogger(__name__)

TABLE_FORMATS = ("csv", "md", "html", "tex")
FIGURE_FORMATS = ("pdf", "png")


@dataclass(frozen=True)
class Planned:
    """One input of a summary: its record (:mod:`.summaries`), the files it needs, and what it is (for counting)."""

    record: dict
    needs: tuple[str, ...]
    keys: dict
    optional: tuple[tuple[str, str], ...] = ()  # record key -> file, kept only where the file exists (the rank)


def _run_keys(run: Run) -> dict:
    return {"dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
            **run.hyperparameters}  # fmt: skip


def _planned(kind: str, run: Run, record: dict) -> Planned:
    """A record of :func:`~softmax_bottleneck.study.summary_records.summary_records` as the preview plans it: the
    files ``summarize`` needs for its kind, the others (a run's rank, a model's metrics) kept where they exist."""
    required = summaries.RECORD_KEYS.get(kind, FILE_KEYS)  # copy: its one file
    files = {key: value for key, value in record.items() if key in FILE_KEYS}
    identity = {key: value for key, value in record.items() if key not in files}
    keys = _run_keys(run) if kind in ("runs", "sweep") else {**_run_keys(run), **identity}
    return Planned(
        record={key: value for key, value in record.items() if key not in files or key in required},
        needs=tuple(value for key, value in files.items() if key in required),
        keys=keys,
        optional=tuple((key, value) for key, value in files.items() if key not in required),
    )


def planned_summaries(study: Study) -> dict[str, tuple[str, list[Planned]]]:
    """Summary file → (its kind in :data:`.summaries.COLLECTORS`, ``sweep``, or ``copy`` for E12's; its planned
    inputs): the records the workflow's summarize rules read (:mod:`softmax_bottleneck.study.summary_records`)."""
    planned = {
        file: (kind, [_planned(kind, run, record) for run, record in records])
        for file, (kind, records) in summary_records(study).items()
    }
    coverage = [Planned(record, (record["corpus"], record["benchmarks"]), {"dataset": record["dataset"]})
                for record in coverage_records(study)]  # fmt: skip
    return {**planned, COVERAGE_SUMMARY: ("coverage", coverage)}


def _present(path: Path) -> bool:
    """Whether ``path`` is there (a FIFO or a link too: its reader names it); a folder that cannot be entered: no."""
    try:
        path.lstat()
    except OSError:
        return False
    return True


def _collect(kind: str, records: list[dict], sweep_keys: list[str]):
    """The summary of ``records`` (:mod:`.summaries`; ``copy``: E12's one CSV, read and checked, as text)."""
    if kind == "copy":
        path = records[0]["csv"]
        readback.check_columns(readback.read_csv(path), path)
        return readback.read_bytes(path, readback.MAX_CSV_BYTES, what="CSV").decode("utf-8")
    if kind == "sweep":
        return summaries.collect_sweep(records, sweep_keys)
    return summaries.COLLECTORS[kind](records)


def write_summaries(study: Study, directory, summary_dir) -> dict[str, tuple[str, list[Planned], list[bool]]]:
    """Write the summaries of what is in under ``directory`` to ``summary_dir``; per summary file its kind, its
    planned inputs and which of them are in (all their files there, and readable: a record whose files cannot be read
    or hold an impossible value, or whose ``metrics.json`` names another run than its folder, is left out with a
    warning naming the file and why)."""
    root, summary_dir = Path(directory), Path(summary_dir)
    found = {}
    for file, (kind, planned) in planned_summaries(study).items():
        sweep_keys = study.sweep_keys(file[len(SWEEP_PREFIX) : -4]) if kind == "sweep" else []
        present, records = [], []
        for p in planned:
            there = all(_present(root / need) for need in p.needs)
            if there:
                record = {k: str(root / v) if k in FILE_KEYS else v for k, v in p.record.items()}
                record.update((k, str(root / f)) for k, f in p.optional if _present(root / f))
                try:
                    _collect(kind, [record], sweep_keys)
                except (OSError, ValueError, KeyError, TypeError) as err:  # ReadbackError, RecordError: ValueErrors
                    log.warning("preview: %s left out of %s: %s", ", ".join(p.needs), file, str(err)[:500])
                    there = False
                else:
                    records.append(record)
            present.append(there)
        target = summary_dir / file
        try:
            summary = _collect(kind, records, sweep_keys) if records or kind != "copy" else None
        except (OSError, ValueError, KeyError, TypeError) as err:  # records that clash with each other
            log.warning("preview: %s left out: %s", file, str(err)[:500])
            present, summary = [False] * len(planned), _collect(kind, [], sweep_keys) if kind != "copy" else None
        found[file] = (kind, planned, present)
        if summary is None:
            target.unlink(missing_ok=True)
        elif isinstance(summary, str):
            atomic_write_text(summary, target)
        else:
            atomic_write_csv(summary, target)
    return found


def inputs_digest(study: Study, directory=".") -> str:
    """A short digest of which summary inputs are in: it changes when a run finishes or an analysis is done (the
    workflow's preview re-renders then, and only then)."""
    import hashlib

    root = Path(directory)
    bits = "".join(
        str(int(all(_present(root / need) for need in p.needs)))
        + str(int(all(_present(root / f) for _, f in p.optional)))
        for _, planned in planned_summaries(study).values()
        for p in planned
    )
    return hashlib.sha256(bits.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- n of N
def _same(a, b) -> bool:
    if b is None:
        return False
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return fkey(a) == fkey(b)


def coverage(table: pd.DataFrame, planned: list[Planned], present: list[bool]) -> list[tuple[int, int]]:
    """Per row of a tidy table: (inputs in, inputs planned) among those whose identity matches the row's key
    columns (dataset, variant, schedule, swept values, model: the table's columns that name what a run is)."""
    names = set().union(*(p.keys for p in planned)) if planned else set()
    columns = [c for c in table.columns if c in names]
    out = []
    for _, row in table.iterrows():
        keys = {c: row[c] for c in columns if not missing(row[c])}
        match = [i for i, p in enumerate(planned) if all(_same(v, p.keys.get(c)) for c, v in keys.items())]
        out.append((sum(present[i] for i in match), len(match)))
    return out


def _counted(kinds: set[str]) -> str:
    """What the inputs of summaries of ``kinds`` are: ``corpora`` (SM Table 13's), ``models`` (the analyses'
    reference models) or ``runs``."""
    if kinds <= {"coverage"}:
        return "corpora"
    return "models" if kinds <= {"spectra", "wordsim", "top5", "copy"} else "runs"


def _unit(kinds: set[str], table: pd.DataFrame) -> str:
    counted = _counted(kinds)
    return "seeds" if counted == "runs" and "variant" in table.columns else counted


# --------------------------------------------------------------------------------------------- files
def _write_table(prefix: str, name: str, tidy: pd.DataFrame, shown: pd.DataFrame, caption: str, banner: str) -> None:
    atomic_write_text(tidy.to_csv(index=False, lineterminator="\n"), prefix + ".csv")
    atomic_write_text(markdown_page(name, shown, caption, banner), prefix + ".md")
    atomic_write_text(html_page(name, shown, caption, banner), prefix + ".html")
    atomic_write_text(latex_table(shown, caption, f"tab:{name}-preview", banner), prefix + ".tex")


def _placeholder_table(prefix: str, name: str, why: str, stamp: str, counts: tuple[int, int], banner: str) -> None:
    frame = pd.DataFrame({"preview": [why]})
    tidy = pd.DataFrame({"note": [why], "finished": [counts[0]], "planned": [counts[1]], "provisional": [stamp]})
    _write_table(prefix, name, tidy, frame, why, banner)


def figure_stamp(fig, stamp: str, text: str, config_banner: str | None, label: str | None = None) -> None:
    """Mark a figure provisional: its paper name (``label``), ``PROVISIONAL, <stamp>`` and the configuration's banner
    on top, a line each (short enough for a one-column figure); what it draws on in red under the panels."""
    footnote(fig, text, color=WARNING_COLOUR)
    finish(fig, f"PROVISIONAL, {stamp}" + (f"\n{config_banner}" if config_banner else ""), label)


def _placeholder_figure(prefix: str, why: str, stamp: str, config_banner: str | None) -> None:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = new_figure(COLUMN, 1.2)
        ax = fig.add_subplot()
        ax.set_axis_off()
        empty_panel(ax, why)
        figure_stamp(fig, stamp, "", config_banner)
        figures.save(fig, prefix)


def render_preview(study: Study, *, directory=".", stamp: str | None = None, names=None) -> dict[str, str]:
    """Write every provisional table and figure (module docstring; ``names``: only these) for ``study`` from the run
    folders under ``directory``; returns item name → ``rendered``, or why it is a placeholder."""
    root = Path(directory)
    results, reports, _ = output_roots(study.config)
    summary_dir, out = root / results / PREVIEW / "summary", root / reports / PREVIEW
    stamp = stamp or time.strftime("%Y-%m-%d %H:%M")
    found = write_summaries(study, root, summary_dir)
    log.info("preview: summaries of the runs in so far written under %s", summary_dir)
    config_banner = study.config.get("report_banner")
    items = [(name, kind, req) for (name, kind), req in _items(study).items() if names is None or name in names]
    outcome = {}
    for name, kind, requires in items:
        planned = [p for file in requires for p in found[file][1]]
        present = [x for file in requires for x in found[file][2]]
        counts, counted = (sum(present), len(present)), _counted({found[file][0] for file in requires})
        banner = stamp_banner(stamp, *counts, config_banner, counted)
        prefix = str(out / f"{kind}s" / name)
        none = {"runs": "no run", "models": "no model", "corpora": "no corpus"}[counted]
        why = None if counts[0] or not counts[1] else f"{none} of this {kind} is in yet (0 of {counts[1]})"
        if why is None:
            try:
                if kind == "table":
                    kinds = {found[file][0] for file in requires}
                    _render_table(name, summary_dir, prefix, (planned, present, counts), stamp, banner, kinds)
                else:
                    _render_figure(name, summary_dir, prefix, counts, stamp, config_banner)
            except Exception as err:  # partial data a builder cannot draw yet: said in the file, never a failure
                why = f"cannot be made yet from the runs in ({type(err).__name__}: {str(err)[:200]})"
                log.warning("preview %s: %s", name, why)
        if why is not None:
            if kind == "table":
                _placeholder_table(prefix, name, why, stamp, counts, banner)
            else:
                _placeholder_figure(prefix, why, stamp, config_banner)
        outcome[name] = why or "rendered"
        log.info("preview %s: %s (%d of %d)", name, outcome[name], len(outcome), len(items))
    if names is None or "claims" in names:  # the claims page, with each claim's runs in of those planned
        outcome["claims"] = claims.render_preview(summary_dir, out / "claims", found, stamp, config_banner)
    return outcome


def _items(study: Study) -> dict[tuple[str, str], tuple[str, ...]]:
    """(name, ``table`` or ``figure``) → the summary files it reads: the paper's, then each configured sweep's."""
    items = {(name, "table"): item.requires for name, item in tables.TABLES.items()}
    items.update({(name, "figure"): item.requires for name, item in figures.FIGURES.items()})
    for name in study.sweeps:
        items.update({(SWEEP_PREFIX + name, kind): (f"{SWEEP_PREFIX}{name}.csv",) for kind in ("table", "figure")})
    return items


def with_counts(shown: pd.DataFrame, cover: list[tuple[int, int]], label: str) -> pd.DataFrame | None:
    """The display table with each tidy row's ``n of N``: a last column where a display row is a tidy row, a last row
    where a display column is one (Table 1's models); None where the layout pivots the rows otherwise."""
    texts = [f"{n} of {total}" for n, total in cover]
    if len(shown) == len(cover):
        return shown.assign(**{label: texts})
    if len(shown.columns) == len(cover) + 1:
        row = pd.DataFrame([[label, *texts]], columns=shown.columns)
        return pd.concat([shown, row], ignore_index=True)
    return None


def _render_table(name, summary_dir, prefix, inputs, stamp, banner, kinds) -> None:
    planned, present, counts = inputs
    if name.startswith(SWEEP_PREFIX):
        frame = sweeps.read_sweep(summary_dir, name[len(SWEEP_PREFIX) :])
        tidy = sweeps.table(frame)
        shown = sweeps.layout(tidy)
        caption = f"{sweeps.caption(name[len(SWEEP_PREFIX) :], frame)} {sweeps.LEGEND}"
    else:
        tidy = tables.build(name, summary_dir)
        shown = display_frame(name, tidy)
        caption = f"{tables.TABLES[name].caption_for(tidy)} {LEGEND}"
    cover, unit = coverage(tidy, planned, present), _unit(kinds, tidy)
    counted = with_counts(shown, cover, f"n of N {unit}")
    if counted is None:  # pivoted (word similarity): the table's count in the caption, each row's in the CSV
        caption += f" {counts[0]} of {counts[1]} {unit} in (per row: the CSV's finished, planned)."
    shown = shown if counted is None else counted
    tidy = tidy.assign(finished=[n for n, _ in cover], planned=[t for _, t in cover], provisional=stamp)
    _write_table(prefix, name, tidy, shown, caption, banner)


def _render_figure(name, summary_dir, prefix, counts, stamp, config_banner) -> None:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        if name.startswith(SWEEP_PREFIX):
            fig = sweeps.figure(name[len(SWEEP_PREFIX) :], sweeps.read_sweep(summary_dir, name[len(SWEEP_PREFIX) :]))
        else:
            require_summaries(summary_dir, figures.FIGURES[name].requires)
            fig = figures.FIGURES[name].build(Path(summary_dir))
        item = figures.FIGURES.get(name)
        if item is not None and not item.requires:  # an illustration (Figure 1): no run, nothing of the scale
            counts, config_banner = (0, 0), None
        text = f"Provisional: drawn from the {counts[0]} of {counts[1]} runs in so far." if counts[1] else ""
        figure_stamp(fig, stamp, text, config_banner, item.label if item is not None else None)
        figures.save(fig, prefix)


def output_files(study: Study) -> list[str]:
    """Every file :func:`render_preview` writes for ``study`` (the workflow's declared outputs)."""
    _, reports, _ = output_roots(study.config)
    names = list(_items(study))
    return [
        f"{reports}/{PREVIEW}/{kind}s/{name}.{ext}"
        for name, kind in names
        for ext in (TABLE_FORMATS if kind == "table" else FIGURE_FORMATS)
    ] + [f"{reports}/{PREVIEW}/claims.{ext}" for ext in claims.FORMATS]


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.description = (
        "Render every table and figure of a configuration from the runs finished so far, stamped provisional, under "
        "<reports>/preview/ (with the progress page and the learning curves); never starts or waits for a run."
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these tables or figures (default: all)")
    from softmax_bottleneck.study.config_file import add_config_option

    add_config_option(parser, "whose runs to preview", follows=True)
    parser.add_argument("--directory", default=".", metavar="DIR",
                        help="the working directory holding results/ and reports/ (default: .)")  # fmt: skip


def run_cli(args) -> int:
    from softmax_bottleneck.report.progress import command_stamp, render_progress
    from softmax_bottleneck.study import config as study_config

    study, source = study_config.load_study(args, "preview", follow=True)
    if study is None:
        return 1
    known = {name for name, _ in _items(study)} | {"claims"}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        raise SystemExit(f"preview: unknown table or figure {unknown[0]!r}; valid names: {', '.join(sorted(known))}")
    retry = study_config.snakemake_options(args)
    render_progress(study, directory=args.directory, config=source, retry_options=retry)
    outcome = render_preview(study, directory=args.directory, names=set(args.names) or None)
    stamp = Path(args.directory) / command_stamp(study)  # after the pages: snakemake progress renders them again
    atomic_write_text(f"python -m softmax_bottleneck preview, {time.strftime('%Y-%m-%d %H:%M:%S')}\n", stamp)
    _, reports, _ = output_roots(study.config)
    rendered = sum(what == "rendered" for what in outcome.values())
    waiting = len(outcome) - rendered
    log.info("wrote %d provisional tables and figures under %s/%s/%s", rendered, reports, PREVIEW,
             f" ({waiting} not yet)" if waiting else "")  # fmt: skip
    return 0
