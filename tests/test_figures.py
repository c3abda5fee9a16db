"""Figures: every figure renders from small synthetic summaries, deterministically, and copes with missing data."""

from __future__ import annotations

import io
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from test_tables import make_summaries

from softmax_bottleneck.report import figures
from softmax_bottleneck.report.summaries import RUN_COLUMNS, SPECTRA_COLUMNS, TOP5_COLUMNS, WORDSIM_COLUMNS


def _draw(fig) -> None:
    with matplotlib.rc_context(figures.STYLE):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=40)
    assert buf.getvalue().startswith(b"\x89PNG")


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory):
    return make_summaries(tmp_path_factory.mktemp("summary"))


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_figure_renders_deterministically(name, summary_dir, tmp_path):
    figures.render(name, summary_dir, tmp_path / "a" / name)
    figures.render(name, summary_dir, tmp_path / "b" / name)
    for ext in ("pdf", "png"):
        first, second = (tmp_path / d / f"{name}.{ext}" for d in ("a", "b"))
        assert first.stat().st_size > 1000, (name, ext)
        assert first.read_bytes() == second.read_bytes(), (name, ext)
    pdf = (tmp_path / "a" / f"{name}.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"CreationDate" not in pdf and b"Producer" not in pdf
    assert b"/Type3" not in pdf and b"/FontFile2" in pdf  # TrueType (Type 42) fonts, no Type 3
    assert (tmp_path / "a" / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert not list((tmp_path / "a").glob(".*.tmp"))


def test_requires():
    assert set(figures.REQUIRES) == set(figures.FIGURES)
    assert figures.REQUIRES["figure1"] == []
    assert figures.REQUIRES["figure5"] == ["mos_k.csv", "mos_dropoutl.csv"]


def test_empty_and_missing_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    headers = {"spectra.csv": SPECTRA_COLUMNS, "wordsim.csv": WORDSIM_COLUMNS, "top5.csv": TOP5_COLUMNS}
    for fname in {f for files in figures.REQUIRES.values() for f in files}:  # each as the workflow writes it
        pd.DataFrame(columns=headers.get(fname, RUN_COLUMNS)).to_csv(empty / fname, index=False)
    for name in figures.FIGURES:  # header-only files: empty panels with a note, no crash (drawing included)
        _draw(figures.build(name, empty))
    with pytest.raises(FileNotFoundError, match="spectra.csv"):
        figures.render("figure7", tmp_path / "nowhere", tmp_path / "x")
    assert not (tmp_path / "x.pdf").exists()


def test_single_point_and_one_dataset(tmp_path, summary_dir):
    root = tmp_path / "s"
    root.mkdir()
    grid = pd.read_csv(summary_dir / "gss_grid.csv")
    for n in (1, 2):
        grid[grid.dataset == "ptb"].head(n).to_csv(root / "gss_grid.csv", index=False)
        _draw(figures.build("figure2", root))
    spectra = pd.read_csv(summary_dir / "spectra.csv")
    spectra[(spectra.dataset == "wt2") & (spectra["index"] < 3)].to_csv(root / "spectra.csv", index=False)
    for name in ("figure7", "sm_figure2", "sm_figure5"):
        _draw(figures.build(name, root))


def test_pl_curves():
    x = np.array([-3.0, 0.0, 1.0, 5.0])
    assert np.allclose(figures.pl(x, 0.0, 2.0), [-6.0, 0.0, 1.0, 5.0])
    # smooth version: k(x-c)+c-(k-1)softplus(x-c) -> x for large x, k(x-c)+c for very negative x
    assert figures.pl_smooth(np.array([50.0]), 2.0, 4.0)[0] == pytest.approx(50.0)
    assert figures.pl_smooth(np.array([-50.0]), 2.0, 4.0)[0] == pytest.approx(4 * (-52.0) + 2.0)


def test_fit_line_band_contains_fit():
    rng = np.random.default_rng(1)
    x = np.linspace(0, 1, 20)
    y = 3 * x + rng.normal(0, 0.1, 20)
    xs, fit, lo, hi = figures.fit_line(x, y)
    assert np.all(lo <= fit) and np.all(fit <= hi)
    assert np.polyfit(x, y, 1)[0] == pytest.approx((fit[-1] - fit[0]) / (xs[-1] - xs[0]))
    # the band against the matrix form: ŷ(x0) ± t_{0.975, n-2} · √(x0ᵀ s² (XᵀX)⁻¹ x0), X = [1, x]
    from scipy import stats as sps

    design = np.column_stack([np.ones_like(x), x])
    coef, residual, *_ = np.linalg.lstsq(design, y, rcond=None)
    cov = residual[0] / (len(x) - 2) * np.linalg.inv(design.T @ design)
    at = np.column_stack([np.ones_like(xs), xs])
    half = sps.t.ppf(0.975, len(x) - 2) * np.sqrt(np.einsum("ij,jk,ik->i", at, cov, at))
    np.testing.assert_allclose(fit, at @ coef, rtol=1e-10)
    np.testing.assert_allclose(np.stack([lo, hi]), np.stack([at @ coef - half, at @ coef + half]), rtol=1e-10)


def test_cli(summary_dir, tmp_path, capsys):
    from softmax_bottleneck.cli import main

    assert main(["figure", "figure6", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "f6")]) == 0
    assert (tmp_path / "f6.pdf").is_file() and (tmp_path / "f6.png").is_file()
    with pytest.raises(SystemExit):
        main(["figure", "figure9", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "x")])
    assert "figure7" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- what a reader sees
