"""What a workflow run records when it starts: ``<logs>/workflow/run.json``.

The workflow writes it once, at its start (``onstart``), when it will run any job of the study (a run of only
``status``, ``progress`` or ``preview`` writes none)::

    {"config": {"files": ["config/small.yaml"], "values": {"data_mirror": "../shared/data"}},
     "started": 1795000000.0, "pid": 4242, "host": "login1", "slots": 2,
     "jobs": [{"jobid": 21, "rule": "train", "what": "dataset=ptb, variant=mos, ...", "kind": "training",
               "planned_s": 14.2, "threads": 1}, ...],
     "runs": ["results/runs/ptb/mos/nt/seed141/default-1a2b3c4d", ...]}

``config``: the ``--configfile`` files (the paper's ``config/config.yaml`` where none was given) and the ``--config``
values; ``pid`` and ``host``: the Snakemake that runs it; ``slots``: how many jobs run at once (``--cores``, or
``--resources gpu=N`` when smaller; the nodes of a cluster executor); ``jobs``: every job Snakemake will run, its kind
(:data:`TRAINING`, :data:`DOWNLOAD`, :data:`OTHER`) and its planned seconds
(:mod:`softmax_bottleneck.study.job_seconds`); ``runs``: every run folder the configuration names, whether it trains
now or not (the next start compares them: :mod:`softmax_bottleneck.study.changed_runs`). The terminal
(:mod:`softmax_bottleneck.cluster.terminal`, through the environment variable :data:`RECORD_VARIABLE` the workflow
sets) reads it for the time left; ``status`` and ``preview`` without ``--config`` follow the configuration of the
newest record in their folder (:func:`latest`; :func:`softmax_bottleneck.study.config.recorded_study`).

Each time the terminal prints its progress line it also writes it beside the record, ``<logs>/workflow/time_left.json``
(``{"written": <Unix time>, "line": "trainings: 12 of 51 done, ...", "seconds_left": 370.0}``, ``null`` while
estimating), which ``status`` and the progress page show. When the run ends, the workflow writes beside them
``<logs>/workflow/ended.json`` (``{"ended": "finished" or "failed", "written": <Unix time>}``, :func:`mark_ended`): a
file of its own, since the terminal may still print, and keep, its last line after that.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
from pathlib import Path

from softmax_bottleneck import bounds, readback
from softmax_bottleneck.atomic import atomic_write_text

#: the record below a configuration's logs folder (``logs/`` or ``logs/<output_subdir>/``)
RECORD = "workflow/run.json"
#: beside it, the terminal's last progress line (:func:`write_time_left`), for ``status`` and the progress page
TIME_LEFT = "workflow/time_left.json"
#: beside it, how the run ended (:func:`mark_ended`)
ENDED = "workflow/ended.json"
#: the environment variable through which the workflow names its record to the terminal
RECORD_VARIABLE = "SOFTMAX_BOTTLENECK_WORKFLOW_RUN"
#: the kinds of job a record names: a training, a download (the network sets its time), any other job
TRAINING, DOWNLOAD, OTHER = "training", "download", "job"


def write(path, *, files: list[str], values: dict, slots: int, jobs: list[dict], runs: list[str] = (),
          started: float | None = None) -> dict:  # fmt: skip
    """Write the record (module docstring) atomically; return it."""
    record = {
        "config": {"files": [str(f) for f in files], "values": values},
        "started": time.time() if started is None else started,
        "pid": os.getpid(),  # the controller: `status` on its machine tells a killed one from a running one
        "host": platform.node(),
        "slots": max(1, int(slots)),
        "jobs": jobs,
        "runs": [str(run) for run in runs],
    }
    atomic_write_text(json.dumps(record, indent=1, default=str) + "\n", path)
    return record


def _fail(path, why: str):
    raise readback.ReadbackError(path, why)


def read(path) -> dict:
    """The record at ``path``, read by the strict reader and checked field by field; :class:`ReadbackError` names the
    file and what is wrong (the workflow wrote it, but the folder is the user's)."""
    record = readback.load_json(path)
    config = record.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("values"), dict):
        _fail(path, "config: expected {files: [...], values: {...}}")
    files = config.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
        _fail(path, "config/files: expected a list of file names")
    started, slots = record.get("started"), record.get("slots")
    if not isinstance(started, int | float) or isinstance(started, bool) or not math.isfinite(started):
        _fail(path, f"started: expected a time in seconds, got {started!r}")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        _fail(path, f"slots: expected a whole number ≥ 1, got {slots!r}")
    pid, host = record.get("pid"), record.get("host")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid < 1):
        _fail(path, f"pid: expected a process id, got {pid!r}")
    if host is not None and not isinstance(host, str):
        _fail(path, f"host: expected a machine's name, got {host!r}")
    jobs = record.get("jobs")
    if not isinstance(jobs, list):
        _fail(path, "jobs: expected a list")
    for i, job in enumerate(jobs):
        if not (isinstance(job, dict) and isinstance(job.get("jobid"), int) and isinstance(job.get("rule"), str)):
            _fail(path, f"jobs/{i}: expected jobid (a whole number) and rule (a name)")
        if job.get("kind", OTHER) not in (TRAINING, DOWNLOAD, OTHER):
            _fail(path, f"jobs/{i}/kind = {job.get('kind')!r} is none of {TRAINING}, {DOWNLOAD}, {OTHER}")
        for key, bound in (("planned_s", bounds.SECONDS), ("threads", bounds.POSITIVE_COUNT)):
            why = bound.violation(job.get(key))
            if why:
                _fail(path, f"jobs/{i}/{key} = {job.get(key)!r} {why}")
    runs = record.setdefault("runs", [])  # a record written before runs were recorded names none
    if not isinstance(runs, list) or not all(isinstance(run, str) and run for run in runs):
        _fail(path, "runs: expected a list of run folders")
    return record


