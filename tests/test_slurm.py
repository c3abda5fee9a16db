"""The study on a real SLURM cluster, through ``--profile profiles/slurm`` (``pytest -m slurm``).

A one-node cluster (munged + slurmctld + slurmd, 4 fake GPUs as GRES, 2 shards per GPU) is started
with ``.ci/slurm/start_cluster.sh`` unless one is already running, and every daemon this module
started is stopped by PID at the end (``.ci/slurm/stop_cluster.sh``). Needs ``slurm-wlm`` and
``munge`` (``apt-get install -y --no-install-recommends slurm-wlm munge``) and root to start them.

1. ``train → analyze (log-P, rank) → figure7`` of the small-scale workflow (2 models) runs through
   ``sbatch``; the GPU jobs ask SLURM for one GPU, the CPU jobs for none, and the two training jobs
   that ran at the same time held different GPUs (``CUDA_VISIBLE_DEVICES`` set by SLURM).
2. Packing, pre-emption and time limits, in one workflow run with the profile's packing option
   (each training asks for one GPU shard): two trainings run at the same time on the same GPU; one
   is ``scancel``-ed, the other is stopped by SLURM's time limit (the test shortens the running
   job's limit to "now" with ``scontrol update EndTime=now``: SLURM's smallest ``--time`` is one
   minute); Snakemake resubmits both by itself (``preemptible-retries``), both resume from their
   saved state and finish, and the cancelled one's final metrics equal those of step 1's
   uninterrupted run.

The cluster tests are opt-in (they start root daemons): ``pytest -m slurm`` or
``SOFTMAX_BOTTLENECK_SLURM_TESTS=1``; a plain ``pytest`` skips them. A lock file serialises test
sessions on one machine. The profile tests at the top need no cluster. Run folders are never
spelled out here: they are read from Snakemake's own job listing (``output:`` of each train job).
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
from conftest import data_dir, has_data, no_data_reason

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import TRAIN_LOG, Study
from softmax_bottleneck.study.status import pid_exists

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[1]
START = REPO / ".ci" / "slurm" / "start_cluster.sh"
STOP = REPO / ".ci" / "slurm" / "stop_cluster.sh"
PROFILE = REPO / "profiles" / "slurm"
CI_PROFILE = REPO / "profiles" / "slurm-ci"
SLURM_CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
DAEMONS = ("munged", "slurmctld", "slurmd")
GPU_RULES = {"train", "analyze", "qualitative", "robustness_logp"}
PACK_MARKER = "# ---- K trainings per GPU (PACK) ----"

#: on top of config/small.yaml: two PTB models feed figure7; short but cancellable training. The
#: GSS run is only trained by the packing test: long enough (1,440 batches, over 35 s on a fast
#: 2-core machine) to outlast the up to 30 s that slurmctld takes to notice an expired time limit.
TEST_CONFIG = {
    "fusion": {"runs_per_job": 1},  # every run its own `train` job here; tests/test_slurm_fused.py fuses
    "model_overrides": {
        "all": {"epochs": 6, "switch_epoch": 4, "train_tokens": 6000, "valid_tokens": 2000, "test_tokens": 2000},
        # the GSS run must outlast slurmctld's 30 s between time-limit checks (16 epochs once finished inside them)
        "variants": {"gss": {"epochs": 40, "switch_epoch": 30, "train_tokens": 18000}},
    },
    "analysis": {
        "rank_rows": 100,
        "spectra": {"datasets": ["ptb"], "variants": ["softmax", "ss"], "schedule": "et"},
    },
}
SUBMITTED = re.compile(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
OPT_IN = "SOFTMAX_BOTTLENECK_SLURM_TESTS"
LOCK = Path("/tmp/softmax-bottleneck-slurm-tests.lock")
#: with several pytest workers, the tests of this file share one worker (and its module-scoped cluster)
pytestmark = pytest.mark.xdist_group("slurm")
COMPARED_METRICS = ("train_ppl", "valid_ppl", "test_ppl", "test_loss", "best_epoch", "epochs_run", "switch_epoch")


def _data_mirror() -> Path:
    return data_dir()


# ------------------------------------------------------------------------------------ profile (no cluster)


def _profile(path: Path) -> dict:
    return yaml.safe_load((path / "config.yaml").read_text())


def _workflow_rules() -> set[str]:
    text = "\n".join(p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))])
    return set(re.findall(r"^(?:rule|checkpoint) (\w+):", text, flags=re.M))


def _pack_lines() -> dict:
    """The commented packing option of profiles/slurm (train's set-resources), as the user uncomments it."""
    text = (PROFILE / "config.yaml").read_text()
    assert PACK_MARKER in text, "profiles/slurm lost its documented packing option"
    block = text.split(PACK_MARKER, 1)[1].split("\n  # analyze", 1)[0]
    lines = [m.group(1) for m in re.finditer(r"^\s+# ((?:gpu|gres): .*)$", block, flags=re.M)]
    return yaml.safe_load("\n".join(lines)) or {}


def _jobs_of(text: str, rule: str | None = None) -> list[dict]:
    """Snakemake's job listing (dry run or real run) as dicts: rule, output, log, wildcards, resources, threads."""
    jobs = []
    for match in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n?)+)", text, flags=re.M):
        if rule and match.group(1) != rule:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", match.group(2), flags=re.M))
        job = {"rule": match.group(1), "output": [o.strip() for o in fields.get("output", "").split(",") if o.strip()]}
        job["log"] = fields.get("log", "").split(",")[0].strip()
        job["wildcards"] = dict(re.findall(r"(\w+)=([^,\s]+)", fields.get("wildcards", "")))
        job["resources"] = dict(re.findall(r"(\w+)=([^,\s]+)", fields.get("resources", "")))
        job["threads"] = int(fields.get("threads", 1))
        jobs.append(job)
    return jobs


