"""The table and the figure of a sweep of the configuration (``sweeps``: one variant's own hyper-parameters).

Both read the sweep's summary ``sweep_<NAME>.csv`` (:func:`~softmax_bottleneck.report.summaries.collect_sweep`: one
row per run, its swept hyper-parameters as columns, in the configuration's order, then training's numbers and the
ranks of its test log-P matrix). The table has one row per dataset × grid point: the number of seeds and the mean ±
sd over the seeds of validation and test perplexity and of Press' rank. The figure draws test perplexity (top row)
and Press' rank (bottom row, when the summary has ranks) against the first swept key, one line per combination of
the other keys, error bars ± 1 sd over the seeds, one panel per dataset. There is no paper value to set beside them.
Results trained with an older source of their layer are noted on both (:mod:`.sources`).

Command line::

    python -m softmax_bottleneck sweep NAME --summary-dir results/summary \\
        --out-table reports/tables/sweep_NAME --out-figure reports/figures/sweep_NAME

writes ``sweep_NAME.csv`` (full precision), ``.md``, ``.html``, ``.tex`` and ``sweep_NAME.pdf``, ``.png``, atomically.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.models.output_layers.hyperparameters import format_value
from softmax_bottleneck.report import variants
from softmax_bottleneck.report.common import mean_sd, read_summary
from softmax_bottleneck.report.figures import STYLE, save
from softmax_bottleneck.report.figures.common import (
    COLUMN,
    PAGE,
    WARNING_COLOUR,
    empty_panel,
    finish,
    footnote,
    legend_below,
    limits,
    new_figure,
    plain_ticks,
)
from softmax_bottleneck.report.layer_sources import stale_notes, with_notes
from softmax_bottleneck.report.reported import DATASETS
from softmax_bottleneck.report.summaries import SWEEP_ID_COLUMNS, SWEEP_METRIC_COLUMNS
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.render import html_page, latex_table, markdown_page
from softmax_bottleneck.study.runs import SWEEP_PREFIX as PREFIX

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

#: the table's quantities: mean and sd over the seeds of each
QUANTITIES = ("valid_ppl", "test_ppl", "press_rank")
#: the figure's rows: quantity and axis label (Press' rank only when the summary has ranks)
FIGURE_ROWS = (("test_ppl", "test perplexity"), ("press_rank", "Press' rank"))
LEGEND = f"Each cell: mean ± sd over the seeds (n); {cells.MISSING} where there is no value."
#: x values spread over at least this ratio are drawn on a log axis
LOG_RATIO = 20.0
LEGEND_SIZE = 7  # points
#: columns of a sweep summary that may be absent (then empty): the ranks and the layer's source
OPTIONAL_COLUMNS = SWEEP_METRIC_COLUMNS[SWEEP_METRIC_COLUMNS.index("press_rank") :]


def model_label(variant: str, schedule: str) -> str:
    """``Taylor (ET)``: a swept model as tables, figures and captions name it."""
    return f"{variants.display(variant)} ({str(schedule).upper()})"


def summary_file(name: str) -> str:
    return f"{PREFIX}{name}.csv"


def swept_keys(frame: pd.DataFrame) -> list[str]:
    """The swept hyper-parameters of a sweep summary: its columns besides the run's identity and metrics."""
    return [c for c in frame.columns if c not in (*SWEEP_ID_COLUMNS, *SWEEP_METRIC_COLUMNS)]


def read_sweep(summary_dir, name: str) -> pd.DataFrame:
    """The summary of sweep ``name``; FileNotFoundError naming it if absent, ValueError if it has no swept key."""
    frame = read_summary(summary_dir, summary_file(name))
    if frame.empty:
        return frame
    for column in OPTIONAL_COLUMNS:  # summaries written before sweeps had ranks
        if column not in frame.columns:
            frame[column] = math.nan
    missing = [c for c in (*SWEEP_ID_COLUMNS, *SWEEP_METRIC_COLUMNS) if c not in frame.columns]
    if missing or not swept_keys(frame):
        what = f"lacks column(s) {', '.join(missing)}" if missing else "has no swept hyper-parameter column"
        raise ValueError(f"{summary_file(name)}: {what} (not a sweep summary: summarize --kind sweep writes one)")
    return frame