BANNER = "small scale — pipeline check, not the paper"


def _drawn(fig):
    """Draw ``fig`` (tick labels are made at draw time) and return it."""
    with matplotlib.rc_context(figures.STYLE):
        fig.savefig(io.BytesIO(), format="png", dpi=30)
    return fig


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def _points_in_axes(ax) -> np.ndarray:
    """Every finite plotted point of ``ax`` (lines and scatter), in axes coordinates."""
    parts = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy):
            parts.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), dtype=float)
        if offsets.ndim == 2 and len(offsets) and isinstance(coll, matplotlib.collections.PathCollection):
            parts.append(coll.get_offset_transform().transform(offsets))
    if not parts:
        return np.empty((0, 2))
    return ax.transAxes.inverted().transform(np.concatenate(parts))


def assert_shows_its_data(fig) -> None:
    """Each panel's plotted data lie in its axes and fill them (not squashed into a corner); no "nan" anywhere."""
    _drawn(fig)
    bad = [t for t in _texts(fig) if re.search(r"\bnan\b", t, re.IGNORECASE)]
    assert not bad, bad
    for ax in fig.axes:
        if ax.images:  # heat maps: one cell per tick
            shape = ax.images[0].get_array().shape
            assert shape == (len(ax.get_yticks()), len(ax.get_xticks())), shape
            continue
        xy = _points_in_axes(ax)
        if not len(xy):
            continue
        inside = xy[((xy >= -1e-6) & (xy <= 1 + 1e-6)).all(axis=1)]
        assert len(inside), f"{ax.get_title()!r}: no plotted point inside the axes"
        for k, axis in enumerate("xy"):  # spread over the axis, or (a constant) away from its edges
            values = inside[:, k]
            spread = np.ptp(values) >= 0.2 or 0.05 < np.median(values) < 0.95
            assert spread, f"{ax.get_title()!r}: the data hug an edge of the {axis}-axis"


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_every_figure_shows_its_data(name, summary_dir):
    assert_shows_its_data(figures.build(name, summary_dir))


def _degenerate_summaries(root, summary_dir):
    """Constant GSS grid, one MoS point per sweep, one singular value above the tail: small-scale extremes."""
    root.mkdir()
    for name in ("top5.csv", "wordsim.csv"):
        (root / name).write_bytes((summary_dir / name).read_bytes())
    grid = pd.read_csv(summary_dir / "gss_grid.csv").assign(test_ppl=2.0, press_rank=7)
    grid.to_csv(root / "gss_grid.csv", index=False)
    mos_k = pd.read_csv(summary_dir / "mos_k.csv")
    mos_k[mos_k["n_experts"] == 3].to_csv(root / "mos_k.csv", index=False)
    drop = pd.read_csv(summary_dir / "mos_dropoutl.csv").head(1).assign(n_experts=4)
    drop.to_csv(root / "mos_dropoutl.csv", index=False)
    sigma = np.r_[1.0, np.full(7, 1e-9)]  # rank one: everything after the first index is ~0
    pd.DataFrame(
        {"dataset": "ptb", "variant": "softmax", "index": range(8), "sigma": sigma, "sigma_normalised": sigma}
    ).to_csv(root / "spectra.csv", index=False)
    return root


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_degenerate_data_gets_a_note_not_nan(name, summary_dir, tmp_path):
    root = _degenerate_summaries(tmp_path / "s", summary_dir)
    assert_shows_its_data(figures.build(name, root))


