"""Tables in the paper's layout: its rows, columns and rounding, ours beside the paper's in one cell; HTML; banner."""

from __future__ import annotations

import html
import math

import pandas as pd
import pytest
from test_tables import make_summaries

from softmax_bottleneck.report import tables
from softmax_bottleneck.report.tables import cells
from softmax_bottleneck.report.tables.render import display_frame

BANNER = "small scale — pipeline check, not the paper"


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory):
    return make_summaries(tmp_path_factory.mktemp("summary"))


@pytest.fixture(scope="module")
def built(summary_dir) -> dict[str, pd.DataFrame]:
    return {name: tables.build(name, summary_dir) for name in tables.TABLES}


def _row(frame: pd.DataFrame, **match) -> pd.Series:
    sel = frame
    for col, value in match.items():
        sel = sel[sel[col] == value]
    assert len(sel) == 1, match
    return sel.iloc[0]


def test_cell_formats_are_the_papers():
    assert cells.params(33.556078) == "33.55M" and cells.params(24.2216) == "24.22M"  # truncated, as printed
    assert cells.params(34.9) == "34.90M"
    assert cells.scientific(0.392) == "3.92×10⁻¹" and cells.scientific(2.04e-13) == "2.04×10⁻¹³"
    assert cells.integer(5113.4) == "5,113" and cells.integer(15734) == "15,734"
    assert cells.two(57.084) == "57.08" and cells.four(0.41604) == "0.4160"
    assert cells.value(0.145) == "0.145" and cells.value(0.0) == "0.00"
    assert cells.times_ten_to(-28)(0.97e-28) == "0.97×10⁻²⁸" and cells.times_ten_to(-28)(3e-14) == "3.00×10⁻¹⁴"
    assert cells.mean_sd(57.08, 0.09, cells.two) == "57.08 ± 0.09"
    assert cells.mean_sd(57.08, math.nan, cells.two) == "57.08"  # one run: no sd
    assert cells.pair(cells.two(math.nan), cells.two(57.08)) == "— (57.08)"
    assert cells.pair(cells.two(58.3), cells.two(None)) == "58.30 (—)"
    assert cells.pair(cells.two(math.nan), cells.two(math.nan)) == "—"
    assert [cells.scale(c) for c in (1e-2, 1e-20, 1e-32, 2.5e-3, 1.0)] == ["10⁻²", "10⁻²⁰", "10⁻³²", "2.5×10⁻³", "10⁰"]
    assert cells.epsilon("erank_1e-3") == "ε = 10⁻³"
    assert [cells.seconds(v) for v in (0.1523, 1.5, 57.34, 123.4, 1234.0, math.nan)] == [
        "0.152s", "1.50s", "57.3s", "123s", "1234s", "—"
    ]  # three significant figures  # fmt: skip


def test_sm_tables_15_and_16_print_c_in_the_p_values_notation(built):
    for name in ("sm_table15", "sm_table16"):
        c = display_frame(name, built[name])["c"].tolist()
        assert "10⁻²⁰" in c and "10⁻²²" in c and not any("e-" in v or "e+" in v for v in c), (name, c)
    assert "10⁻²" in display_frame("sm_table15", built["sm_table15"])["c"].tolist()


def test_baseline_p_values_are_not_applicable_as_printed(built):
    for name, column in (("table2", "p-value vs Softmax"), ("sm_table1", "p-value")):
        frame = display_frame(name, built[name])
        softmax = frame[frame["model"] == "Softmax"]
        assert len(softmax) == 2 and (softmax[column] == "N/A").all(), softmax[column]
        assert not (frame.loc[frame["model"] != "Softmax", column] == "N/A").any()
    table5 = display_frame("table5", built["table5"]).set_index("model")
    assert table5.loc["Softmax‡", "p-value"] == "N/A" and table5.loc["MoS†", "p-value"].endswith("(0.62)")


