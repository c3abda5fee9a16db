"""The LaTeX forms of the tables (NAME.tex: ours beside the paper's, NAME.ours.tex: ours alone), the notation of
powers of ten and captions that state what was run."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

import pandas as pd
import pytest
from test_tables import make_summaries

from softmax_bottleneck.report import tables
from softmax_bottleneck.report.tables.render import display_frame, latex_text

#: tables whose layout keeps the tidy CSV's rows (the others are pivoted: one row per metric or benchmark)
PIVOTED = {"table1", "sm_table3", "sm_table13", "figure4_wins"}
BANNER = "small scale — pipeline check, not the paper"


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory):
    return make_summaries(tmp_path_factory.mktemp("summary"))


@pytest.fixture(scope="module")
def rendered(summary_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    return {name: tables.render(name, summary_dir, out / name, banner=BANNER) for name in tables.TABLES}, out


def _unescaped(text: str, char: str) -> int:
    return len(re.findall(rf"(?<!\\){re.escape(char)}", text))


def check_tabular(tex: str, frame: pd.DataFrame, name: str) -> None:
    """A float of booktabs tabulars holding ``frame``: each block one rule each, a header and one line per row of as
    many cells as it has columns, balanced braces and maths; the blocks' headers (a wide table's key columns repeated
    in each) hold every column of ``frame`` in order."""
    env = "table*" if tex.startswith("\\begin{table*}") else "table"
    assert tex.startswith(f"\\begin{{{env}}}") and tex.rstrip().endswith(f"\\end{{{env}}}"), name
    assert f"\\label{{tab:{name}" in tex and "\\caption{" in tex
    blocks = re.findall(r"\\begin\{tabular\}\{([lr]+)\}\n(.*?)\\end\{tabular\}", tex, flags=re.S)
    assert blocks, name
    columns: list[str] = []
    for spec, block in blocks:
        for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
            assert block.count(rule) == 1, (name, rule)
        head = block.split("\\toprule\n", 1)[1].split("\\midrule\n", 1)[0]
        body = block.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
        lines = [line for line in body.splitlines() if line.strip()]
        assert len(lines) == len(frame), (name, len(lines), len(frame))
        for line in [head.strip(), *lines]:
            assert line.endswith("\\\\"), (name, line)
            assert _unescaped(line, "&") == len(spec) - 1, (name, line)
            assert _unescaped(line, "$") % 2 == 0, (name, line)
            assert _unescaped(line, "{") == _unescaped(line, "}"), (name, line)
        columns += [c.strip() for c in head.strip().removesuffix("\\\\").split(" & ") if c.strip() not in columns]
    assert columns == [latex_text(str(c)) for c in frame.columns], (name, columns)
    assert not re.search(r"[±×⁻⁰¹²³⁴⁵⁶⁷⁸⁹ε—†‡]", tex), name  # every symbol spelled in LaTeX


def test_every_table_has_both_latex_forms(rendered):
    built, out = rendered
    for name, table in built.items():
        both = (out / f"{name}.tex").read_text(encoding="utf-8")
        ours = (out / f"{name}.ours.tex").read_text(encoding="utf-8")
        frame = display_frame(name, table)
        check_tabular(both, frame, name)
        check_tabular(ours, display_frame(name, table, paper=False), name)
        if name not in PIVOTED:
            assert len(frame) == len(pd.read_csv(out / f"{name}.csv")), name  # one row per row of the CSV
        assert "\\textbf{small scale --- pipeline check, not the paper.}" in both


def test_ours_alone_drops_the_papers_values(rendered):
    built, out = rendered
    ours = (out / "table2.ours.tex").read_text(encoding="utf-8")
    both = (out / "table2.tex").read_text(encoding="utf-8")
    assert "(57.05 $\\pm$ 0.15)" in both and "57.05" not in ours  # the paper's PTB SS test ppl
    assert "3.92\\times10^{-1}" in both and "3.92\\times10^{-1}" not in ours
    sm2 = display_frame("sm_table2", built["sm_table2"], paper=False)
    assert "top-5 (paper)" not in sm2.columns and "top-5 (ours)" in sm2.columns
    t1 = display_frame("table1", built["table1"], paper=False)["metric"].tolist()
    assert t1 == ["rank, ours (this paper's)", "ppl difference, ours (this paper's)"]


def test_latex_notation():
    assert latex_text("3.92×10⁻¹") == "$3.92\\times10^{-1}$"
    assert latex_text("10⁻²⁰ (2.5×10⁻³)") == "$10^{-20}$ ($2.5\\times10^{-3}$)"
    assert latex_text("ε = 10⁻³") == "$\\varepsilon$ = $10^{-3}$"
    assert latex_text("57.08 ± 0.09 (—)") == "57.08 $\\pm$ 0.09 (---)"
    assert latex_text("LMS-PLIF† #Param 5% a_b <eos> ~57s") == (
        "LMS-PLIF\\dag{} \\#Param 5\\% a\\_b \\textless{}eos\\textgreater{} $\\sim$57s"
    )


def test_powers_of_ten_share_one_notation(rendered):
    built, out = rendered
    md = (out / "table6.md").read_text(encoding="utf-8") + (out / "sm_table16.md").read_text(encoding="utf-8")
    assert "ε = 10⁻³" in md and "1e-3" not in md and "10⁻²⁰" in md
    tex = (out / "sm_table16.tex").read_text(encoding="utf-8")
    assert "$\\varepsilon$ = $10^{-3}$" in tex and "$10^{-20}$" in tex


@pytest.mark.parametrize(("k", "caption"), [(2, "K = 2; the paper's K = 15"), (15, "K = 15, as in the paper")])
def test_sm_table12_caption_states_the_configured_k(k, caption, summary_dir, tmp_path):
    root = tmp_path / "s"
    shutil.copytree(summary_dir, root)
    runs = pd.read_csv(root / "mos_dropoutl.csv").assign(n_experts=k)  # the configuration's K, as the runs record it
    runs.to_csv(root / "mos_dropoutl.csv", index=False)
    tables.render("sm_table12", root, tmp_path / "sm12")
    for ext in ("md", "html", "tex", "ours.tex"):
        text = html.unescape((tmp_path / f"sm12.{ext}").read_text(encoding="utf-8"))
        assert f"MoS ({caption})" in text, ext
    assert "K = 15 in the paper" in tables.TABLES["sm_table12"].description  # no build: the paper's K


# --------------------------------------------------------------------------------------------- on the page
PDFLATEX = shutil.which("pdflatex")
#: the smallest scale of a table's text (10 pt) that stays readable in print: 7 pt
MIN_SCALE = 0.7
#: each float measured where the paper's page puts it (AAAI, two columns: a ``table`` in a 3.3 in column, a
#: ``table*`` across the 7 in text), as a minipage of that width; each block of columns (``\usebox0``) writes its
#: natural width and the width it has to fit to the log
MEASURE = r"""\documentclass[10pt]{article}
\usepackage{booktabs}
\usepackage{graphicx}
\setlength{\textwidth}{7in}\setlength{\hfuzz}{0.1pt}
\makeatletter
\let\sbusebox\usebox
\renewcommand\usebox[1]{\typeout{MEASURED \sbname\space\sbfloat\space\the\wd#1 \space\the\linewidth}\sbusebox{#1}}
\newcommand\sbmeasure[2]{\def\@captype{table}\def\sbfloat{#2}\par\noindent\begin{minipage}{#1}}
\renewenvironment{table}{\sbmeasure{3.3in}{table}}{\end{minipage}\par}
\renewenvironment{table*}{\sbmeasure{7in}{table*}}{\end{minipage}\par}
\makeatother
\begin{document}
"""


def measure_tables(files: list, workdir) -> dict[str, list[tuple[str, float, float]]]:
    """``{file name: [(float, natural width, width to fit) of each block]}`` in pt, measured by compiling ``files``
    with pdflatex; AssertionError with the log's end where it fails or reports an overfull line."""
    body = "".join(f"\\def\\sbname{{{path.name}}}\\input{{{path.as_posix()}}}\n" for path in files)
    (workdir / "measure.tex").write_text(MEASURE + body + "\\end{document}\n", encoding="utf-8")
    done = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "measure.tex"], cwd=workdir,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    log = (workdir / "measure.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)
    measured: dict[str, list[tuple[str, float, float]]] = {}
    for name, env, natural, width in re.findall(r"^MEASURED (\S+) (table\*?) ([\d.]+)pt ([\d.]+)pt$", log, re.M):
        measured.setdefault(name, []).append((env, float(natural), float(width)))
    return measured


@pytest.mark.skipif(PDFLATEX is None, reason="no pdflatex (Debian: apt-get install texlive-latex-recommended)")
def test_every_tex_table_fits_the_papers_page_and_stays_readable(rendered, tmp_path):
    """Compiled, every NAME.tex and NAME.ours.tex fits its float on an AAAI page (a ``table`` the 3.3 in column,
    a ``table*`` the 7 in text) without an overfull line, scaled down by at most :data:`MIN_SCALE` (7 pt text);
    a table chosen for the column fits it within 10 %."""
    _, out = rendered
    files = sorted(out.glob("*.tex"))
    measured = measure_tables(files, tmp_path)
    assert set(measured) == {path.name for path in files}
    for name, blocks in measured.items():
        for env, natural, width in blocks:
            assert width == pytest.approx({"table": 3.3, "table*": 7.0}[env] * 72.27, abs=0.1), name
            assert min(1.0, width / natural) >= MIN_SCALE, (name, env, natural, width)
            if env == "table":
                assert natural <= 1.1 * width, (name, natural, width)
