"""The suite's own guard (tests/conftest.py): a run in which every selected test skipped tested nothing and fails,
ending in one line that says what to do; a test skipped for want of the data names the folder it looked in and the
file it missed. Each case is a pytest run of its own (a subprocess, with this suite's conftest as a plug-in) on a tiny
generated test file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import DATA_VARIABLE, REPO

TESTS = """
import pytest

def test_wants_the_data(shared_data):
    assert (shared_data / "ptb" / "train.txt").is_file()

@pytest.mark.skip(reason="not here")
def test_skipped_by_its_mark():
    pass
"""


def _pytest(folder: Path, data: Path, *select: str, more: str = "") -> subprocess.CompletedProcess:
    """pytest on :data:`TESTS` (and ``more`` tests) in ``folder``, the data looked for in ``data``."""
    (folder / "test_tiny.py").write_text(TESTS + more)
    paths = os.pathsep.join([str(REPO / "tests"), str(REPO / "src")])
    env = {**os.environ, DATA_VARIABLE: str(data), "PYTHONPATH": paths}
    command = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-n", "0", "-q",
               str(folder / "test_tiny.py"), *select]  # fmt: skip
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)


def _partial_data(tmp_path: Path) -> tuple[Path, str]:
    """A data folder as a fetch still under way leaves it: every file of the study but the last one."""
    from softmax_bottleneck.corpora.download import FILES

    data = tmp_path / "data"
    *present, last = FILES
    for name in present:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text("w\n")
    return data, last


def test_a_run_whose_tests_all_skip_fails_in_one_line_naming_the_folder_and_the_missing_file(tmp_path):
    data, last = _partial_data(tmp_path)
    folder = tmp_path / "run"
    folder.mkdir()
    done = _pytest(folder, data)
    out = done.stdout + done.stderr
    assert done.returncode == 5, out
    lines = [line for line in out.splitlines() if line.startswith("All 2 selected tests skipped, none ran")]
    assert len(lines) == 1, out
    assert f"{data} lacks {last} (18 of the 19 data files are there)" in lines[0]
    assert f"set {DATA_VARIABLE}=DIR" in lines[0] and "Traceback" not in out
    # one test that runs is a run that tested something: its exit status is the tests' own
    assert _pytest(folder, data, more="\ndef test_runs():\n    pass\n").returncode == 0
    (data / last).write_text("w\n")
    assert _pytest(folder, data).returncode == 0, "the data test ran and passed"


def test_a_run_whose_tests_all_skip_for_another_reason_fails_too(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    done = _pytest(folder, tmp_path / "nowhere", "-k", "mark")
    out = done.stdout + done.stderr
    assert done.returncode == 5, out
    assert "All 1 selected tests skipped, none ran: a failure. see why with pytest -rs" in out


def test_a_data_skip_names_the_folder_and_the_file(tmp_path):
    import conftest

    data, last = _partial_data(tmp_path)
    assert conftest.no_data_reason(data) == (
        f"{conftest.NO_DATA}: {data} lacks {last} (18 of the 19 data files are there)"
    )
    shutil.rmtree(data)
    assert conftest.no_data_reason(data) == f"{conftest.NO_DATA}: {data} does not exist"


def test_a_skip_after_falling_back_to_the_cache_names_the_folders_looked_in_first(tmp_path, monkeypatch):
    """A quick start still fetching (18 of the 19 files in resources/data): the tests fall back to the user's cache,
    and the skip names resources/data and the file it lacks, then the cache."""
    import conftest

    checkout, last = _partial_data(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setattr(conftest, "CHECKOUT", checkout)
    monkeypatch.setattr(conftest, "BESIDE", tmp_path / "no-shared-data")
    monkeypatch.setattr(conftest, "CACHE", cache)
    assert conftest.no_data_reason(cache) == (
        f"{conftest.NO_DATA}: {checkout} lacks {last} (18 of the 19 data files are there); {cache} does not exist"
    )
