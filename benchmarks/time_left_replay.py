"""How right the terminal's time left would have been on a workflow run that has ended: its Snakemake log replayed.

Reads Snakemake's complete log of a run (``.snakemake/log/<date>.snakemake.log``: each job's start with its rule,
jobid, wildcards and threads, each job's end, all timestamped to the second), plans its jobs as the workflow's record
does (:func:`softmax_bottleneck.study.job_seconds.planned_jobs` for the configuration given), feeds the starts and ends
to the terminal's clock (:class:`softmax_bottleneck.cluster.time_left.Clock`) in order, and prints, after each
training, the time left the terminal says then, the wall time the run actually took from then to its last job, and
their ratio. No job runs; the run's own machine, load and order of jobs are what the clock sees. Usage::

    python benchmarks/time_left_replay.py LOG --config config/small.yaml [--slots 2]
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from pathlib import Path

from softmax_bottleneck.cluster.time_left import Clock
from softmax_bottleneck.durations import duration_text
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.job_seconds import TRAINING_RULE, planned_jobs
from softmax_bottleneck.study.runs import Study

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\w+):$")
FIELD = re.compile(r"^ +(jobid|wildcards|threads): (.*)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) ")


def read_log(path: Path) -> tuple[list[tuple[int, str, dict, int]], list[tuple[float, str, int]]]:
    """``(jobs, events)`` of a Snakemake log: each job ``(jobid, rule, wildcards, threads)`` and each ``(unix time,
    "start" | "finish", jobid)`` in the log's order."""
    jobs: dict[int, tuple[int, str, dict, int]] = {}
    events: list[tuple[float, str, int]] = []
    now, rule, fields = 0.0, None, {}

    def close() -> None:
        if rule is not None and "jobid" in fields:
            jobid = int(fields["jobid"])
            wildcards = dict(item.split("=", 1) for item in fields.get("wildcards", "").split(", ") if "=" in item)
            jobs[jobid] = (jobid, rule, wildcards, int(fields.get("threads", 1)))
            events.append((start, "start", jobid))

    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if stamp := STAMP.match(line):
            close()
            now, rule, fields = datetime.strptime(stamp.group(1), "%a %b %d %H:%M:%S %Y").timestamp(), None, {}
        elif (found := RULE.match(line)) and rule is None:
            rule, start = found.group(1), now
        elif (field := FIELD.match(line)) and rule is not None:
            fields[field.group(1)] = field.group(2)
        elif finished := FINISHED.match(line):
            close()
            rule, fields = None, {}
            events.append((now, "finish", int(finished.group(1))))
    close()
    return list(jobs.values()), events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="Snakemake's complete log of the run")
    parser.add_argument("--config", required=True, help="the configuration the run ran (config/small.yaml)")
    parser.add_argument("--slots", type=int, default=2, help="--cores of the run (default 2)")
    args = parser.parse_args()
    study = Study(study_config.check(study_config.read(args.config)))
    jobs, events = read_log(args.log)
    clock = Clock({"slots": args.slots, "jobs": planned_jobs(study, jobs)})
    rules = {jobid: rule for jobid, rule, _, _ in jobs}
    end = max(t for t, _, _ in events)
    print(f"{args.log}: {len(jobs)} jobs, {duration_text(end - events[0][0])} from the first job to the last\n")
    print("| after training | at | time left said | time it took | said ÷ took |\n|---:|---|---:|---:|---:|")
    trainings = 0
    for when, what, jobid in events:
        if what == "start":
            clock.start(jobid, when)
            continue
        clock.finish(jobid, when)
        if rules.get(jobid) == TRAINING_RULE:
            trainings += 1
            said, took = clock.seconds_left(when), end - when
            if said is not None and took > 0:
                at = datetime.fromtimestamp(when).strftime("%H:%M:%S")
                print(f"| {trainings} | {at} | {duration_text(said)} | {duration_text(took)} | {said / took:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
