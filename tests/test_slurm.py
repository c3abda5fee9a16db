"""The study on a real SLURM cluster, through ``--profile profiles/slurm`` (``pytest -m slurm``).

A one-node cluster (munged + slurmctld + slurmd, 4 fake GPUs as GRES) is started with
``.ci/slurm/start_cluster.sh`` unless one is already running, and every daemon this module started
is stopped by PID at the end (``.ci/slurm/stop_cluster.sh``). Needs ``slurm-wlm`` and ``munge``
(``apt-get install -y --no-install-recommends slurm-wlm munge``) and root to start the daemons.

1. ``train → analyze (log-P, rank) → figure7`` of the small-scale workflow (2 models) runs through
   ``sbatch``; the GPU jobs ask SLURM for one GPU, the CPU jobs for none, and the two training jobs
   that ran at the same time held different GPUs (``CUDA_VISIBLE_DEVICES`` set by SLURM).
2. Pre-emption: a training job ``scancel``-ed mid-run is resumed from its checkpoint when the
   workflow is rerun, and its final metrics equal those of the uninterrupted run of step 1.

The cluster tests are opt-in (they start root daemons): ``pytest -m slurm`` or
``SOFTMAX_BOTTLENECK_SLURM_TESTS=1``; a plain ``pytest`` skips them. A lock file serialises test
sessions on one machine. The profile tests at the top need no cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[1]
START = REPO / ".ci" / "slurm" / "start_cluster.sh"
STOP = REPO / ".ci" / "slurm" / "stop_cluster.sh"
PROFILE = REPO / "profiles" / "slurm"
CI_PROFILE = REPO / "profiles" / "slurm-ci"
SLURM_CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
DAEMONS = ("munged", "slurmctld", "slurmd")
GPU_RULES = {"train", "analyze", "qualitative", "robustness_logp"}

#: on top of config/small.yaml: two PTB models feed figure7; short but cancellable training
TEST_CONFIG = {
    "model_overrides": {
        "all": {"epochs": 6, "switch_epoch": 4, "train_tokens": 6000, "valid_tokens": 2000, "test_tokens": 2000}
    },
    "analysis": {
        "rank_rows": 100,
        "spectra": {"datasets": ["ptb"], "variants": ["softmax", "ss"], "schedule": "et"},
    },
}
RUN = "results/runs/ptb/{variant}/et/seed141/default"
TRAIN_LOG = "logs/train/ptb/{variant}/et/seed141/default.log"
SUBMITTED = re.compile(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
OPT_IN = "SOFTMAX_BOTTLENECK_SLURM_TESTS"
LOCK = Path("/tmp/softmax-bottleneck-slurm-tests.lock")
COMPARED_METRICS = ("train_ppl", "valid_ppl", "test_ppl", "test_loss", "best_epoch", "epochs_run", "switch_epoch")


def _data_mirror() -> Path:
    return Path(os.environ.get("SOFTMAX_BOTTLENECK_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()


# ------------------------------------------------------------------------------------ profile (no cluster)


def _profile(path: Path) -> dict:
    return yaml.safe_load((path / "config.yaml").read_text())


def _workflow_rules() -> set[str]:
    text = "\n".join(p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))])
    return set(re.findall(r"^rule (\w+):", text, flags=re.M))


def test_slurm_profile_settings():
    profile = _profile(PROFILE)
    assert profile["executor"] == "slurm"
    # works without accounting; the plugin upgrades to sacct itself when MinJobAge is too short
    assert profile["slurm-status-command"] == "squeue"
    assert profile["rerun-incomplete"] is True and profile["keep-going"] is True
    assert profile["latency-wait"] >= 30 and profile["retries"] >= 1
    # never a global GPU cap on a cluster (see the README, "Submitting the study to SLURM")
    assert "resources" not in profile
    text = (PROFILE / "config.yaml").read_text()
    assert "slurm_partition" in text and "slurm_account" in text  # documented site settings
    rules = _workflow_rules()
    if rules:
        assert set(profile["set-resources"]) <= rules, "set-resources names a rule the workflow does not have"
        ci = _profile(CI_PROFILE)
        assert set(ci["set-resources"]) | set(ci["set-threads"]) <= rules
    # the workflow profile is applied to cluster runs too: it must not cap GPUs or pick an executor
    default = REPO / "profiles" / "default" / "config.yaml"
    if default.exists():
        auto = yaml.safe_load(default.read_text()) or {}
        assert "executor" not in auto and "gpu" not in str(auto.get("resources", ""))


def test_slurm_profile_dry_run(tmp_path):
    """The profile parses and every GPU job of the small study asks for exactly one GPU."""
    if not (REPO / "Snakefile").exists():
        pytest.skip("no Snakefile yet")
    proc = subprocess.run(
        [*_snakemake_cmd(tmp_path, ci=False), "--dry-run", "figure7"], env=_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?:\n\n|\Z)", proc.stdout, flags=re.M | re.S)
    assert jobs, proc.stdout[-2000:]
    for rule, body in jobs:
        gpus = re.search(r"\bgpu=(\d+)", body)
        if rule in GPU_RULES:
            assert gpus and gpus.group(1) == "1", f"{rule}: {body}"
        else:
            assert not gpus or gpus.group(1) == "0", f"{rule} asks for a GPU: {body}"


# ------------------------------------------------------------------------------------------------ cluster


def _env() -> dict[str, str]:
    """The test's environment without an enclosing SLURM job or GPU choice; the venv's python first."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_")) and k != "CUDA_VISIBLE_DEVICES"
    }
    # the jobs run `python -m softmax_bottleneck ...` with the submitting environment (--export=ALL)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _cluster_up() -> bool:
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "is UP" in out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="module")
def cluster_lock(request):
    """Opt-in, and one SLURM test session per machine at a time (another one would stop our cluster)."""
    if "slurm" not in (request.config.getoption("markexpr") or "") and os.environ.get(OPT_IN) != "1":
        pytest.skip(f"SLURM tests start root daemons: run them with `pytest -m slurm` (or {OPT_IN}=1)")
    if not sys.platform.startswith("linux"):
        pytest.skip("SLURM tests need Linux")
    import fcntl

    with open(LOCK, "a") as fh:
        deadline = time.monotonic() + 900
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another SLURM test session has held {LOCK} for 15 minutes")
                time.sleep(2)
        yield