def latest(paths) -> tuple[Path, dict] | None:
    """``(path, record)`` of the newest readable record among ``paths`` (by its start), None if there is none; a
    record that cannot be read is left out with a warning naming it."""
    found = []
    for path in map(Path, paths):
        if not path.is_file():
            continue
        try:
            found.append((read(path)["started"], path))
        except (OSError, readback.ReadbackError) as err:
            logging.getLogger(__name__).warning("%s (left out)", err)
    if not found:
        return None
    _, path = max(found)
    return path, read(path)


def path_from_environment() -> Path | None:
    """The record the workflow named in :data:`RECORD_VARIABLE`, None when unset."""
    value = os.environ.get(RECORD_VARIABLE)
    return Path(value) if value else None


#: how a workflow run ended (:func:`mark_ended`)
ENDINGS = ("finished", "failed")


def write_time_left(record_path, line: str, seconds_left: float | None) -> None:
    """The terminal's progress ``line`` beside the record at ``record_path`` (atomically), written now."""
    text = {"written": time.time(), "line": line, "seconds_left": seconds_left}
    atomic_write_text(json.dumps(text) + "\n", Path(record_path).parent / Path(TIME_LEFT).name)


def mark_ended(ok: bool) -> None:
    """At the end of the workflow run (``onsuccess``, ``onerror``): ``finished`` or ``failed`` (an error, or Ctrl-C)
    beside its record, so that ``status`` does not show a run that has ended as running; nothing for a run that
    recorded nothing (a run killed outright marks nothing either: its last line stays as it was)."""
    path = path_from_environment()
    if path is not None:
        text = {"ended": ENDINGS[0] if ok else ENDINGS[1], "written": time.time()}
        atomic_write_text(json.dumps(text) + "\n", path.parent / Path(ENDED).name)


def read_ended(path) -> dict | None:
    """How the run whose marker is at ``path`` ended (:func:`mark_ended`), None where it wrote none; a file that is not
    one is :class:`ReadbackError` naming it."""
    try:
        text = readback.load_json(path)
    except FileNotFoundError:
        return None
    if text.get("ended") not in ENDINGS:
        raise readback.ReadbackError(path, f"ended = {text.get('ended')!r} is none of {', '.join(ENDINGS)}")
    why = bounds.TIMESTAMP.violation(text.get("written"))
    if why:
        raise readback.ReadbackError(path, f"written = {text.get('written')!r} {why}")
    return text


def read_time_left(path) -> dict | None:
    """The progress line written at ``path`` (:func:`write_time_left`), None where there is none; a file that is not
    one is :class:`ReadbackError` naming it."""
    try:
        text = readback.load_json(path)
    except FileNotFoundError:
        return None
    written, line, left = text.get("written"), text.get("line"), text.get("seconds_left")
    if not isinstance(line, str):
        raise readback.ReadbackError(path, f"line: expected the terminal's progress line (text), got {line!r}")
    # ``written`` is a Unix time (when), ``seconds_left`` a duration (how long): each within its own bounds
    for key, value, bound in (("written", written, bounds.TIMESTAMP), ("seconds_left", left, bounds.SECONDS)):
        why = None if key == "seconds_left" and value is None else bound.violation(value)
        if why:
            raise readback.ReadbackError(path, f"{key} = {value!r} {why}")
    return text
