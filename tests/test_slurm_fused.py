"""A fused group's job on the real one-node SLURM cluster (``pytest -m slurm``): ``figure7`` of the small study with
``fusion: runs_per_job: 2``, whose two PTB runs form one group. Its controller is killed (SIGKILL) as soon as it has
submitted the group's job, then started again: the group is trained by that one job (one GPU job for two runs, its
comment naming the group), the new controller waits for it instead of submitting it or either run again, each run's
training log holds its one training, and a third controller finds nothing to do. Another job holds the node's GPUs
until the new controller waits, so the group's job (a smoke training of seconds) cannot finish before, however slow
the machine. Uses the cluster and helpers of ``tests/test_slurm.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import has_data, no_data_reason
from test_slurm import (
    REPO,
    SUBMITTED,
    TEST_CONFIG,
    _cancel_leftovers,
    _controller,
    _data_mirror,
    _env_field,
    _job,
    _jobs_in,
    _snakemake_cmd,
    _wait_for,
    cluster,  # noqa: F401  (a fixture: the cluster of test_slurm.py)
    cluster_lock,  # noqa: F401  (the fixture cluster needs)
)
from test_slurm_controller import _blocker, _jobs_with_comment, _kill, _unlock

from softmax_bottleneck.cluster.scheduler import job_comment
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.fusion import fused_groups
from softmax_bottleneck.study.runs import TRAIN_LOG, Study

pytestmark = pytest.mark.xdist_group("slurm")


def _group_jobs(log: str) -> list[str]:
    return [jobid for jobid, path in SUBMITTED.findall(log) if "/rule_train_fused/" in path]


@pytest.mark.long
@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_a_fused_groups_job_trains_its_runs_once_across_a_killed_controller(tmp_path_factory):
    if not has_data(_data_mirror()):
        pytest.skip(no_data_reason(_data_mirror()))
    workdir = tmp_path_factory.mktemp("fused-group")
    config = {"data_mirror": str(_data_mirror()), **TEST_CONFIG, "fusion": {"runs_per_job": 2}}
    (workdir / "test_config.yaml").write_text(yaml.safe_dump(config))
    cmd = [*_snakemake_cmd(workdir), "figure7"]
    study = Study(study_config.check(study_config.load([str(REPO / "config" / "small.yaml"),
                                                        str(workdir / "test_config.yaml")])))  # fmt: skip
    spectra = {run.dir for run in study.model_set("spectra")}
    group = next(g for g in fused_groups(study).values() if {run.dir for run in g.runs} == spectra)
    comment = job_comment("train_fused", [group.name])
    before = _jobs_with_comment(comment)
    logs = [workdir / f"controller{i}.log" for i in (1, 2)]
    procs, submitted = [], []
    t0 = time.monotonic()
    # every GPU of the node taken until controller 2 waits: the group's job pends until then
    gpus = re.search(r"\bgpu:(\d+)", subprocess.run(["sinfo", "--noheader", "--Format=Gres:64"], capture_output=True,
                                                    text=True, check=True).stdout)  # fmt: skip
    assert gpus, "the node declares no GPU"
    submitted.append(_blocker(f"--gres=gpu:{gpus[1]}"))
    try:
        # 1. killed as soon as the group's job is submitted (pending: the GPUs are taken)
        procs.append(_controller(cmd, logs[0]))
        jobs = _wait_for("the group's job submitted", lambda: _group_jobs(logs[0].read_text()),
                         time.monotonic() + 600, procs[0], logs[0])  # fmt: skip
        _kill(procs[0])
        submitted += _jobs_in(logs[0].read_text())
        info = _job(jobs[0])
        assert info.get("JobState") == "PENDING" and info.get("Comment") == comment, info
        assert "gpu" in info.get("TresPerJob", "") + info.get("TresPerNode", ""), info
        # 2. started again: it waits for the group's job (for a run of it), then the GPUs are freed and it finishes
        _unlock(cmd)
        procs.append(_controller(cmd, logs[1]))
        awaited = [workdir / "logs" / "await_training" / f"{Path(run.dir).relative_to('results/runs')}.log"
                   for run in group.runs]  # fmt: skip
        _wait_for("controller 2 waiting for the group's job", lambda: any(log.is_file() and "waiting" in
                  log.read_text() for log in awaited), time.monotonic() + 600, procs[1], logs[1])  # fmt: skip
        subprocess.run(["scancel", submitted[0]], check=True)
        procs[1].wait(960)
        submitted += _jobs_in(logs[1].read_text())
        dry = _controller([*cmd, "--dry-run"], workdir / "dry.log")
        dry.wait(300)
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)
        _cancel_leftovers(submitted)
    texts = [log.read_text() for log in logs]
    print(f"fused group: controller 1 killed, controller 2 done after {time.monotonic() - t0:.0f} s")
    assert procs[1].returncode == 0, texts[1][-5000:]
    assert (workdir / "reports" / "small" / "figures" / "figure7.png").stat().st_size > 0
    # one job for the group, in Snakemake's logs and in SLURM's list; no train job for either run
    assert [_group_jobs(text) for text in texts] == [jobs, []], texts[1][-3000:]
    assert _jobs_with_comment(comment) - before == set(jobs)
    assert not [path for text in texts for _, path in SUBMITTED.findall(text) if "/rule_train/" in path]
    complete = "".join(p.read_text() for p in (workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    assert re.search(r"localrule await_(scheduled_)?training:", complete), complete[-3000:]
    for run in group.runs:
        metrics = json.loads((workdir / run.dir / "metrics.json").read_text())
        assert str(_env_field(metrics, "slurm_job_id")) == jobs[0], run.dir
        text = (workdir / TRAIN_LOG.format(**run.wildcards)).read_text()
        assert text.count(f"training ptb/{run.variant} ") == 1 and "resumed from" not in text, text[-3000:]
    record = json.loads((workdir / "results" / "fused" / f"{group.name}.json").read_text())
    assert sorted(r["run"] for r in record["runs"]) == sorted(run.dir for run in group.runs)
    dry_text = (workdir / "dry.log").read_text()
    assert dry.returncode == 0 and not re.search(r"rule train(_fused)?:", dry_text), dry_text[-3000:]