def test_figure2_names_why_r_is_undefined(summary_dir, tmp_path):
    fig = _drawn(figures.build("figure2", _degenerate_summaries(tmp_path / "s", summary_dir)))
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert any("r undefined: constant values" in label for label in labels), labels
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert not any("e-" in t or "e−" in t or "+" in t for t in ticks), ticks  # no offset like 1e−12+2
    offsets = [ax.xaxis.get_offset_text().get_text() + ax.yaxis.get_offset_text().get_text() for ax in fig.axes]
    assert not any(offsets), offsets


@pytest.mark.parametrize("sign", [1, -1])
def test_figure2_reverses_perplexity_as_the_paper_and_gives_each_r_with_its_sign(sign, summary_dir, tmp_path):
    """Lower perplexity to the right, as the paper draws it: the least-squares line rises on the page exactly when r
    is negative (the paper's points: r = -0.48, -0.53); the legend gives our r and the paper's, each with its sign."""
    from softmax_bottleneck.report.common import pearson

    root = tmp_path / "s"
    root.mkdir()
    for path in summary_dir.iterdir():
        (root / path.name).write_bytes(path.read_bytes())
    runs = pd.read_csv(root / "gss_grid.csv")
    trend = (500 + sign * 40 * (runs["test_ppl"] - runs["test_ppl"].mean())).round()
    runs["press_rank"] = (trend + np.arange(len(runs)) % 3).astype(int)  # ranks are whole numbers
    runs.to_csv(root / "gss_grid.csv", index=False)
    fig = _drawn(figures.build("figure2", root))
    for ds, label, paper_r in (("ptb", "PTB", "-0.48"), ("wt2", "WT2", "-0.53")):
        ax = next(a for a in fig.axes if a.get_title() == f"Trained on {label}")
        sel = runs[runs["dataset"] == ds]
        r = pearson(sel["test_ppl"], sel["press_rank"])[0]
        assert np.sign(r) == sign and ax.xaxis_inverted() and "reversed" in ax.get_xlabel()
        # the points drawn are the runs' test perplexities and ranks, not another column
        drawn = [{tuple(np.round(p, 6)) for p in c.get_offsets()} for c in ax.collections]
        assert {tuple(np.round(p, 6)) for p in sel[["test_ppl", "press_rank"]].to_numpy(float)} in drawn
        legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
        assert f"r = {r:+.2f}" in legend and f"paper (digitised), r = {paper_r}" in legend, legend
        line = next(line for line in ax.get_lines() if line.get_label() == "least squares")
        (x0, y0), (x1, y1) = ax.transData.transform(line.get_xydata()[[0, -1]])
        assert np.sign((y1 - y0) / (x1 - x0)) == -sign, (ds, sign)  # on the page: rises iff r < 0


def test_figure5_titles_the_k_that_was_run_and_draws_the_paper(summary_dir, tmp_path):
    fig = _drawn(figures.build("figure5", _degenerate_summaries(tmp_path / "s", summary_dir)))
    titles = [ax.get_title() for ax in fig.axes]
    assert any("this reproduction" in t and "K = 4" in t for t in titles), titles
    assert any("SM Table 12" in t and "K = 15" in t for t in titles), titles
    paper = [ax for ax in fig.axes if "SM Table 5" in ax.get_title()][0]
    assert sorted(paper.get_lines()[0].get_xdata()) == [10, 15, 20]  # SM Table 5's K
    assert list(paper.get_lines()[0].get_ydata()) == [63.62, 63.06, 62.76]


def test_figure6_draws_the_papers_sweeps(summary_dir):
    fig = figures.build("figure6", summary_dir)
    ptb = [ax for ax in fig.axes if "SM Table 4" in ax.get_title()][0]
    train, test = (line.get_ydata() for line in ptb.get_lines()[:2])
    assert list(test) == [64.50, 59.25, 58.38, 56.21, 56.07, 56.19] and train[0] == 56.42