def test_table2_has_the_papers_columns_and_printed_values(built):
    frame = display_frame("table2", built["table2"])
    assert list(frame.columns) == [
        "dataset",
        "model",
        "#Param",
        "time/epoch (paper: V100)",
        "train ppl",
        "valid ppl",
        "test ppl",
        "p-value vs Softmax",
        "rank",
        "n",
    ]
    assert frame["dataset"].tolist()[:6] == ["PTB", "", "", "", "", "WT2"]  # the paper's merged cells
    ss = frame.iloc[1]  # PTB SS, as printed in the paper's Table 2
    assert ss["model"] == "SS"
    for col, printed in [
        ("#Param", "(24.22M)"),
        ("time/epoch (paper: V100)", "(~57s)"),
        ("train ppl", "(32.87 ± 0.19)"),
        ("test ppl", "(57.05 ± 0.15)"),
        ("p-value vs Softmax", "(3.92×10⁻¹)"),
        ("rank", "(5,113 ± 85)"),
    ]:
        assert ss[col].endswith(printed), (col, ss[col])
    mos = frame.iloc[9]  # WT2 MoS
    assert mos["model"] == "MoS" and mos["#Param"].endswith("(34.90M)") and mos["rank"].endswith("(15,734 ± 188)")
    assert mos["p-value vs Softmax"].endswith("(2.04×10⁻¹³)") and mos["time/epoch (paper: V100)"].endswith("(~600s)")
    ours = _row(built["table2"], dataset="ptb", variant="ss")
    assert ss["test ppl"].startswith(f"{ours['test_ppl_mean_ours']:.2f} ± {ours['test_ppl_sd_ours']:.2f} (")


@pytest.mark.parametrize(
    ("name", "columns"),
    [
        ("table1", ["metric", "SS", "LMS-PLIF", "MoS", "GSS", "MoC"]),  # the paper's, then every other E2 model
        ("table3", ["dataset", "model", "train ppl", "valid ppl", "test ppl", "n"]),
        ("table4", ["dataset", "LMS-PLIF", "LMS-PLIF†", "p-value", "n"]),
        ("table5", ["model", "#Param", "train ppl", "valid ppl", "test ppl", "p-value", "n"]),
        ("table6", ["dataset", "model", "Press' rank", "ε = 10⁻³", "ε = 10⁻⁴", "ε = 10⁻⁵"]),
        ("sm_table1", ["dataset", "model", "test ppl", "p-value", "n"]),
        ("sm_table4", ["K", "#Param", "train ppl", "test ppl", "rank"]),
        ("sm_table10", ["schedule", "model", "#Param", "train", "valid", "test", "rank"]),
        ("sm_table12", ["dataset", "dropoutl", "train ppl", "test ppl", "rank"]),
        ("sm_table13", ["benchmark", "# pairs", "# not in PTB", "# not in WT2"]),
        ("sm_table14", ["iteration", "Press' rank", "error"]),
        ("sm_table16", ["c", "Press' rank", "ε = 10⁻³", "ε = 10⁻⁴", "ε = 10⁻⁵"]),
    ],
)
def test_columns_follow_the_paper(built, name, columns):
    assert list(display_frame(name, built[name]).columns) == columns


def test_wide_tables_are_laid_out_as_printed(built):
    sm3 = display_frame("sm_table3", built["sm_table3"])
    models = ["Softmax", "SS", "GSS", "LMS-PLIF", "MoS", "MoC"]  # SM Table 3's column order
    assert list(sm3.columns) == ["benchmark", *[f"{ds} {m}" for ds in ("PTB", "WT2") for m in models]]
    assert sm3["benchmark"].tolist()[0] == "WS-353" and len(sm3) == 13
    assert sm3.loc[sm3["benchmark"] == "RG-65", "PTB GSS"].item().endswith("(0.5152)")
    sm13 = display_frame("sm_table13", built["sm_table13"]).set_index("benchmark")
    assert sm13.loc["MEN", "# pairs"] == "— (3,000)" and sm13.loc["VERB-143", "# not in WT2"] == "— (0)"
    assert sm13.loc["RG-65"].tolist() == ["30 (65)", "13 (55)", "13 (20)"]  # ours (the paper's)
    t1 = display_frame("table1", built["table1"]).set_index("metric")
    assert t1.loc["rank, reported in the original papers"].tolist() == ["4,640", "N/A", "9,980", "—", "—"]  # as printed
    assert t1.loc["ppl difference, ours (this paper's)", "SS"].endswith("(-0.06)")
    wins = display_frame("figure4_wins", built["figure4_wins"])
    assert list(wins.columns[2:]) == ["GSS", "LMS-PLIF", "MoC", "MoS", "SS", "Softmax"]  # Figure 4's order
    ptb = wins.iloc[:6].set_index("row beats column")
    assert ptb.loc["SS", "MoS"].endswith("(9)") and ptb.loc["GSS", "GSS"] == ""


