"""The registry of the paper's tables and figures: one registration per item, everything else read from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from softmax_bottleneck.report import common, figures, tables

ROOT = Path(__file__).resolve().parents[1]
SUMMARIES = {
    "fair.csv", "frozen.csv", "gss_grid.csv", "main.csv", "mos_dropoutl.csv", "mos_k.csv", "ntet.csv",
    "robustness.csv", "spectra.csv", "top5.csv", "wordsim.csv", "wordsim_coverage.csv",
}  # fmt: skip


def _items():
    return [*tables.TABLES.values(), *figures.FIGURES.values()]


def test_every_item_is_one_complete_registration():
    assert len(tables.TABLES) == 22 and len(figures.FIGURES) == 11
    for item in _items():
        assert item.caption and item.report and item.report_caption.startswith(item.report), item.name
        assert set(item.requires) <= SUMMARIES, item.name
        assert (item.layout is not None) == (item.kind == "table"), item.name
        assert item.name in item.report_caption  # the files it names
        assert len(item.description) <= common.DESCRIPTION_LENGTH
    assert tables.REQUIRES == {n: list(t.requires) for n, t in tables.TABLES.items()}
    assert figures.REQUIRES["figure1"] == [] and figures.REQUIRES["figure5"] == ["mos_k.csv", "mos_dropoutl.csv"]


def test_paper_order_labels_and_categories():
    assert list(tables.TABLES)[:7] == ["table1", "table2", "table3", "table4", "table5", "table6", "sm_table1"]
    assert list(tables.TABLES)[-2:] == ["figure2_pearson", "figure4_wins"]
    assert list(tables.TABLES).index("sm_table5") + 1 == list(tables.TABLES).index("sm_table10")
    assert list(figures.FIGURES)[-4:] == ["sm_figure2", "sm_figure3", "sm_figure4", "sm_figure5"]
    assert tables.TABLES["sm_table12"].label == "SM Table 12"
    assert tables.TABLES["figure2_pearson"].label == "Figure 2 pearson"
    assert tables.TABLES["sm_table12"].category == "Supplementary material"
    assert figures.FIGURES["figure7"].category == "Paper"


def test_registry_refuses_bad_registrations():
    registry = common.Registry("table")
    with pytest.raises(ValueError, match="must read like"):
        registry.register("Table 2", requires=[], caption="c", report="r", layout=len)
    with pytest.raises(ValueError, match="needs a layout"):
        registry.register("table2", requires=[], caption="c", report="r")
    registry.register("table2", requires=[], caption="c", report="r", layout=len)(print)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("table2", requires=[], caption="c", report="r", layout=len)(repr)


def test_figures_do_not_import_tables():
    for path in (ROOT / "src" / "softmax_bottleneck" / "report" / "figures").glob("*.py"):
        assert "report.tables" not in path.read_text(), path.name


def test_workflow_reads_the_registry():
    rules = (ROOT / "workflow" / "rules" / "reports.smk").read_text()
    assert "paper_tables.TABLES" in rules and "paper_figures.FIGURES" in rules
    assert not (ROOT / "workflow" / "rules" / "helpers" / "reports.smk").exists()
    assert "snakemake.params.caption" in (ROOT / "workflow" / "report" / "item.rst").read_text()