def _texts_with_sizes(fig) -> list[tuple[str, float]]:
    """Every drawn text of ``fig``'s axes (twin and secondary axes included) with its size in points: titles, axis
    labels, tick labels, legends and texts."""
    _drawn(fig)
    axes = [*fig.axes, *(child for ax in fig.axes for child in ax.child_axes)]
    texts = [t for ax in axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts)]
    texts += [t for ax in axes for axis in (ax.xaxis, ax.yaxis) for t in _drawn_tick_labels(axis)]
    texts += [t for ax in axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    return [(t.get_text(), t.get_fontsize()) for t in texts if t.get_text()]


@pytest.mark.parametrize("name", ["figure5", "figure6"])
def test_figures_5_and_6_print_every_label_at_7_pt_or_more(name, summary_dir):
    """Drawn at their printed width (a page, 7 in), so a text's size is its size in print; Figure 6's top axis
    (#Param) has its title."""
    fig = figures.build(name, summary_dir)
    assert fig.get_size_inches()[0] == 7.0
    texts = _texts_with_sizes(fig)
    assert texts and not [(text, size) for text, size in texts if size < 7], texts
    if name == "figure6":
        tops = [child for ax in fig.axes for child in ax.child_axes]
        assert len(tops) == 4 and all(top.get_xlabel() == "#Param" for top in tops)
        assert all(any(t.get_text() for t in top.get_xticklabels()) for top in tops)


@pytest.mark.parametrize("ranks", [(5, 6, 7), (7,)])
def test_figure5_ticks_ranks_and_k_at_whole_numbers(ranks, summary_dir, tmp_path):
    """Press' rank and K are whole numbers: their axes never tick at 5.5 or 6.6, also over a range of a few ranks or
    a single one."""
    root = tmp_path / "s"
    root.mkdir()
    for path in summary_dir.iterdir():
        (root / path.name).write_bytes(path.read_bytes())
    for name in ("mos_k.csv", "mos_dropoutl.csv"):
        runs = pd.read_csv(root / name)
        runs["press_rank"] = np.array(ranks)[np.arange(len(runs)) % len(ranks)]
        runs.to_csv(root / name, index=False)
    fig = _drawn(figures.build("figure5", root))
    rank_axes = [ax for ax in fig.axes if ax.get_ylabel() == "Press' rank"]
    k_axes = [ax for ax in fig.axes if ax.get_xlabel() == "K"]
    assert len(rank_axes) == 4 and len(k_axes) == 2
    for ticks in [[t.get_loc() for t in ax.yaxis.get_major_ticks()] for ax in rank_axes] + [
        [t.get_loc() for t in ax.xaxis.get_major_ticks()] for ax in k_axes
    ]:
        assert ticks and all(float(v).is_integer() for v in ticks), ticks


def test_figure3_labels_the_authors_contexts(summary_dir):
    texts = _texts(_drawn(figures.build("figure3", summary_dir)))
    assert "the authors'" in texts and "Yang et al.'s" in texts and "Ours" not in texts
    assert "this reproduction" in texts and "paper (SM Table 2)" in texts


def test_figure3_and_4_keep_the_papers_order(summary_dir):
    fig3 = _drawn(figures.build("figure3", summary_dir))
    rows = [t.get_text() for t in fig3.axes[0].get_yticklabels()]
    assert rows == ["GSS", "LMS-PLIF", "MoC", "MoC*", "MoS", "MoS*", "SS", "Softmax"]  # as printed (alphabetical)
    fig4 = _drawn(figures.build("figure4", summary_dir))
    assert [t.get_text() for t in fig4.axes[0].get_yticklabels()] == ["GSS", "MoS", "SS", "Softmax"]


def _paper_scale_spectra(root):
    root.mkdir()
    rows = []
    for j, (variant, rank) in enumerate(
        [("softmax", 402), ("ss", 4979), ("gss", 8989), ("lms_plif", 580), ("mos", 9983)]
    ):
        i = np.arange(1000)
        sigma = np.where(i < rank, 0.5 * np.exp(-i / (300 + 50 * j)), 1e-7)
        sigma[0] = 1.0
        rows += [
            {"dataset": "ptb", "variant": variant, "index": k, "sigma": s, "sigma_normalised": s}
            for k, s in enumerate(sigma)
        ]
    pd.DataFrame(rows).to_csv(root / "spectra.csv", index=False)
    return root


def test_figure7_keeps_the_papers_window_at_paper_scale_and_marks_its_ranks(tmp_path):
    fig = _drawn(figures.build("sm_figure3", _paper_scale_spectra(tmp_path / "s")))
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 500.0) and ax.get_ylim() == (0.0, 0.2)
    markers = [line for line in ax.get_lines() if line.get_marker() == "v"]
    assert [line.get_xdata()[0] for line in markers] == [402.0]  # Softmax's Press' rank, Table 6 (PTB)
    assert any("SS 4,979" in t for t in _texts(fig))  # the others are named under the figure
    assert_shows_its_data(fig)


