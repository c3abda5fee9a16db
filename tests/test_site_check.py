"""``site-check``: the study's heaviest request per rule put to SLURM with ``sbatch --test-only``, and the file system.

The parsing and the fixes need no cluster; the check itself runs on the one-node SLURM cluster of
``tests/test_slurm.py`` (``pytest -m slurm``), whose node (2 CPUs, about 20 GB) refuses the analyses' 8 CPUs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_slurm import (
    _data_mirror,
    _env,
    _jobs_of,
    cluster,  # noqa: F401  (a fixture: the cluster of test_slurm.py)
    cluster_lock,  # noqa: F401  (the fixture cluster needs)
)

from softmax_bottleneck.cluster.site_check import Request, fix_for, heaviest_requests

REPO = Path(__file__).resolve().parents[1]

LISTING = """
rule train:
    output: results/runs/ptb/mos/et/seed28/default-1/model.pt (update)
    wildcards: dataset=ptb, variant=mos, schedule=et, seed=28, runid=default-1
    resources: tmpdir=<TBD>, gpu=1, mem_mb=8000, runtime=600, slurm_partition=gpu, slurm_extra='--signal=TERM@300'

rule train:
    output: results/runs/wt2/mos/et/seed28/default-2/model.pt (update)
    resources: tmpdir=<TBD>, gpu=1, mem_mb=16000, runtime=1440, slurm_partition=gpu, slurm_extra='--signal=TERM@300'

rule analyze:
    threads: 8
    resources: tmpdir=<TBD>, gpu=1, mem_mb=32000, runtime=120, slurm_account=proj

localrule fetch_corpus:
    threads: 64
    resources: tmpdir=<TBD>, mem_mb=4000, runtime=60
"""


def test_the_heaviest_request_of_each_rule_as_the_plugin_would_submit_it():
    requests = heaviest_requests(LISTING)
    assert sorted(requests) == ["analyze", "train"]  # a local rule never reaches sbatch
    train = requests["train"]
    assert (train.jobs, train.cpus, train.mem_mb, train.runtime, train.gpus) == (2, 1, 16000, 1440, 1)
    cmd = train.sbatch({"slurm-qos": "normal", "slurm-reservation": "study"})
    assert cmd[:2] == ["sbatch", "--test-only"] and cmd[-2:] == ["--wrap", "true"]
    for part in (["-t", "1440"], ["--mem", "16000"], ["-p", "gpu"], ["--qos=normal"], ["--reservation=study"],
                 ["--gpus=1"], ["--signal=TERM@300"], ["--cpus-per-task=1"]):  # fmt: skip
        assert " ".join(part) in " ".join(cmd), (part, cmd)
    analyze = requests["analyze"].sbatch({})
    assert "--cpus-per-task=8" in analyze and ["-A", "proj"] == analyze[analyze.index("-A") : analyze.index("-A") + 2]
    assert Request("x", gpus=2, options={"gpu_model": "a100"}).sbatch({})[-3] == "--gpus=a100:2"


@pytest.mark.parametrize(
    "answer, fix",
    [
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
         "slurm_account"),
        ("sbatch: error: invalid partition specified: nope", "slurm_partition"),
        ("sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)",
         "max_runtime"),
        ("allocation failure: Requested node configuration is not available", "sinfo -o '%P %c %m %G'"),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", "slurm-qos"),
    ],
)  # fmt: skip
def test_each_refusal_comes_with_its_fix(answer, fix):
    assert fix in fix_for(answer)


def test_trainings_ask_their_own_time_at_most_the_site_limit(tmp_path):
    """Through profiles/slurm each training asks min(the site's limit, its estimate): the pilot's minutes, the study's
    long runs the limit, and never the profile's limit for every run."""
    from softmax_bottleneck.study import config as study_config
    from softmax_bottleneck.study.plan import train_runtime_minutes
    from softmax_bottleneck.study.runs import Study

    limit = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())["set-resources"]["train"][
        "max_runtime"
    ]
    asked = {}
    for name in ("gpu-smoke.yaml", "config.yaml"):
        config = REPO / "config" / name
        study = Study(study_config.check(study_config.load([str(config)])))
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
               str(tmp_path / name), "--configfile", str(config), "--config", f"data_mirror={_data_mirror()}",
               "--profile", str(REPO / "profiles" / "slurm"), "--dry-run", "summarize_top5", "figure7"]  # fmt: skip
        proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        jobs = _jobs_of(proc.stdout, "train")
        assert jobs, proc.stdout[-2000:]
        for job in jobs:
            run = study.job(job["wildcards"])
            expected = min(limit, train_runtime_minutes(run, 1))
            assert int(job["resources"]["runtime"]) == expected, (name, job["wildcards"], job["resources"])
        asked[name] = sorted(int(j["resources"]["runtime"]) for j in jobs)
    assert asked["gpu-smoke.yaml"][-1] <= 30, asked  # the pilot's trainings ask minutes
    assert asked["config.yaml"][0] < limit <= asked["config.yaml"][-1], asked  # the study's: their own, up to the limit


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_site_check_names_the_refused_request_and_checks_the_file_system(tmp_path):
    """The study through the real profile on the one-node cluster: the trainings fit, the analyses' 8 CPUs do not."""
    site = tmp_path / "my-site"  # the user's copy, outside the checkout
    shutil.copytree(REPO / "profiles" / "slurm", site)
    study = tmp_path / "study"
    cmd = [sys.executable, "-m", "softmax_bottleneck", "site-check", "--profile", str(site), "--configfile",
           str(REPO / "config" / "config.yaml"), "--config", f"data_mirror={_data_mirror()}", "--directory",
           str(study)]  # fmt: skip
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=900)
    print(proc.stdout)
    lines = proc.stdout.splitlines()
    verdict = {line.split()[1]: line.split()[0] for line in lines if line.startswith(("PASS ", "FAIL "))}
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert verdict.get("train") == "PASS" and verdict.get("qualitative") == "PASS", proc.stdout
    assert verdict.get("analyze") == "FAIL" and verdict.get("robustness") == "FAIL", proc.stdout
    analyze = next(line for line in lines if line.startswith("FAIL analyze"))
    assert "8 CPUs" in analyze and "Requested node configuration is not available" in analyze, analyze
    assert "Fix: no node of the partition has this many CPUs" in analyze, analyze
    assert verdict.get("hard") == "PASS" and verdict.get("cluster-wide") == "PASS", proc.stdout
    assert f"a lock held on {os.uname().nodename} is seen here" in proc.stdout  # the one node is this machine
    assert verdict.get("file") == "PASS", proc.stdout
    assert lines[-1].startswith("site-check: ") and "failed" in lines[-1]


