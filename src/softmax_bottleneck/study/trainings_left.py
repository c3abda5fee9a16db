"""How far a workflow run's trainings are, in one line: how many are done and the time left, projected from the
finished runs' own timings.

At its start the workflow writes the configuration's trainings to a JSON file (:func:`write_trainings`):
``{"slots": k, "runs": [{"run": <run folder>, "projected_s": <seconds>}, ...]}``, where ``projected_s`` is the
plan's projection (the paper's V100 seconds per epoch × epochs, :func:`softmax_bottleneck.study.plan.gpu_hours`)
and ``k`` how many trainings run at once (``--cores``, or ``--resources gpu=N`` when smaller). It prints
:func:`progress_line` then, and each training job prints it again when it has finished
(``python -m softmax_bottleneck trainings-left FILE``; this module imports neither torch nor pandas).

A run is done when its folder holds ``metrics.json``; its own time is its ``seconds_per_epoch`` × ``epochs_run``.
The time left is (Σ own time ÷ Σ projection, over the finished runs) × Σ projection of the runs to go, ÷ k when
k trainings run at once; the plan's relative costs (a WT2 MoS epoch against a PTB Softmax one) carry over to the
runs still to train. Before any run has finished there is nothing of the machine's own to project from.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_write_json
from softmax_bottleneck.durations import duration_text


def write_trainings(path: str | os.PathLike, runs: dict[str, float], slots: int) -> dict:
    """Write ``runs`` (run folder → projected seconds) and ``slots`` for :func:`progress_line` (atomically); return
    what was written."""
    plan = {"slots": max(1, int(slots)), "runs": [{"run": r, "projected_s": s} for r, s in runs.items()]}
    atomic_write_json(plan, path)
    return plan


def own_seconds(run: str | os.PathLike) -> float | None:
    """The training time of a finished run from its ``metrics.json`` (seconds per epoch × epochs run); None while
    the run has no ``metrics.json`` (not finished), or the file lacks those fields or holds an impossible number
    (:mod:`softmax_bottleneck.readback`)."""
    path = Path(run) / "metrics.json"
    try:
        metrics = readback.check_metrics(readback.load_json(path), path)
        seconds = float(metrics["seconds_per_epoch"]) * int(metrics["epochs_run"])
    except (OSError, readback.ReadbackError, KeyError, TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def progress_line(plan: dict) -> str:
    """``trainings: 12 of 51 done; about 3m 10s of training left at 2 at once (from the finished runs' times)``."""
    runs, slots = plan["runs"], max(1, int(plan.get("slots", 1)))
    own = {r["run"]: own_seconds(r["run"]) for r in runs}
    done = [r for r in runs if (Path(r["run"]) / "metrics.json").is_file()]
    todo = [r for r in runs if r not in done]
    head = f"trainings: {len(done)} of {len(runs)} done"
    if not todo:
        return head
    timed = [r for r in done if own[r["run"]] is not None and r["projected_s"] > 0]
    if not timed:
        return f"{head}; the time left is projected once one has finished"
    ratio = sum(own[r["run"]] for r in timed) / sum(r["projected_s"] for r in timed)
    at_once = min(slots, len(todo))
    left = ratio * sum(r["projected_s"] for r in todo) / at_once
    return f"{head}; about {duration_text(left)} of training left at {at_once} at once (from the finished runs' times)"


def add_cli(parser) -> None:
    parser.add_argument("plan", metavar="FILE", help="the trainings file the workflow writes at its start")


def run_cli(args) -> int:
    try:
        plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SystemExit(f"trainings-left: {args.plan}: {err}") from None
    print(progress_line(plan), flush=True)
    return 0
