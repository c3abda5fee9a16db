"""A controller killed in the first seconds of its trainings, on the real one-node SLURM cluster (``pytest -m slurm``).

The window the run folder cannot show: a ``train`` job that is pending, or in its first seconds (Snakemake's job step,
``import torch``, the corpus), writes nothing to its run folder yet. The pilot's controller is killed (SIGKILL) as
soon as it has submitted its two trainings (one of them pending: another job holds one of the node's two CPUs),
started again, killed again while it waits, and started a third time: every training is submitted once (Snakemake's
logs and SLURM's own list of jobs by their comment agree), its log is whole, and a fourth controller finds nothing to
do. Uses the cluster and helpers of ``tests/test_slurm.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import has_data, no_data_reason
from test_slurm import (
    _cancel_leftovers,
    _controller,
    _data_mirror,
    _env,
    _env_field,
    _job,
    _jobs_in,
    _pilot,
    _train_jobs_of,
    _wait_for,
    cluster,  # noqa: F401  (a fixture: the cluster of test_slurm.py)
    cluster_lock,  # noqa: F401  (the fixture cluster needs)
)

from softmax_bottleneck.cluster.scheduler import job_comment

pytestmark = pytest.mark.xdist_group("slurm")


def _jobs_with_comment(comment: str) -> set[str]:
    """Every job SLURM still lists (any state; MinJobAge keeps finished ones) whose comment is ``comment``."""
    out = subprocess.run(["squeue", "--me", "--states=all", "--noheader", "--Format=JobID:|,Comment:256"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return {jobid.strip() for jobid, _, text in (line.partition("|") for line in out.splitlines())
            if text.strip() == comment}  # fmt: skip


def _seconds(runtime: str) -> int:
    """``scontrol``'s RunTime (``[D-]HH:MM:SS``) in seconds."""
    days, _, clock = runtime.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def _blocker(*request: str) -> str:
    """Submit a job that holds one CPU (and what ``request`` adds, e.g. ``--gres=gpu:4``) for 20 minutes, so that
    jobs needing it pend until it is cancelled; returns its job id."""
    command = ["sbatch", "--parsable", "--cpus-per-task=1", "--mem=100", "-t", "30", *request, "--output=/dev/null",
               "--wrap", "sleep 1200"]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and its local children; never the SLURM jobs
    proc.wait()


def _unlock(cmd: list[str]) -> None:
    unlock = subprocess.run([*cmd, "--unlock"], env=_env(), capture_output=True, text=True, timeout=300)
    assert unlock.returncode == 0, unlock.stdout[-2000:] + unlock.stderr[-2000:]