def test_a_copied_profile_outside_the_checkout_with_its_optional_site_lines(tmp_path):
    """The user's copy of profiles/slurm, its commented SITE options (QOS, reservation, job-name prefix) uncommented:
    Snakemake takes it by its path and knows every option (a misspelt one stops it)."""
    site = tmp_path / "softmax-site"
    shutil.copytree(REPO / "profiles" / "slurm", site)
    text = (site / "config.yaml").read_text()
    optional = ("slurm-qos", "slurm-reservation", "slurm-jobname-prefix")
    for key in optional:
        assert f"\n# {key}: " in text, f"profiles/slurm lost its commented {key}"
        text = text.replace(f"\n# {key}: ", f"\n{key}: ")
    (site / "config.yaml").write_text(text)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(REPO / "config" / "small.yaml"), "--config", f"data_mirror={_data_mirror()}",
           "--profile", str(site), "--dry-run", "figure7"]  # fmt: skip
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (site / "config.yaml").write_text(text.replace("\nslurm-qos: ", "\nslurm-qso: "))
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "slurm-qso" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("sinfo", "said"),
    [("echo 'slurm_load_partitions: Unable to contact slurm controller (connect failure)' >&2; exit 1",
      "FAIL SLURM: sinfo exited 1 (slurm_load_partitions: Unable to contact slurm controller (connect failure)): the "
      "controller is not reachable from this machine"),
     (None, "FAIL SLURM: sinfo not found: run site-check where SLURM's commands are (a login node)")],
    ids=["no-controller", "no-slurm"],
)  # fmt: skip
def test_an_unreachable_controller_is_one_line_and_no_request_is_put(tmp_path, sinfo, said):
    """Before, each rule's sbatch --test-only waited for the controller in turn (over a minute each), then printed the
    same FAIL line per rule."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\ntouch {tmp_path}/sbatch-ran\nexit 1\n")
    if sinfo:
        (bin_dir / "sinfo").write_text(f"#!/bin/sh\n{sinfo}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {**_env(), "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if not (Path(p) / "sinfo").exists() or p == str(bin_dir))
    cmd = [sys.executable, "-m", "softmax_bottleneck", "site-check", "--profile", str(REPO / "profiles" / "slurm"),
           "--directory", str(tmp_path / "study"), "--no-job"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        said, f"PASS hard links: {tmp_path / 'study'}: hard links work", "site-check: 1 failed; the requests were not "
        "put to SLURM"]  # fmt: skip
    assert not (tmp_path / "sbatch-ran").exists()


def test_a_multi_cluster_sites_cluster_is_asked_as_the_plugin_submits_to_it(tmp_path):
    """Before, a profile sending every job to another cluster of the site (the plug-in's ``clusters`` resource, or
    ``-M`` in slurm_extra) had its controller probed and its requests put to the default cluster's."""
    from softmax_bottleneck.cluster.site_check import profile_cluster

    assert profile_cluster({"default-resources": {"clusters": "gpu2", "mem_mb": 4000}}) == "gpu2"
    assert profile_cluster({"default-resources": ["slurm_cluster='gpu2'", "runtime=60"]}) == "gpu2"
    for extra in ("'-M gpu2 --signal=TERM@300'", "--clusters=gpu2", "-Mgpu2"):
        assert profile_cluster({"default-resources": {"slurm_extra": extra}}) == "gpu2", extra
    assert profile_cluster({"default-resources": {"slurm_partition": "gpu"}}) is None and profile_cluster({}) is None
    listing = LISTING.replace("slurm_account=proj", "slurm_account=proj, clusters=gpu2")
    analyze = heaviest_requests(listing)["analyze"].sbatch({})
    assert analyze[analyze.index("--clusters") + 1] == "gpu2" and "--clusters" not in heaviest_requests(LISTING)[
        "train"].sbatch({})  # fmt: skip

    site = tmp_path / "site"
    site.mkdir()
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["clusters"] = "gpu2"
    (site / "config.yaml").write_text(yaml.safe_dump(profile))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/sinfo-args\necho 'no answer' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    env = {**_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "softmax_bottleneck", "site-check", "--profile", str(site), "--directory",
           str(tmp_path / "study"), "--no-job"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and proc.stdout.startswith("FAIL SLURM: sinfo exited 1 (no answer)"), proc.stdout
    assert (tmp_path / "sinfo-args").read_text().split() == ["--noheader", "--format=%P", "--clusters", "gpu2"]


def test_a_missing_profile_or_configfile_is_named_before_slurm_is_asked(tmp_path):
    """Before, a mistyped --profile gave "[Errno 2] No such file or directory: ..." (or, with no controller reachable,
    went unnoticed), and a missing --configfile a traceback's tail ("^^^^^^ FileNotFoundError ...")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "sinfo"):
        (bin_dir / tool).write_text(f"#!/bin/sh\ntouch {tmp_path}/{tool}-ran\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    env = {**_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    base = [
        sys.executable,
        "-m",
        "softmax_bottleneck",
        "site-check",
        "--directory",
        str(tmp_path / "study"),
        "--no-job",
    ]
    cases = {
        ("--profile", str(tmp_path / "softmax-sitee")): f"site-check: --profile {tmp_path / 'softmax-sitee'}: no "
        "profile there (a folder holding config.yaml, e.g. a copy of profiles/slurm)",
        ("--profile", str(REPO / "profiles" / "slurm"), "--configfile", str(tmp_path / "nope.yaml")): "site-check: "
        f"--configfile {tmp_path / 'nope.yaml'}: no such file",
    }
    for extra, line in cases.items():
        proc = subprocess.run([*base, *extra], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == 1 and proc.stdout.splitlines() == [line], proc.stdout + proc.stderr
    assert not list(tmp_path.glob("*-ran"))


def test_a_failed_commands_reason_is_its_last_meaningful_lines():
    """Snakemake prints "Using profiles ..." on stderr and its error on stdout: the error is what is said."""
    from types import SimpleNamespace

    from softmax_bottleneck.cluster.site_check import _tail

    proc = SimpleNamespace(stderr="Using profiles /x and workflow specific profile y for setting default ...\n",
                           stdout="Building DAG\nset-resources: train: max_runtime: '24h': expected ...\n")  # fmt: skip
    assert _tail(proc, 1) == "set-resources: train: max_runtime: '24h': expected ..."
    proc = SimpleNamespace(stderr="Traceback\n  x = f()\n      ^^^^^\nFileNotFoundError: [Errno 2] a.yaml\n", stdout="")
    assert _tail(proc, 2) == "x = f() FileNotFoundError: [Errno 2] a.yaml"