def _run_dir(job: dict) -> Path:
    """The run folder of a train job: where its metrics.json goes."""
    outputs = [o.split(" (")[0] for o in job["output"]]  # Snakemake appends flags, e.g. "(update)"
    return Path(next(o for o in outputs if o.endswith("metrics.json"))).parent


def test_slurm_profile_settings():
    profile = _profile(PROFILE)
    assert profile["executor"] == "slurm"
    # works without accounting; the plugin upgrades to sacct itself when MinJobAge is too short
    assert profile["slurm-status-command"] == "squeue"
    assert profile["rerun-incomplete"] is True and profile["keep-going"] is True
    assert profile["latency-wait"] >= 30 and profile["retries"] >= 1
    # long runs: train alone gets many attempts (each resumes), whatever the rule's own `retries:`
    assert profile["preemptible-rules"] == ["train", "train_fused"] and profile["preemptible-retries"] >= 10
    train = profile["set-resources"]["train"]
    assert re.fullmatch(r"'--signal=TERM@\d+'", train["slurm_extra"]), train
    # a fused group's job: the same signal (its trainings save their states on it), the time limit train's
    fused = profile["set-resources"]["train_fused"]
    assert fused["slurm_extra"] == train["slurm_extra"] and "runtime" not in fused, fused
    # the site's limit caps each training's own estimate; a profile `runtime` would replace every estimate
    assert "runtime" not in train and isinstance(train["max_runtime"], int), train
    # the memory of a time-limit retry stops growing after attempt 2: the rule's own mem_mb does that
    # (tests/test_workflow.py), the profile keeps it and its table says so
    assert "mem_mb" not in train, train
    assert _resource_table()["train"]["mem"].startswith("min(n, 2) x ")
    assert _pack_lines() == {"gpu": 0, "gres": "shard:1"}
    # never a global GPU cap on a cluster (see the README, "Submitting the study to SLURM")
    assert "resources" not in profile
    text = (PROFILE / "config.yaml").read_text()
    assert "slurm_partition" in text and "slurm_account" in text  # documented site settings
    ci = _profile(CI_PROFILE)
    assert 1 <= ci["preemptible-retries"] <= 3
    rules = _workflow_rules()
    if rules:
        assert set(profile["set-resources"]) <= rules, "set-resources names a rule the workflow does not have"
        assert set(ci["set-resources"]) | set(ci["set-threads"]) <= rules
        assert set(profile["preemptible-rules"]) <= rules
    # the workflow profile is applied to cluster runs too: it must not cap GPUs or pick an executor
    default = REPO / "profiles" / "default" / "config.yaml"
    if default.exists():
        auto = yaml.safe_load(default.read_text()) or {}
        assert "executor" not in auto and "gpu" not in str(auto.get("resources", ""))


