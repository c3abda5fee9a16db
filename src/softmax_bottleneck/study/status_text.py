"""The one-screen view of ``status`` (:mod:`.status`): the counts per experiment and state, the time spent against
the plan's projection, the projected finish, the workflow's own time left, and the runs that need a look (running,
stalled, failed, unreadable), each on one line."""

from __future__ import annotations

import time

from softmax_bottleneck.durations import duration_text
from softmax_bottleneck.study.run_status import (
    LISTED_STATES,
    STATES,
    RunStatus,
    StudyStatus,
    experiment_label,
    iso_time,
)
from softmax_bottleneck.study.run_text import shown

#: runs listed per state on the default one-screen view
LISTED = 8


def _ago(now: float, t: float | None) -> str:
    return "never" if t is None else f"{duration_text(now - t)} ago"


def _ppl(value) -> str:
    return "—" if value is None else f"{value:,.2f}"


def counts_rows(status: StudyStatus) -> list[dict]:
    """Per experiment its jobs and how many are in each state (``unreadable`` only where a run is); then the distinct
    jobs."""
    rows = [
        {"experiment": experiment_label(name), "jobs": len(paths), **status.counts(status.runs_of(paths))}
        for name, paths in status.groups.items()
    ]
    rows.append({"experiment": "total (distinct jobs)", "jobs": len(status.runs), **status.counts()})
    if not rows[-1]["unreadable"]:
        for row in rows:
            del row["unreadable"]
    return rows


def counts_frame(status: StudyStatus):
    """:func:`counts_rows` as a ``pandas.DataFrame``."""
    import pandas as pd

    return pd.DataFrame(counts_rows(status))


def counts_table(status: StudyStatus) -> str:
    """:func:`counts_rows` as Markdown (tabulate, as ``DataFrame.to_markdown`` writes it, without importing pandas)."""
    from tabulate import tabulate

    rows = counts_rows(status)
    colalign = ("left", *["right"] * (len(rows[0]) - 1))
    return tabulate(rows, headers="keys", tablefmt="pipe", colalign=colalign)


def run_line(r: RunStatus, now: float) -> str:
    """One run on one line: its folder, then what its state says."""
    if r.state == "finished":
        rank = "" if r.press_rank is None else f", Press' rank {r.press_rank:.0f}"
        detail = f"test ppl {_ppl(r.test_ppl)}{rank}" + (f" ({r.note})" if r.note else "")
    elif r.state == "running":
        left = "" if r.seconds_left is None else f", about {duration_text(r.seconds_left)} left"
        detail = (f"epoch {r.epoch or 0}/{r.epochs}, best valid ppl {_ppl(r.best_valid_ppl)}{left}, "
                  f"last write {_ago(now, r.last_write)}" + (f" ({r.note})" if r.note else ""))  # fmt: skip
    elif r.state == "not started":
        detail = f"{r.epochs} epochs, {r.projected_hours:,.1f} V100 GPU-hours projected"
    elif r.state == "unreadable":
        detail = r.note
    else:
        epoch = f"epoch {r.epoch}/{r.epochs}, " if r.epoch is not None else ""
        retry = f"; retry: {r.retry}" if r.retry else ""
        detail = f"{epoch}{r.note}; last write {_ago(now, r.last_write)}{retry}"
    return f"  {r.run}  {detail}"


