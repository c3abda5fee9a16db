"""The qualitative top-5 comparison (E5): SM Table 2."""

from __future__ import annotations

import math
import re

import pandas as pd

from softmax_bottleneck.report import reported, variants
from softmax_bottleneck.report.common import as_hit, read_top5
from softmax_bottleneck.report.reported import FIGURE3_GROUP_LABELS, FIGURE3_GROUPS
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.catalog import paper_table
from softmax_bottleneck.report.tables.common import compare


def _top5_text(row) -> str:
    parts = []
    for i in range(1, 6):
        word, prob = row.get(f"word_{i}"), row.get(f"prob_{i}")
        if word is None or (isinstance(word, float) and math.isnan(word)):
            continue
        parts.append(f"{word} {float(prob):.2f}" if pd.notna(prob) else str(word))
    return ", ".join(parts)


def as_ptb_token(printed: str) -> str:
    """A word as SM Table 2 prints it, as the PTB token it stands for: the SM sets the apostrophe curly (``’s``,
    ``n’t``: PTB's ``'s``, ``n't``) and spaces the abbreviation's full stop (``mr .``: PTB's ``mr.``)."""
    return re.sub(r"^(\w+) \.$", r"\1.", printed.replace("\u2019", "'"))


def _top5_words(row) -> set[str]:
    return {as_ptb_token(str(row.get(f"word_{i}"))) for i in range(1, 6) if pd.notna(row.get(f"word_{i}"))}


# --------------------------------------------------------------------------------------------- the paper's layout
def sm_table2_layout(table: pd.DataFrame) -> pd.DataFrame:
    """SM Table 2 as printed: per context (Yang et al.'s, the authors', random), each model's top-5 (word p)."""

    def context(row) -> str:
        return f"{FIGURE3_GROUP_LABELS.get(row['group'], row['group'])} #{row['number']}"

    def hit(value) -> str:
        return cells.MISSING if cells.missing(value) else ("yes" if float(value) else "no")

    return cells.layout(
        table,
        [
            ("context", context),
            ("true token", lambda r: str(r["true_token"])),
            ("model", lambda r: str(r["model"])),
            ("top-5 (ours)", lambda r: r["top5_ours"] or cells.MISSING),
            ("top-5 (paper)", lambda r: r["top5_paper"] or cells.MISSING),
            ("true token in top-5", lambda r: cells.pair(hit(r["hit_ours"]), hit(r["hit_paper"]))),
        ],
        merge=["context", "true token"],
    )


# --------------------------------------------------------------------------------------------- the tables
@paper_table(
    "sm_table2",
    requires=["top5.csv"],
    caption="SM Table 2 (PTB): top-5 next-word predictions at the 18 contexts and whether the true token is among "
    "them.",
    layout=sm_table2_layout,
    report="**SM Table 2** (PTB). Top-5 next-word predictions and probabilities at the 18 test contexts (Yang et "
    "al.'s six, the paper authors' six — \"Ours\" in the SM —, six random ones) for Softmax, SS, GSS, LMS-PLIF, "
    "MoS, MoC (ET-ASGD) and MoS*, MoC* (NT-ASGD), authors' seeds (E5), and whether the true token is among them. "
    "Rows: per context, our top-5 beside the paper's.",
)
def sm_table2(summary_dir) -> pd.DataFrame:
    ours = read_top5(summary_dir)
    paper = reported.load("sm_table2")
    paper = paper[~paper["model"].str.endswith("**")]  # Yang et al.'s own numbers: nothing to reproduce
    keys = ["model", "group", "number"]
    ours = ours.assign(number=pd.to_numeric(ours["number"], errors="coerce"), hit=ours["hit"].map(as_hit))
    ours = ours.dropna(subset=["number"]).astype({"number": "int64"}).drop_duplicates(keys)
    table = compare(
        ours,
        paper,
        keys,
        ["token_index", "hit"],
        extra_paper=["true_token"],
    )
    o_idx = ours.set_index(keys)
    p_idx = paper.set_index(keys)
    top_ours, top_paper, overlap = [], [], []
    for key in table[keys].itertuples(index=False):
        key = tuple(key)
        o = o_idx.loc[key].to_dict() if key in o_idx.index else None
        p = p_idx.loc[key].to_dict() if key in p_idx.index else None
        top_ours.append(_top5_text(o) if o else "")
        top_paper.append(_top5_text(p) if p else "")
        overlap.append(len(_top5_words(o) & _top5_words(p)) if o and p else math.nan)
    missing_token = table["true_token"].isna()
    if missing_token.any():
        table.loc[missing_token, "true_token"] = [
            o_idx.loc[tuple(k)]["true_token"] for k in table.loc[missing_token, keys].itertuples(index=False)
        ]
    table.insert(4, "top5_ours", top_ours)
    table.insert(5, "top5_paper", top_paper)
    table.insert(6, "top5_overlap", overlap)
    # per context (group, number), the paper's models in its order, then other models in registry order
    models = variants.ordered_models(list(dict.fromkeys(paper["model"])), table["model"])
    group = {g: i for i, g in enumerate(FIGURE3_GROUPS)}
    order = table.assign(
        _g=table["group"].map(group).fillna(len(group)),
        _m=table["model"].map({m: i for i, m in enumerate(models)}),
    ).sort_values(["_g", "number", "_m"], kind="mergesort")
    return table.loc[order.index].reset_index(drop=True)