@pytest.mark.long
@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_a_controller_killed_in_its_trainings_first_seconds_and_started_twice_submits_nothing_twice(tmp_path_factory):
    if not has_data(_data_mirror()):
        pytest.skip(no_data_reason(_data_mirror()))
    workdir = tmp_path_factory.mktemp("first-seconds")
    cmd, runs = _pilot(workdir)
    # the wildcards of each run, from its folder (dataset/variant/schedule/seed<seed>/runid): the job's comment
    parts = {d: run.relative_to(workdir / "results" / "runs").parts for d, run in runs.items()}
    comments = {d: job_comment("train", [*p[:3], p[3].removeprefix("seed"), p[4]]) for d, p in parts.items()}
    before = {d: _jobs_with_comment(c) for d, c in comments.items()}  # an earlier session's jobs of the same runs
    logs = [workdir / f"controller{i}.log" for i in (1, 2, 3)]
    procs: list[subprocess.Popen] = []
    submitted: list[str] = []
    t0 = time.monotonic()
    # one of the node's two CPUs taken until controller 3 starts: of the two trainings one runs, the other pends
    submitted.append(_blocker())
    try:
        # 1. killed as soon as both trainings are submitted: their jobs pending, or running for seconds
        procs.append(_controller(cmd, logs[0]))

        def both_submitted() -> dict[str, list[str]] | None:
            text = logs[0].read_text()
            jobs = {d: _train_jobs_of(text, run) for d, run in runs.items()}
            return jobs if all(jobs.values()) else None

        first_jobs = _wait_for("both trainings submitted", both_submitted, time.monotonic() + 600, procs[0], logs[0])
        _kill(procs[0])
        submitted += _jobs_in(logs[0].read_text())
        at_kill = {d: _job(jobs[0]) for d, jobs in first_jobs.items()}
        for dataset, info in at_kill.items():
            assert info.get("JobState") in ("PENDING", "CONFIGURING", "RUNNING"), info
            assert _seconds(info.get("RunTime", "0:00:00")) < 30, info
            assert info.get("Comment") == comments[dataset], (info.get("Comment"), comments[dataset])
        assert "PENDING" in {info.get("JobState") for info in at_kill.values()}, at_kill  # one never started
        print(f"controller 1 killed after {time.monotonic() - t0:.0f} s; its train jobs then: "
              f"{ {d: (i.get('JobState'), i.get('RunTime')) for d, i in at_kill.items()} }")  # fmt: skip

        # 2. started again at once: it waits for what SLURM still lists (the pending training always; the running one
        # unless it finished meanwhile: a smoke training takes seconds); killed again while it waits
        _unlock(cmd)
        procs.append(_controller(cmd, logs[1]))
        awaited = {d: workdir / "logs" / "await_training" / f"{run.relative_to(workdir / 'results' / 'runs')}.log"
                   for d, run in runs.items()}  # fmt: skip

        def waits(dataset: str) -> bool:
            return awaited[dataset].is_file() and "waiting" in awaited[dataset].read_text()

        _wait_for("controller 2 waiting for the trainings still running", lambda: all(waits(d) or (run / "model.pt")
                  .exists() for d, run in runs.items()), time.monotonic() + 600, procs[1], logs[1])  # fmt: skip
        # the training the blocker keeps pending has no model and is waited for (both may have pended at the kill, on
        # a busy machine, and the other one trained since)
        blocked = [d for d, run in runs.items() if not (run / "model.pt").exists()]
        assert blocked and all(waits(d) for d in blocked), (blocked, logs[1].read_text()[-3000:])
        _kill(procs[1])
        submitted += _jobs_in(logs[1].read_text())
        subprocess.run(["scancel", submitted[0]], check=True)  # the pending training starts now

        # 3. a third time: it waits for what still runs and finishes the pilot
        _unlock(cmd)
        procs.append(_controller(cmd, logs[2]))
        procs[2].wait(960)
        submitted += _jobs_in(logs[2].read_text())
        # 4. a fourth controller (a dry run) finds nothing left to train
        dry = subprocess.run([*cmd, "--dry-run"], env=_env(), capture_output=True, text=True, timeout=300)
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)
        _cancel_leftovers(submitted)
    texts = [log.read_text() for log in logs]
    print(f"controllers 2 and 3: done after {time.monotonic() - t0:.0f} s")
    assert procs[2].returncode == 0, texts[2][-5000:]
    assert (workdir / "reports" / "gpu-smoke" / "tables" / "table3.md").is_file()
    for dataset, run in runs.items():
        # one train job per run: in Snakemake's logs of the three controllers, and in SLURM's own list of jobs
        per_controller = [_train_jobs_of(text, run) for text in texts]
        assert per_controller == [first_jobs[dataset], [], []], (dataset, per_controller)
        assert _jobs_with_comment(comments[dataset]) - before[dataset] == set(first_jobs[dataset]), dataset
        metrics = json.loads((run / "metrics.json").read_text())
        assert str(_env_field(metrics, "slurm_job_id")) == first_jobs[dataset][0]
        # its training log, whole: one training, never resumed, no second job that failed on the run's lock
        train_log = (workdir / "logs" / "train" / run.relative_to(workdir / "results" / "runs")).with_suffix(".log")
        text = train_log.read_text()
        assert text.count(f"training {dataset}/lms_plif_frozen") == 1 and "resumed from" not in text, text[-3000:]
        assert "another training process" not in text, text[-3000:]
    complete = "".join(p.read_text() for p in (workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    assert "localrule await_scheduled_training:" in complete  # controller 2 waited through the queue
    assert dry.returncode == 0 and not re.search(r"^rule train:", dry.stdout, flags=re.M), dry.stdout[-3000:]
