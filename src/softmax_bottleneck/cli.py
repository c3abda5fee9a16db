"""Command-line interface: ``python -m softmax_bottleneck <command> ...``.

Each command lives in the module that implements its science. Such a module defines
``add_cli(parser)`` (adds its arguments to an ``argparse`` sub-parser) and ``run_cli(args) -> int``.
Modules are imported lazily, so ``describe`` or ``rank`` do not pay for importing matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

#: command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("softmax_bottleneck.corpora.download", "download or copy the data files, verified by SHA-256"),
    "describe": ("softmax_bottleneck.presets", "print a model's resolved hyper-parameters and size"),
    "train": ("softmax_bottleneck.training.trainer", "train one model (resumable)"),
    "analyze": ("softmax_bottleneck.analysis.logp", "stream a model's test log-P matrix into its rank"),
    "rank": ("softmax_bottleneck.analysis.rank", "Press' and ε-effective rank of a .npy matrix"),
    "robustness": ("softmax_bottleneck.analysis.rank", "SM §5 robustness of Press' rank (E12)"),
    "wordsim": ("softmax_bottleneck.analysis.wordsim", "word-similarity benchmarks of a model's embedding"),
    "qualitative": ("softmax_bottleneck.analysis.qualitative", "top-5 predictions at the 18 contexts"),
    "summarize": ("softmax_bottleneck.report.summaries", "collect run metrics or analyses into one summary CSV"),
    "table": ("softmax_bottleneck.report.tables", "render one table of the paper or SM, ours beside the paper's"),
    "figure": ("softmax_bottleneck.report.figures", "draw one figure of the paper or SM, with the paper's values"),
    "gpu-lease": ("softmax_bottleneck.cluster.gpu_lease", "run a command holding one free local GPU"),
    "costs": ("softmax_bottleneck.report.costs", "time and memory per rule, and training cost at paper scale"),
}


def _load(module: str, name: str):
    mod = importlib.import_module(module)
    return _CommandModule(mod, name)


class _CommandModule:
    """Dispatch ``add_cli``/``run_cli`` (or ``add_<name>_cli``/``run_<name>_cli`` for modules with several)."""

    def __init__(self, mod, name: str):
        self.mod, self.name = mod, name

    def _attr(self, kind: str):
        specific = getattr(self.mod, f"{kind}_{self.name.replace('-', '_')}_cli", None)
        return specific or getattr(self.mod, f"{kind}_cli")

    def add_cli(self, parser):
        return self._attr("add")(parser)

    def run_cli(self, args):
        return self._attr("run")(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m softmax_bottleneck", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == chosen:
            _load(module, name).add_cli(command)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )
    module, _ = COMMANDS[args.command]
    return int(_load(module, args.command).run_cli(args) or 0)
