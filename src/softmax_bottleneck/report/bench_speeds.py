"""Seconds per epoch measured on your own device by ``bench``, for ``costs --bench`` (instead of the paper's V100).

Each file is the JSON that ``python -m softmax_bottleneck bench --dataset D --variant V ... > FILE.json`` prints.
Only measurements of the paper-scale model count: a file measured with ``--set`` overrides is refused, and so
are files of different devices or different ``--runs`` (runs sharing one device), which cannot be mixed into
one projection; each refusal is one line naming the file.

Per training run, the seconds per epoch are the measured ``projected_seconds_per_epoch`` (training steps plus
the validation pass) of its (dataset, variant), else of its cost proxy, else of its family's default (as the
V100 projection chooses, :func:`softmax_bottleneck.study.plan.time_sources`). ASGD steps cost more than
SGD steps (the average is updated every step); where both phases are measured (``bench --phase sgd`` and
``--phase asgd``), an ET run is weighted ``(s·sgd + (E − s)·asgd) / E`` with the preset's switch epoch ``s`` (200) of
its ``E`` epochs, and an NT run (its switch depends on the validation curve) is counted at the ASGD time, an upper
bound. With one phase measured, that phase's time is used and ``time_of`` says so.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from softmax_bottleneck import presets
from softmax_bottleneck.study.plan import first_time, time_sources

PHASES = ("sgd", "asgd")
_KEYS = ("dataset", "variant", "phase", "device", "projected_seconds_per_epoch", "runs")


class BenchFileError(ValueError):
    """A ``bench`` result that cannot be used for the projection; one line naming the file."""


@dataclass
class MeasuredSpeeds:
    """Seconds per epoch by (dataset, variant) and phase, all measured on one device with ``runs`` per device."""

    device: str
    runs_per_device: int
    seconds: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    files: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def seconds_per_epoch(self, dataset: str, variant: str, schedule: str, epochs: int) -> tuple[float, str]:
        """The run's seconds per epoch on this device, and whose measurement it is (empty: its own, both phases)."""
        found = first_time(self.seconds, dataset, variant)
        if found is None:
            measured = ", ".join(f"{d}/{v}" for d, v in sorted(self.seconds)) or "none"
            family = time_sources(variant)[-1][0]
            raise BenchFileError(
                f"no bench measurement for {dataset}/{variant} (nor its cost proxy or family default "
                f"{family}); measured: {measured}; run: python -m softmax_bottleneck bench --dataset {dataset} "
                f"--variant {variant} > {dataset}-{variant}.json"
            )
        phases, label = found
        label = "" if label == variant else label  # its own measurement
        if len(phases) == 1:
            ((phase, sec),) = phases.items()
            return sec, " ".join(filter(None, [label, f"({phase} steps only)"]))
        if schedule == "nt":
            return phases["asgd"], " ".join(filter(None, [label, "(NT: ASGD time)"]))
        switch = min(max(int(presets.resolve(dataset, variant, "et")["switch_epoch"]), 0), int(epochs))
        return (switch * phases["sgd"] + (int(epochs) - switch) * phases["asgd"]) / int(epochs), label


def _read(path: Path) -> dict:
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        raise BenchFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BenchFileError(f"{path}: not the JSON that bench prints ({err})") from None
    missing = [key for key in _KEYS if not isinstance(result, dict) or key not in result]
    if missing:
        raise BenchFileError(f"{path}: not the JSON that bench prints (no {', '.join(missing)})")
    return result


def load_speeds(paths: list[str | os.PathLike]) -> MeasuredSpeeds:
    """Read ``bench`` results; refuse overrides, unknown names, bad numbers, mixed devices or runs, duplicates."""
    from softmax_bottleneck import presets

    speeds: MeasuredSpeeds | None = None
    first = ""
    for raw in paths:
        path = Path(raw)
        result = _read(path)
        if result.get("overrides"):
            sets = " ".join(f"--set {k}={v}" for k, v in result["overrides"].items())
            raise BenchFileError(f"{path}: measured with {sets}, not at the paper's hyper-parameters")
        dataset, variant, phase = result["dataset"], result["variant"], result["phase"]
        if dataset not in presets.DATASETS or phase not in PHASES:
            raise BenchFileError(f"{path}: dataset {dataset!r} / phase {phase!r} unknown")
        try:
            presets.variant_info(variant)
        except ValueError as err:
            raise BenchFileError(f"{path}: {err}") from None
        sec = result["projected_seconds_per_epoch"]
        if isinstance(sec, bool) or not isinstance(sec, (int, float)) or not (math.isfinite(sec) and sec > 0):
            raise BenchFileError(f"{path}: projected_seconds_per_epoch {sec!r} is not a positive number")
        device = str(result.get("device_name") or result["device"])
        runs = result["runs"]
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise BenchFileError(f"{path}: runs {runs!r} is not a positive integer")
        if speeds is None:
            speeds, first = MeasuredSpeeds(device=device, runs_per_device=runs), str(path)
        elif (device, runs) != (speeds.device, speeds.runs_per_device):
            raise BenchFileError(
                f"{path}: measured on {device} with {runs} run(s) per device, {first} on {speeds.device} with "
                f"{speeds.runs_per_device}; project one device and one packing at a time"
            )
        key = (dataset, variant, phase)
        if key in speeds.files:
            raise BenchFileError(
                f"{path}: a second measurement of {dataset}/{variant} ({phase}), after {speeds.files[key]}"
            )
        speeds.files[key] = str(path)
        speeds.seconds.setdefault((dataset, variant), {})[phase] = float(sec)
    if speeds is None:
        raise BenchFileError("--bench: no files given")
    return speeds