def _resource_table() -> dict[str, dict]:
    """The per-rule table in the comments of profiles/slurm: rule -> {gpu, threads, mem, runtime}."""
    text = (PROFILE / "config.yaml").read_text()
    rows = {}
    for line in text.split("#   rule ", 1)[1].split("(tests/test_slurm.py", 1)[0].splitlines()[1:]:
        m = re.match(r"#\s+(\w+(?: else)?)\s+(\d|-)\s+(\d+|all)\s+(.*?)\s{2,}(.*)$", line)
        if m:
            name, gpu, threads, mem, runtime = m.groups()
            threads = threads if threads == "all" else int(threads)  # all: every core (--cores), one job at a time
            rows[name] = {"gpu": int(gpu) if gpu != "-" else 0, "threads": threads, "mem": mem, "runtime": runtime}
    return rows


def _table_mem(row: dict, dataset: str | None) -> int:
    """A table cell's mem_mb at attempt 1: ``4000``, or ``min(n, 2) x (8000 PTB, 16000 WT2)`` for a dataset."""
    per_dataset = re.fullmatch(r"(?:n|min\(n, 2\)) x \((\d+) PTB, (\d+) WT2\)", row["mem"])
    if per_dataset:
        return int(per_dataset.group(1 if dataset == "ptb" else 2))
    return int(row["mem"])


def test_resource_table_matches_the_rules(tmp_path):
    """The profile's table of per-rule resources says what the rules declare at paper scale (attempt 1)."""
    if not (REPO / "Snakefile").exists():
        pytest.skip("no Snakefile yet")
    table = _resource_table()
    assert {"train", "analyze", "qualitative", "robustness_logp", "robustness", "everything else"} <= set(table)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    cmd += ["--configfile", str(REPO / "config" / "config.yaml"), "--config", f"data_mirror={_data_mirror()}"]
    # no profile: the rules' own values (profiles/slurm caps train's runtime); --cores shows threads
    cmd += ["--workflow-profile", "none", "--cores", "64", "--dry-run"]
    cmd += ["summarize_robustness", "summarize_top5", "figure7"]  # targets without wildcards
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = _jobs_of(proc.stdout)
    assert {"train", "analyze", "qualitative", "robustness_logp", "robustness"} <= {j["rule"] for j in jobs}
    defaults = _profile(PROFILE)["default-resources"]  # what a rule that declares nothing gets
    for job in jobs:
        row = table.get(job["rule"], table["everything else"])
        res = job["resources"]
        where = f"{job['rule']} {job['wildcards']}: {res}, threads {job['threads']}; table: {row}"
        threads = 64 if row["threads"] == "all" else row["threads"]  # --cores 64
        assert int(res.get("gpu", 0)) == row["gpu"] and job["threads"] == threads, where
        assert int(res.get("mem_mb", defaults["mem_mb"])) == _table_mem(row, job["wildcards"].get("dataset")), where
        if row["runtime"].isdigit():
            assert int(res.get("runtime", defaults["runtime"])) == int(row["runtime"]), where