# --------------------------------------------------------------------------------------------- the table
def table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset × variant × schedule × grid point, in the summary's order: the swept values, ``n_seeds``,
    ``<q>_mean`` and ``<q>_sd`` over the seeds for each of :data:`QUANTITIES`."""
    keys = swept_keys(frame)
    group = ["dataset", "variant", "schedule", *keys]
    columns = [*group, "n_seeds", *(f"{q}_{s}" for q in QUANTITIES for s in ("mean", "sd"))]
    rows = []
    if not frame.empty:
        for values, runs in frame.groupby(group, sort=False, dropna=False):
            row = dict(zip(group, values, strict=True))
            row["n_seeds"] = int(runs["seed"].nunique())
            for q in QUANTITIES:
                row[f"{q}_mean"], row[f"{q}_sd"] = mean_sd(runs[q])
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _value(value) -> str:
    """A swept value as text, as a run's tag writes it (:func:`format_value`): ``0.5``, ``1.0`` (a float), ``1`` (an
    int), ``1e-05``, ``true``, ``null``; a string as written."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if cells.missing(value):
        return "null"
    if isinstance(value, int | np.integer):
        return str(int(value))
    return format_value(float(value)) if isinstance(value, float | np.floating) else str(value)


def layout(tidy: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: dataset, the swept values, n, validation and test perplexity (mean ± sd)."""
    columns = list(tidy.columns)
    keys = columns[columns.index("schedule") + 1 : columns.index("n_seeds")]
    columns = [("Dataset", cells.key("dataset"))]
    columns += [(key, lambda row, key=key: _value(row.get(key))) for key in keys]
    columns += [("n", cells.only("n_seeds", cells.integer))]
    columns += [
        (label, lambda row, q=q, f=fmt: cells.mean_sd(row.get(f"{q}_mean"), row.get(f"{q}_sd"), f))
        for q, label, fmt in zip(
            QUANTITIES, ("valid ppl", "test ppl", "Press' rank"), (cells.two, cells.two, cells.integer), strict=True
        )
    ]
    return cells.layout(tidy, columns, merge=["Dataset"])


def caption(name: str, frame: pd.DataFrame) -> str:
    """``Sweep NAME: Taylor (ET) over taylor_scale; ...``: what was swept, from the summary."""
    pairs = dict.fromkeys(zip(frame.get("variant", []), frame.get("schedule", []), strict=True))
    models = ", ".join(model_label(v, s) for v, s in pairs)
    keys = " × ".join(swept_keys(frame)) if not frame.empty else "its grid"
    return (f"Sweep {name}: {models or 'no runs yet'} over {keys}; validation and test perplexity and Press' rank of "
            "the test log-P matrix, mean ± sd over the seeds (n).")  # fmt: skip


def description(name: str, sweep: dict) -> str:
    """One line on sweep ``name`` (``sweeps/<name>`` of the configuration) for ``snakemake --list-rules``."""
    model = model_label(sweep["variant"], sweep["schedule"])
    return f"Table and figure of sweep {name}: {model} over {' × '.join(sweep['grid'])}"


def report_caption(name: str, sweep: dict) -> str:
    """The HTML report's caption (reStructuredText) of sweep ``name`` from its configuration (``sweeps/<name>``)."""
    grid = " × ".join(f"{key} ∈ {{{', '.join(_value(v) for v in values)}}}" for key, values in sweep["grid"].items())
    datasets = ", ".join(DATASETS.get(d, d) for d in sweep["datasets"])
    return (
        f"**Sweep {name}.** {model_label(sweep['variant'], sweep['schedule'])} over {grid} on "
        f"{datasets}, seeds: {sweep['seeds']}. Table: validation and test perplexity and Press' rank per grid point, "
        f"mean ± sd over the seeds; figure: test perplexity and Press' rank against {next(iter(sweep['grid']))}, "
        "error bars ± 1 sd over the seeds.\n\n"
        f"``tables/{PREFIX}{name}.csv`` holds every value at full precision; ``figures/{PREFIX}{name}.pdf`` is the "
        "vector version of the figure.\n"
    )


def render_table(name: str, frame: pd.DataFrame, out_prefix, *, banner: str | None = None) -> pd.DataFrame:
    """Write ``<out_prefix>.csv`` (tidy, full precision), ``.md``, ``.html`` and ``.tex``, atomically."""
    tidy = table(frame)
    banner = with_notes(banner, stale_notes(frame))  # results an older source of the layer made
    shown, text, item = layout(tidy), f"{caption(name, frame)} {LEGEND}", PREFIX + name
    prefix = str(out_prefix)
    atomic_write_text(tidy.to_csv(index=False, lineterminator="\n"), prefix + ".csv")
    atomic_write_text(markdown_page(item, shown, text, banner), prefix + ".md")
    atomic_write_text(html_page(item, shown, text, banner), prefix + ".html")
    atomic_write_text(latex_table(shown, text, f"tab:{item}", banner), prefix + ".tex")
    return tidy


# --------------------------------------------------------------------------------------------- the figure
def _positions(values: pd.Series) -> tuple[dict[str, float], bool]:
    """Each swept value's text -> its place on the x axis, and whether the axis is numeric: the value itself when
    every one is a number (not a boolean), else its rank in text order (a categorical axis)."""
    texts = values.map(_value)
    numeric = not values.isna().any() and not values.map(lambda v: isinstance(v, bool | np.bool_ | str)).any()
    if numeric:
        return dict(sorted(zip(texts, values.astype(float), strict=True), key=lambda item: item[1])), True
    return {text: float(i) for i, text in enumerate(sorted(set(texts)))}, False


#: markers and line styles of a panel's lines, in turn (the lines of one panel are one model's: they share its hue)
MARKERS, DASHES = ("o", "s", "^", "D", "v", "P", "X"), ("-", "--", ":", "-.")


def _line_styles(colour: str, n: int) -> list[tuple[str, str, str]]:
    """Colour, marker and line style of each of ``n`` lines of one model: the model's own colour first, then shades
    of it (mixed with black and with white by 0.3, then both by 0.45, 0.6, ..., at most 0.8: never another model's
    colour), each with a marker and a line style of its own."""
    from matplotlib.colors import to_hex, to_rgb

    rgb = np.asarray(to_rgb(colour))
    styles = []
    for i in range(n):
        amount = 0.0 if i == 0 else min(0.8, 0.15 + 0.15 * ((i + 1) // 2))
        towards = np.zeros(3) if i % 2 else np.ones(3)
        shade = to_hex(rgb + amount * (towards - rgb))
        styles.append((shade, MARKERS[i % len(MARKERS)], DASHES[i % len(DASHES)]))
    return styles


def _panel(ax, runs: pd.DataFrame, x: str, others: list[str], colour: str, quantity: str = "test_ppl") -> bool:
    """``quantity`` (test perplexity, Press' rank) against ``x``, one line per combination of ``others``; whether
    anything was drawn."""
    from matplotlib.ticker import NullFormatter

    position, numeric = _positions(runs[x])
    texts = runs[[x, *others]].map(_value)
    combos = list(dict.fromkeys(texts[others].itertuples(index=False, name=None))) if others else [()]
    styles = _line_styles(colour, len(combos))
    ys = []
    for i, combo in enumerate(combos):
        chosen = (texts[others] == list(combo)).all(axis=1) if others else pd.Series(True, index=runs.index)
        sel = runs[chosen]
        points = [(position[t], *mean_sd(g[quantity])) for t, g in sel.groupby(texts.loc[chosen, x], sort=False)]
        points = sorted(p for p in points if not math.isnan(p[1]))
        if not points:
            continue
        px, mean, sd = (np.asarray(a, dtype=float) for a in zip(*points, strict=True))
        label = ", ".join(f"{k} = {v}" for k, v in zip(others, combo, strict=True)) or None
        shade, marker, dashes = styles[i]
        ax.errorbar(px, mean, yerr=np.nan_to_num(sd), color=shade, marker=marker, linestyle=dashes, capsize=2,
                    label=label)  # fmt: skip
        ys += [mean - np.nan_to_num(sd), mean + np.nan_to_num(sd)]
    if not ys:
        return False
    ticks = list(position.values())
    if numeric and min(ticks) > 0 and max(ticks) / min(ticks) >= LOG_RATIO:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        lo, hi = math.log10(min(ticks)), math.log10(max(ticks))
        pad = 0.08 * (hi - lo)
        ax.set_xlim(10 ** (lo - pad), 10 ** (hi + pad))
    else:
        ax.set_xlim(*limits(ticks))
    ax.set_xticks(ticks, list(position))
    ax.set_ylim(*limits(np.concatenate(ys)))
    plain_ticks(ax)
    return True


def _legend(ax, width: float) -> None:
    """The legend of a panel ``width`` inches wide (the other keys' values) under it, as many columns as fit."""
    labels = ax.get_legend_handles_labels()[1]
    if labels:
        fits = int(0.85 * width * 72 / (max(map(len, labels)) * 0.6 * LEGEND_SIZE + 30))
        legend_below(ax, ncols=max(1, min(len(labels), fits)), fontsize=LEGEND_SIZE)


def figure(name: str, frame: pd.DataFrame) -> Figure:
    """Test perplexity, and Press' rank where the summary has ranks, against the first swept key: one column of
    panels per dataset (see the module docstring)."""
    keys = swept_keys(frame) if not frame.empty else []
    datasets = [d for d in DATASETS if not frame.empty and d in set(frame["dataset"])]
    rows = [row for row in FIGURE_ROWS if row[0] == "test_ppl" or (row[0] in frame and frame[row[0]].notna().any())]
    fig = new_figure(COLUMN if len(datasets) <= 1 else PAGE, 2.6 + 2.2 * (len(rows) - 1))
    grid = fig.subplots(len(rows), max(1, len(datasets)), squeeze=False)
    if not datasets:
        empty_panel(grid[0][0], "no runs in the summary")
        grid[0][0].set_title(f"sweep {name}")
        return fig
    x, others = keys[0], keys[1:]
    missing = []
    for (quantity, label), axes in zip(rows, grid, strict=True):
        for ax, dataset in zip(axes, datasets, strict=True):
            runs = frame[frame["dataset"] == dataset]
            models = list(dict.fromkeys(zip(runs["variant"], runs["schedule"], strict=True)))
            if quantity == rows[0][0]:
                ax.set_title(f"{DATASETS[dataset]}: {', '.join(model_label(v, s) for v, s in models)}")
            ax.set_xlabel(x)
            ax.set_ylabel(label)
            if not _panel(ax, runs, x, others, variants.color(models[0][0]), quantity):
                empty_panel(ax, f"no {label}")
                missing.append(f"{DATASETS[dataset]} {label}")
            if quantity == rows[-1][0]:
                _legend(ax, fig.get_size_inches()[0] / len(axes))
    seeds = sorted(set(frame.groupby(["dataset", *keys], dropna=False)["seed"].nunique()))
    footnote(fig, f"sweep {name}: mean over {' or '.join(map(str, seeds))} seed(s) per point; error bars ± 1 sd "
                  "over the seeds (none for one seed).")  # fmt: skip
    if missing:
        footnote(fig, "not available: " + "; ".join(missing), color="0.4")
    for text in stale_notes(frame):  # results an older source of the layer made
        footnote(fig, text, color=WARNING_COLOUR)
    return fig


def render_figure(name: str, frame: pd.DataFrame, out_prefix, *, banner: str | None = None) -> Figure:
    """Draw the figure and write ``<out_prefix>.pdf`` and ``.png`` atomically (deterministic)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = finish(figure(name, frame), banner, label=f"Sweep {name}")
        save(fig, out_prefix)
    return fig


def build_figure(name: str, summary_dir, *, banner: str | None = None) -> Figure:
    """The laid-out figure of sweep ``name`` from ``summary_dir`` (as :func:`render_figure` writes it)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return finish(figure(name, read_sweep(summary_dir, name)), banner, label=f"Sweep {name}")


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser) -> None:
    parser.description = (
        "Render the table (mean ± sd over the seeds of validation and test perplexity and Press' rank per grid point) "
        "and the figure (test perplexity and Press' rank against the first swept key) of one sweep of the "
        "configuration (sweeps:) from its summary sweep_NAME.csv."
    )
    parser.add_argument("name", metavar="NAME", help="the sweep's name in the configuration (sweeps: NAME)")
    parser.add_argument("--summary-dir", required=True, help="folder of the summary CSVs (results/summary)")
    parser.add_argument("--out-table", metavar="PREFIX", help="write PREFIX.csv, .md, .html and .tex")
    parser.add_argument("--out-figure", metavar="PREFIX", help="write PREFIX.pdf and .png")
    parser.add_argument(
        "--banner", default=None, metavar="TEXT", help="text shown at the top (e.g. a small-scale mark)"
    )


def run_cli(args) -> int:
    if not (args.out_table or args.out_figure):
        raise SystemExit("sweep: nothing to write: pass --out-table and/or --out-figure")
    try:
        frame = read_sweep(args.summary_dir, args.name)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"sweep {args.name}: {err}") from None
    if args.out_table:
        render_table(args.name, frame, args.out_table, banner=args.banner)
        log.info("wrote %s.csv, .md, .html and .tex", args.out_table)
    if args.out_figure:
        render_figure(args.name, frame, args.out_figure, banner=args.banner)
        log.info("wrote %s.pdf and .png", args.out_figure)
    return 0
