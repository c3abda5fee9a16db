"""Command-line interface: ``python -m softmax_bottleneck <command> ...`` (``--help`` lists the commands).

Each command lives in the module that implements its science. Such a module defines
``add_cli(parser)`` (adds its arguments to an ``argparse`` sub-parser) and ``run_cli(args) -> int``.
Modules are imported lazily, so ``describe`` or ``rank`` do not pay for importing matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from softmax_bottleneck.atomic import WriteError

#: command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("softmax_bottleneck.corpora.download", "download or copy the data files, verified by SHA-256"),
    "describe": ("softmax_bottleneck.presets", "print a model's resolved hyper-parameters and size"),
    "plan": (
        "softmax_bottleneck.report.plan_on_card",
        "print a configuration's training plan: jobs and projected GPU-hours",
    ),
    "status": (
        "softmax_bottleneck.study.status",
        "where every run of a configuration stands: finished, running, stalled, failed, unreadable, not started; "
        "GPU time",
    ),
    "check-layer": (
        "softmax_bottleneck.training.check_layer",
        "run the conformance checks on a registered output layer (yours too)",
    ),
    "train": ("softmax_bottleneck.training.train_command", "train one model (resumable)"),
    "train-fused": (
        "softmax_bottleneck.training.fused_trainer",
        "train K runs of one shape in one process, their LSTM recurrences fused (each run resumable, as train's)",
    ),
    "wait-for-run": (
        "softmax_bottleneck.study.wait_for_run",
        "wait, without a GPU, for a training another process runs (the workflow's await_training)",
    ),
    "cuda-check": (
        "softmax_bottleneck.training.cuda_check",
        "whether this PyTorch build trains on this machine's GPUs (its CUDA, kernels, each GPU's capability)",
    ),
    "bench": ("softmax_bottleneck.training.bench", "time training steps of a preset model, project seconds per epoch"),
    "analyze": ("softmax_bottleneck.analysis.logp", "Press' and ε-effective rank of a model's test log-P matrix"),
    "analyze-lm": (
        "softmax_bottleneck.analysis.language_model",
        "Press' and ε-effective rank of a local Hugging Face causal LM's log-P matrix on a text",
    ),
    "rank": ("softmax_bottleneck.analysis.rank", "Press' and ε-effective rank of a matrix saved as .npy"),
    "robustness": ("softmax_bottleneck.analysis.robustness", "robustness of Press' rank (SM §5, Tables 14-16)"),
    "wordsim": ("softmax_bottleneck.analysis.wordsim", "word similarity of a model's embedding (SM Table 3)"),
    "qualitative": ("softmax_bottleneck.analysis.qualitative", "top-5 predictions at 18 PTB contexts (SM Table 2)"),
    "summarize": ("softmax_bottleneck.report.summaries", "collect run metrics or analyses into one summary CSV"),
    "table": ("softmax_bottleneck.report.tables", "render one table of the paper or SM, ours beside the paper's"),
    "lm-report": (
        "softmax_bottleneck.report.language_models",
        "table and figure: ranks of Hugging Face LMs (analyze-lm) beside the paper's models",
    ),
    "figure": ("softmax_bottleneck.report.figures", "draw one figure of the paper or SM, with the paper's values"),
    "claims": (
        "softmax_bottleneck.report.claims",
        "decide each of the paper's claims from the summaries by its stated rule; --seeds: the seeds each claim needs",
    ),
    "sweep": (
        "softmax_bottleneck.report.sweeps",
        "table and figure of one sweep of the configuration (sweeps:): perplexity and Press' rank per grid point "
        "over the seeds",
    ),
    "preview": (
        "softmax_bottleneck.report.preview",
        "every table and figure from the runs finished so far, stamped provisional, and the progress page",
    ),
    "gpu-lease": (
        "softmax_bottleneck.cluster.gpu_lease",
        "run a command on a free local GPU slot (--per-gpu K jobs share a GPU)",
    ),
    "job-start": (
        "softmax_bottleneck.training.job_start",
        "a train or analyze job's first act: take the run's lock, refuse a GPU job without CUDA, run the command",
    ),
    "wait-for-job": (
        "softmax_bottleneck.cluster.scheduler",
        "wait while a SLURM job is pending or running (the workflow's await_scheduled_training)",
    ),
    "site-check": (
        "softmax_bottleneck.cluster.site_check",
        "ask SLURM (sbatch --test-only) whether the study's heaviest requests are accepted; check the file system",
    ),
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


DESCRIPTION = """\
Reproduce "On the Softmax Bottleneck of Recurrent Language Models" (Parthiban, Mao & Inkpen, AAAI 2021):
train AWD-LSTM language models with different output layers, measure the rank of their test log-probability
matrices, and render the paper's tables and figures. The Snakemake workflow calls these commands; each one
also works on its own."""

EPILOG = """\
typical order: fetch -> describe -> train -> analyze / wordsim / qualitative -> summarize -> table / figure / sweep.
Run 'python -m softmax_bottleneck COMMAND --help' for a command's options; 'describe' lists the
hyper-parameters that 'train --set KEY=VALUE' accepts."""


class OneLineParser(argparse.ArgumentParser):
    """An option the command does not take, or a bad value, fails in one line (argparse's own message, then where the
    options are listed), not after the whole usage block."""

    #: the command chosen, on the top-level parser (which reports the options no command took)
    command: str | None = None

    def error(self, message: str):
        prog = f"{self.prog} {self.command}" if self.command else self.prog
        self.exit(2, f"{prog}: error: {message} (options: {prog} --help)\n")


def _parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m softmax_bottleneck",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages too")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".")
        if name == chosen:
            _load(module, name).add_cli(command)
            parser.command = chosen
    return parser


def main(argv: list[str] | None = None, *, heartbeat: bool = False) -> int:
    """Run one command; ``heartbeat`` (``python -m softmax_bottleneck``): a line in its log after every minute
    without one (:mod:`softmax_bottleneck.cluster.heartbeat`)."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    try:
        args = _parser(chosen).parse_args(argv)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
            stream=sys.stderr,
        )
        if not args.verbose:  # matplotlib's PDF backend subsets fonts through fontTools, tens of INFO lines a figure
            logging.getLogger("fontTools").setLevel(logging.WARNING)
        if heartbeat:
            from softmax_bottleneck.cluster import heartbeat as beat

            beat.start(args.command)
        module, _ = COMMANDS[args.command]
        return int(_load(module, args.command).run_cli(args) or 0)
    except WriteError as err:  # an output that could not be written (full disk, read-only folder, a FIFO there)
        raise SystemExit(f"{chosen or 'softmax_bottleneck'}: {err}") from None
    except ValueError as err:
        if type(err).__name__ != "RegistryError":
            raise
        # a broken plug-in output layer: one line naming its entry point (the registry imports torch, so
        # it is not imported here up front)
        raise SystemExit(f"{chosen or 'softmax_bottleneck'}: {err}") from None
