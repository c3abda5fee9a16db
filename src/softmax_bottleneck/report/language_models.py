"""Hugging Face language models beside the paper's: one table and one figure (the ``lm-report`` command).

Rows: the paper's AWD-LSTM models (Press' and ε-effective ranks of Table 6 = SM Tables 17/18, test perplexity the
11-seed mean of Table 2, ``d`` the size of the vector the output layer reads: ``nemb`` of the presets) and every
``analyze-lm`` summary given (``d`` = the head's input size). The figure has two panels: Press' rank against ``d``, with
the softmax bound ``d + 2`` as a line (a single softmax lies on or under it: the paper's Softmax at 402 = 400 + 2), and
Press' rank against test perplexity.

Caveat, also in the table's note: a language model's perplexity is per token of its own tokenizer and its matrix has
its own columns (e.g. GPT-2's 50,257 subwords against PTB's 10,000 words), so neither its perplexity nor its rank is
comparable cell for cell with the paper's; the bound ``d + 1`` (``d + 2`` with an output bias) holds for any softmax.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd

from softmax_bottleneck import readback
from softmax_bottleneck.analysis.rank import EPSILONS
from softmax_bottleneck.atomic import atomic_path, atomic_write_csv, atomic_write_text
from softmax_bottleneck.report.tables.render import markdown_cell

log = logging.getLogger(__name__)

#: the table's columns, in order
COLUMNS: tuple[str, ...] = (
    "source",
    "model",
    "text",
    "d",
    "columns",
    "rows",
    "press_rank",
    "softmax_bound",
    "erank_1e-3",
    "erank_1e-4",
    "erank_1e-5",
    "test_ppl",
)

NOTE = (
    "d: size of the vector the output layer reads; softmax_bound: d + 1, or d + 2 with an output bias, for a single "
    "softmax (the paper's other layers are not bounded by it). A language model's perplexity is per token of its own "
    "tokenizer and its matrix has its own columns: not comparable cell for cell with the paper's word-level PTB/WT2."
)


def paper_models() -> pd.DataFrame:
    """The paper's models: ranks of Table 6, the mean test perplexity of Table 2, d = ``nemb``."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.analysis.logp import row_count
    from softmax_bottleneck.corpora.datasets import DATASETS
    from softmax_bottleneck.report import reported

    ranks = reported.load("table6")
    ppl = reported.load("main").set_index(["dataset", "variant"])["test_ppl_mean"]
    rows = []
    for rec in ranks.to_dict("records"):
        dataset, variant = rec["dataset"], rec["variant"]
        hp = presets.resolve(dataset, variant)
        d, corpus = int(hp["nemb"]), DATASETS[dataset]
        rows.append(
            {
                "source": "paper",
                "model": f"{reported.DATASETS[dataset]} {presets.display_name(variant)}",
                "text": dataset,
                "d": d,
                "columns": corpus.vocab_size,
                # the paper's rows: every predicted test token of PTB, WT2's first chunks of bptt rows beyond V
                "rows": row_count("reference", dataset, corpus.split_tokens[2], corpus.vocab_size, int(hp["bptt"])),
                "press_rank": int(rec["press_rank"]),
                "softmax_bound": d + 2 if variant == "softmax" else pd.NA,
                **{f"erank_{e}": int(rec[f"erank_{e}"]) for e in EPSILONS},
                "test_ppl": float(ppl.get((dataset, variant), math.nan)),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def read_analysis(name: str, path) -> dict:
    """One table row from an ``analyze-lm`` summary JSON."""
    path = Path(path)
    try:
        summary = readback.load_json(path, follow_links=True)  # a file you name: a link to one is read
    except FileNotFoundError:
        raise ValueError(f"{path}: not a readable analyze-lm summary (no such file)") from None
    missing = [k for k in ("press_rank", "effective_rank", "shape", "perplexity") if k not in summary]
    if missing:
        raise ValueError(f"{path}: not an analyze-lm summary (no {', '.join(missing)})")
    readback.check_rank(summary, path)
    for key in ("perplexity", "logp_test_loss", "rows", "softmax_bound"):
        readback.check_value(path, key, summary.get(key))
    d = summary.get("head_input_size") or summary.get("hidden_size")
    return {
        "source": "lm",
        "model": name,
        "text": _text_label(summary.get("text", "")),
        "d": d if d is not None else pd.NA,
        "columns": int(summary["shape"][1]),
        "rows": int(summary["shape"][0]),
        "press_rank": int(summary["press_rank"]),
        "softmax_bound": summary.get("softmax_bound") if summary.get("softmax_bound") is not None else pd.NA,
        **{f"erank_{e}": summary["effective_rank"].get(e, pd.NA) for e in EPSILONS},
        "test_ppl": float(summary["perplexity"]),
    }


def _text_label(text) -> str:
    """``ptb/test.txt`` of ``resources/data/ptb/test.txt``: the file and its folder."""
    path = Path(str(text))
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def table(analyses: dict[str, str | Path]) -> pd.DataFrame:
    """The paper's models, then one row per ``name -> analyze-lm JSON`` (in the given order)."""
    lms = pd.DataFrame([read_analysis(name, path) for name, path in analyses.items()], columns=list(COLUMNS))
    frames = [f for f in (paper_models(), lms) if len(f)]
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def to_markdown(frame: pd.DataFrame) -> str:
    shown = frame.astype(object).where(frame.notna(), "")
    shown["test_ppl"] = [f"{v:.2f}" if isinstance(v, float) else v for v in shown["test_ppl"]]
    shown[["model", "text"]] = shown[["model", "text"]].map(markdown_cell)  # names you chose, texts' file names
    return shown.to_markdown(index=False) + f"\n\n{NOTE}\n"


def figure(frame: pd.DataFrame):
    """Press' rank against d (with the bound d + 2) and against test perplexity; an axis is logarithmic where its
    values span a decade or more, else linear."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    fig = Figure(figsize=(7.0, 3.0))
    ax_d, ax_ppl = fig.subplots(1, 2)
    markers = {"ptb": "o", "wt2": "s"}
    for ax, x, label in ((ax_d, "d", "d (input size of the output layer)"), (ax_ppl, "test_ppl", "test perplexity")):
        for (source, text), group in frame.groupby(["source", "text"], sort=False):
            group = group.dropna(subset=[x])
            if group.empty:
                continue
            paper = source == "paper"
            ax.scatter(
                group[x].astype(float), group["press_rank"].astype(float),
                marker=markers.get(text, "o") if paper else "*", s=18 if paper else 60,
                label=f"paper, {text.upper()}" if paper else f"LM on {text}", zorder=3,
            )  # fmt: skip
            for _, row in group.iterrows():
                ax.annotate(
                    str(row["model"]).split(" ", 1)[-1] if paper else str(row["model"]),
                    (float(row[x]), float(row["press_rank"])), fontsize=5, xytext=(3, 2), textcoords="offset points",
                )  # fmt: skip
        ax.set_xlabel(label)
        ax.set_ylabel("Press' rank")
        for set_scale, axis, values in ((ax.set_xscale, ax.xaxis, frame[x]),
                                        (ax.set_yscale, ax.yaxis, frame["press_rank"])):  # fmt: skip
            values = pd.to_numeric(values, errors="coerce").dropna()
            # log where the values span a decade or more; under a decade no power of ten (a log axis's only
            # labels) may fall inside: perplexities of 55-70 had no label at all
            if len(values) and values.min() > 0 and values.max() >= 10 * values.min():
                set_scale("log")
                axis.set_minor_formatter(NullFormatter())
    ds = frame["d"].dropna().astype(float)
    if len(ds):
        lo, hi = ds.min() / 1.3, ds.max() * 1.3
        ax_d.plot([lo, hi], [lo + 2, hi + 2], "k--", lw=0.8, label="softmax bound d + 2", zorder=2)
    ax_d.set_title("rank against d")
    ax_ppl.set_title("rank against test perplexity")
    ax_d.legend(loc="best")
    fig.tight_layout()
    return fig


def render(analyses: dict[str, str | Path], out_table=None, out_figure=None) -> pd.DataFrame:
    """Write ``<out_table>.csv`` / ``.md`` and ``<out_figure>.pdf`` / ``.png`` (each atomically)."""
    frame = table(analyses)
    if out_table:
        atomic_write_csv(frame, f"{out_table}.csv")
        atomic_write_text(to_markdown(frame), f"{out_table}.md")
    if out_figure:
        import matplotlib

        from softmax_bottleneck.report.figures.common import STYLE

        with matplotlib.rc_context(STYLE):
            fig = figure(frame)
            with atomic_path(f"{out_figure}.pdf") as tmp:
                fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Creator": None, "Producer": None})
            with atomic_path(f"{out_figure}.png") as tmp:
                fig.savefig(tmp, format="png", metadata={"Software": None})
    return frame


def _analysis(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep:
        path, name = text, Path(text).parent.name or Path(text).stem
    if not name or not path:
        raise ValueError(f"expected NAME=JSON, not {text!r}")
    return name, path


def add_cli(parser) -> None:
    parser.description = (
        "Set the ranks of Hugging Face LMs (analyze-lm summaries) beside the paper's models: a table "
        "(PREFIX.csv, PREFIX.md) and a figure of Press' rank against d and against test perplexity (PREFIX.pdf/.png)."
    )
    parser.add_argument(
        "analyses",
        nargs="*",
        metavar="NAME=JSON",
        help="analyze-lm summaries (NAME: the JSON's folder, or its name without .json in the current folder)",
    )
    parser.add_argument("--out-table", metavar="PREFIX", help="write PREFIX.csv and PREFIX.md")
    parser.add_argument("--out-figure", metavar="PREFIX", help="write PREFIX.pdf and PREFIX.png")


def run_cli(args) -> int:
    if not (args.out_table or args.out_figure):
        raise SystemExit("lm-report: nothing to write: pass --out-table and/or --out-figure")
    try:
        analyses = {}
        for name, path in map(_analysis, args.analyses):
            if name in analyses:  # one row each: a second would silently replace the first
                raise ValueError(f"the name {name!r} is given to {analyses[name]} and {path}: one name per model "
                                 "(NAME=JSON)")  # fmt: skip
            analyses[name] = path
        render(analyses, args.out_table, args.out_figure)
    except ValueError as err:
        raise SystemExit(f"lm-report: {err}") from None
    written = [f"{args.out_table}.{ext}" for ext in ("csv", "md") if args.out_table]
    written += [f"{args.out_figure}.{ext}" for ext in ("pdf", "png") if args.out_figure]
    log.info("wrote %s", ", ".join(written))
    return 0