def gpu_lines(status: StudyStatus) -> list[str]:
    """The time spent (on CPU or GPU, as the finished runs say), the plan's V100 GPU-hours (not for scaled-down runs,
    whose cost the paper's times do not tell), the projected finish of the trainings, the workflow's own time left of
    every job still to run where its terminal wrote one, and the runs its next start stops for (:mod:`.changed_runs`).
    """
    label = status.device_label
    hours = f"{status.device_hours:,.2f} {label}-hours"
    spent = f"{label[0].upper()}{label[1:]} time spent: {hours} (the runs' own epoch times)."
    if status.scaled_down:
        scaled = ("These runs read the first tokens of their data only (train_tokens, as the small scale): the plan's "
                  "V100 GPU-hours do not apply to them.")  # fmt: skip
        return [f"{spent} {scaled}", *workflow_lines(status), *changed_lines(status)]
    finish = status.seconds_to_finish
    lines = [
        f"{spent} The plan projects {status.projected_hours:,.0f} V100 GPU-hours: {status.done_hours:,.1f} done "
        f"(finished runs, and e/E of the others), {status.projected_hours - status.done_hours:,.1f} left."
    ]
    if finish is not None:
        lines.append(
            f"Projected finish at the current rate ({status.rate:,.2f} projected V100 GPU-hours per hour since the "
            f"first run started): in about {duration_text(finish)}, {iso_time(status.now + finish)}."
        )
    elif any(r.state == "running" for r in status.runs):
        lines.append("Projected finish: known once a running run has finished an epoch.")
    else:
        lines.append("Projected finish: none while no run is running.")
    return [*lines, *workflow_lines(status), *changed_lines(status)]


def changed_lines(status: StudyStatus) -> list[str]:
    """The runs that an edit made new models where the workflow's last start named finished or begun ones, which its
    next start stops for (:func:`~.changed_runs.waiting_note`: its one line, without control characters)."""
    return [shown(status.changed, 1200)] if status.changed else []


def workflow_lines(status: StudyStatus) -> list[str]:
    """The workflow's time left of every job still to run (analyses, tables and figures too), as its terminal last
    wrote it; nothing where no workflow run of this study wrote one. Its line is a file's text: shown without control
    characters (:func:`~.run_text.shown`)."""
    if not status.workflow:
        return []
    if "error" in status.workflow:
        return [f"Time left of the workflow: {shown(status.workflow['error'])}"]
    line = shown(status.workflow["line"])
    ended = status.workflow.get("ended")
    when = status.workflow["ended_at"] if ended else status.workflow["written"]
    at = f"at {time.strftime('%H:%M', time.localtime(when))} ({_ago(status.now, when)})"
    if ended == "gone":  # killed outright: no end marked, and its process is gone from this machine
        pid = status.workflow["pid"]
        return [
            f"The workflow's last run of this study stopped without an end: its Snakemake (process {pid} on this "
            f"machine) is gone; its last line, {at}: {line}."
        ]
    if ended:
        how = "finished" if ended == "finished" else "stopped on an error or an interruption"
        return [f"The workflow's last run of this study {how} {at}; its last line: {line}."]
    return [f"The workflow running this study, {at}: {line}."]


def status_text(status: StudyStatus, *, every_run: bool = False) -> str:
    """The one-screen view (``every_run``: every run of the plan, grouped by state)."""
    counts = status.counts()
    summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [f"Status of {status.config} at {iso_time(status.now)}: {len(status.runs)} training jobs: {summary}.", ""]
    lines += [counts_table(status), "", *gpu_lines(status)]
    for state in STATES if every_run else LISTED_STATES:
        runs = [r for r in status.runs if r.state == state]
        if not runs:
            continue
        lines += ["", f"{state} ({len(runs)}):"]
        limit = len(runs) if every_run else LISTED
        lines += [run_line(r, status.now) for r in runs[:limit]]
        if len(runs) > limit:
            lines.append(f"  … and {len(runs) - limit} more (--runs lists every run)")
    if any(r.retry for r in status.runs):
        lines += ["", RETRY_NOTE]
    if not every_run:
        lines += ["", "Every run, finished and not started too: --runs; for scripts: --json."]
    return "\n".join(lines)


#: said under a list with retry commands: what they cannot know
RETRY_NOTE = (
    "A retry command names the run, the configuration and the study's folder; add the options you run the study with "
    "(--profile on a cluster, --cores, --resources): without --profile it runs on this machine."
)
