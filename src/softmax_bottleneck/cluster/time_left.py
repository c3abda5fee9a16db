"""The time left of a workflow run: every job still to run at the pace this run has shown so far.

A run's record (:mod:`.workflow_run`) lists every job it will run with its planned seconds ``p``
and its kind (a training, a download, any other job: analyses, summaries, tables, figures). The terminal
(:mod:`.terminal`) tells the clock when each job starts and finishes. Then

* the pace ``k`` = Σ w·wall seconds ÷ Σ w·planned seconds over the finished jobs that have a planned time
  (downloads have none: the network sets their time), each job weighing :data:`DECAY` of the one that finished after
  it (the last ten or so count most): how much slower or faster than planned this machine, its load now and the jobs
  sharing it make a job;
* a job still to finish needs ``k × p`` seconds, less what it has run already if it is running (at least nothing);
* with ``s`` jobs at once (the record's slots; a job of ``t`` threads takes ``min(t, s)`` of them) the time left is
  the larger of Σ (remaining seconds × slots taken) ÷ ``s`` and the longest remaining job.

Until a training has finished (in a run without trainings: until any job with a planned time has) there is nothing of
this run to take the pace from, and the clock says it is estimating.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from softmax_bottleneck.cluster.workflow_run import OTHER, TRAINING
from softmax_bottleneck.durations import duration_text

#: the weight of a finished job in the pace, against the job that finished after it: the pace follows the machine's
#: load as it changes (measured on a small-scale run whose load average rose from 2 to 19: with 0.9 the time left
#: said after half the trainings was 0.63 of the time it took, with every job weighing the same 0.35)
DECAY = 0.9
#: seconds the wall clock may move against the monotonic clock before it counts as a jump (an NTP step, a suspended
#: machine, a hand-set clock): the times taken before it cannot be compared with those after
JUMP_SECONDS = 120.0


@dataclass
class Job:
    """One job of the record, and when it started and finished in this run (Unix seconds)."""

    jobid: int
    rule: str
    what: str
    kind: str
    planned_s: float
    threads: int = 1
    started: float | None = None
    finished: float | None = None
    #: whether started and finished were read on one clock (False: the clock jumped in between)
    timed: bool = True

    @property
    def label(self) -> str:
        return f"{self.rule} {self.what}".strip()


class Clock:
    """The jobs of one workflow run and the time left (module docstring)."""

    def __init__(self, record: dict):
        self.jumped = False  # the wall clock jumped, and no job has run from start to end since
        self.slots = max(1, int(record["slots"]))
        self.jobs = {
            int(j["jobid"]): Job(int(j["jobid"]), j["rule"], str(j.get("what", "")), str(j.get("kind", OTHER)),
                                 float(j["planned_s"]), max(1, int(j.get("threads", 1))))
            for j in record["jobs"]
        }  # fmt: skip

    def start(self, jobid: int, when: float | None = None) -> None:
        job = self.jobs.get(jobid)
        if job is not None:
            job.started, job.finished, job.timed = time.time() if when is None else when, None, True

    def clock_jumped(self) -> None:
        """The wall clock jumped (:data:`JUMP_SECONDS`): every time taken so far is of the old clock. The time left
        is unknown until a job has run from its start to its end on the new one."""
        self.jumped = True
        for job in self.jobs.values():
            if job.started is not None:
                job.timed = False

    def finish(self, jobid: int, when: float | None = None) -> Job | None:
        """Mark ``jobid`` finished; the job, or None if the record does not list it."""
        job = self.jobs.get(jobid)
        if job is not None and job.finished is None:
            job.finished = time.time() if when is None else when
            if job.started is None:
                job.started = job.finished
            if job.finished < job.started:  # it ended before it began: the clock stepped back in between
                self.clock_jumped()
            elif job.timed and self.jumped and job.planned_s > 0:
                self.jumped = False  # measured again on the new clock
        return job

    def running(self) -> list[Job]:
        return [j for j in self.jobs.values() if j.started is not None and j.finished is None]

    def pace(self) -> float | None:
        """``k``: wall seconds per planned second over the finished jobs with a planned time; None while there is
        nothing of this run to take it from (no training finished yet, where the run trains)."""
        timed = sorted((j for j in self.jobs.values() if j.finished is not None and j.planned_s > 0
                        and j.started is not None and j.timed), key=lambda j: j.finished)  # fmt: skip
        trainings = [j for j in self.jobs.values() if j.kind == TRAINING]
        if self.jumped or not timed or (trainings and not any(j.finished is not None for j in trainings)):
            return None
        weights = [DECAY ** (len(timed) - 1 - i) for i in range(len(timed))]
        wall = sum(w * (j.finished - j.started) for w, j in zip(weights, timed, strict=True))
        return wall / sum(w * j.planned_s for w, j in zip(weights, timed, strict=True))

    def seconds_left(self, now: float | None = None) -> float | None:
        """Wall seconds until the last job has finished, at this run's pace; None while estimating."""
        k = self.pace()
        if k is None:
            return None
        now = time.time() if now is None else now
        remaining = []
        for job in self.jobs.values():
            if job.finished is not None:
                continue
            ran = max(0.0, now - job.started) if job.started is not None and job.timed else 0.0
            remaining.append((max(0.0, k * job.planned_s - ran), min(job.threads, self.slots)))
        if not remaining:
            return 0.0
        return max(sum(r * s for r, s in remaining) / self.slots, max(r for r, _ in remaining))

    def counts(self) -> str:
        """``trainings: 12 of 51 done, jobs: 40 of 186`` (the trainings where the run has any)."""
        jobs = list(self.jobs.values())
        done = sum(j.finished is not None for j in jobs)
        text = f"jobs: {done} of {len(jobs)}"
        trainings = [j for j in jobs if j.kind == TRAINING]
        if trainings:
            finished = sum(j.finished is not None for j in trainings)
            text = f"trainings: {finished} of {len(trainings)} done, {text}"
        return text

    def line(self, now: float | None = None) -> str:
        """``trainings: 12 of 51 done, jobs: 40 of 186; about 6m 10s left (...)``: the progress line."""
        if all(j.finished is not None for j in self.jobs.values()):
            return self.counts()
        left = self.seconds_left(now)
        if left is None and self.jumped:
            return f"{self.counts()}; time left unknown: the clock jumped, measured again once a job has run since"
        if left is None:
            first = "training" if any(j.kind == TRAINING for j in self.jobs.values()) else "job"
            return f"{self.counts()}; time left: estimating until the first {first} has finished"
        return f"{self.counts()}; about {duration_text(left)} left (every job still to run, at this run's pace)"
