"""The registry of the figures: :func:`paper_figure` registers each one next to its builder (see
:mod:`softmax_bottleneck.report.common`); :data:`REGISTRY` is read by the command line and the workflow."""

from __future__ import annotations

from softmax_bottleneck.report.common import Registry

#: every figure of the paper and its SM (filled as the experiment modules are imported)
REGISTRY = Registry("figure")

#: ``@paper_figure(name, requires=[summary files], caption=one line, report=rst paragraph)``
paper_figure = REGISTRY.register
