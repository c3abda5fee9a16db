"""What a workflow run prints in the terminal: one line per job as it starts, with how many steps were done by then,
errors in full.

Snakemake's own ``--quiet`` choices cannot give that (checked with Snakemake 9.27): ``rules`` also hides the error
blocks and the failed job's log (its filter drops job errors with job starts), ``progress`` hides "N of M steps
done" and the job statistics, ``reason`` drops only the reason line (the jobs' input files stay), and the scheduler
prints "Select jobs to execute..." and "Execute N jobs..." every round whatever the choice: about 16 lines a job.

Protected outputs add a "Write-protecting output file" line per file (three per training).

:func:`install` changes only Snakemake's terminal handler (not its log file in ``.snakemake/log/``, which keeps
every line): a job's start becomes one line ``[15:23:04] job 12: train dataset=ptb, variant=mos (37 of 186 steps
done)``, the count being Snakemake's "N of M steps done" when the job started; its "Finished jobid" line, the
scheduler's two lines, the output bookkeeping (:data:`LEFT_OUT_MESSAGES`) and the step counts but the last go;
everything else (warnings, errors with the failed job's log, the final summary) is printed as Snakemake prints it.
The workflow installs it for local runs; ``--verbose`` and cluster executors keep Snakemake's output.
"""

from __future__ import annotations

import logging
import sys
import time

#: the beginnings of plain INFO messages (no event) the compact terminal leaves out: the scheduler's of every round
#: and the bookkeeping of each job's outputs (write-protected, touched, temporary removed)
LEFT_OUT_MESSAGES = (
    "Select jobs to execute...",
    "Write-protecting output file ",
    "Touching output file ",
    "Removing temporary output ",
)
#: Snakemake's events (``snakemake.logging.LogEvent`` names) that the compact terminal leaves out; a job's start
#: (JOB_INFO) is printed by :class:`JobLine` instead, with the last step count (PROGRESS; the final one is printed)
LEFT_OUT = {"JOB_INFO", "JOB_FINISHED", "JOB_STARTED"}


def _event(record: logging.LogRecord) -> str | None:
    event = getattr(record, "event", None)
    return getattr(event, "name", None)


def job_line(record: logging.LogRecord, steps: tuple[int, int] | None = None) -> str:
    """``[15:23:04] job 12: train dataset=ptb, variant=mos (37 of 186 steps done)`` from a Snakemake JOB_INFO record
    and the last step count (done, total) before it."""
    stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
    wildcards = getattr(record, "wildcards", None) or {}
    what = ", ".join(f"{key}={value}" for key, value in wildcards.items())
    rule = getattr(record, "rule_name", "?")
    count = f" ({steps[0]} of {steps[1]} steps done)" if steps else ""
    return f"[{stamp}] job {getattr(record, 'jobid', '?')}: {rule}" + (f" {what}" if what else "") + count


def _last_step(record: logging.LogRecord) -> bool:
    done, total = getattr(record, "done", None), getattr(record, "total", None)
    return done is not None and done == total


class LeaveOut(logging.Filter):
    """Drops the records the compact terminal leaves out (on Snakemake's terminal handler only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _event(record) in LEFT_OUT or (_event(record) == "PROGRESS" and not _last_step(record)):
            return False
        return not (_event(record) is None and record.getMessage().startswith(LEFT_OUT_MESSAGES))


class JobLine(logging.Handler):
    """Writes one line per job start to ``stream`` (the stream of Snakemake's terminal handler), with the step count
    Snakemake reported last (0 of the DAG's jobs before the first has finished)."""

    def __init__(self, stream):
        super().__init__(level=logging.INFO)
        self.stream = stream
        self.steps: tuple[int, int] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if _event(record) == "PROGRESS":
            self.steps = (getattr(record, "done", 0), getattr(record, "total", 0))
            return
        if _event(record) != "JOB_INFO":
            return
        try:
            self.stream.write(job_line(record, self.steps) + "\n")
            self.stream.flush()
        except Exception:  # a broken terminal must not stop the workflow
            self.handleError(record)


def install(logger: logging.Logger, verbose: bool = False) -> bool:
    """Make ``logger``'s terminal handler (Snakemake's ``DefaultStreamHandler``) compact; False where there is none
    (a logger plug-in writes the terminal) or ``verbose``. Installing twice changes nothing more."""
    if verbose:
        return False
    terminal = next((h for h in logger.handlers if h.name == "DefaultStreamHandler"), None)
    if terminal is None:
        return False
    if not any(isinstance(f, LeaveOut) for f in terminal.filters):
        terminal.addFilter(LeaveOut())
    if not any(isinstance(h, JobLine) for h in logger.handlers):
        logger.addHandler(JobLine(getattr(terminal, "stream", sys.stderr)))
    return True