def test_figure7_scales_to_small_scale_spectra(summary_dir):
    fig = _drawn(figures.build("figure7", summary_dir))
    for ax in fig.axes[:2]:
        assert ax.get_xlim()[1] < 50  # 40 singular values in the synthetic spectra
    assert any("scaled to the data: first" in t for t in _texts(fig))


def test_banner_is_drawn_on_top(summary_dir, tmp_path):
    plain = figures.build("figure7", summary_dir)
    marked = _drawn(figures.build("figure7", summary_dir, banner=BANNER))
    banner = [t for t in marked.texts if t.get_text() == BANNER]
    assert len(banner) == 1 and matplotlib.colors.to_hex(banner[0].get_color()) == "#c00000"
    assert marked.get_size_inches()[1] > plain.get_size_inches()[1]
    top_of_axes = max(ax.get_position().y1 for ax in marked.axes)
    assert banner[0].get_position()[1] > top_of_axes  # above every panel, covering none
    canvas = FigureCanvasAgg(marked)
    with matplotlib.rc_context(figures.STYLE):
        canvas.draw()
    titles = [ax.title.get_window_extent(canvas.get_renderer()) for ax in marked.axes]
    box = banner[0].get_window_extent(canvas.get_renderer())
    assert all(box.y0 > t.y1 for t in titles if t.height)
    from softmax_bottleneck.cli import main

    out = tmp_path / "f7"
    assert main(["figure", "figure7", "--summary-dir", str(summary_dir), "--out", str(out), "--banner", BANNER]) == 0
    assert (tmp_path / "f7.png").is_file() and (tmp_path / "f7.pdf").is_file()
    with pytest.raises(SystemExit) as exc:
        main(["figure", "figure7", "--summary-dir", str(tmp_path / "none"), "--out", str(out)])
    assert "spectra.csv" in str(exc.value)


def test_figure3_and_sm_table2_read_every_hit_spelling_alike(summary_dir, tmp_path):
    """One parser of top5.csv's hit flag for the figure and the table: y/n, 1.0/0.0, True, YES; others are NaN."""
    from softmax_bottleneck.report import tables

    spellings = {"y": 1, "n": 0, "1.0": 1, "0.0": 0, "True": 1, "no": 0, "YES": 1, "0": 0, "1": 1, "maybe": None,
                 "2": None}  # fmt: skip
    root = tmp_path / "s"
    root.mkdir()
    top5 = pd.read_csv(summary_dir / "top5.csv")
    top5 = top5[top5["model"] == "Softmax"].sort_values(["group", "number"]).head(len(spellings)).copy()
    top5["hit"] = list(spellings)
    top5.to_csv(root / "top5.csv", index=False)
    expected = [np.nan if v is None else float(v) for v in spellings.values()]

    table = tables.build("sm_table2", root).set_index(["model", "group", "number"])
    keys = list(top5[["model", "group", "number"]].itertuples(index=False, name=None))
    np.testing.assert_array_equal(table.loc[keys, "hit_ours"].to_numpy(float), expected)

    ax = figures.build("figure3", root).axes[0]  # this reproduction: 0 miss, 1 hit, 2 not available
    codes = np.asarray(ax.images[0].get_array())
    row = [t.get_text() for t in ax.get_yticklabels()].index("Softmax")
    groups = ("Yang", "Ours", "Random")
    drawn = [codes[row, groups.index(g) * 6 + n - 1] for _, g, n in keys]
    np.testing.assert_array_equal(drawn, [2 if np.isnan(v) else v for v in expected])


