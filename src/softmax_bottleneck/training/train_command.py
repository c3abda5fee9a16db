"""``train``: one model from its preset to ``model.pt``, ``metrics.json``, ``curve.csv`` (:mod:`.trainer`)."""

from __future__ import annotations

from pathlib import Path

import torch

from softmax_bottleneck import argtypes, presets
from softmax_bottleneck.atomic import os_error_reason
from softmax_bottleneck.corpora.corpus import DATASET_DIRS
from softmax_bottleneck.corpora.datasets import DATA_ROOT
from softmax_bottleneck.training.environment import resolve_device
from softmax_bottleneck.training.host_memory import keep_freed_host_memory
from softmax_bottleneck.training.lock import RunFolderBusy
from softmax_bottleneck.training.state import make_read_only
from softmax_bottleneck.training.trainer import PREEMPTED_EXIT, Diverged, Preempted, log, train


def add_cli(parser) -> None:
    parser.add_argument("--dataset", required=True, choices=presets.DATASETS, help="ptb or wt2")
    parser.add_argument("--variant", required=True, help=f"one of: {', '.join(presets.variants())}")
    parser.add_argument(
        "--schedule", default="et", choices=presets.SCHEDULES, help="et: ET-ASGD, nt: NT-ASGD (paper §4; SM §2)"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: the authors' seed of the preset")
    parser.add_argument("--out", required=True, help="run folder: model.pt, metrics.json, curve.csv")
    add_data_and_device(parser, "the preset", "the resume state")
    parser.add_argument(
        "--conformance-stamp", default=None, metavar="FILE",
        help="train only if FILE (written by check-layer NAME --stamp FILE) vouches for this variant's output layer "
        "as registered now; the workflow passes it for plug-in layers",
    )  # fmt: skip


def add_data_and_device(parser, preset: str, state: str) -> None:
    """The options ``train`` and ``train-fused`` share: data, corpus cache, ``--set`` (of ``preset``), device and how
    often ``state`` is written."""
    parser.add_argument(
        "--data", default=None, help="folder with train/valid/test.txt (default resources/data/<dataset>)"
    )
    parser.add_argument("--corpus-cache", default=None, help="tensor cache of the corpus (read, or written if absent)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override one hyper-parameter of {preset} (repeatable)")  # fmt: skip
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--checkpoint-seconds", type=argtypes.seconds, default=600.0, metavar="S",
        help=f"write {state} at most every S seconds, and on SIGTERM (not a hyper-parameter)",
    )  # fmt: skip
    parser.add_argument(
        "--refuse-cpu", action="store_true",
        help="stop at once, in one line, where the device is this machine's CPU (the workflow passes it for a "
        "paper-scale run, unless --config allow_cpu_training=true)",
    )  # fmt: skip
    parser.add_argument(
        "--read-only-outputs", action="store_true",
        help="make each finished run's model.pt, metrics.json and curve.csv read-only, as the workflow's protected() "
        "does (the workflow passes it: a training whose job Snakemake lost ends protected too)",
    )  # fmt: skip


def training_device(args) -> torch.device:
    """``--device`` resolved; with ``--refuse-cpu`` a CPU is a :class:`ValueError` (one line) before anything is read:
    the job's own guard against months of CPU time, which holds where the workflow's check at its start did not run
    (the study's rules used as a module of another workflow)."""
    device = resolve_device(args.device)
    if args.refuse_cpu and device.type == "cpu":
        raise ValueError(
            "a paper-scale training would run on this machine's CPU, which has no CUDA device (months of CPU time); "
            "run it where a GPU is, or allow it deliberately with --config allow_cpu_training=true (by hand: leave "
            "out --refuse-cpu)"
        )
    return device


def data_folder(args) -> Path:
    """``--data``, else the folder ``fetch`` fills for ``--dataset``."""
    return Path(args.data) if args.data else Path(DATA_ROOT) / DATASET_DIRS[args.dataset]


def run_cli(args) -> int:
    data_dir = data_folder(args)
    try:
        overrides = presets.parse_overrides(args.overrides)
        foreign = presets.not_owned_note(args.variant, overrides)
        if foreign:  # the workflow passes its model_overrides whole: model_overrides/all may name other layers' keys
            log.warning("%s (ignored)", foreign)
        if args.conformance_stamp:  # the stamp must vouch for this layer's source, at this run's values of its own keys
            from softmax_bottleneck.training.conformance_stamp import conformance_stamp_ok

            hp = presets.resolve(args.dataset, args.variant, args.schedule, overrides)
            ok, why = conformance_stamp_ok(args.conformance_stamp, hp["output_layer"], hp)
            if not ok:
                raise SystemExit(f"train: {why}")
        keep_freed_host_memory(training_device(args))  # this process is the training's alone
        train(dataset=args.dataset, variant=args.variant, schedule=args.schedule, seed=args.seed,
              overrides=overrides, out_dir=args.out, data_dir=data_dir, corpus_cache=args.corpus_cache,
              device=args.device, checkpoint_seconds=args.checkpoint_seconds)  # fmt: skip
        if args.read_only_outputs:
            make_read_only(Path(args.out))
    except Preempted as stop:
        log.warning("pre-empted (%s); state saved, rerun the same command to resume", stop)
        return PREEMPTED_EXIT
    except (ValueError, FileNotFoundError, RunFolderBusy, Diverged) as err:  # incl. RunFinished, FinalSetError
        raise SystemExit(f"train: {err}") from None
    except OSError as err:  # a full disk, a read-only folder, a file where a folder is expected, ...
        raise SystemExit(f"train: {os_error_reason(err)}") from None
    return 0
