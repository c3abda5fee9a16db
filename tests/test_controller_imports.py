"""What a ``snakemake`` call imports of the package: the modules named by the workflow's rule files load no matplotlib
(the report modules import it in the functions that draw), so planning a study does not pay for it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: an import of the package in a rule file, on one line or parenthesised over several, at the top or inside a function
#: (``onstart``'s: it runs in every controller)
IMPORT = re.compile(
    r"^[ \t]*(from softmax_bottleneck[\w.]* import (?:\([^)]*\)|[^\n]*)|import softmax_bottleneck[\w.]*)", re.MULTILINE
)

PROBE = """
import sys
exec(sys.stdin.read())
loaded = lambda: sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib")
print(len(loaded()))
from softmax_bottleneck.report.figures.common import new_figure
new_figure(1, 1)  # drawing imports it: the probe sees an import where there is one
print(len(loaded()) > 0)
"""


def workflow_imports() -> list[str]:
    """Every import of the package in the ``Snakefile`` and ``workflow/rules/*.smk``, as written."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    return [match for path in files for match in IMPORT.findall(path.read_text())]


def test_the_workflows_imports_load_no_matplotlib():
    imports = workflow_imports()
    assert len(imports) >= 20 and any("report import figures" in line for line in imports), imports
    probe = subprocess.run([sys.executable, "-c", PROBE], input="\n".join(imports), capture_output=True, text=True,
                           cwd=ROOT, timeout=300)  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split() == ["0", "True"], probe.stdout