def test_sm_table2_groups_contexts_and_names_the_authors_contexts(built):
    frame = display_frame("sm_table2", built["sm_table2"])
    contexts = [c for c in frame["context"] if c]
    assert contexts[:7] == [f"Yang et al.'s #{i}" for i in range(1, 7)] + ["the authors' #1"]
    assert len(contexts) == 18 and not any(c.startswith("Ours") for c in contexts)
    first = frame.iloc[:8]
    assert first["model"].tolist() == ["Softmax", "SS", "GSS", "LMS-PLIF", "MoS", "MoC", "MoS*", "MoC*"]
    assert first.iloc[0]["true token in top-5"] == "no (yes)"  # flipped in the synthetic data


def test_html_shows_the_markdown_cells(built):
    for name in ("table2", "sm_table3", "figure4_wins"):
        page = tables.to_html(name, built[name])
        frame = display_frame(name, built[name])
        for value in frame.to_numpy().ravel():
            assert f"<td>{html.escape(value)}</td>" in page, (name, value)
        assert f"<caption><b>{name}</b>" in page


def test_banner_tops_markdown_and_html(summary_dir, tmp_path):
    tables.render("table6", summary_dir, tmp_path / "t6", banner=BANNER)
    md = (tmp_path / "t6.md").read_text(encoding="utf-8")
    assert md.startswith(f"**{BANNER}**\n\n**table6**")
    page = (tmp_path / "t6.html").read_text(encoding="utf-8")
    assert f'<p class="banner">{BANNER}</p>' in page and page.index("banner") < page.index("<table")
    tables.render("table6", summary_dir, tmp_path / "plain")
    assert (tmp_path / "plain.md").read_text(encoding="utf-8").startswith("**table6**")
    assert 'class="banner"' not in (tmp_path / "plain.html").read_text(encoding="utf-8")


def test_cli_banner_and_help(summary_dir, tmp_path, capsys):
    from softmax_bottleneck.cli import main

    out = tmp_path / "t2"
    assert main(["table", "table2", "--summary-dir", str(summary_dir), "--out", str(out), "--banner", BANNER]) == 0
    assert (tmp_path / "t2.md").read_text(encoding="utf-8").startswith(f"**{BANNER}**")
    assert (tmp_path / "t2.html").is_file() and (tmp_path / "t2.csv").is_file()
    with pytest.raises(SystemExit) as exc:
        main(["table", "table2", "--summary-dir", str(tmp_path / "nowhere"), "--out", str(out)])
    assert "main.csv" in str(exc.value) and "table table2" in str(exc.value)  # one line naming the file
    with pytest.raises(SystemExit):
        main(["table", "--help"])
    text = capsys.readouterr().out
    for option in ("--summary-dir", "--out", "--banner"):
        assert option in text
    assert "paper's layout" in text


def test_sweeps_with_values_the_paper_lacks_keep_the_papers_order(summary_dir, tmp_path):
    """An extra K (or dropoutl) of ours goes where it falls in the paper's order, not after its last row."""
    import shutil

    root = tmp_path / "s"
    shutil.copytree(summary_dir, root)
    mos_k = pd.read_csv(root / "mos_k.csv")
    pd.concat([mos_k, mos_k[mos_k["n_experts"] == 1].assign(n_experts=2)]).to_csv(root / "mos_k.csv", index=False)
    drop = pd.read_csv(root / "mos_dropoutl.csv")
    pd.concat([drop, drop.head(1).assign(dropoutl=0.2)]).to_csv(root / "mos_dropoutl.csv", index=False)
    k = display_frame("sm_table4", tables.build("sm_table4", root))["K"].tolist()
    assert k == ["1", "2", "3", "5", "10", "15", "20"]
    sm12 = display_frame("sm_table12", tables.build("sm_table12", root))
    assert sm12["dropoutl"].tolist() == ["0.29", "0.145", "0.00", "0.29", "0.2", "0.145", "0.00"]
    assert sm12["dataset"].tolist() == ["PTB", "", "", "WT2", "", "", ""]


def test_csv_keeps_full_precision(summary_dir, tmp_path):
    """The tidy CSV round-trips every float exactly (``NAME.csv`` is the full-precision record)."""
    table = tables.render("table2", summary_dir, tmp_path / "table2")
    back = pd.read_csv(tmp_path / "table2.csv")
    floats = [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]
    assert "p_value_ours" in floats
    pd.testing.assert_frame_equal(back[floats], table[floats], check_exact=True)
