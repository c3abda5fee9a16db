"""Robustness of Press' rank (E12, SM Section 5): SM Tables 14, 15 and 16."""

from __future__ import annotations

import pandas as pd

from softmax_bottleneck.report import reported
from softmax_bottleneck.report.common import EPS, fkey, read_summary
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare


def read_robustness(summary_dir) -> pd.DataFrame:
    numbers = ["algorithm", "iteration_or_c", "press_rank", "error", *EPS]
    return read_summary(summary_dir, "robustness.csv", numbers=numbers, required=numbers[:3])


def robustness_pair(
    summary_dir, algorithms: tuple[int, ...], tables: tuple[str, ...], key: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our rows of the robustness ``algorithms`` (SM Algorithms 1, 2; 0: the matrix itself) and the paper's rows of
    ``tables``, keyed by ``key``."""

    def keyed(frame):
        frame = frame.rename(columns={"iteration_or_c": key})
        return frame.assign(**{key: frame[key].map(fkey)})

    ours = read_robustness(summary_dir)
    paper = reported.load("robustness")
    return keyed(ours[ours["algorithm"].isin(algorithms)]), keyed(paper[paper["table"].isin(tables)])


# --------------------------------------------------------------------------------------------- the paper's layout
def _iteration(value) -> str:
    """An iteration of Algorithm 1; 0 is the matrix itself, before its rank-10 reconstruction (SM §5)."""
    return "0: the matrix itself (SM §5)" if not cells.missing(value) and int(value) == 0 else cells.integer(value)


def sm_table14_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 14: iteration, Press' rank, reconstruction error; first the matrix itself (SM §5's text)."""
    return cells.layout(
        table,
        [
            ("iteration", cells.key("iteration", _iteration)),
            ("Press' rank", cells.both("press_rank", cells.integer)),
            ("error", cells.both("error", cells.times_ten_to(-28))),
        ],
    )


def sm_table15_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 15's three sub-tables stacked: sub-table, c, Press' rank."""
    return cells.layout(
        table,
        [
            ("sub-table", cells.only("subtable", cells.integer)),
            ("c", cells.key("c", cells.scale)),
            ("Press' rank", cells.both("press_rank", cells.integer)),
        ],
        merge=["sub-table"],
    )


def sm_table16_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 16: c, Press' rank, ε-effective ranks for ε = 10⁻³, 10⁻⁴, 10⁻⁵."""
    return cells.layout(
        table,
        [
            ("c", cells.key("c", cells.scale)),
            ("Press' rank", cells.both("press_rank", cells.integer)),
            *[(cells.epsilon(e), cells.both(e, cells.integer)) for e in EPS],
        ],
    )


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "sm_table14",
    requires=["robustness.csv"],
    caption="SM Table 14: robustness of Press' rank, Algorithm 1 (reconstruction noise).",
    layout=sm_table14_layout,
    report="**SM Table 14.** Robustness of Press' rank, Algorithm 1 (E12): a rank-10 reconstruction of the first rows "
    "of the PTB MoS log-P matrix, re-decomposed 10 times; Press' rank and reconstruction error (as multiples of "
    "10⁻²⁸, as the SM prints them) per iteration. Iteration 0 is the matrix itself, whose Press' rank the SM gives "
    "in its text (§5: 8,933).",
)
def sm_table14(summary_dir) -> pd.DataFrame:
    ours, paper = robustness_pair(summary_dir, (0, 1), ("sm_section5", "sm_table14"), "iteration")
    return compare(ours, paper, ["iteration"], ["press_rank", "error"])


@paper_table(
    "sm_table15",
    requires=["robustness.csv"],
    caption="SM Table 15: robustness of Press' rank, Algorithm 2 (additive Gaussian noise of scale c).",
    layout=sm_table15_layout,
    report="**SM Table 15.** Robustness of Press' rank, Algorithm 2 (E12): Press' rank of the rank-10 reconstruction "
    "plus Gaussian noise of scale c, for the paper's values of c.",
)
def sm_table15(summary_dir) -> pd.DataFrame:
    ours, paper = robustness_pair(summary_dir, (2,), ("sm_table15",), "c")
    return compare(ours, paper, ["c"], ["press_rank"], extra_paper=["subtable"])


@paper_table(
    "sm_table16",
    requires=["robustness.csv"],
    caption="SM Table 16: Press' rank vs ε-effective rank of the noisy matrices of Algorithm 2.",
    layout=sm_table16_layout,
    report="**SM Table 16.** The noisy matrices of SM Table 15: Press' rank against the ε-effective ranks (ε = 10⁻³, "
    "10⁻⁴, 10⁻⁵), E12.",
)
def sm_table16(summary_dir) -> pd.DataFrame:
    ours, paper = robustness_pair(summary_dir, (2,), ("sm_table16",), "c")
    return compare(ours, paper, ["c"], ["press_rank", *EPS], keep_ours_only=False)
