"""Runs that an edited configuration no longer names: the workflow stops before training new models in their places.

A run's folder is named by the hash of its identity (every resolved hyper-parameter, the seed, the data files'
SHA-256: :mod:`softmax_bottleneck.training.identity`). An edit of a preset value, of ``model_overrides``, of
``log_interval`` or ``tf32``, another data file, or a package update that changes a preset gives the same experiment
point (dataset, layer, schedule, seed and tag) another identity: a new model, trained in a new folder beside the
old one, which stays. Each start of the workflow records the run folders its configuration names
(:mod:`softmax_bottleneck.cluster.workflow_run`, ``runs``). At the next start, a training about to run whose place a
folder of that record holds, finished or begun (a model, or a resume state: a training of days may be running there),
starts such a new model: :func:`check` stops the workflow in one line saying how many, what differs (read from the
finished run's ``metrics.json``) and how to go on, so that an edit meant for one thing does not start hundreds of
GPU-days unseen; a record that cannot be read stops a start that would train, too (nothing could be compared).
``--config train_changed_runs=true`` trains them; the record then names the new runs, and the next start asks nothing
again.
"""

from __future__ import annotations

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
#: hyper-parameters named in one kind of difference at most (the rest counted)
SHOWN_KEYS = 4
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


def what_differs(run: Run, old: Path) -> str:
    """``key old → new, ...`` (at most :data:`SHOWN_KEYS`, the others counted): the hyper-parameters (seed included) of
    ``run`` that differ from those the finished run in ``old`` recorded; ``the data files' SHA-256`` where none does
    (the identity holds only those besides); :data:`BEGUN` for a run begun and not finished (it has recorded none)."""
    path = old / "metrics.json"
    if not (old / "model.pt").is_file():
        return BEGUN
    try:
        recorded = readback.check_metrics(readback.load_json(path), path).get("hyperparameters") or {}
    except (OSError, ValueError) as err:  # ReadbackError is a ValueError
        return shown(f"unknown: {readback.error_line(err)}", 160)
    wanted = {**run.hyperparameters, "seed": run.seed}
    changed = [
        shown(f"{key} {_value(recorded, key)} → {_value(wanted, key)}", 60)
        for key in sorted(set(recorded) | set(wanted))
        if key not in recorded or key not in wanted or not _same(recorded[key], wanted[key])
    ]
    if len(changed) > SHOWN_KEYS:
        changed[SHOWN_KEYS:] = [f"{len(changed) - SHOWN_KEYS} other keys"]
    return ", ".join(changed) if changed else "the data files' SHA-256"


def recorded_runs(logs) -> list[str]:
    """The run folders the configuration's last start recorded under its logs folder ``logs`` (none where it wrote no
    record, or one before runs were recorded); a record that cannot be read is :class:`ReadbackError` naming it."""
    path = Path(logs) / workflow_run.RECORD
    if not path.exists() and not path.is_symlink():
        return []
    return workflow_run.read(path)["runs"]


def _successors(study: Study, recorded, root: Path = Path(".")) -> dict[str, tuple[Run, Path]]:
    """New run folder -> (its run, the folder of ``recorded`` whose place it takes): each run of ``study`` not begun
    whose place (seed folder and tag) a folder of ``recorded``, no longer named, holds with a model or a resume state
    (:func:`~softmax_bottleneck.training.identity.training_held`: finished, or begun); folders below ``root``."""
    named = set(study.jobs)
    held: dict[tuple[Path, str], Path] = {}
    for folder in recorded:
        place = _place(folder)
        if place and folder not in named and any(training_held(root / folder)):
            held.setdefault(place, Path(folder))
    if not held:
        return {}
    return {
        folder: (run, held[_place(folder)])
        for folder, run in study.jobs.items()
        if _place(folder) in held and not any(training_held(root / folder))
    }


def _trained(study: Study, jobs) -> set[str]:
    """The run folders that ``jobs`` (``(jobid, rule, wildcards, threads)``) train."""
    return {run.dir for _, rule, wildcards, _ in jobs for run in job_runs(study, rule, wildcards)}


def _split(study: Study, jobs, recorded) -> tuple[list[tuple[Run, Path]], list[str]]:
    """Of the :func:`_successors` of ``recorded``: ``(run, old folder)`` of those that ``jobs`` train, and the old
    folders of the others (a start for another target: the record keeps them, so that the start that trains them
    compares them)."""
    trained = _trained(study, jobs)
    successors = _successors(study, recorded)
    return ([pair for new, pair in successors.items() if new in trained],
            [str(old) for new, (_, old) in successors.items() if new not in trained])  # fmt: skip