def test_slurm_profile_dry_run(tmp_path):
    """The profile parses and every GPU job of the small study asks for exactly one GPU."""
    if not (REPO / "Snakefile").exists():
        pytest.skip("no Snakefile yet")
    proc = subprocess.run(
        [*_snakemake_cmd(tmp_path, ci=False), "--dry-run", "figure7"], env=_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = _jobs_of(proc.stdout)
    assert jobs, proc.stdout[-2000:]
    for job in jobs:
        gpus = job["resources"].get("gpu", "0")
        if job["rule"] in GPU_RULES:
            assert gpus == "1", job
        else:
            assert gpus == "0", f"{job['rule']} asks for a GPU: {job}"
        if job["rule"] == "train":
            assert job["resources"]["slurm_extra"].startswith("--signal=TERM@"), job
        if job["rule"] == "analyze":  # 300 rows: small, whatever the dataset (before: 24 and 32 GB, which the
            # one-node cluster's 21 GB could never give: the pilot's analyses pended for ever)
            assert (job["resources"]["mem_mb"], job["threads"]) == ("8000", 1), job
    assert "analyze" in {job["rule"] for job in jobs}


def test_an_analysis_asks_the_memory_of_the_method_it_takes(tmp_path):
    """8 GB while auto's exact SVD takes the matrix (at most 1 GiB in float64: 13,421 PTB rows, 4,033 WT2 rows), the
    paper's 24 / 32 GB beyond it, where the streamed Gram takes over (a WT2 matrix of 5,000 rows: 9.9 GB); 1 thread up
    to 5,000 rows. Both follow the rows of the rank file asked for, not the configuration's."""
    from softmax_bottleneck.analysis.rank import EXACT_AUTO_BYTES, memory_needed

    cmd = _snakemake_cmd(tmp_path, ci=False)  # the small study with this module's overlay (test_config.yaml)
    files = [REPO / "config" / "small.yaml", tmp_path / "test_config.yaml"]
    study = Study(study_config.check(study_config.load(files)))
    run = {ds: next(r for r in study.jobs.values() if r.dataset == ds) for ds in ("ptb", "wt2")}
    asked = {("ptb", 13421): ("8000", 8), ("ptb", 13422): ("24000", 8), ("wt2", 4033): ("8000", 1),
             ("wt2", 4034): ("32000", 1), ("wt2", 5001): ("32000", 8)}  # fmt: skip
    assert 13421 * 10000 * 8 <= EXACT_AUTO_BYTES < 13422 * 10000 * 8 and memory_needed("gram", 5000, 33278) > 9e9
    targets = [f"{run[ds].dir}/rank-{rows}.json" for ds, rows in asked]
    proc = subprocess.run([*cmd, "--cores", "64", "--dry-run", *targets], env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = {(j["wildcards"]["dataset"], int(j["wildcards"]["rows"])): j for j in _jobs_of(proc.stdout, "analyze")}
    assert {key: (j["resources"]["mem_mb"], j["threads"]) for key, j in jobs.items()} == asked


# ------------------------------------------------------------------------------------------------ cluster


def _env() -> dict[str, str]:
    """The test's environment without an enclosing SLURM job or GPU choice; the venv's python first."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_")) and k != "CUDA_VISIBLE_DEVICES"
    }
    # the jobs run `python -m softmax_bottleneck ...` with the submitting environment (--export=ALL)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # the test cluster's GPUs are stand-ins and torch a CPU build: its GPU jobs may train on the CPU (job-start)
    env["SOFTMAX_BOTTLENECK_ALLOW_CPU"] = "1"
    env["SOFTMAX_BOTTLENECK_SCHEDULER_POLL"] = "3"  # wait-for-job asks squeue every 3 s (30 on a real cluster)
    return env


def _cluster_up() -> bool:
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "is UP" in out


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
        left = {name: pid for name, pid in started.items() if pid_exists(pid)}
        assert not left, f"daemons still running after stop_cluster.sh: {left}"


@dataclass
class Run:
    """One Snakemake invocation: its command, exit status and log, and the SLURM jobs it submitted."""

    returncode: int
    log: str  # what the terminal showed: a line per job (the package's logger plug-in, profiles/default)
    seconds: float
    jobs: dict[str, str] = field(default_factory=dict)  # SLURM job id -> rule
    complete: str = ""  # Snakemake's complete log of the invocation (.snakemake/log/): every job's block


def _snakemake_cmd(workdir: Path, *, ci: bool = True, profiles: tuple[Path, ...] = ()) -> list[str]:
    config = workdir / "test_config.yaml"
    if not config.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump({"data_mirror": str(_data_mirror()), **TEST_CONFIG}))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--configfile", str(REPO / "config" / "small.yaml"), str(config), "--profile", str(PROFILE)]
    if ci:
        cmd += ["--profile", str(CI_PROFILE)]
    for profile in profiles:  # later profiles replace whole top-level keys of earlier ones
        cmd += ["--profile", str(profile)]
    return cmd


def _jobs_in(log: str) -> dict[str, str]:
    jobs = {}
    for jobid, path in SUBMITTED.findall(log):
        match = re.search(r"/rule_([^/]+)/", path)
        jobs[jobid] = match.group(1) if match else "?"
    return jobs


def _start(
    workdir: Path, targets: list[str], extra: list[str], log_path: Path, timeout: int, profiles: tuple[Path, ...] = ()
) -> subprocess.Popen:
    # targets first: an option with several values (--set-resources ...) would swallow them
    cmd = ["timeout", "-k", "30", str(timeout), *_snakemake_cmd(workdir, profiles=profiles), *targets, *extra]
    with open(log_path, "w") as fh:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, env=_env(), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _finish(proc: subprocess.Popen, log_path: Path, t0: float, timeout: float) -> Run:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log = log_path.read_text()
    return Run(proc.returncode, log, time.monotonic() - t0, _jobs_in(log), _complete_log(log_path.parent))


def _complete_log(workdir: Path) -> str:
    """The newest of Snakemake's complete logs in ``workdir`` (the invocation that just ended)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    return logs[-1].read_text() if logs else ""


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


def _train_runs(log: str) -> dict[str, dict]:
    """variant -> {"run": run folder, "log": train log} of the train jobs listed in a Snakemake log."""
    return {
        job["wildcards"]["variant"]: {"run": _run_dir(job), "log": _train_log(job)} for job in _jobs_of(log, "train")
    }


def _train_log(job: dict) -> Path:
    """The run's training log (every attempt appends to it; the rule's own log is another file)."""
    return Path(TRAIN_LOG.format(**job["wildcards"]))


@pytest.fixture(scope="module")
def small_study(cluster, tmp_path_factory):
    """``figure7`` of the small study (2 PTB models: train → analyze → summary → figure) under SLURM."""
    if not (REPO / "Snakefile").exists():
        pytest.skip("no Snakefile yet")
    if not has_data(_data_mirror()):
        pytest.skip(no_data_reason(_data_mirror()))
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
    assert (workdir / "reports/small/figures/figure7.png").stat().st_size > 0
    runs = _train_runs(run.complete)
    assert sorted(runs) == ["softmax", "ss"], runs
    for variant in ("softmax", "ss"):
        rank = json.loads(
            (workdir / runs[variant]["run"] / f"rank-{TEST_CONFIG['analysis']['rank_rows']}.json").read_text()
        )
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
        metrics = json.loads((workdir / runs[variant]["run"] / "metrics.json").read_text())
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


def _pack_profile(tmp: Path) -> Path:
    """The CI overlay plus what profiles/slurm says for train: its --signal and the packing lines."""
    ci = _profile(CI_PROFILE)
    train = {
        **ci["set-resources"]["train"],
        "slurm_extra": _profile(PROFILE)["set-resources"]["train"]["slurm_extra"],
        **_pack_lines(),
    }
    path = tmp / "pack"
    path.mkdir()
    (path / "config.yaml").write_text(yaml.safe_dump({"set-resources": {**ci["set-resources"], "train": train}}))
    return path


def _gres_index(jobid: str) -> str | None:
    """The GPU a running job's shard belongs to (``scontrol -d show job``: ``GRES=shard:1(IDX:0)``)."""
    out = subprocess.run(["scontrol", "-d", "show", "job", jobid], capture_output=True, text=True).stdout
    match = re.search(r"GRES=shard:\d+\(IDX:([\d,-]+)\)", out)
    return match.group(1) if match else None


def _wait_for(what: str, condition, deadline: float, proc: subprocess.Popen, log_path: Path):
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen (snakemake exit {proc.poll()})\n{log_path.read_text()[-4000:]}")


@pytest.mark.long
@pytest.mark.slurm
def test_packed_trainings_share_a_gpu_and_finish_after_scancel_and_time_limit(small_study, tmp_path, request):
    workdir, first, submitted = small_study
    if first.returncode != 0:
        pytest.fail("the uninterrupted run (test_train_analyze_figure_through_sbatch) failed; nothing to compare")
    softmax = _train_runs(first.complete)["softmax"]
    run_dir = workdir / softmax["run"]
    reference = json.loads((run_dir / "metrics.json").read_text())
    reference_curve = (run_dir / "curve.csv").read_text()
    # train the same run again, from scratch; the module's other tests find the first run's folder again afterwards
    shutil.move(run_dir, tmp_path / "first-run")
    request.addfinalizer(
        lambda: (shutil.rmtree(run_dir, ignore_errors=True), shutil.move(tmp_path / "first-run", run_dir))
    )

    # the long GSS run (not trained in step 1): its folder, from the plan
    plan = subprocess.run([*_snakemake_cmd(workdir), "--dry-run"], env=_env(), capture_output=True, text=True)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    wanted = {"dataset": "ptb", "variant": "gss", "schedule": "et", "seed": "141"}
    gss_job = next(j for j in _jobs_of(plan.stdout, "train") if wanted.items() <= j["wildcards"].items())
    gss = {"run": _run_dir(gss_job), "log": _train_log(gss_job)}
    runs = {"softmax": softmax, "gss": gss}
    targets = [str(r["run"] / "metrics.json") for r in runs.values()]

    # the training logs are appended to: what this test waits for is only what its own trainings write
    offsets = {v: (workdir / r["log"]).stat().st_size if (workdir / r["log"]).exists() else 0 for v, r in runs.items()}

    # 1. both trainings as packed SLURM jobs: one GPU shard each, the same GPU, at the same time
    log_path = workdir / "packed.log"
    t0 = time.monotonic()
    proc = _start(workdir, targets, [], log_path, 480, profiles=(_pack_profile(tmp_path),))
    first_jobs: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 300

        def train_jobs() -> dict[str, str]:
            found = {}
            for jobid, path in SUBMITTED.findall(log_path.read_text()):
                for variant in runs:
                    if "/rule_train/" in path and f"_{variant}_" in path and variant not in found:
                        found[variant] = jobid
            return found

        def both_submitted() -> dict[str, str] | None:
            found = train_jobs()
            return found if len(found) == 2 else None

        first_jobs = _wait_for("two train jobs submitted", both_submitted, deadline, proc, log_path)
        submitted.extend(first_jobs.values())

        def both_running() -> dict[str, str] | None:
            states = {v: _job(j).get("JobState") for v, j in first_jobs.items()}
            if all(s == "RUNNING" for s in states.values()):
                return {v: _gres_index(j) for v, j in first_jobs.items()}
            return None

        gpus = _wait_for("both train jobs running at once", both_running, deadline, proc, log_path)
        for jobid in first_jobs.values():
            info = _job(jobid)
            assert "shard:1" in info.get("TresPerNode", "") and "gpu" not in info.get("TresPerJob", ""), info
        assert gpus["softmax"] is not None and gpus["softmax"] == gpus["gss"], f"packed trainings on GPUs {gpus}"

        # 2. stop both mid-run: scancel one; let SLURM's time limit stop the other
        def training(variant: str, pattern: str) -> bool:
            path = workdir / runs[variant]["log"]
            if not path.exists():
                return False
            ours = path.read_bytes()[offsets[variant] :].decode(errors="replace")  # not the earlier training's lines
            return re.search(pattern, ours) is not None

        # slurmctld checks time limits every 30 s: stop the GSS run as soon as it trains (its
        # SIGTERM handler is in place once it logs "training")
        _wait_for("GSS training started", lambda: training("gss", r"training ptb/gss"), deadline, proc, log_path)
        subprocess.run(["scontrol", "update", f"JobId={first_jobs['gss']}", "EndTime=now"], check=True)
        _wait_for(
            "Softmax training started", lambda: training("softmax", r"end of epoch +1 "), deadline, proc, log_path
        )
        subprocess.run(["scancel", first_jobs["softmax"]], check=True)
        # 3. Snakemake resubmits both by itself; each resumes from its saved state and finishes
        rerun = _finish(proc, log_path, t0, 480)
    finally:
        if proc.poll() is None:  # a failed assertion above: do not leave Snakemake submitting jobs
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        submitted.extend(_jobs_in(log_path.read_text()))
    print(f"packed run with scancel and time limit: {rerun.seconds:.0f} s, SLURM jobs {rerun.jobs}")

    def diagnosis() -> str:
        logs = [log_path, *(workdir / r["log"] for r in runs.values())]
        return "\n".join(f"--- {p.name}:\n{p.read_text()[-3000:]}" for p in logs if p.exists())

    assert rerun.returncode == 0, diagnosis()
    assert _job(first_jobs["softmax"]).get("JobState") == "CANCELLED", (_job(first_jobs["softmax"]), diagnosis())
    timed_out = _job(first_jobs["gss"])
    assert timed_out.get("JobState") != "COMPLETED", "the GSS run finished before its time limit hit: make it longer"
    assert (timed_out.get("JobState"), timed_out.get("Reason")) == ("TIMEOUT", "TimeLimit"), (timed_out, diagnosis())
    trains = [jobid for jobid, rule in rerun.jobs.items() if rule == "train"]
    assert len(trains) == 4, (rerun.jobs, diagnosis())  # two attempts each
    for variant, r in runs.items():
        metrics = json.loads((workdir / r["run"] / "metrics.json").read_text())
        second = str(_env_field(metrics, "slurm_job_id"))
        assert second in trains and second != first_jobs[variant], (variant, second, trains)
        assert _job(second).get("JobState") == "COMPLETED", _job(second)
        assert "resumed from" in (workdir / r["log"]).read_text(), diagnosis()
        kept = sorted(p.name for p in (workdir / r["run"] / ".resume").iterdir())
        assert kept == ["final"], f"the resume state was not removed after success: {kept}"
        assert metrics["epochs_run"] == TEST_CONFIG["model_overrides"]["variants"].get(variant, {}).get(
            "epochs", TEST_CONFIG["model_overrides"]["all"]["epochs"]
        )

    # 4. the cancelled-and-resumed run's final metrics equal the uninterrupted run's
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for key in COMPARED_METRICS:
        assert metrics[key] == reference[key], (key, metrics[key], reference[key], diagnosis())

    def without_seconds(text: str) -> list[list[str]]:
        rows = [line.split(",") for line in text.strip().splitlines()]
        drop = rows[0].index("seconds")
        return [row[:drop] + row[drop + 1 :] for row in rows]

    assert without_seconds((run_dir / "curve.csv").read_text()) == without_seconds(reference_curve)
    print(f"resumed runs: GPU {gpus}; metrics { ({k: metrics[k] for k in COMPARED_METRICS}) }")


# ------------------------------------------------------------------------ the pilot, and its controller killed
PILOT_CONFIG = REPO / "config" / "gpu-smoke.yaml"
#: the pilot's tiny version: config/gpu-smoke.yaml with config/small.yaml's tiny models, E7 on the authors' seeds only
#: (table3: one PTB and one WT2 training and their analyses), the WT2 run several times the PTB one, so that it still
#: trains when the PTB one has finished
PILOT_DATASETS = {"ptb": {"train_tokens": 8000}, "wt2": {"epochs": 8, "switch_epoch": 6, "train_tokens": 6000}}


def _pilot(workdir: Path) -> tuple[list[str], dict[str, Path]]:
    """The documented pilot command (a checkout beside the results: --snakefile, --directory) through the CI profile
    on its tiny configuration, and the run folder of its two trainings by dataset (under ``workdir``)."""
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.runs import Study

    overrides = yaml.safe_load((REPO / "config" / "small.yaml").read_text())["model_overrides"]
    overrides["datasets"] = PILOT_DATASETS
    overlay = workdir / "pilot_overlay.yaml"
    overlay.write_text(yaml.safe_dump({"data_mirror": str(_data_mirror()), "model_overrides": overrides,
                                       "experiments": {"frozen": {"seeds": "authors"}}}))  # fmt: skip
    files = [str(PILOT_CONFIG), str(overlay)]
    study = Study(study_config.check(study_config.load(files)))
    runs = {r.dataset: workdir / path for path, r in study.jobs.items() if r.variant == "lms_plif_frozen"}
    cmd = [sys.executable, "-m", "snakemake", "table3", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--profile", str(PROFILE), "--profile", str(CI_PROFILE), "--configfile", *files]  # fmt: skip
    return cmd, runs


def _train_jobs_of(log: str, run: Path) -> list[str]:
    """SLURM ids of the train jobs of ``run`` that a Snakemake log says it submitted."""
    dataset = run.parts[-5]
    return [jobid for jobid, path in SUBMITTED.findall(log) if f"/rule_train/{dataset}_" in path]


def _controller(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as handle:  # the child keeps its own descriptor
        return subprocess.Popen(["timeout", "-k", "30", "900", *cmd], env=_env(), stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


@pytest.mark.long
@pytest.mark.slurm
def test_a_killed_controller_started_again_duplicates_and_redoes_nothing(cluster, tmp_path_factory):
    """The pilot through the profile, its results in another folder (``--directory``). Its controller is killed
    (SIGKILL: a reboot, a lost session) once one training has finished and the other trains; the same command is
    refused (the dead one's lock), ``--unlock``, the same command again: the running training is waited for (no
    second SLURM job), the finished one is not trained again, and the pilot finishes. The running training is held
    (``scontrol suspend``) from the kill until the new controller waits for it, so that it cannot finish before."""
    if not has_data(_data_mirror()):
        pytest.skip(no_data_reason(_data_mirror()))
    workdir = tmp_path_factory.mktemp("scratch")
    cmd, runs = _pilot(workdir)
    assert sorted(runs) == ["ptb", "wt2"], runs
    log1, log2 = workdir / "controller1.log", workdir / "controller2.log"
    t0 = time.monotonic()
    first = _controller(cmd, log1)
    second = None
    submitted: list[str] = []
    wt2_job: list[str] = []
    try:

        def one_done_one_training() -> bool:
            wt2 = runs["wt2"] / ".resume" / "progress.json"
            return (runs["ptb"] / "model.pt").exists() and wt2.exists() and not (runs["wt2"] / "model.pt").exists()

        _wait_for("the PTB run finished while the WT2 run trains", one_done_one_training, time.monotonic() + 600,
                  first, log1)  # fmt: skip
        wt2_job = _train_jobs_of(log1.read_text(), runs["wt2"])
        assert len(wt2_job) == 1, log1.read_text()[-3000:]
        subprocess.run(["scontrol", "suspend", wt2_job[0]], check=True)
        os.killpg(first.pid, signal.SIGKILL)  # the controller and its children; never the SLURM jobs
        first.wait()
        killed_at = time.monotonic() - t0
        submitted += _jobs_in(log1.read_text())
        assert _job(wt2_job[0]).get("JobState") == "SUSPENDED", _job(wt2_job[0])
        ptb_model = (runs["ptb"] / "model.pt").read_bytes()

        # after the controller died: status says which runs still run, the same command is refused while the dead
        # one's lock is there, --unlock lifts it, and the same command goes on
        status = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "status", "--config", cmd[-2], "--config",
                                 cmd[-1], "--directory", str(workdir), "--runs"], env=_env(), capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert status.returncode == 0 and re.search(r"running \(1\)", status.stdout), status.stdout
        refused = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        assert refused.returncode != 0 and "no longer runs on this machine" in refused.stdout + refused.stderr
        unlock = subprocess.run([*cmd, "--unlock"], env=_env(), capture_output=True, text=True, timeout=300)
        assert unlock.returncode == 0, unlock.stdout[-2000:] + unlock.stderr[-2000:]
        second = _controller(cmd, log2)
        waiting = workdir / "logs" / "await_training" / f"{runs['wt2'].relative_to(workdir / 'results' / 'runs')}.log"
        _wait_for("the new controller waiting for the WT2 run", lambda: waiting.is_file() and "waiting" in
                  waiting.read_text(), time.monotonic() + 600, second, log2)  # fmt: skip
        subprocess.run(["scontrol", "resume", wt2_job[0]], check=True)
        second.wait(960)
        again = log2.read_text()
        submitted += _jobs_in(again)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if wt2_job and _job(wt2_job[0]).get("JobState") == "SUSPENDED":
            subprocess.run(["scontrol", "resume", wt2_job[0]], check=False)
        _cancel_leftovers(submitted)
    print(f"pilot: controller killed after {killed_at:.0f} s; started again, done after {time.monotonic() - t0:.0f} s")
    assert second.returncode == 0, again[-5000:]
    assert (workdir / "reports" / "gpu-smoke" / "tables" / "table3.md").is_file()
    # the running training: waited for on this machine, never submitted again; trained once, by its first job
    assert not _train_jobs_of(again, runs["wt2"]), again[-4000:]
    complete = _complete_log(workdir)  # the second's whole log
    stats = again.split("Job stats:")[1].split("total")[0]  # the terminal shows one line per job, the log every rule
    # SLURM still lists its (suspended) job: waited for through the queue, then as await_training does
    assert "localrule await_scheduled_training:" in complete and "await_scheduled_training" in stats
    assert "finished by the process that trained it" in waiting.read_text()
    metrics = json.loads((runs["wt2"] / "metrics.json").read_text())
    assert str(_env_field(metrics, "slurm_job_id")) == wt2_job[0]
    # the finished training: not trained again (a job Snakemake had not seen finish only checks it: nothing to do)
    assert (runs["ptb"] / "model.pt").read_bytes() == ptb_model
    for dataset, run in runs.items():
        train_log = (workdir / "logs" / "train" / run.relative_to(workdir / "results" / "runs")).with_suffix(".log")
        text = train_log.read_text()
        assert text.count(f"training {dataset}/lms_plif_frozen") == 1 and "resumed from" not in text, text[-3000:]
