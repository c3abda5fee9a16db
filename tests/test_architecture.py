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


@pytest.mark.parametrize(
    ("module", "imported", "said"),
    [
        ("corpora/datasets.py", "softmax_bottleneck.report", "softmax_bottleneck.corpora is not allowed to import"),
        (
            "cluster/terminal.py",
            "softmax_bottleneck.cli",
            "softmax_bottleneck.cluster.terminal -> softmax_bottleneck.cli",
        ),
    ],
)
def test_an_import_against_the_flow_breaks_the_contract(tmp_path, module, imported, said):
    """The contracts can fail: corpora importing the report stage, or the cluster plumbing importing the command line
    (which imports every stage), is reported, naming the import."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = copy / "src" / "softmax_bottleneck" / module
    path.write_text(path.read_text() + f"\nimport {imported}  # noqa\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    assert said in result.stdout, result.stdout[-3000:]
