"""What ``status`` says of one run and of the whole study (:mod:`.status`): the records :class:`RunStatus` and
:class:`StudyStatus`, the sums over them (time spent, the plan's projection, the rate and the projected finish) and
their JSON form (``status --json``), and each experiment's label (:data:`EXPERIMENT_LABELS`, the plan's too)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

#: an experiment's name in the plan and in ``status``: the paper's experiment number and what it compares
EXPERIMENT_LABELS = {
    "main": "E1 main comparison",
    "frozen": "E7 LMS-PLIF†",
    "ntet": "E2 NT vs ET",
    "gss_grid": "E4 GSS grid",
    "mos_k": "E8 MoS K sweep",
    "mos_dropoutl": "E9 MoS dropoutl sweep",
    "fair": "E10 MoS† vs Softmax‡",
    "analysis": "analyses' reference models",
}
#: a run's states, in the order ``status`` counts them
STATES = ("finished", "running", "stalled", "failed", "unreadable", "not started")
#: states the one-screen view lists run by run
LISTED_STATES = ("running", "stalled", "failed", "unreadable")


@dataclass
class RunStatus:
    """One run's state and what its folder says about it (times are Unix seconds)."""

    run: str
    dataset: str
    variant: str
    schedule: str
    seed: int
    tag: str
    experiments: list[str]
    state: str
    epochs: int
    projected_hours: float  # V100 GPU-hours, the plan's
    epoch: int | None = None
    best_valid_ppl: float | None = None
    test_ppl: float | None = None
    press_rank: float | None = None
    seconds_left: float | None = None
    last_write: float | None = None
    started: float | None = None
    finished: float | None = None
    device_seconds: float = 0.0
    device: str | None = None  # where a finished run trained (its metrics.json: cpu, cuda, cuda:1, ...)
    note: str = ""
    retry: str | None = None

    @property
    def done_fraction(self) -> float:
        if self.state == "finished":
            return 1.0
        return min(1.0, (self.epoch or 0) / self.epochs) if self.epochs else 0.0


@dataclass
class StudyStatus:
    """Every run's :class:`RunStatus` and the sums over them."""

    config: str
    now: float
    runs: list[RunStatus]
    groups: dict[str, list[str]] = field(default_factory=dict)  # experiment -> run folders
    scaled_down: bool = False  # the runs read only the first tokens of their splits (the small scale)
    workflow: dict | None = None  # the workflow's time left, as its terminal last wrote it (workflow_run.TIME_LEFT)
    changed: str | None = None  # runs an edit made new models where finished or begun ones stand (.changed_runs)

    @property
    def device_label(self) -> str:
        """``CPU`` or ``GPU`` where every finished run trained on one kind of device, else ``device``."""
        kinds = {r.device.split(":")[0] for r in self.runs if r.device}
        return {frozenset({"cpu"}): "CPU", frozenset({"cuda"}): "GPU"}.get(frozenset(kinds), "device")

    def counts(self, runs: list[RunStatus] | None = None) -> dict[str, int]:
        runs = self.runs if runs is None else runs
        return {state: sum(r.state == state for r in runs) for state in STATES}

    @property
    def device_hours(self) -> float:
        return sum(r.device_seconds for r in self.runs) / 3600.0

    @property
    def projected_hours(self) -> float:
        return sum(r.projected_hours for r in self.runs)

    @property
    def done_hours(self) -> float:
        """Projected V100 GPU-hours done: finished runs whole, e/E of the others."""
        return sum(r.projected_hours * r.done_fraction for r in self.runs)

    @property
    def rate(self) -> float | None:
        """Projected V100 GPU-hours done per wall-clock hour since the first run started (None before)."""
        starts = [r.started for r in self.runs if r.started is not None]
        if not starts or self.now <= min(starts):
            return None
        return self.done_hours / ((self.now - min(starts)) / 3600.0)

    @property
    def seconds_to_finish(self) -> float | None:
        """Wall seconds left at the current rate, while a run is running (None otherwise)."""
        rate = self.rate
        if not rate or not any(r.state == "running" for r in self.runs):
            return None
        return (self.projected_hours - self.done_hours) / rate * 3600.0

    def as_dict(self) -> dict:
        finish = self.seconds_to_finish
        return {
            "config": self.config,
            "time": iso_time(self.now),
            "jobs": len(self.runs),
            "counts": self.counts(),
            "experiments": [
                {
                    "experiment": name,
                    "label": experiment_label(name),
                    "jobs": len(paths),
                    **self.counts(self.runs_of(paths)),
                }
                for name, paths in self.groups.items()
            ],
            "device_hours_spent": self.device_hours,
            "device": self.device_label,
            "scaled_down": self.scaled_down,
            "workflow_time_left": self.workflow,
            "changed_runs": self.changed,
            "projected_v100_hours": self.projected_hours,
            "projected_v100_hours_done": self.done_hours,
            "projected_v100_hours_left": self.projected_hours - self.done_hours,
            "rate_v100_hours_per_hour": self.rate,
            "seconds_to_finish": finish,
            "projected_finish": iso_time(self.now + finish) if finish is not None else None,
            "runs": [asdict(r) for r in self.runs],
        }

    def runs_of(self, paths: list[str]) -> list[RunStatus]:
        by_path = {r.run: r for r in self.runs}
        return [by_path[p] for p in paths]


def experiment_label(name: str) -> str:
    """``name``'s label (:data:`EXPERIMENT_LABELS`); a sweep's own name."""
    return EXPERIMENT_LABELS.get(name, name)


def iso_time(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
