"""The study's progress for the HTML report (``snakemake progress``; in ``snakemake preview``'s report).

* ``<reports>/preview/progress.html``: a standalone page: the runs by state per experiment, GPU time spent against
  the plan's projection and what is left, the projected finish, finished runs over time (a figure embedded in the
  page), and the running, stalled, failed and unreadable runs, as ``status`` (:mod:`softmax_bottleneck.study.status`)
  reads them;
* ``<reports>/preview/learning_curves/<experiment>.png``: per experiment, the validation perplexity per epoch of each
  of its runs (``curve.csv``, or the progress file of a run still training: dashed), one panel per dataset, one
  colour per output layer.

Both are read from the run folders only and stamped with the time they were made.
"""

from __future__ import annotations

import base64
import html
import io
import time
from pathlib import Path

import matplotlib

from softmax_bottleneck.atomic import atomic_path, atomic_write_text
from softmax_bottleneck.report import variants
from softmax_bottleneck.report.figures.common import COLUMN, PAGE, STYLE, empty_panel, finish, legend_below, new_figure
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.study.runs import Study, output_roots
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
    """Validation perplexity per epoch of each run of experiment ``name``; dashed: still training or interrupted.
    ``read``: run folder → its curve, filled as they are read (a run in several experiments is read once)."""
    read = {} if read is None else read
    runs = status.runs_of(status.groups[name])
    datasets = list(dict.fromkeys(r.dataset for r in runs))
    fig = new_figure(COLUMN * len(datasets), 2.4)
    axes = fig.subplots(1, len(datasets), squeeze=False)[0]
    for ax, dataset in zip(axes, datasets, strict=True):
        drawn = {}
        for r in (r for r in runs if r.dataset == dataset):
            if r.run not in read:
                read[r.run] = learning_curve(Path(directory) / r.run, r)
            curve = read[r.run]
            if not curve:
                continue
            epochs, ppl = zip(*curve, strict=True)
            style = "-" if r.state == "finished" else "--"
            (line,) = ax.plot(epochs, ppl, style, color=variants.color(r.variant), linewidth=0.8, alpha=0.8)
            drawn.setdefault(variants.display(r.variant), line)
        if drawn:
            ax.set_yscale("log")
            legend_below(ax, list(drawn.values()), list(drawn), ncols=3)
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


def progress_page(status: StudyStatus, banner: str | None = None) -> str:
    """The standalone HTML page (module docstring)."""
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
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n{top}<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(status.runs)} training jobs; runs by state per experiment (a run several experiments use counts in "
        f"each; the last row counts each run once):</p>\n{table}\n{gpu}"
        f'<img alt="finished runs over time" src="data:image/png;base64,{figure}">\n'
        + "\n".join(lists)
        + "\n</body>\n</html>\n"
    )


def render_progress(study: Study, *, directory=".", retry_options: str = "", config: str = "") -> StudyStatus:
    """Write the progress page and the learning curves (module docstring) under ``directory``."""
    root = Path(directory)
    status = study_status(study, directory=root, config=config or "the configuration", retry_options=retry_options)
    page, curves = progress_files(study)
    stamp = f"learning curves, {time.strftime('%Y-%m-%d %H:%M')} (dashed: not finished)"
    banner = study.config.get("report_banner")
    atomic_write_text(progress_page(status, banner), root / page)
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
