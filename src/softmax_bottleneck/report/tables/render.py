"""Rendering of a table in the paper's layout: Markdown and a standalone HTML page (no JavaScript).

Each table's registration holds its layout as the paper prints it (same rows, columns and order, one
``ours (paper)`` cell per value, the paper's rounding); this module adds the caption, and an optional banner
(e.g. "small scale — pipeline check, not the paper") at the top.
"""

from __future__ import annotations

import html

import pandas as pd

from softmax_bottleneck.report.tables.catalog import REGISTRY
from softmax_bottleneck.report.tables.cells import MISSING

#: how to read a cell (under every caption)
LEGEND = f"Each cell: ours (the paper's value); {MISSING} where there is no value."

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


def display_frame(name: str, table: pd.DataFrame) -> pd.DataFrame:
    """Table ``name`` as the paper prints it (strings), from its tidy comparison table."""
    return REGISTRY[name].layout(table)


def to_markdown(name: str, table: pd.DataFrame, banner: str | None = None) -> str:
    """Markdown: optional bold banner, ``**name** — caption``, the legend, then the table in the paper's layout."""
    frame = display_frame(name, table)
    body = frame.to_markdown(index=False, disable_numparse=True) if len(frame) else "(no rows)"
    head = f"**{banner}**\n\n" if banner else ""
    return f"{head}**{name}** — {REGISTRY[name].caption} {LEGEND}\n\n{body}\n"


def to_html(name: str, table: pd.DataFrame, banner: str | None = None) -> str:
    """A standalone HTML page: optional banner, then the table in the paper's layout with its caption."""
    frame = display_frame(name, table)
    body = frame.to_html(index=False, escape=True, border=0, na_rep=MISSING)
    text = f"{REGISTRY[name].caption} {LEGEND}"
    caption = f"<caption><b>{html.escape(name)}</b> — {html.escape(text)}</caption>"
    body = body.replace(">", ">\n" + caption, 1)
    top = f'<p class="banner">{html.escape(banner)}</p>\n' if banner else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(name)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{top}{body}\n</body>\n</html>\n"
    )
