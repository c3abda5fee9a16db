"""The package's layers: a stage imports only the stages upstream of it (pyproject.toml's import-linter contracts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {"PYTHONPATH": str(cwd / "src"), "PATH": str(Path(sys.executable).parent)}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_stages_only_import_upstream():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


def test_an_import_against_the_flow_breaks_the_contract(tmp_path):
    """The contract can fail: corpora importing the report stage is reported, naming the import."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    module = copy / "src" / "softmax_bottleneck" / "corpora" / "datasets.py"
    module.write_text(module.read_text() + "\nfrom softmax_bottleneck.report import reported  # noqa\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "softmax_bottleneck.corpora is not allowed to import softmax_bottleneck.report" in result.stdout
