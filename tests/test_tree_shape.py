"""The package reads as the study's data flow: files of one idea, few modules beside the subpackages, no import circle.

The import graph is grimp's (import-linter's own), module-level and function-level imports alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "softmax_bottleneck"

#: a source file longer than this holds more than one idea
MAX_LINES = 550
#: modules beside the subpackages (``__init__`` and ``__main__`` not counted): ``cli``, ``presets`` and the shared
#: modules below the stages (``atomic``, ``argtypes``, ``readback``, ``bounds``, ``durations``, ``paper_numbers``,
#: ``measured``)
MAX_TOP_LEVEL = 9


def import_circles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module of ``graph`` (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def circles_in(src: Path) -> list[list[str]]:
    """The import circles of the package under ``src``, found by this file run as a script in a fresh interpreter
    (grimp finds the package on ``sys.path``, so ``src`` comes first there)."""
    pytest.importorskip("grimp", reason="grimp comes with import-linter (pip install -e '.[test]')")
    done = subprocess.run([sys.executable, __file__], env={"PYTHONPATH": str(src)}, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_no_source_file_holds_more_than_one_idea():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_few_modules_beside_the_subpackages():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} top-level modules (at most {MAX_TOP_LEVEL}): {top}"


def test_no_import_circle():
    assert circles_in(ROOT / "src") == []


def test_a_planted_circle_is_found(tmp_path):
    """The check can fail: a module of the corpora that imports the report, which imports the corpora, is a circle."""
    import shutil

    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src", copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    module = copy / "softmax_bottleneck" / "corpora" / "datasets.py"
    module.write_text(module.read_text() + "\nfrom softmax_bottleneck.report import summaries  # noqa\n")
    circles = circles_in(copy)
    assert any("softmax_bottleneck.corpora.datasets" in circle for circle in circles), circles


if __name__ == "__main__":
    import grimp

    print(json.dumps(import_circles(grimp.build_graph("softmax_bottleneck", cache_dir=None))))
