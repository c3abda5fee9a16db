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


def test_rendering_code_is_what_the_renderers_import():
    """The rendering code (inputs of the summaries, tables, figures and claims page) is the renderers' import closure,
    as import-linter's graph (grimp) finds it independently; the statistics of the claims page are in it."""
    grimp = pytest.importorskip("grimp")
    from softmax_bottleneck.report.sources import NOT_RENDERING, PACKAGE_DIR, rendering_sources

    def module_file(name):
        base = PACKAGE_DIR.joinpath(*name.split(".")[1:])
        return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")

    graph = grimp.build_graph("softmax_bottleneck")
    renderers = {
        m
        for m in graph.modules
        if m.startswith("softmax_bottleneck.report")
        and module_file(m).relative_to(PACKAGE_DIR).as_posix() not in NOT_RENDERING
    }
    closure = set(renderers).union(*(graph.find_upstream_modules(m) for m in renderers))
    with_packages = {".".join(m.split(".")[:i]) for m in closure for i in range(1, m.count(".") + 2)}
    code = {Path(p) for p in rendering_sources() if p.endswith(".py")}
    assert code == {module_file(m) for m in with_packages}
    assert PACKAGE_DIR / "analysis" / "power.py" in code and PACKAGE_DIR / "report" / "costs.py" not in code
    assert {Path(p).name for p in rendering_sources() if not p.endswith(".py")} >= {"main.csv", "sm_table2.csv"}
