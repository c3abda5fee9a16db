"""A controller started again does not submit an `analyze` job a second time while SLURM still lists the first (its
comment names the rule and the wildcards): the analysis is waited for on the controller's machine
(`await_scheduled_analysis`), as a queued training is. Planned by a dry run against a stand-in squeue."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from conftest import data_dir

from softmax_bottleneck.cluster.scheduler import job_comment
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "config" / "small.yaml"


def _stand_in_slurm(folder: Path, jobs: list[tuple[str, str, str]]) -> None:
    """An scontrol whose controller is up and an squeue that lists ``jobs`` (id, state, comment)."""
    folder.mkdir()
    (folder / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at head is UP'\n")
    listed = "".join(f"echo '{jobid}|{state}|{comment}'\n" for jobid, state, comment in jobs)
    (folder / "squeue").write_text(f"#!/bin/sh\n{listed}")
    for tool in ("scontrol", "squeue"):
        (folder / tool).chmod(0o755)


def _planned(dry_run: str, rule: str) -> list[str]:
    """The first output of each job of ``rule`` in a dry run's listing."""
    blocks = re.findall(rf"^(?:local)?rule {rule}:\n((?:    .*\n)+)", dry_run, flags=re.M)
    return [re.search(r"^    output: ([^ ,]+)", block, flags=re.M).group(1) for block in blocks]


def test_an_analysis_slurm_still_lists_is_waited_for_not_submitted_again(tmp_path):
    study = Study(study_config.check(study_config.read(SMALL)))
    x, y = list(study.jobs.values())[:2]

    def comment(run, rows):
        return job_comment("analyze", [run.dataset, run.variant, run.schedule, run.seed, run.runid, rows])

    _stand_in_slurm(tmp_path / "bin", [("71", "PENDING", comment(x, "300")), ("72", "RUNNING", comment(y, "full"))])
    # x's analysis on 300 rows and y's on all rows are queued; y's on 300 rows is not, although each of its wildcards
    # alone is one of a queued analysis
    queued = [f"{x.dir}/rank-300.json", f"{y.dir}/rank-full.json"]
    fresh = f"{y.dir}/rank-300.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(SMALL), "--cores", "1", "--dry-run", *queued, fresh,
           "--config", f"data_mirror={data_dir()}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    waited, submitted = _planned(proc.stdout, "await_scheduled_analysis"), _planned(proc.stdout, "analyze")
    assert sorted(waited) == sorted(queued) and submitted == [fresh], proc.stdout[-4000:]


def test_the_wait_keeps_what_the_queued_job_wrote_and_fails_in_one_line_without_it(tmp_path):
    """Run for real: a finished run (its outputs in place), its analysis queued. Once the wait has started, the job
    writes its outputs and leaves the queue: the wait succeeds and the files are the job's. Gone without outputs: the
    wait fails, its log's last line saying to run snakemake again."""
    study = Study(study_config.check(study_config.read(SMALL)))
    run = next(iter(study.jobs.values()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SOFTMAX_BOTTLENECK_SCHEDULER_POLL"] = "0.2"
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            "--configfile", str(SMALL), "--cores", "1", "--config", f"data_mirror={data_dir()}"]  # fmt: skip
    _stand_in_slurm(tmp_path / "bin", [])
    cache = subprocess.run([*base, "--", f"resources/corpus/{run.dataset}.pt"], capture_output=True, text=True,
                           timeout=600, cwd=tmp_path, env=env)  # fmt: skip
    assert cache.returncode == 0, cache.stdout[-3000:] + cache.stderr[-3000:]
    folder = tmp_path / run.dir  # a finished training after its corpus: nothing upstream of the analysis runs
    folder.mkdir(parents=True)
    for name in ("model.pt", "metrics.json", "curve.csv"):
        (folder / name).write_text("a finished run's file\n")
    rank, spectrum = folder / "rank-300.json", folder / "spectrum-300.csv"
    comment = job_comment("analyze", [run.dataset, run.variant, run.schedule, run.seed, run.runid, "300"])
    gone = tmp_path / "gone"  # the job has left the queue
    (tmp_path / "bin" / "squeue").write_text(f'#!/bin/sh\n[ -e {gone} ] || echo "71|RUNNING|{comment}"\n')
    cmd = [*base, "--", str(rank.relative_to(tmp_path))]
    log = tmp_path / "logs" / "await_analysis" / f"{Path(run.dir).relative_to('results/runs')}-300.log"

    def run_until_waiting(job_writes: bool) -> subprocess.CompletedProcess:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                              env=env) as proc:  # fmt: skip
            deadline = time.monotonic() + 300
            while not (log.is_file() and "waiting" in log.read_text()):
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:]
                time.sleep(0.2)
            if job_writes:
                rank.write_text('{"press_rank": 3}\n')
                spectrum.write_text("s\n")
            gone.touch()
            out = proc.communicate(timeout=300)[0]
        return subprocess.CompletedProcess(cmd, proc.returncode, out)

    done = run_until_waiting(job_writes=True)
    assert done.returncode == 0, done.stdout[-3000:]
    complete = "".join(p.read_text() for p in (tmp_path / ".snakemake" / "log").glob("*.snakemake.log"))
    assert "localrule await_scheduled_analysis:" in complete and "rule analyze:" not in complete, complete[-3000:]
    assert rank.read_text() == '{"press_rank": 3}\n' and spectrum.read_text() == "s\n"

    for done_file in (rank, spectrum, gone, log):
        done_file.unlink()
    failed = run_until_waiting(job_writes=False)
    assert failed.returncode != 0 and not rank.exists(), failed.stdout[-3000:]
    said = "SLURM job 71 ended without this analysis: run snakemake again to submit it"
    assert log.read_text().splitlines()[-1] == said