def _described(pairs, root: Path = Path(".")) -> list[tuple[Run, Path, str]]:
    """``(run, old folder, what differs)`` of ``(run, old folder)`` pairs (folders below ``root``), begun ones first
    (a training of days may be running there)."""
    found = [(run, old, what_differs(run, root / old)) for run, old in pairs]
    return sorted(found, key=lambda item: item[2] != BEGUN)


def changed_runs(study: Study, jobs, recorded) -> list[tuple[Run, Path, str]]:
    """``(run, old folder, what differs)`` for each run that ``jobs`` train while a folder of ``recorded`` (the run
    folders of the configuration's last start), finished or begun and no longer named, holds its place (module
    docstring); begun ones first."""
    return _described(_split(study, jobs, recorded)[0])


def _summary(found: list[tuple[Run, Path, str]]) -> str:
    """``what differs: ...; e.g. <old> is finished, <new> would train`` of the runs :func:`changed_runs` found."""
    kinds = Counter(differs for _, _, differs in found).most_common()
    said = "; ".join(f"in {count} run{'s' * (count > 1)}, {differs}" for differs, count in kinds[:SHOWN_DIFFERENCES])
    if len(kinds) > SHOWN_DIFFERENCES:
        said += f"; {len(kinds) - SHOWN_DIFFERENCES} other differences"
    run, old, differs = found[0]
    state = "holds a training begun, which may be running" if differs == BEGUN else "is finished"
    return f"what differs: {said}; e.g. {old} {state}, {run.dir} would train"


def refusal_line(found: list[tuple[Run, Path, str]], source: str) -> str:
    """The one line that stops the workflow for the runs :func:`changed_runs` found (at least one)."""
    what = f"{len(found)} trainings would start new models" if len(found) > 1 else "a training would start a new model"
    return (
        f"{source}: {what} where this configuration's last start named finished or begun runs of the same dataset, "
        f"layer, schedule, seed and tag ({_summary(found)}). Nothing was started, and the old runs stay in their "
        f"folders: undo the edit to use them, or train the new models deliberately with --config "
        f"{TRAIN_CHANGED_RUNS}=true ({DOCS})"
    )


def waiting_note(study: Study, root: Path, logs: Path) -> str | None:
    """For ``status``: the runs of ``study`` not begun (in ``root``) whose places runs of the last start's record
    (under ``logs``) hold, finished or begun, which the next start that would train them stops for, in one line; None
    where there are none, or the record cannot be read (the next start that would train stops, naming it)."""
    try:
        recorded = recorded_runs(logs)
    except (OSError, readback.ReadbackError):
        return None
    found = _described(_successors(study, recorded, root).values(), root)
    if not found:
        return None
    what = f"{len(found)} runs of this study are new models" if len(found) > 1 else "a run of this study is a new model"
    return (
        f"Changed since the workflow's last start: {what} where it named finished or begun runs ({_summary(found)}); "
        f"the next start that would train them stops first (undo the edit, or give it --config "
        f"{TRAIN_CHANGED_RUNS}=true)."
    )


def check(study: Study, jobs, logs, source: str, *, train_changed: bool) -> tuple[str | None, list[str]]:
    """``(refusal, runs)`` at a workflow start that runs ``jobs``: the one line that stops it (module docstring; a
    record under ``logs`` that cannot be read stops it too, where it would train, unless ``train_changed``), else None;
    and the run folders its record names: the configuration's, and the old folders of the changed runs it does not
    train (:func:`_split`)."""
    try:
        recorded = recorded_runs(logs)
    except (OSError, readback.ReadbackError) as err:
        if train_changed or not _trained(study, jobs):
            return None, list(study.jobs)
        return (
            f"{source}: {readback.error_line(err)}: this start compares the trainings it would run with the runs that "
            f"record names ({DOCS}); move it away (nothing is then compared), or train all the same with --config "
            f"{TRAIN_CHANGED_RUNS}=true"
        ), []
    pairs, kept = _split(study, jobs, recorded)
    found = [] if train_changed else _described(pairs)
    return (refusal_line(found, source) if found else None), [*study.jobs, *dict.fromkeys(kept)]
