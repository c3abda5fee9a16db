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


def markdown_cell(text) -> str:
    """A cell's text on one line with ``\\``, ``|``, ``<``, ``>``, ``[`` and ``]`` escaped: a name a user or a plug-in
    chose (``<script>|x``, ``[a](javascript:...)``, a word with a line break in it) ends no cell or row, opens no HTML
    tag and makes no link where the Markdown is rendered."""
    return re.sub(r"([\\|<>\[\]])", r"\\\1", re.sub(r"[\r\n]+", " ", str(text)))


def markdown_page(name: str, frame: pd.DataFrame, caption: str, banner: str | None = None) -> str:
    """Markdown of a display table (strings): optional bold banner, ``**name** — caption``, then the table; every
    cell, header, the banner and the caption through :func:`markdown_cell` (they hold names users and plug-ins
    chose)."""
    shown = frame.map(markdown_cell).rename(columns=markdown_cell)
    body = shown.to_markdown(index=False, disable_numparse=True) if len(frame) else "(no rows)"
    head = f"**{markdown_cell(banner)}**\n\n" if banner else ""
    return f"{head}**{name}** — {markdown_cell(caption)}\n\n{body}\n"


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
    "\n": " ",  # a blank line would end the tabular's paragraph
    "\r": " ",
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
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
    "√": r"$\surd$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "·": r"$\cdot$",
    "→": r"$\to$",
    "§": r"\S{}",
    "Φ": r"$\Phi$",
    "…": r"\ldots{}",
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


#: the paper's page (AAAI, two columns): a column is 3.3 in wide, the text 7 in, in points (72.27 pt to the inch)
COLUMN_PT, TEXT_PT = 3.3 * 72.27, 7.0 * 72.27
#: estimated width of a character of a table at 10 pt (half an em), and the padding of a column (2 × \tabcolsep)
CHAR_PT, PADDING_PT = 5.0, 12.0
#: a table estimated wider than this share of the text is split into blocks of columns (scaled to the text it would
#: print below 8 pt); up to that it is scaled down at most to 0.8 (8 pt)
SPLIT_ABOVE = 1.25
#: at most this many leading text columns (dataset, model, ...) name a row and are repeated in every block
MAX_KEYS = 3
_RESIZE = "\\ifdim\\wd0>\\linewidth\\resizebox{\\linewidth}{!}{\\usebox0}\\else\\usebox0\\fi\n"


def estimated_width_pt(frame: pd.DataFrame) -> float:
    """The tabular's width at 10 pt, estimated from the display strings: per column its widest cell or header at
    :data:`CHAR_PT` a character, plus :data:`PADDING_PT` (within 15 % of pdflatex's width for every table)."""
    widths = [
        max([len(str(column)), *(len(str(value)) for value in frame[column])]) * CHAR_PT + PADDING_PT
        for column in frame.columns
    ]
    return float(sum(widths))


def column_blocks(frame: pd.DataFrame, column_format: str) -> list[list[int]]:
    """Column positions of each block the tabular is printed in: one block where it is estimated to fit the page
    scaled to at most 1 / :data:`SPLIT_ABOVE`, else consecutive blocks that each fit the text width (:data:`TEXT_PT`),
    each led by the key columns (the leading text columns naming a row, at most :data:`MAX_KEYS`)."""
    positions = list(range(len(frame.columns)))
    if estimated_width_pt(frame) <= SPLIT_ABOVE * TEXT_PT:
        return [positions]
    keys = []
    for i, kind in enumerate(column_format[: min(MAX_KEYS, len(positions) - 1)]):
        if kind != "l" or len(keys) < i:
            break
        keys.append(i)
    keys = keys or [0]
    blocks: list[list[int]] = []
    current: list[int] = []
    for i in positions[len(keys) :]:
        if current and estimated_width_pt(frame.iloc[:, [*keys, *current, i]]) > TEXT_PT:
            blocks.append([*keys, *current])
            current = []
        current.append(i)
    return [*blocks, [*keys, *current]]


def latex_table(frame: pd.DataFrame, caption: str, label: str, banner: str | None = None) -> str:
    """A display table (strings) as a LaTeX float (booktabs) with ``caption`` (``banner`` in bold in front of it) and
    ``label``, sized for the paper's two-column page: a ``table`` where it fits a column (:data:`COLUMN_PT`, as
    :func:`estimated_width_pt` estimates it), else a ``table*`` (the page's width; in a one-column document the same
    as ``table``); a table far wider than the page is printed in blocks of columns (:func:`column_blocks`). A tabular
    still wider than its float's ``\\linewidth`` when compiled is scaled down to it (``\\resizebox``: needs
    ``\\usepackage{graphicx}`` beside ``booktabs``); a narrower one keeps its size."""
    column_format = _column_format(frame)
    float_env = "table" if estimated_width_pt(frame) <= COLUMN_PT else "table*"
    blocks = column_blocks(frame, column_format)
    frame = frame.map(latex_text).rename(columns=latex_text)
    caption = latex_text(caption)
    if banner:
        caption = f"\\textbf{{{latex_text(banner)}.}} {caption}"
    parts = []
    for block in blocks:
        columns = "".join(column_format[i] for i in block)
        tabular = frame.iloc[:, block].style.hide(axis="index").to_latex(hrules=True, column_format=columns)
        parts.append(f"\\sbox0{{%\n{tabular.rstrip()}%\n}}%\n{_RESIZE}")
    return (
        f"\\begin{{{float_env}}}\n\\centering\n\\caption{{{caption}}}\n\\label{{{label}}}\n"
        "% scaled to the float's width only where it is wider (\\resizebox: \\usepackage{graphicx})\n"
        + "\\par\\medskip\n".join(parts)
        + f"\\end{{{float_env}}}\n"
    )
