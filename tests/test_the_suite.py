"""How the suite runs: the tests of one pytest-xdist group (the SLURM cluster's, the container image's) on one worker,
and every mark on a test, never on a helper beside it (where it silently does nothing: a long test then runs under
``-m 'not long'``, a test that needs the data fails instead of skipping without it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: a group of tests each writing the worker that ran it, and as many tests of no group beside them (without them one
#: worker would get every test)
GROUPED = """
import os
from pathlib import Path

import pytest

def _record(name):
    Path(name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))

@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    _record(f"grouped-{i}.worker")

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    _record(f"free-{i}.worker")
"""


def test_the_tests_of_a_group_run_on_one_worker(tmp_path):
    """This environment's pytest and pytest-xdist group as ``--dist loadgroup`` says (pytest 9.2 with pytest-xdist
    3.8 does not: pytest-xdist#1386), on the two workers the suite runs with on CI."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-q",
               "test_grouped.py"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    grouped = {p.read_text() for p in tmp_path.glob("grouped-*.worker")}
    assert len(list(tmp_path.glob("*.worker"))) == 12
    assert len(grouped) == 1, f"the group ran on workers {sorted(grouped)}: pytest-xdist's loadgroup does not group"


def _mark_names(trees: dict[Path, ast.Module]) -> set[str]:
    """The names the test modules bind to a pytest mark at module level (``needs_data = pytest.mark...``)."""
    names = set()
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and ast.unparse(node.value).startswith("pytest.mark."):
                names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def _is_mark(decorator: ast.expr, names: set[str]) -> bool:
    text = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
    return text.startswith("pytest.mark.") or text in names


def test_every_mark_sits_on_a_test():
    """No function of the suite but a test (``test_*``) carries a pytest mark, its own or a module's alias of one."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(TESTS.rglob("*.py"))}
    names = _mark_names(trees)
    assert {"needs_data", "needs_cuda"} <= names, names  # the aliases this check must see
    misplaced = [
        f"{path.relative_to(TESTS)}:{node.lineno} {node.name}"
        for path, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("test")
        and any(_is_mark(d, names) for d in node.decorator_list)
    ]
    assert not misplaced, f"marks on functions that are not tests (they do nothing there): {misplaced}"
