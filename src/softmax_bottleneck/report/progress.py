"""The study's progress for the HTML report (``snakemake progress``; in ``snakemake preview``'s report).

* ``<reports>/preview/progress.html``: a standalone page that reloads itself every :data:`REFRESH_SECONDS`: the runs
  by state per experiment, the time spent (CPU or GPU, as the finished runs say) against the plan's projection and
  what is left, the projected finish and the workflow's own time left of every job still to run, finished runs over
  time (a figure embedded in the page); once every training has finished, when the last one did and what is still to
  come (analyses, tables and figures); the running, stalled, failed and unreadable runs, as ``status``
  (:mod:`softmax_bottleneck.study.status`) reads them; and links to the learning curves and the provisional tables
  and figures beside it;
* ``<reports>/preview/learning_curves/<experiment>.png``: per experiment, the validation perplexity per epoch of each
  of its runs (``curve.csv``, or the progress file of a run still training: dashed), one panel per dataset, one
  colour per output layer, one marker per seed.

Both are read from the run folders only and stamped with the time they were made.
"""

from __future__ import annotations

import base64
import html
import io
import time
from pathlib import Path

from softmax_bottleneck.atomic import atomic_path, atomic_write_text
from softmax_bottleneck.report import variants
from softmax_bottleneck.report.figures.common import COLUMN, PAGE, STYLE, empty_panel, finish, legend_below, new_figure
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.study.runs import SWEEP_PREFIX, Study, output_roots
from softmax_bottleneck.study.status import (
    LISTED_STATES,
    StudyStatus,
    counts_frame,
    experiment_label,
    gpu_lines,
    groups,
    iso_time,
    learning_curve,
    run_line,
    study_status,
)

#: the folder under <results>/ and <reports>/ of everything rendered while the study runs
PREVIEW = "preview"
#: the progress page reloads itself this often (seconds)
REFRESH_SECONDS = 60
#: one marker per seed of a learning-curves panel, in the order of the seeds
SEED_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")

_CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 13px; margin: 1em; color: #222; max-width: 70em; }
.banner { color: #b00; font-weight: bold; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; }
th, td { padding: 3px 9px; text-align: right; white-space: nowrap; }
th { border-bottom: 1.5px solid #222; }
td:first-child, th:first-child { text-align: left; }
tbody tr:last-child td { border-top: 1px solid #222; font-weight: bold; }
pre { font-size: 12px; }
"""


def command_stamp(study: Study) -> str:
    """The file ``python -m softmax_bottleneck preview`` writes after its pages: an input of the workflow's
    ``progress`` where it exists, so that pages Snakemake did not write are rendered again by ``snakemake progress``
    and ``preview`` (which would otherwise find them and, without a record of their own, do nothing)."""
    _, reports, _ = output_roots(study.config)
    return f"{reports}/{PREVIEW}/.written-by-command"


def progress_files(study: Study) -> tuple[str, list[str]]:
    """The progress page and the learning-curve figures that :func:`render_progress` writes (relative paths)."""
    _, reports, _ = output_roots(study.config)
    curves = [f"{reports}/{PREVIEW}/learning_curves/{name}.png" for name in groups(study)]
    return f"{reports}/{PREVIEW}/progress.html", curves


# --------------------------------------------------------------------------------------------- figures
def finished_over_time(status: StudyStatus):
    """Finished runs over time: the cumulative count of finished runs by the time their ``metrics.json`` appeared."""
    fig = new_figure(PAGE * 0.6, 2.2)
    ax = fig.add_subplot()
    times = sorted(r.finished for r in status.runs if r.state == "finished" and r.finished is not None)
    if times:
        from datetime import datetime

        xs = [datetime.fromtimestamp(t) for t in times]
        ax.step(xs, range(1, len(xs) + 1), where="post", color="#1f77b4")
        ax.plot(xs, range(1, len(xs) + 1), "o", color="#1f77b4", markersize=2)
        fig.autofmt_xdate()
    else:
        empty_panel(ax, "no run has finished yet")
    ax.axhline(len(status.runs), color="0.6", linestyle=":", linewidth=1)
    ax.set_ylim(0, len(status.runs) * 1.05)
    ax.set_ylabel("finished runs")
    ax.set_title(f"finished runs over time (of {len(status.runs)})")
    return fig


def learning_curves(status: StudyStatus, name: str, directory, read: dict | None = None) -> object:
    """Validation perplexity per epoch of each run of experiment ``name``: a colour per output layer, a marker per
    seed (two seeds of one model apart); dashed: still training or interrupted. ``read``: run folder → its curve,
    filled as they are read (a run in several experiments is read once)."""
    from matplotlib.lines import Line2D

    read = {} if read is None else read
    runs = status.runs_of(status.groups[name])
    datasets = list(dict.fromkeys(r.dataset for r in runs))
    fig = new_figure(COLUMN * len(datasets), 2.4)
    axes = fig.subplots(1, len(datasets), squeeze=False)[0]
    for ax, dataset in zip(axes, datasets, strict=True):
        drawn, seeds = {}, {}
        panel = [r for r in runs if r.dataset == dataset]
        marker = {seed: SEED_MARKERS[i % len(SEED_MARKERS)] for i, seed in enumerate(sorted({r.seed for r in panel}))}
        for r in panel:
            if r.run not in read:
                read[r.run] = learning_curve(Path(directory) / r.run, r)
            curve = read[r.run]
            if not curve:
                continue
            epochs, ppl = zip(*curve, strict=True)
            style = "-" if r.state == "finished" else "--"
            ax.plot(epochs, ppl, style, color=variants.color(r.variant), linewidth=0.8, alpha=0.8,
                    marker=marker[r.seed], markersize=3, markevery=max(1, len(epochs) // 8))  # fmt: skip
            drawn.setdefault(variants.display(r.variant), Line2D([], [], color=variants.color(r.variant), lw=0.8))
            seeds.setdefault(f"seed {r.seed}", Line2D([], [], color="0.3", lw=0, marker=marker[r.seed], ms=3))
        if drawn:
            ax.set_yscale("log")
            legend_below(ax, [*drawn.values(), *seeds.values()], [*drawn, *seeds], ncols=3)
        else:
            empty_panel(ax, "no epoch finished yet")
            ax.set_xticks([])
            ax.set_yticks([])
        count = sum(r.dataset == dataset for r in runs)
        ax.set_title(f"{experiment_label(name)}, {DATASETS.get(dataset, dataset)}: {count} runs", fontsize=8)
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation ppl")
    return fig


# --------------------------------------------------------------------------------------------- the page
def _png_data(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _links(title: str, links: list[tuple[str, str]]) -> str:
    """``<p>title: <a href=...>label</a> · ...</p>``, escaped."""
    items = " · ".join(f'<a href="{html.escape(href)}">{html.escape(label)}</a>' for href, label in links)
    return f"<p>{html.escape(title)}: {items}</p>\n" if links else ""


def finished_trainings(status: StudyStatus, to_come: tuple[int, int, int, int] | None) -> str:
    """Once every training has finished: when the last one did, and what is still to come (``to_come``: analysis
    files made and planned, final tables and figures made and planned); "" before."""
    if not status.runs or any(r.state != "finished" for r in status.runs):
        return ""
    last = max((r.finished for r in status.runs if r.finished is not None), default=None)
    text = f"All {len(status.runs)} trainings have finished" + (f", the last at {iso_time(last)}" if last else "") + "."
    if to_come:
        analyses, planned, items, all_items = to_come
        if analyses < planned or items < all_items:
            text += (f" Still to come: the analyses ({analyses} of their {planned} result files are written) and the "
                     f"tables and figures ({items} of {all_items} made).")  # fmt: skip
        else:
            text += f" Every analysis ({planned} result files) and all {all_items} tables and figures are made."
    return f"<p><b>{html.escape(text)}</b></p>\n"


def progress_page(status: StudyStatus, banner: str | None = None, *, links: str = "",
                  to_come: tuple[int, int, int, int] | None = None) -> str:  # fmt: skip
    """The standalone HTML page (module docstring); ``links``: the HTML of its links (:func:`page_links`)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        figure = _png_data(finish(finished_over_time(status)))
    table = counts_frame(status).to_html(index=False, border=0)
    lists = []
    for state in LISTED_STATES:
        runs = [r for r in status.runs if r.state == state]
        if runs:
            text = "\n".join(run_line(r, status.now).strip() for r in runs)
            lists.append(f"<h2>{state} ({len(runs)})</h2>\n<pre>{html.escape(text)}</pre>")
    top = f'<p class="banner">{html.escape(banner)}</p>\n' if banner else ""
    gpu = "".join(f"<p>{html.escape(line)}</p>\n" for line in gpu_lines(status))
    title = f"Study progress: {status.config}, {iso_time(status.now)}"
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">\n<title>{html.escape(title)}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n{top}<h1>{html.escape(title)}</h1>\n"
        f"<p>This page reloads itself every {REFRESH_SECONDS} s; snakemake progress (or preview) rewrites it.</p>\n"
        f"{finished_trainings(status, to_come)}"
        f"<p>{len(status.runs)} training jobs; runs by state per experiment (a run several experiments use counts in "
        f"each; the last row counts each run once):</p>\n{table}\n{gpu}"
        f'<img alt="finished runs over time" src="data:image/png;base64,{figure}">\n{links}'
        + "\n".join(lists)
        + "\n</body>\n</html>\n"
    )


def page_links(study: Study, status: StudyStatus) -> str:
    """The page's links, relative to it: each experiment's learning curves, each provisional table (its HTML page) and
    figure (its PNG) of the preview beside it (``snakemake preview`` writes them)."""
    from softmax_bottleneck.report import figures, tables

    curves = [(f"learning_curves/{name}.png", experiment_label(name)) for name in status.groups]
    sweeps = [f"{SWEEP_PREFIX}{name}" for name in study.sweeps]
    shown = [(f"tables/{name}.html", item.label) for name, item in tables.TABLES.items()]
    shown += [(f"tables/{name}.html", name) for name in sweeps]
    drawn = [(f"figures/{name}.png", item.label) for name, item in figures.FIGURES.items()]
    drawn += [(f"figures/{name}.png", name) for name in sweeps]
    return (_links("Learning curves", curves) + _links("Provisional tables (snakemake preview)", shown)
            + _links("Provisional figures", drawn) + claims_link(len(status.runs)))  # fmt: skip


def claims_link(jobs: int) -> str:
    """The provisional claims page's link, and why its count is not the training jobs' (its "n of N runs in" counts
    the rows of the summaries its claims read, as the provisional tables do theirs)."""
    return (
        '<p>Provisional claims: <a href="claims.html">the paper\'s claims decided from the runs in so far</a>. Its '
        '"n of N runs in" counts results, not training jobs: each row of the summaries its claims read, so a run that '
        "several experiments share counts once in each of their summaries, and an analysis of a run (its word "
        f"similarity) counts as a row of its own. Its N is thus not the {jobs} training jobs above; the provisional "
        "tables count their own summaries' rows alike.</p>\n"
    )


def still_to_come(study: Study, root: Path) -> tuple[int, int, int, int]:
    """(analysis result files written, planned; final tables and figures made, planned) of ``study`` under ``root``:
    the result files the summaries read beside each run's metrics (:mod:`softmax_bottleneck.study.summary_records`),
    each table's Markdown and each figure's PNG under ``<reports>/``."""
    from softmax_bottleneck.report import figures, tables
    from softmax_bottleneck.study.summary_records import record_files, summary_records

    files = {f for _, records in summary_records(study).values() for _, r in records for f in record_files(r)}
    analyses = {f for f in files if not f.endswith("metrics.json")}
    _, reports, _ = output_roots(study.config)
    sweeps = [f"{SWEEP_PREFIX}{name}" for name in study.sweeps]
    items = [f"{reports}/tables/{name}.md" for name in [*tables.TABLES, *sweeps]]
    items += [f"{reports}/figures/{name}.png" for name in [*figures.FIGURES, *sweeps]]
    made = sum((root / f).is_file() for f in items)
    return sum((root / f).is_file() for f in analyses), len(analyses), made, len(items)


def study_page(study: Study, status: StudyStatus, root: Path) -> str:
    """The progress page of ``study`` as ``status`` reads it under ``root``: its banner, its links and, once every
    training has finished, what is still to come (:func:`still_to_come`)."""
    done = all(r.state == "finished" for r in status.runs)
    to_come = still_to_come(study, root) if done else None
    return progress_page(status, study.config.get("report_banner"), links=page_links(study, status), to_come=to_come)


def render_progress(study: Study, *, directory=".", retry_options: str = "", config: str = "") -> StudyStatus:
    """Write the progress page and the learning curves (module docstring) under ``directory``."""
    import matplotlib

    root = Path(directory)
    status = study_status(study, directory=root, config=config or "the configuration", retry_options=retry_options)
    page, curves = progress_files(study)
    stamp = f"learning curves, {time.strftime('%Y-%m-%d %H:%M')} (dashed: not finished)"
    banner = study.config.get("report_banner")
    atomic_write_text(study_page(study, status, root), root / page)
    read: dict = {}
    with matplotlib.rc_context(STYLE):
        for name, path in zip(status.groups, curves, strict=True):
            fig = finish(learning_curves(status, name, root, read), stamp + (f"\n{banner}" if banner else ""))
            save_png(fig, root / path)
    return status


def save_png(fig, path: Path) -> None:
    """``fig`` as a PNG at ``path``, atomically, without a software string."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
