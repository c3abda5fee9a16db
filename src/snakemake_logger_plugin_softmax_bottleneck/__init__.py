"""The workflow's terminal as a Snakemake logger plug-in: ``snakemake --logger softmax-bottleneck`` (profiles/default
names it). Snakemake finds logger plug-ins by this module's name; the handler is
:class:`softmax_bottleneck.cluster.terminal.LogHandler`."""

from softmax_bottleneck.cluster.terminal import LogHandler

__all__ = ["LogHandler"]
