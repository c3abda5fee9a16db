"""Rendering of a table in the paper's layout: Markdown, a standalone HTML page (no JavaScript), and LaTeX (booktabs)
ours beside the paper's or ours alone.

Each table's registration holds its layout as the paper prints it (same rows, columns and order, one
``ours (paper)`` cell per value, the paper's rounding); this module adds the caption, and an optional banner
(e.g. "small scale — pipeline check, not the paper") at the top.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import REGISTRY
from softmax_bottleneck.report.tables.cells import MISSING

#: how to read a cell (under every caption)
LEGEND = f"Each cell: ours (the paper's value); {MISSING} where there is no value."
#: how to read a cell of the "ours alone" rendering
LEGEND_OURS = f"{MISSING} where there is no value."

_CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 13px; margin: 1em; color: #222; }
.banner { color: #b00; font-weight: bold; font-size: 15px; }
table { border-collapse: collapse; }
caption { caption-side: top; text-align: left; padding-bottom: 0.5em; max-width: 60em; }
th, td { padding: 3px 9px; white-space: nowrap; text-align: right; }
th { border-bottom: 1.5px solid #222; }
tbody tr:last-child td { border-bottom: 1.5px solid #222; }
td:first-child, th:first-child { text-align: left; }
tbody tr:nth-child(even) { background: #f5f5f5; }
"""


def display_frame(name: str, table: pd.DataFrame, *, paper: bool = True) -> pd.DataFrame:
    """Table ``name`` as the paper prints it (strings), from its tidy comparison table: each cell ``ours (paper)``,
    or (``paper=False``) ours alone, without the columns and rows that hold only the paper's values."""
    layout = REGISTRY[name].layout
    both = layout(table)
    if paper:
        return both
    with cells.ours_alone():
        ours = layout(table)
    same = (ours == both).all()  # a column (row) that does not change holds no value of ours ...
    keep = [c for c in ours.columns if not ("paper" in c and same[c])]  # ... if it names the paper
    rows = ours[keep]
    if len(rows):
        first = rows.iloc[:, 0].astype(str)
        rows = rows[~(first.str.contains("paper") & (ours == both).all(axis=1))]
    return rows.reset_index(drop=True)


def markdown_page(name: str, frame: pd.DataFrame, caption: str, banner: str | None = None) -> str:
    """Markdown of a display table (strings): optional bold banner, ``**name** — caption``, then the table."""
    body = frame.to_markdown(index=False, disable_numparse=True) if len(frame) else "(no rows)"
    head = f"**{banner}**\n\n" if banner else ""
    return f"{head}**{name}** — {caption}\n\n{body}\n"


def to_markdown(name: str, table: pd.DataFrame, banner: str | None = None) -> str:
    """Markdown: optional bold banner, ``**name** — caption``, the legend, then the table in the paper's layout."""
    return markdown_page(name, display_frame(name, table), f"{REGISTRY[name].caption_for(table)} {LEGEND}", banner)


def to_html(name: str, table: pd.DataFrame, banner: str | None = None) -> str:
    """A standalone HTML page: optional banner, then the table in the paper's layout with its caption."""
    return html_page(name, display_frame(name, table), f"{REGISTRY[name].caption_for(table)} {LEGEND}", banner)


def html_page(name: str, frame: pd.DataFrame, text: str, banner: str | None = None) -> str:
    """A standalone HTML page of a display table (strings): optional banner, then the table with its caption."""
    body = frame.to_html(index=False, escape=True, border=0, na_rep=MISSING)
    caption = f"<caption><b>{html.escape(name)}</b> — {html.escape(text)}</caption>"
    body = body.replace(">", ">\n" + caption, 1)
    top = f'<p class="banner">{html.escape(banner)}</p>\n' if banner else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(name)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{top}{body}\n</body>\n</html>\n"
    )


# --------------------------------------------------------------------------------------------- LaTeX
_SUPERSCRIPTS = "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"
_POWER = re.compile(rf"(?:(\d+(?:\.\d+)?)×)?10([{_SUPERSCRIPTS}]+)")
#: text characters -> LaTeX (the rest of the text is escaped as LaTeX needs)
_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"$\sim$",
    "^": r"\^{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "±": r"$\pm$",
    "×": r"$\times$",
    "−": r"$-$",
    "—": "---",
    "–": "--",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "ε": r"$\varepsilon$",
    "ρ": r"$\rho$",
    "σ": r"$\sigma$",
    "∈": r"$\in$",
}


def latex_text(text: str) -> str:
    r"""``text`` (a cell, header or caption) as LaTeX: ``3.92×10⁻¹`` → ``$3.92\times10^{-1}$``, ``10⁻²`` →
    ``$10^{-2}$``, ``±`` → ``$\pm$``, ``—`` → ``---``, ``†`` → ``\dag{}``; LaTeX's special characters escaped."""
    out, last = [], 0
    for match in _POWER.finditer(text):
        out.append("".join(_LATEX.get(ch, ch) for ch in text[last : match.start()]))
        mantissa, exponent = match.groups()
        power = "10^{" + exponent.translate(str.maketrans(_SUPERSCRIPTS, "-0123456789")) + "}"
        out.append(f"${mantissa}\\times{power}$" if mantissa else f"${power}$")
        last = match.end()
    out.append("".join(_LATEX.get(ch, ch) for ch in text[last:]))
    return "".join(out)


def _column_format(frame: pd.DataFrame) -> str:
    """``l`` for a text column (the first, names, top-5 words), ``r`` for a column of numbers."""
    numeric = re.compile(r"^([\d—~(−-]|N/A|$)")
    formats = []
    for i, column in enumerate(frame.columns):
        values = frame[column].astype(str)
        formats.append("r" if i and values.map(lambda v: bool(numeric.match(v))).all() else "l")
    return "".join(formats)


def to_latex(name: str, table: pd.DataFrame, *, paper: bool = True, banner: str | None = None) -> str:
    """A LaTeX ``table`` float (booktabs: ``\\toprule``, ``\\midrule``, ``\\bottomrule``; needs
    ``\\usepackage{booktabs}``) in the paper's layout: ours beside the paper's (``paper=True``), or ours alone,
    with the caption (``banner`` in bold in front of it) and the label ``tab:<name>``."""
    frame = display_frame(name, table, paper=paper)
    caption = f"{REGISTRY[name].caption_for(table)} {LEGEND if paper else LEGEND_OURS}"
    return latex_table(frame, caption, f"tab:{name}" if paper else f"tab:{name}-ours", banner)


def latex_table(frame: pd.DataFrame, caption: str, label: str, banner: str | None = None) -> str:
    """A display table (strings) as a LaTeX ``table`` float (booktabs) with ``caption`` (``banner`` in bold in
    front of it) and ``label``."""
    column_format = _column_format(frame)
    frame = frame.map(latex_text).rename(columns=latex_text)
    caption = latex_text(caption)
    if banner:
        caption = f"\\textbf{{{latex_text(banner)}.}} {caption}"
    styler = frame.style.hide(axis="index")
    return styler.to_latex(
        hrules=True, caption=caption, label=label, column_format=column_format, position_float="centering"
    )
