"""Figures: every figure renders from small synthetic summaries, deterministically, and copes with missing data."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pandas as pd
import pytest
from test_tables import make_summaries

from softmax_bottleneck.report import figures
from softmax_bottleneck.report.summaries import RUN_COLUMNS


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
    assert (tmp_path / "a" / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert not list((tmp_path / "a").glob(".*.tmp"))


def test_requires():
    assert set(figures.REQUIRES) == set(figures.FIGURES)
    assert figures.REQUIRES["figure1"] == []
    assert figures.REQUIRES["figure5"] == ["mos_k.csv", "mos_dropoutl.csv"]


def test_empty_and_missing_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for fname in {f for files in figures.REQUIRES.values() for f in files}:
        columns = (
            ["dataset", "variant", "index", "sigma", "sigma_normalised"] if fname == "spectra.csv" else RUN_COLUMNS
        )
        pd.DataFrame(columns=columns).to_csv(empty / fname, index=False)
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


def test_cli(summary_dir, tmp_path, capsys):
    from softmax_bottleneck.cli import main

    assert main(["figure", "figure6", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "f6")]) == 0
    assert (tmp_path / "f6.pdf").is_file() and (tmp_path / "f6.png").is_file()
    with pytest.raises(SystemExit):
        main(["figure", "figure9", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "x")])
    assert "figure7" in capsys.readouterr().err
