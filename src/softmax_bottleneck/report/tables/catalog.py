"""The registry of the tables: :func:`paper_table` registers each one next to its builder (see
:mod:`softmax_bottleneck.report.common`); :data:`REGISTRY` is read by :mod:`.render`, the command line and the
workflow."""

from __future__ import annotations

from softmax_bottleneck.report.common import Registry

#: every table of the paper and its SM (filled as the experiment modules are imported)
REGISTRY = Registry("table")

#: ``@paper_table(name, requires=[summary files], caption=one line, layout=paper's layout, report=rst paragraph)``
paper_table = REGISTRY.register
