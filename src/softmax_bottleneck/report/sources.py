"""The code behind the summaries, tables, figures and the claims page: the renderers (``report/`` but the modules that
render none of them) with every module of the package they import, followed import by import, and the paper's numbers
(``data/reported/``). The workflow makes these files inputs of those rules: an edit of one re-renders them, and trains
or analyses nothing.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]

#: modules of report/ that no summary, table, figure or claims page uses (the cost report, the language models' report)
NOT_RENDERING = frozenset({"report/costs.py", "report/bench_speeds.py", "report/language_models.py"})


def _module_file(name: str) -> Path | None:
    """The file of the package's module ``name`` (``softmax_bottleneck.a.b``), or None where there is none."""
    base = PACKAGE_DIR.joinpath(*name.split(".")[1:])
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
    return ".".join((PACKAGE_DIR.name, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _imported(path: Path) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in it (a function's own imports too), with the
    packages around each (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            start = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            base = ".".join([*start, node.module] if node.module else start)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from a import b`: b may be a module
    own = {n for n in names if n == PACKAGE_DIR.name or n.startswith(PACKAGE_DIR.name + ".")}
    return {".".join(n.split(".")[:i]) for n in own for i in range(1, n.count(".") + 2)}


def rendering_sources() -> list[str]:
    """The files (sorted paths) whose edit re-renders the summaries, tables, figures and claims page: found once a
    process (the workflow asks for every job of those rules), a new list each call."""
    return list(_rendering_sources())


@functools.cache
def _rendering_sources() -> tuple[str, ...]:
    todo = [
        p
        for p in (PACKAGE_DIR / "report").rglob("*.py")
        if "__pycache__" not in p.parts and p.relative_to(PACKAGE_DIR).as_posix() not in NOT_RENDERING
    ]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo += [f for f in map(_module_file, _imported(path)) if f is not None and f not in seen]
    return tuple(sorted(str(p) for p in [*seen, *(PACKAGE_DIR / "data" / "reported").glob("*")]))
