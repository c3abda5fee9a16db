"""Where every run of the study stands (``status``; ``snakemake status``), read from the run folders alone.

It works under any executor (local, SLURM) and while Snakemake runs: it only reads files (never a model or a resume
state, never the run's lock), and never starts, locks or changes a run. A run of the plan (:mod:`.plan`) is

* **finished**: ``model.pt`` and ``metrics.json`` are there (or the kept set ``.resume/final/``, which the next job
  restores); its test perplexity from ``metrics.json``, its Press' rank from ``rank-<rows>.json`` once analysed;
* **failed**: the newest of its progress file, its log (``logs/train/<run>.log``: its last line) and its ``.lock``
  says its last attempt ended on an error, that one line shown with the command that retries it;
* **stalled**: interrupted and resumable: that newest record says the attempt stopped on a signal (pre-empted,
  Ctrl-C), or its process is gone (same host), or nothing of it (progress file, resume state, log, lock) was
  written for longer than its checkpoint interval allows (:func:`allowed_silence`: killed, or lost with its node);
* **running**: written to within that interval; epoch e of E, the best validation perplexity so far, the time left
  (the epochs to go × the mean wall time of its epochs) and its last write, from ``.resume/progress.json``
  (:mod:`softmax_bottleneck.training.run_files`);
* **not started**: no progress file, resume state or lock (a log alone that ends in an error: failed);
* **unreadable**: a file that says where it stands cannot be read or holds an impossible value (the progress file, the
  ``.lock``, the log, the folder itself): the run is listed with the file and why, never with the file's numbers.

Every file is read as every file read back is (:mod:`softmax_bottleneck.readback`: a regular file only, never through a
link, never waited on, its size bounded before reading, no key twice, the progress file's numbers within their bounds
and the run's epochs); a text from a file (an error, a log's last line, a host) is shown without control characters
and cut at :data:`NOTE_CHARS` characters, saying so.

The time spent is the runs' own: the wall time of each epoch in the progress file (training + validation), or
``seconds_per_epoch × epochs_run`` of a finished run's ``metrics.json``; CPU- or GPU-hours where every finished run
trained on that kind of device (its ``metrics.json``). The plan's projection is in V100 GPU-hours
(:func:`.plan.gpu_hours`); work done counts a finished run's projection whole and e/E of an unfinished one's. The
current rate is that work over the hours since the first run started, and the projected finish is the work left at
that rate (shown while a run is running). Runs that read only the first tokens of their data (the small scale) are
not projected with the paper's V100 times, which say nothing of their cost. Where the workflow runs the study, its
terminal's last time left (every job still to run: :mod:`softmax_bottleneck.cluster.time_left`) is shown too, and
the runs that an edit of the configuration made new models where the workflow's last start named finished or begun
ones (:mod:`.changed_runs`: its next start stops before training them).

The records and their sums are :mod:`.run_status`; one run's folder read, :mod:`.run_folder`; the texts of its files
(a log's last line and what it says), :mod:`.run_text`; the one-screen view, :mod:`.status_text`. This module reads
the whole study with them, and names what they hold for its callers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.cluster.scheduler import job_comment, queued_jobs
from softmax_bottleneck.study import changed_runs
from softmax_bottleneck.study.config_file import DEFAULT_CONFIG
from softmax_bottleneck.study.fusion import fused_groups
from softmax_bottleneck.study.plan import gpu_hours
from softmax_bottleneck.study.run_folder import (
    allowed_silence,
    learning_curve,
    pid_exists,
    process_alive,
    read_progress_file,
    read_run_status,
)
from softmax_bottleneck.study.run_status import (
    LISTED_STATES,
    STATES,
    RunStatus,
    StudyStatus,
    experiment_label,
    iso_time,
)
from softmax_bottleneck.study.run_text import NOTE_CHARS, last_line, log_event, shown, without_controls
from softmax_bottleneck.study.runs import SWEEP_PREFIX, TRAIN_LOG, Study, analysis_names, output_roots
from softmax_bottleneck.study.status_text import (
    counts_frame,
    counts_rows,
    counts_table,
    gpu_lines,
    run_line,
    status_text,
    workflow_lines,
)

#: what the modules beside this one hold, named here too: callers import them from ``status``
__all__ = [
    "LISTED_STATES", "NOTE_CHARS", "STATES", "RunStatus", "StudyStatus", "allowed_silence", "counts_frame",
    "counts_rows", "counts_table", "experiment_label", "gpu_lines", "groups", "iso_time", "last_line",
    "learning_curve", "log_event", "pid_exists", "process_alive", "read_progress_file", "read_run_status", "run_line",
    "shown", "state_digest", "status_text", "study_status", "without_controls", "workflow_lines", "workflow_time_left",
]  # fmt: skip


def groups(study: Study) -> dict[str, list[str]]:
    """Experiment (then each sweep, then the analyses' reference models) → its run folders, in the plan's order."""
    members = study.members()
    names = [*study.experiments, *(SWEEP_PREFIX + name for name in study.sweeps), "analysis"]
    out = {name: [path for path in study.jobs if name in members[path]] for name in names}
    return {name: paths for name, paths in out.items() if paths}


def study_status(study: Study, *, directory=".", config: str = DEFAULT_CONFIG, retry_options: str = "",
                 now: float | None = None, slurm: bool = True) -> StudyStatus:  # fmt: skip
    """Every training job of ``study`` read from its run folder under ``directory``; with ``slurm``, what SLURM holds
    of them too (:func:`held_by_slurm`)."""
    root, now = Path(directory), time.time() if now is None else now
    rank_name = analysis_names(study.config)[0]
    members = study.members()
    runs = []
    for path, run in study.jobs.items():
        base = RunStatus(
            run=path, dataset=run.dataset, variant=run.variant, schedule=run.schedule, seed=run.seed, tag=run.tag,
            experiments=members[path], state="not started", epochs=int(run.hyperparameters["epochs"]),
            projected_hours=gpu_hours(run),
        )  # fmt: skip
        status = read_run_status(root / path, root / TRAIN_LOG.format(**run.wildcards), rank_name, base, now)
        if status.state in ("failed", "stalled"):
            status.retry = f"snakemake {path}/model.pt {retry_options}".strip()
        runs.append(status)
    jobs = held_by_slurm(study, root) if slurm else {}
    for status in (status for status in runs if status.run in jobs and status.state != "finished"):
        held(status, *jobs[status.run])
    scaled = any(run.hyperparameters.get("train_tokens") is not None for run in study.jobs.values())
    logs = root / output_roots(study.config)[2]
    return StudyStatus(config=config, now=now, runs=runs, groups=groups(study), scaled_down=scaled,
                       workflow=workflow_time_left(study, root),
                       changed=changed_runs.waiting_note(study, root, logs))  # fmt: skip


def held_by_slurm(study: Study, root: Path) -> dict[str, tuple[str, str]]:
    """Run folder → ``(job id, state)`` of each training of ``study`` in ``root`` whose ``train`` job, or whose fused
    group's ``train_fused`` job, SLURM lists pending or running (empty where no SLURM controller answers)."""
    trains, fused = queued_jobs("train", directory=root), queued_jobs("train_fused", directory=root)
    found = {}
    for path, run in study.jobs.items() if trains else ():
        comment = job_comment("train", [run.dataset, run.variant, run.schedule, run.seed, run.runid])
        if comment in trains:
            found[path] = trains[comment]
    groups = fused_groups(study) if fused else {}
    for comment, job in fused.items():
        group = groups.get(comment.removeprefix(job_comment("train_fused", [""])))
        found.update({run.dir: job for run in group.runs} if group else {})
    return found


def held(status: RunStatus, jobid: str, state: str) -> None:
    """``status`` of a run whose SLURM job is pending or running: running where SLURM runs it (its folder shows it
    once the job has loaded), else waiting to resume (stalled) or to start; never a retry to run by hand."""
    status.retry = None
    if state in ("RUNNING", "COMPLETING") and status.state != "running":
        status.state, status.note = (
            "running",
            f"SLURM job {jobid} runs it (its folder shows it once the job has loaded)",
        )
    elif state not in ("RUNNING", "COMPLETING") and status.state != "running":  # its folder's word first
        status.state = "stalled" if status.state == "failed" else status.state
        what = "resumes" if status.epoch else "starts"
        status.note = f"SLURM job {jobid} is {state.lower()}: the run {what} when it starts, nothing to retry"


def workflow_time_left(study: Study, root: Path) -> dict | None:
    """What the terminal of the workflow running ``study`` in ``root`` last wrote of the time left (every job still
    to run: :mod:`softmax_bottleneck.cluster.time_left`), with ``ended`` where that run has ended
    (:func:`~softmax_bottleneck.cluster.workflow_run.mark_ended`); None where no workflow run of it wrote any;
    ``{"error": <one line>}`` for a file that is not one."""
    logs = root / output_roots(study.config)[2]
    try:
        written = workflow_run.read_time_left(logs / workflow_run.TIME_LEFT)
        record = workflow_run.read(logs / workflow_run.RECORD) if written else None
        ended = workflow_run.read_ended(logs / workflow_run.ENDED) if record else None
    except (OSError, readback.ReadbackError) as err:
        return {"error": str(err)}
    if not (written and record and written["written"] >= record["started"]):
        return None
    if ended and ended["written"] >= record["started"]:  # this run's end, not an earlier run's
        return {**written, "ended": ended["ended"], "ended_at": ended["written"]}
    if process_alive(record.get("pid"), record.get("host"), since=record["started"]) is False:
        # killed outright (SIGKILL, the machine's OOM killer): it marked no end; seen from its own machine only
        return {**written, "ended": GONE, "ended_at": written["written"], "pid": record["pid"]}
    return written


#: how a workflow run that marked no end but whose Snakemake is gone ended, in :func:`workflow_time_left`
GONE = "gone"


def state_digest(status: StudyStatus) -> str:
    """A short digest of every run's state and epoch: it changes when the study moves on (the workflow's progress
    page re-renders then, and only then)."""
    import hashlib

    text = "\n".join(f"{r.run} {r.state} {r.epoch}" for r in status.runs)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def add_cli(parser) -> None:
    parser.description = (
        "Where every training run of a configuration stands, read from its run folder alone (never starting, "
        "locking or changing a run): finished, running, stalled, failed, unreadable, not started; per experiment; "
        "GPU time spent against the plan's projection and the projected finish."
    )
    from softmax_bottleneck.study.config_file import add_config_option

    add_config_option(parser, "whose runs to follow", follows=True)
    parser.add_argument("--directory", default=".", metavar="DIR",
                        help="the workflow's working directory, holding results/ and logs/ (default: .)")  # fmt: skip
    parser.add_argument("--runs", action="store_true", help="list every run, not only the running, stalled and failed")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")


def run_cli(args) -> int:
    from softmax_bottleneck.study import config as study_config

    study, source = study_config.load_study(args, "status", follow=True)
    if study is None:
        return 1
    retry = study_config.snakemake_options(args)
    status = study_status(study, directory=args.directory, config=source, retry_options=retry)
    if args.json:
        print(json.dumps(status.as_dict(), indent=1))
    else:
        print(status_text(status, every_run=args.runs))
    return 0