@pytest.mark.parametrize("name", ["figure7", "sm_figure3"])
def test_normalised_spectra_have_readable_ticks_in_a_tiny_window(name, summary_dir, tmp_path):
    """A small-scale tail far below the paper's 0.2: linear y ticks as a×10⁻ᵇ (one power of ten), no offset text."""
    fig = _drawn(figures.build(name, _degenerate_summaries(tmp_path / "s", summary_dir)))
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert panels and all(ax.get_ylim()[1] < 1e-6 for ax in panels)  # the window was scaled to the tail
    for ax in panels:
        assert ax.yaxis.get_offset_text().get_text() == "", ax.get_title()
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert ticks and all(re.fullmatch(r"0|\d(\.\d+)?×10⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+", t) for t in ticks), ticks
        assert len({t.rsplit("×", 1)[-1] for t in ticks if t != "0"}) == 1, ticks  # one power of ten


def _drawn_tick_labels(axis) -> list:
    """The tick labels ``axis`` draws: those of the ticks inside its view interval, on the sides it labels."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = [tick for tick in axis.get_major_ticks() if lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi]
    return [label for tick in ticks for label in (tick.label1, tick.label2) if label.get_visible()]


def _outside_canvas(fig) -> list[tuple[str, list[int]]]:
    """Every piece of text of ``fig`` (each axes' tick labels, axis labels, title, legend and texts, colour bars
    included; the figure's notes and banner) whose drawn extent leaves the canvas."""
    canvas = FigureCanvasAgg(fig)
    with matplotlib.rc_context(figures.STYLE):
        canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(f"axes {ax.get_title() or ax.get_ylabel()!r}", ax.get_tightbbox(renderer)) for ax in fig.axes]
    texts = [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts)]
    texts += [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in _drawn_tick_labels(axis)]
    texts += [t for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    boxes += [(repr(t.get_text()), t.get_window_extent(renderer)) for t in [*texts, *fig.texts] if t.get_text()]
    boxes += [("legend", ax.get_legend().get_window_extent(renderer)) for ax in fig.axes if ax.get_legend()]
    width, height = fig.bbox.width, fig.bbox.height
    return [
        (what, [round(v) for v in box.extents])
        for what, box in boxes
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5
    ]


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_nothing_is_drawn_outside_the_canvas(name, summary_dir, tmp_path):
    """Every registered figure, from small summaries (with the small-scale banner) and from degenerate ones."""
    fig = figures.build(name, summary_dir, banner=BANNER)
    assert not _outside_canvas(fig)
    assert not _outside_canvas(figures.build(name, _degenerate_summaries(tmp_path / "s", summary_dir)))
    width = fig.get_size_inches()[0]
    assert width in (3.3, 7.0), width  # a column or a page wide


def test_figure4_has_a_colour_bar(summary_dir):
    fig = _drawn(figures.build("figure4", summary_dir))
    bars = [ax for ax in fig.axes if "row model wins" in ax.get_ylabel()]
    assert len(bars) == 1 and bars[0].get_ylim() == (0.0, 5.0)  # 5 benchmarks in the synthetic summaries


def test_each_figure_names_itself_on_top_and_an_illustration_carries_no_banner(summary_dir):
    """A PNG shown without its file name says which figure it is; Figure 1 (no result drawn) is not marked."""
    for name in ("figure7", "sm_figure2"):
        fig = _drawn(figures.build(name, summary_dir, banner=BANNER))
        top = max(ax.get_position().y1 for ax in fig.axes)
        label = [t for t in fig.texts if t.get_text() == figures.FIGURES[name].label]
        banner = [t for t in fig.texts if t.get_text() == BANNER]
        assert len(label) == 1 and label[0].get_position()[1] > banner[0].get_position()[1] > top, name
    illustration = _texts(_drawn(figures.build("figure1", summary_dir, banner=BANNER)))
    assert "Figure 1" in illustration and BANNER not in illustration


def test_a_provisional_figure_has_its_name_stamp_and_banner_on_top(summary_dir):
    from softmax_bottleneck.report import preview

    with matplotlib.rc_context(figures.STYLE):
        fig = figures.FIGURES["figure7"].build(summary_dir)
        preview.figure_stamp(fig, "2026-11-27 12:00", "Provisional: drawn from the 1 of 2 runs", BANNER, "Figure 7")
    top = max(ax.get_position().y1 for ax in fig.axes)
    heights = []
    for text in ("Figure 7", "PROVISIONAL, 2026-11-27 12:00", BANNER):
        found = [t for t in fig.texts if t.get_text() == text]
        assert len(found) == 1 and found[0].get_position()[1] > top, text
        heights.append(found[0].get_position()[1])
    assert heights == sorted(heights, reverse=True)  # in that order, from the top
