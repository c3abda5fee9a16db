"""Seconds per epoch measured on your own device by ``bench``, for ``costs --bench`` (instead of the paper's V100).

Each file is the JSON that ``python -m softmax_bottleneck bench --dataset D --variant V ... > FILE.json`` prints.
Only measurements of the paper-scale model count: a file measured with ``--set`` overrides is refused, and so
are files of different devices, which cannot be mixed into one projection; each refusal is one line naming the
file.

**Packed runs.** A file of ``bench --runs K`` (K runs sharing the device at once, under MPS where ``bench`` ran
with an MPS pipe directory) gives each run's own seconds per epoch while it shares the device; the device is then
held K times over, so one run costs ``seconds / K`` device-seconds per epoch. Several files of one (dataset,
variant, phase) with different K (or with and without MPS) are alternatives: the projection takes the one whose
run costs the fewest device-seconds, i.e. it assumes the runs of that model are packed that way (the workflow's
``gpu-lease --per-gpu K``); ``time_of`` names the packing. The same K twice is refused as a duplicate. A file of
``bench --fused K`` (``fused``: true) is read the same way: K runs trained fused hold the device together, each for its
group's seconds per epoch, so a run costs a K-th of them (the workflow's ``fusion: runs_per_job: K``).

Per training run, the seconds per epoch are the measured ``projected_seconds_per_epoch`` (training steps plus
the validation pass) of its (dataset, variant), else of its cost proxy, else of its family's default (as the
V100 projection chooses, :func:`softmax_bottleneck.study.plan.time_sources`). ASGD steps cost more than
SGD steps (the average is updated every step); where both phases are measured (``bench --phase sgd`` and
``--phase asgd``), an ET run is weighted ``(s·sgd + (E − s)·asgd) / E`` with the preset's switch epoch ``s`` (200) of
its ``E`` epochs, and an NT run (its switch depends on the validation curve) is counted at the ASGD time, an upper
bound. With one phase measured, that phase's time is used and ``time_of`` says so.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from softmax_bottleneck import bounds, presets, readback
from softmax_bottleneck.study.plan import first_time, time_sources

PHASES = ("sgd", "asgd")
_KEYS = ("dataset", "variant", "phase", "device", "projected_seconds_per_epoch", "runs")


class BenchFileError(ValueError):
    """A ``bench`` result that cannot be used for the projection; one line naming the file."""


@dataclass
class MeasuredSpeeds:
    """Seconds per epoch of one run by (dataset, variant) and phase, all measured on one device, and how many runs
    shared the device while it was measured (``runs``; ``mps``: under an MPS daemon)."""

    device: str
    seconds: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    runs: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    mps: dict[tuple[str, str], dict[str, bool]] = field(default_factory=dict)
    fused: dict[tuple[str, str], dict[str, bool]] = field(default_factory=dict)
    files: dict[tuple, str] = field(default_factory=dict)

    @property
    def packings(self) -> list[int]:
        """The numbers of runs per device used (sorted)."""
        return sorted({k for phases in self.runs.values() for k in phases.values()})

    def device_seconds_per_epoch(self, dataset: str, variant: str, schedule: str, epochs: int) -> float:
        """Device-seconds one epoch of the run holds: each phase's seconds over the runs sharing the device, weighted
        by the phases as :meth:`seconds_per_epoch` weights them."""
        shared = MeasuredSpeeds(self.device)
        for key, phases in self.seconds.items():
            shared.seconds[key] = {phase: sec / self.runs[key][phase] for phase, sec in phases.items()}
        return shared.seconds_per_epoch(dataset, variant, schedule, epochs)[0]

    def packing_of(self, dataset: str, variant: str) -> str:
        """``"4 per device under MPS"``-like words for the measurement used (empty: one run alone)."""
        found = first_time(self.runs, dataset, variant)
        if found is None:
            return ""
        phases, label = found
        words = []
        for phase, k in sorted(phases.items()):
            if k > 1:
                mps = " under MPS" if first_time(self.mps, dataset, variant)[0][phase] else ""
                fused = first_time(self.fused, dataset, variant)[0][phase]  # recorded with runs and mps
                how = f"{k} fused" if fused else f"{k} per device{mps}"
                words.append(how + (f" ({phase})" if len(phases) > 1 else ""))
        return ", ".join(words)

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
    """``bench``'s JSON through the package's bounded reader: a regular file only (a FIFO or a device is refused,
    never waited on), its size bounded, strict JSON."""
    try:
        result = readback.load_json(path)
    except FileNotFoundError:
        raise BenchFileError(f"{path}: no such file") from None
    except (OSError, readback.ReadbackError) as err:
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
        if sec > bounds.MAX_SECONDS:
            raise BenchFileError(f"{path}: projected_seconds_per_epoch {sec!r} is impossible: an epoch takes < 1 year")
        device = str(result.get("device_name") or result["device"])
        runs = result["runs"]
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise BenchFileError(f"{path}: runs {runs!r} is not a positive integer")
        if speeds is None:
            speeds, first = MeasuredSpeeds(device=device), str(path)
        elif device != speeds.device:
            raise BenchFileError(
                f"{path}: measured on {device} with {runs} run(s) per device, {first} on {speeds.device}; "
                "project one device at a time"
            )
        mps, fused = bool(result.get("mps")), bool(result.get("fused"))
        key = (dataset, variant, phase, runs, mps, fused)
        if key in speeds.files:
            packed = f", {runs} runs {'fused' if fused else 'per device'}" if runs > 1 else ""
            raise BenchFileError(
                f"{path}: a second measurement of {dataset}/{variant} ({phase}{packed}{', MPS' if mps else ''}), "
                f"after {speeds.files[key]}"
            )
        speeds.files[key] = str(path)
        pair, sec = (dataset, variant), float(sec)
        old = speeds.seconds.get(pair, {}).get(phase)
        if old is None or sec / runs < old / speeds.runs[pair][phase]:  # the cheapest packing of this model
            speeds.seconds.setdefault(pair, {})[phase] = sec
            speeds.runs.setdefault(pair, {})[phase] = runs
            speeds.mps.setdefault(pair, {})[phase] = mps
            speeds.fused.setdefault(pair, {})[phase] = fused
    if speeds is None:
        raise BenchFileError("--bench: no files given")
    return speeds