@pytest.fixture(scope="module")
def cluster(cluster_lock, tmp_path_factory):
    """A running SLURM cluster with GPU GRES: the one already running, or one started (and stopped) here."""
    missing = [exe for exe in SLURM_CLIENTS if not shutil.which(exe)]
    if missing:
        pytest.skip(
            f"slurm-wlm is not installed (no {', '.join(missing)}): "
            "apt-get install -y --no-install-recommends slurm-wlm munge"
        )
    if _cluster_up():
        gres = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True).stdout
        if "gpu" not in gres:
            pytest.skip(f"the running SLURM cluster has no GPU GRES (sinfo %G: {gres.strip()!r})")
        yield {"started": False}
        return
    if os.geteuid() != 0:
        pytest.skip("no SLURM cluster is running, and starting one (.ci/slurm/start_cluster.sh) needs root")
    absent = [d for d in DAEMONS if not (shutil.which(d) or Path(f"/usr/sbin/{d}").exists())]
    if absent:
        pytest.skip(f"cannot start a cluster: {', '.join(absent)} not installed (slurm-wlm, munge)")
    state = tmp_path_factory.mktemp("slurm-state")
    env = {**_env(), "STATE": str(state)}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(START)], env=env, capture_output=True, text=True, timeout=180)
    started = {p.stem: int(p.read_text()) for p in state.glob("*.pid")}
    try:
        assert proc.returncode == 0, f"start_cluster.sh failed:\n{proc.stdout}\n{proc.stderr}"
        print(f"SLURM cluster {proc.stdout.strip().splitlines()[-1]} in {time.monotonic() - t0:.1f} s: {started}")
        yield {"started": True, "state": state, "pids": started}
    finally:
        stop = subprocess.run(["bash", str(STOP)], env=env, capture_output=True, text=True, timeout=120)
        print(stop.stdout, stop.stderr)
        left = {name: pid for name, pid in started.items() if _alive(pid)}
        assert not left, f"daemons still running after stop_cluster.sh: {left}"


@dataclass
class Run:
    """One Snakemake invocation: its command, exit status and log, and the SLURM jobs it submitted."""

    returncode: int
    log: str
    seconds: float
    jobs: dict[str, str] = field(default_factory=dict)  # SLURM job id -> rule


def _snakemake_cmd(workdir: Path, *, ci: bool = True) -> list[str]:
    config = workdir / "test_config.yaml"
    if not config.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump({"data_mirror": str(_data_mirror()), **TEST_CONFIG}))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--configfile", str(REPO / "config" / "small.yaml"), str(config), "--profile", str(PROFILE)]
    if ci:
        cmd += ["--profile", str(CI_PROFILE)]
    return cmd


