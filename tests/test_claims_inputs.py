"""The claims page never turns bad input into a verdict: each bad summary or argument is one line naming it, with no
traceback and no page file written, run through the real command (``python -m softmax_bottleneck claims``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_claims import paper_study

FILES = ("csv", "md", "html", "tex")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return paper_study(tmp_path_factory.mktemp("claims-inputs"), n_random=4)


def copy_of(study: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "summary"
    shutil.copytree(study, folder)
    return folder


def claims(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", "claims", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def refused(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("claims: ") and all(needle in last for needle in needles), done.stderr[-3000:]


def no_page(prefix: Path) -> None:
    written = [ext for ext in FILES if Path(f"{prefix}.{ext}").exists()]
    assert not written, written
    assert not list(prefix.parent.glob(".claims-*")) if prefix.parent.exists() else True


def edit(folder: Path, file: str, row: int, **values) -> None:
    frame = pd.read_csv(folder / file, keep_default_na=False)
    for column, value in values.items():
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
    frame.to_csv(folder / file, index=False)


@pytest.mark.parametrize(
    ("file", "values", "needles"),
    [
        ("main.csv", {"press_rank": 10**9}, ("main.csv: column press_rank, row 1", "at most its 10,000 words")),
        ("main.csv", {"test_ppl": ""}, ("main.csv: row 1, column test_ppl: empty",)),
        ("main.csv", {"test_ppl": 0.5}, ("main.csv: column test_ppl, row 1",)),
        ("ntet.csv", {"schedule": 42}, ("ntet.csv: row 1, column schedule: ", "42", "not one of")),
        ("main.csv", {"seed": "x"}, ("main.csv: column seed, row 1: 'x' is not a number",)),
        ("main.csv", {"dataset": "penn"}, ("main.csv: row 1, column dataset: 'penn'",)),
    ],
)
def test_an_impossible_summary_cell_is_refused_naming_file_row_and_column(study, tmp_path, file, values, needles):
    folder = copy_of(study, tmp_path)
    edit(folder, file, 0, **values)
    prefix = tmp_path / "reports" / "claims"
    refused(claims("--summary-dir", str(folder), "--out", str(prefix)), *needles)
    no_page(prefix)


def test_a_run_written_twice_is_not_two_runs(study, tmp_path):
    """Three seeds written three times each are not n = 9: the repeated row is refused, naming both rows."""
    folder = copy_of(study, tmp_path)
    frame = pd.read_csv(folder / "fair.csv", keep_default_na=False)
    pd.concat([frame, frame.iloc[[0]]]).to_csv(folder / "fair.csv", index=False)
    prefix = tmp_path / "claims"
    refused(claims("--summary-dir", str(folder), "--out", str(prefix)), f"fair.csv: row {len(frame) + 1} repeats row 1",
            "a run is counted once")  # fmt: skip
    no_page(prefix)


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "folder"])
def test_a_summary_that_is_not_a_file_is_refused_never_waited_on(study, tmp_path, kind):
    folder = copy_of(study, tmp_path)
    (folder / "main.csv").unlink()
    if kind == "fifo":
        os.mkfifo(folder / "main.csv")
    elif kind == "folder":
        (folder / "main.csv").mkdir()
    else:
        (folder / "main.csv").symlink_to("/dev/zero")
    prefix = tmp_path / "claims"
    done = claims("--summary-dir", str(folder), "--out", str(prefix))
    refused(done, "main.csv")
    assert "no such summary" not in done.stderr
    no_page(prefix)


@pytest.mark.parametrize("cut", ["press_rank", "test_ppl", "everything"])
def test_a_summary_without_the_columns_its_claims_read_is_refused(study, tmp_path, cut):
    """Before, main.csv without its press_rank column (or emptied to 0 bytes) gave a page on which the claims that
    read it were "too few runs", with nothing said."""
    folder = copy_of(study, tmp_path)
    if cut == "everything":
        (folder / "main.csv").write_bytes(b"")
        needles = ("main.csv: empty (no header): not a summary of the workflow",)
    else:
        pd.read_csv(folder / "main.csv", keep_default_na=False).drop(columns=cut).to_csv(folder / "main.csv",
                                                                                           index=False)  # fmt: skip
        needles = (f"main.csv: no column {cut}: not a summary of the workflow",)
    prefix = tmp_path / "claims"
    refused(claims("--summary-dir", str(folder), "--out", str(prefix)), *needles)
    no_page(prefix)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--simulate", "--seeds"], "--simulate draws its own studies and writes its table to stdout; drop --seeds"),
        (["--out", "page"], "the page needs its input: --summary-dir DIR (the study's results/summary) or --paper"),
        (["--paper"], "the page needs --out PREFIX"),
    ],
)
def test_arguments_that_do_not_go_together_are_refused_before_any_work(tmp_path, args, needle):
    """Before, --simulate ignored --seeds (minutes of simulation), and a page without --out was asked --summary-dir."""
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "claims", *args], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    refused(done, needle)
    assert list(tmp_path.iterdir()) == []


def test_a_summary_folder_that_does_not_exist_is_refused(tmp_path):
    refused(claims("--summary-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "claims")), "no such folder")


@pytest.mark.parametrize("where", ["folder/", "under-a-file", "proc", "tex-is-a-folder"])
def test_a_page_that_cannot_be_written_whole_is_not_written_at_all(study, tmp_path, where):
    prefix = {"folder/": str(tmp_path / "out") + "/", "proc": "/proc/claims-page"}.get(
        where, str(tmp_path / "out" / "claims")
    )
    if where == "under-a-file":  # its folder cannot be made (as a read-only one, even for root)
        (tmp_path / "out").write_text("a file")
        prefix = str(tmp_path / "out" / "claims")
    if where == "tex-is-a-folder":
        Path(f"{prefix}.tex").mkdir(parents=True)
    done = claims("--summary-dir", str(study), "--out", prefix)
    refused(done, "--out")
    if where in ("folder/", "tex-is-a-folder"):
        for ext in ("csv", "md", "html"):
            assert not Path(f"{prefix}.{ext}").exists(), ext
        assert not list((tmp_path / "out").glob(".*"))  # no hidden DIR/.csv, no scratch left behind
