"""Cells of the tables as the paper prints them: its rounding, and "ours (paper)" side by side in one cell.

Every formatter maps a number (NaN or None for "no value") to text. :func:`pair` joins ours and the paper's value
as ``ours (paper)``; a missing value is ``—``. :func:`layout` turns a tidy comparison table into the rows and
columns of the paper's table.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Sequence

import pandas as pd

from softmax_bottleneck.report import variants
from softmax_bottleneck.report.reported import DATASETS

#: shown where a value is missing (ours not run yet, or a row the paper does not have)
MISSING = "—"
#: shown where a value cannot exist, as the paper prints it (the p-value of the baseline against itself)
NOT_APPLICABLE = "N/A"

Formatter = Callable[[object], str]
Cell = Callable[[pd.Series], str]

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _number(fmt: Callable[[float], str]) -> Formatter:
    def apply(value) -> str:
        if missing(value):
            return MISSING
        if isinstance(value, str):
            return value
        return fmt(float(value))

    return apply


#: perplexities, sds and Spearman-free two-decimal numbers ("57.08")
two = _number(lambda v: f"{v:.2f}")
#: Spearman ρ ("0.4160")
four = _number(lambda v: f"{v:.4f}")
#: Pearson r ("0.48")
r2 = _number(lambda v: f"{v:.2f}")
#: counts and ranks with thousands separators ("5,113")
integer = _number(lambda v: f"{round(v):,d}")
#: #Param in millions, truncated to two decimals as the paper does (33,556,078 → "33.55M")
params = _number(lambda v: f"{math.floor(v * 100 + 1e-6) / 100:.2f}M")
#: hyper-parameter values as printed (0.29, 0.145, 0.00)
value = _number(lambda v: "0.00" if v == 0 else f"{v:g}")


def sci(v: float, digits: int = 3) -> str:
    """``3.92×10⁻¹`` (the paper's p-values and errors)."""
    mantissa, exponent = f"{v:.{digits - 1}e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(_SUPERSCRIPT)}"


#: p-values ("3.92×10⁻¹")
scientific = _number(sci)


def times_ten_to(exponent: int) -> Formatter:
    """Numbers as multiples of 10^exponent with two decimals, as SM Table 14 prints its errors ("0.97×10⁻²⁸");
    values far from that scale fall back to :func:`sci`."""
    unit = f"×10{str(exponent).translate(_SUPERSCRIPT)}"

    def fmt(v: float) -> str:
        mantissa = v / 10.0**exponent
        return f"{mantissa:.2f}{unit}" if v == 0 or 0.01 <= abs(mantissa) < 1000 else sci(v)

    return _number(fmt)


def power_of_ten(v: float) -> str:
    """``10⁻²``, ``10⁻²⁰``, ``2.5×10⁻³``: a noise scale c of SM Tables 15 and 16, or an ε, in the notation of the
    p-values (:func:`sci`), without a mantissa of 1."""
    mantissa, exponent = f"{v:.6e}".split("e")
    power = f"10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    return power if float(mantissa) == 1 else f"{float(mantissa):g}×{power}"


#: noise scales c of SM Tables 15, 16 ("10⁻²", "10⁻²⁰")
scale = _number(power_of_ten)


def epsilon(column: str) -> str:
    """The header of an ε-effective-rank column (``erank_1e-3`` → ``ε = 10⁻³``)."""
    return f"ε = {power_of_ten(float(column.removeprefix('erank_')))}"


def seconds(v) -> str:
    """Our seconds per epoch on whatever device ran it, three significant figures ("0.152s", "1.52s", "57.3s",
    "123s"; larger numbers in whole seconds)."""
    if missing(v):
        return MISSING
    v = float(v)
    if v == 0:
        return "0s"
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}s"


#: whether :func:`pair` shows the paper's value beside ours (off for the "ours alone" renderings)
_SHOW_PAPER: contextvars.ContextVar[bool] = contextvars.ContextVar("show_paper", default=True)


@contextlib.contextmanager
def ours_alone() -> Iterator[None]:
    """Within this block every :func:`pair` cell shows our value only (the tables' ``.ours.tex`` form)."""
    token = _SHOW_PAPER.set(False)
    try:
        yield
    finally:
        _SHOW_PAPER.reset(token)


def pair(ours: str, paper: str) -> str:
    """``ours (paper)``; ``—`` stands for a missing value, and a cell missing on both sides is just ``—``.
    Within :func:`ours_alone`, just ``ours``."""
    if not _SHOW_PAPER.get():
        return ours
    if ours == MISSING and paper == MISSING:
        return MISSING
    return f"{ours} ({paper})"


def mean_sd(mean, sd, fmt: Formatter) -> str:
    """``57.08 ± 0.09``; just the mean when there is no sd (one run)."""
    if missing(mean):
        return MISSING
    return fmt(mean) if missing(sd) else f"{fmt(mean)} ± {fmt(sd)}"


# --------------------------------------------------------------------------------------------- cell builders
def both(q: str, fmt: Formatter, paper_fmt: Formatter | None = None) -> Cell:
    """Cell ``ours (paper)`` of quantity ``q`` (columns ``q_ours``, ``q_paper``)."""
    return lambda row: pair(fmt(row.get(f"{q}_ours")), (paper_fmt or fmt)(row.get(f"{q}_paper")))


def p_value(baseline: str, fmt: Formatter = scientific) -> Cell:
    """Cell ``ours (paper)`` of ``p_value``; ``N/A`` on the row of the ``baseline`` variant the others are tested
    against, as the paper prints it (Table 2, SM Table 1)."""
    cell = both("p_value", fmt)
    return lambda row: NOT_APPLICABLE if row.get("variant") == baseline else cell(row)


def both_mean_sd(q: str, fmt: Formatter) -> Cell:
    """Cell ``mean ± sd (mean ± sd)`` of quantity ``q`` (columns ``q_mean_ours``, ``q_sd_ours``, ...)."""

    def cell(row) -> str:
        ours = mean_sd(row.get(f"{q}_mean_ours"), row.get(f"{q}_sd_ours"), fmt)
        paper = mean_sd(row.get(f"{q}_mean_paper"), row.get(f"{q}_sd_paper"), fmt)
        return pair(ours, paper)

    return cell


def key(column: str, fmt: Formatter | None = None) -> Cell:
    """A key column as text: dataset and variant display names, numbers through ``fmt``."""

    def cell(row) -> str:
        v = row.get(column)
        if missing(v):
            return MISSING
        if column == "dataset":
            return DATASETS.get(v, str(v))
        if column in ("variant", "row_variant", "col_variant"):
            return variants.display(v)
        if column == "schedule":
            return str(v).upper()
        return fmt(v) if fmt else str(v)

    return cell


def only(column: str, fmt: Formatter) -> Cell:
    """One column's value, no pairing (e.g. the number of runs, or a value only the paper reports)."""
    return lambda row: fmt(row.get(column))


def layout(table: pd.DataFrame, columns: Sequence[tuple[str, Cell]], *, merge: Sequence[str] = ()) -> pd.DataFrame:
    """The display table: one column per ``(header, cell)``; repeated values of the ``merge`` headers are blanked
    (the paper's merged cells, e.g. the dataset column of Table 2)."""
    rows = [{header: cell(row) for header, cell in columns} for _, row in table.iterrows()]
    frame = pd.DataFrame(rows, columns=[h for h, _ in columns])
    repeated = pd.Series(True, index=frame.index)
    for header in merge:  # a cell is blanked when it and the merged cells to its left repeat the row above
        repeated &= frame[header].eq(frame[header].shift())
        frame.loc[repeated, header] = ""
    return frame