def _jobs_in(log: str) -> dict[str, str]:
    jobs = {}
    for jobid, path in SUBMITTED.findall(log):
        match = re.search(r"/rule_([^/]+)/", path)
        jobs[jobid] = match.group(1) if match else "?"
    return jobs


def _start(workdir: Path, targets: list[str], extra: list[str], log_path: Path, timeout: int) -> subprocess.Popen:
    cmd = ["timeout", "-k", "30", str(timeout), *_snakemake_cmd(workdir), *extra, *targets]
    with open(log_path, "w") as fh:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, env=_env(), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _finish(proc: subprocess.Popen, log_path: Path, t0: float, timeout: float) -> Run:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log = log_path.read_text()
    return Run(proc.returncode, log, time.monotonic() - t0, _jobs_in(log))


def _snakemake(workdir: Path, targets: list[str], name: str, extra: list[str] = (), timeout: int = 420) -> Run:
    log_path = workdir / f"{name}.log"
    t0 = time.monotonic()
    proc = _start(workdir, targets, list(extra), log_path, timeout)
    run = _finish(proc, log_path, t0, timeout + 60)
    print(f"snakemake {name}: exit {run.returncode} after {run.seconds:.0f} s, SLURM jobs {run.jobs}")
    return run


def _job(jobid: str) -> dict[str, str]:
    """``scontrol show job`` as a dict (finished jobs stay visible for MinJobAge)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", jobid], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def _epoch(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def _cancel_leftovers(jobs) -> None:
    for jobid in jobs:
        state = _job(jobid).get("JobState", "")
        if state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"):
            subprocess.run(["scancel", jobid], check=False)


def _env_field(metrics: dict, key: str):
    return metrics.get(key, (metrics.get("environment") or {}).get(key))


def _tail(run: Run, n: int = 6000) -> str:
    return run.log[-n:]


@pytest.fixture(scope="module")
def small_study(cluster, tmp_path_factory):
    """``figure7`` of the small study (2 PTB models: train → analyze → summary → figure) under SLURM."""
    if not (REPO / "Snakefile").exists():
        pytest.skip("no Snakefile yet")
    if not (_data_mirror() / "ptb" / "train.txt").is_file():
        pytest.skip(f"real datasets not found at {_data_mirror()}")
    workdir = tmp_path_factory.mktemp("slurm-study")
    submitted: list[str] = []
    try:
        run = _snakemake(workdir, ["figure7"], "study", timeout=600)
        submitted += run.jobs
        yield workdir, run, submitted
    finally:
        _cancel_leftovers(submitted)


@pytest.mark.slurm
def test_train_analyze_figure_through_sbatch(small_study):
    workdir, run, _ = small_study
    assert run.returncode == 0, _tail(run)
    assert (workdir / "reports/figures/figure7.png").stat().st_size > 0
    for variant in ("softmax", "ss"):
        rank = json.loads((workdir / RUN.format(variant=variant) / "rank.json").read_text())
        assert rank["press_rank"] > 0

    # every non-local job went through sbatch; the local ones (downloads, summaries, plots) did not
    rules = sorted(run.jobs.values())
    assert rules.count("train") == 2 and rules.count("analyze") == 2, run.jobs
    assert "corpus_cache" in rules
    assert not {"fetch_corpus", "summarize_spectra", "figure7"} & set(rules)
    jobs = {jobid: _job(jobid) for jobid in run.jobs}
    for jobid, info in jobs.items():
        rule = run.jobs[jobid]
        assert info.get("JobState") == "COMPLETED", (jobid, rule, info)
        assert info.get("Comment", "").startswith(f"rule_{rule}"), info
        asks_gpu = "gpu" in info.get("TresPerJob", "") + info.get("TresPerNode", "")
        assert asks_gpu == (rule in GPU_RULES), f"{rule} (job {jobid}): TresPerJob={info.get('TresPerJob')}"

    # each training job ran in its SLURM job with one GPU; jobs that overlapped in time held different GPUs
    trains = {}
    for variant in ("softmax", "ss"):
        metrics = json.loads((workdir / RUN.format(variant=variant) / "metrics.json").read_text())
        jobid = str(_env_field(metrics, "slurm_job_id"))
        gpu = _env_field(metrics, "cuda_visible_devices")
        assert run.jobs.get(jobid) == "train", (variant, jobid, run.jobs)
        assert gpu in {"0", "1", "2", "3"}, (variant, gpu)
        trains[variant] = (gpu, _epoch(jobs[jobid]["StartTime"]), _epoch(jobs[jobid]["EndTime"]))
    (gpu_a, start_a, end_a), (gpu_b, start_b, end_b) = trains.values()
    overlap = start_a < end_b and start_b < end_a
    assert overlap, f"the two training jobs did not run at the same time: {trains}"
    assert gpu_a != gpu_b, f"concurrent training jobs shared a GPU: {trains}"
    print(f"study: {run.seconds:.0f} s, {len(run.jobs)} SLURM jobs; training GPUs {trains}")


@pytest.mark.slurm
def test_cancelled_training_resumes_with_identical_metrics(small_study):
    workdir, first, submitted = small_study
    if first.returncode != 0:
        pytest.fail("the uninterrupted run (test_train_analyze_figure_through_sbatch) failed; nothing to compare")
    run_dir = workdir / RUN.format(variant="softmax")
    reference = json.loads((run_dir / "metrics.json").read_text())
    reference_curve = (run_dir / "curve.csv").read_text()
    shutil.rmtree(run_dir)  # train the same run again, from scratch
    target = [str(run_dir.relative_to(workdir) / "metrics.json")]

    # 1. start it, wait for its resume state, scancel the SLURM job mid-run.
    # No automatic resubmission for this run (the rule may declare `retries:`): the rerun below resumes.
    log_path = workdir / "preempted.log"
    t0 = time.monotonic()
    proc = _start(workdir, target, ["--preemptible-rules", "train", "--preemptible-retries", "0"], log_path, 300)
    state = run_dir / ".resume" / "state.pt"
    jobid = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            jobs = _jobs_in(log_path.read_text())
            jobid = next((j for j, rule in jobs.items() if rule == "train"), None)
            if jobid and state.exists():
                break
            time.sleep(0.1)
        assert jobid and state.exists(), f"no resume state before the run ended:\n{log_path.read_text()[-4000:]}"
        submitted.append(jobid)
        subprocess.run(["scancel", jobid], check=True)
        cancelled = _finish(proc, log_path, t0, 240)
    finally:
        if proc.poll() is None:  # a failed assertion above: do not leave Snakemake submitting jobs
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        submitted.extend(_jobs_in(log_path.read_text()))
    print(f"cancelled SLURM job {jobid} after {cancelled.seconds:.0f} s")
    train_log = workdir / TRAIN_LOG.format(variant="softmax")

    def diagnosis() -> str:
        logs = [log_path, workdir / "resumed.log", train_log]
        return "\n".join(f"--- {p.name}:\n{p.read_text()[-3000:]}" for p in logs if p.exists())

    assert cancelled.returncode != 0, "the workflow reported success although its training job was cancelled"
    assert _job(jobid).get("JobState") == "CANCELLED", (_job(jobid), diagnosis())
    assert not (run_dir / "metrics.json").exists(), "training finished before it was cancelled; make it longer"
    assert state.exists(), f"the cancelled job left no resume state\n{diagnosis()}"

    # 2. rerun the workflow: the training job resumes from the checkpoint and finishes
    rerun = _snakemake(workdir, target, "resumed", timeout=300)
    submitted += rerun.jobs
    assert rerun.returncode == 0, diagnosis()
    assert list(rerun.jobs.values()) == ["train"], (rerun.jobs, diagnosis())
    assert "resumed from" in train_log.read_text(), diagnosis()
    assert not state.parent.exists(), "the resume state was not removed after success"

    # 3. the final metrics equal the uninterrupted run's
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert str(_env_field(metrics, "slurm_job_id")) in rerun.jobs
    for key in COMPARED_METRICS:
        assert metrics[key] == reference[key], (key, metrics[key], reference[key], diagnosis())

    def without_seconds(text: str) -> list[list[str]]:
        rows = [line.split(",") for line in text.strip().splitlines()]
        drop = rows[0].index("seconds")
        return [row[:drop] + row[drop + 1 :] for row in rows]

    assert without_seconds((run_dir / "curve.csv").read_text()) == without_seconds(reference_curve)
    print(f"resumed run: {rerun.seconds:.0f} s; metrics { ({k: metrics[k] for k in COMPARED_METRICS}) }")
