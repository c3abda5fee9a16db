"""Runs that an edited configuration no longer names: the workflow stops before training new models in their places.

A run's folder is named by the hash of its identity (every resolved hyper-parameter, the seed, the data files'
SHA-256: :mod:`softmax_bottleneck.training.identity`). An edit of a preset value, of ``model_overrides``, of
``log_interval`` or ``tf32``, another data file, or a package update that changes a preset gives the same experiment
point (dataset, layer, schedule, seed and tag) another identity: a new model, trained in a new folder beside the
old one, which stays. Each start of the workflow records the run folders its configuration names
(:mod:`softmax_bottleneck.cluster.workflow_run`, ``runs``). At the next start, a training about to run whose place a
folder of that record holds, finished or begun (a model, or a resume state: a training of days may be running there),
starts such a new model: :func:`changed_refusal` stops the workflow in one line saying how many, what differs (read
from the finished run's ``metrics.json``) and how to go on, so that an edit meant for one thing does not start
hundreds of GPU-days unseen. ``train_changed_runs: true`` trains them; the record then names the new runs, and the
next start asks nothing again.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.models.output_layers.hyperparameters import format_value
from softmax_bottleneck.study.config_file import TRAIN_CHANGED_RUNS
from softmax_bottleneck.study.job_seconds import job_runs
from softmax_bottleneck.study.run_text import shown
from softmax_bottleneck.study.runs import Run, Study, same_value
from softmax_bottleneck.training.identity import folder_hash, training_held

#: where the rerun policy is explained
DOCS = "docs/running.md#rerun-policy-a-finished-run-is-never-redone-by-accident"
#: kinds of difference named in the refusal at most (the rest counted)
SHOWN_DIFFERENCES = 3
#: what differs from a run begun and not finished (its hyper-parameters are recorded when it finishes)
BEGUN = "a training begun under the old identity, not finished"


def _place(folder: str | Path) -> tuple[Path, str] | None:
    """``(seed folder, tag)`` of a run folder named ``<tag>-<hash>``, else None."""
    folder = Path(folder)
    if not folder_hash(folder.name):
        return None
    return folder.parent, folder.name.rsplit("-", 1)[0]


def _value(holder: dict, key: str) -> str:
    if key not in holder:
        return "(absent)"
    value = holder[key]
    return format_value(value) if value is None or isinstance(value, int | float | str) else repr(value)


def _same(a, b) -> bool:
    try:
        return same_value(a, b)
    except (TypeError, ValueError):  # a value no hyper-parameter has (a list, an object): as written
        return a == b


def what_differs(run: Run, finished: Path) -> str:
    """``key old → new, ...``: the hyper-parameters (seed included) of ``run`` that differ from those the finished run
    in ``finished`` recorded; ``the data files' SHA-256`` where none does (the identity holds only those besides); a
    run begun but not finished has recorded none yet."""
    path = finished / "metrics.json"
    if not (finished / "model.pt").is_file():
        return BEGUN
    try:
        recorded = readback.check_metrics(readback.load_json(path), path).get("hyperparameters") or {}
    except (OSError, ValueError) as err:  # ReadbackError is a ValueError
        return shown(f"unknown: {readback.error_line(err)}", 120)
    wanted = {**run.hyperparameters, "seed": run.seed}
    changed = [
        f"{key} {_value(recorded, key)} → {_value(wanted, key)}"
        for key in sorted(set(recorded) | set(wanted))
        if key not in recorded or key not in wanted or not _same(recorded[key], wanted[key])
    ]
    return shown(", ".join(changed), 120) if changed else "the data files' SHA-256"


def recorded_runs(logs) -> list[str]:
    """The run folders the configuration's last start recorded under its logs folder ``logs``; none where it recorded
    none, or its record cannot be read (said in a warning naming it)."""
    path = Path(logs) / workflow_run.RECORD
    if not path.is_file():
        return []
    try:
        return workflow_run.read(path)["runs"]
    except (OSError, readback.ReadbackError) as err:
        logging.getLogger(__name__).warning("%s (the runs it names are not compared)", readback.error_line(err))
        return []


def _successors(study: Study, recorded) -> dict[str, tuple[Run, Path]]:
    """New run folder -> (its run, the folder of ``recorded`` whose place it takes): each run of ``study`` not begun
    whose place (seed folder and tag) a folder of ``recorded``, no longer named, holds with a model or a resume state
    (:func:`~softmax_bottleneck.training.identity.training_held`: finished, or begun)."""
    named = set(study.jobs)
    finished: dict[tuple[Path, str], Path] = {}
    for folder in recorded:
        place = _place(folder)
        if place and folder not in named and any(training_held(Path(folder))):
            finished.setdefault(place, Path(folder))
    if not finished:
        return {}
    return {
        folder: (run, finished[_place(folder)])
        for folder, run in study.jobs.items()
        if _place(folder) in finished and not any(training_held(Path(folder)))
    }


def _trained(study: Study, jobs) -> set[str]:
    """The run folders that ``jobs`` (``(jobid, rule, wildcards, threads)``) train."""
    return {run.dir for _, rule, wildcards, _ in jobs for run in job_runs(study, rule, wildcards)}


def changed_runs(study: Study, jobs, recorded) -> list[tuple[Run, Path, str]]:
    """``(run, old folder, what differs)`` for each run that ``jobs`` train while a folder of ``recorded`` (the run
    folders of the configuration's last start), finished or begun and no longer named, holds its place (module
    docstring)."""
    trained = _trained(study, jobs)
    return [(run, old, what_differs(run, old)) for new, (run, old) in _successors(study, recorded).items()
            if new in trained]  # fmt: skip


def runs_to_record(study: Study, jobs, recorded) -> list[str]:
    """The record's ``runs`` for a start that trains ``jobs``: the configuration's run folders, and the finished or
    begun folders of ``recorded`` whose successors this start does not train (a start for another target), so that the
    start that would train them still compares them."""
    trained = _trained(study, jobs)
    kept = [str(old) for new, (_, old) in _successors(study, recorded).items() if new not in trained]
    return [*study.jobs, *dict.fromkeys(kept)]


def changed_refusal(study: Study, jobs, recorded_runs, source: str) -> str | None:
    """The one line that stops the workflow where :func:`changed_runs` finds any, else None."""
    found = changed_runs(study, jobs, recorded_runs)
    if not found:
        return None
    kinds = Counter(differs for _, _, differs in found).most_common()
    said = "; ".join(f"{differs} ({count} run{'s' * (count > 1)})" for differs, count in kinds[:SHOWN_DIFFERENCES])
    if len(kinds) > SHOWN_DIFFERENCES:
        said += f"; {len(kinds) - SHOWN_DIFFERENCES} other differences"
    run, old, differs = found[0]
    state = "holds a training begun" if differs == BEGUN else "is finished"
    return (
        f"{source}: {len(found)} training{'s' * (len(found) > 1)} would start new models where this configuration's "
        f"last start named finished or begun ones, of the same dataset, layer, schedule, seed and tag (what differs: "
        f"{said}; e.g. {old} {state}, {run.dir} would train). Those stay in their folders: undo the edit to use them, "
        f"or train the new models deliberately with --config {TRAIN_CHANGED_RUNS}=true ({DOCS})"
    )
