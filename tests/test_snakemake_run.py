"""What the workflow reads of the Snakemake that runs it (:mod:`softmax_bottleneck.cluster.snakemake_run`), read from
a real Snakemake run of a Snakefile of three rules: the values as the command line gave them, and one line naming what
a Snakemake without them lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from softmax_bottleneck.cluster import site_check
from softmax_bottleneck.cluster.snakemake_run import SnakemakeChanged, jobs_to_run, set_resource

REPO = Path(__file__).resolve().parents[1]

SNAKEFILE = """
import json
from pathlib import Path
from softmax_bottleneck.cluster import snakemake_run as read


def said(tag, **values):
    print(tag + " " + json.dumps(values), flush=True)


if read.is_controller(workflow):
    said(
        "PARSED",
        files=read.given_configfiles(workflow),
        config=read.given_config(workflow),
        runtime=read.set_resource(workflow, "work", "max_runtime"),
        unset=read.set_resource(workflow, "work", "mem_mb"),
    )


onstart:
    said(
        "START",
        jobs=read.jobs_to_run(workflow),
        slots=read.job_slots(workflow),
        local=sorted(read.local_rules(workflow)),
    )


rule all:
    input:
        expand("out/{n}.txt", n=[1, 2]),
        "out/tidy.txt",


rule work:
    output:
        "out/{n}.txt",
    threads: 2
    run:
        said("JOB", controller=read.is_controller(workflow))
        Path(output[0]).write_text(wildcards.n)


rule tidy:
    output:
        "out/tidy.txt",
    localrule: True
    shell:
        "touch {output}"
"""


def _run(tmp_path: Path, *args: str) -> dict[str, list[dict]]:
    """Run the Snakefile in ``tmp_path`` with ``args``; the values each process said, by tag."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "snakemake", "--directory", str(tmp_path), "--snakefile", str(tmp_path / "Snakefile"),
           "--quiet", "rules", *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said: dict[str, list[dict]] = {}
    for line in proc.stdout.splitlines():
        tag, _, values = line.partition(" ")
        if tag in ("PARSED", "START", "JOB"):
            said.setdefault(tag, []).append(json.loads(values))
    return said


def test_every_value_as_the_command_line_gave_it(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("count: 0\n")
    said = _run(tmp_path, "--cores", "3", "--resources", "gpu=2", "--configfile", "a.yaml", "b.yaml",
                "--config", "count=1", "label=abc", "--set-resources", "work:max_runtime=30")  # fmt: skip
    parsed = said["PARSED"][0]
    assert [Path(p).name for p in parsed["files"]] == ["a.yaml", "b.yaml"]
    assert parsed["config"] == {"count": 1, "label": "abc"}
    assert (parsed["runtime"], parsed["unset"]) == (30, None)
    start = said["START"][0]
    assert start["local"] == ["all", "tidy"]  # `localrule: True`, and a rule without a command
    assert start["slots"] == [True, 2]  # the lesser of --cores 3 and gpu=2
    jobs = sorted((rule, json.dumps(wildcards), threads) for _, rule, wildcards, threads in start["jobs"])
    assert jobs == [("all", "{}", 1), ("tidy", "{}", 1), ("work", '{"n": "1"}', 2), ("work", '{"n": "2"}', 2)]
    assert len({jobid for jobid, *_ in start["jobs"]}) == 4
    # a `run:` job runs in a Snakemake of its own: not the controller, which said its values once
    assert said["JOB"] == [{"controller": False}] * 2 and len(said["PARSED"]) == 1


def test_no_configfile_no_config_and_the_cores_alone(tmp_path):
    said = _run(tmp_path, "--cores", "3")
    parsed = said["PARSED"][0]
    assert (parsed["files"], parsed["config"], parsed["runtime"]) == ([], {}, None)
    assert said["START"][0]["slots"] == [True, 3]


def test_only_the_jobs_still_to_run(tmp_path):
    _run(tmp_path, "--cores", "1")
    (tmp_path / "out" / "2.txt").unlink()
    jobs = _run(tmp_path, "--cores", "1")["START"][0]["jobs"]
    still = sorted((rule, json.dumps(wildcards)) for _, rule, wildcards, _ in jobs)
    assert still == [("all", "{}"), ("work", '{"n": "2"}')]


def test_a_snakemake_without_a_value_is_named_in_one_line():
    with pytest.raises(SnakemakeChanged, match=r"^Snakemake \S+ has no workflow\.dag .*requirements\.lock$"):
        jobs_to_run(SimpleNamespace())
    with pytest.raises(SnakemakeChanged, match=r"has no workflow\.resource_settings\.overwrite_resources"):
        set_resource(SimpleNamespace(resource_settings=SimpleNamespace()), "train", "max_runtime")


def test_the_site_check_reads_the_study_s_local_rules(tmp_path):
    """The rules the site check leaves out of its sbatch requests: the study's local ones, never a GPU job's."""
    args = SimpleNamespace(snakefile=REPO / "Snakefile", configfile=[REPO / "config" / "small.yaml"])
    local = site_check.local_rules(args, tmp_path)
    assert {"all", "status", "progress", "preview", "plan", "table2", "figure7", "claims"} <= local, sorted(local)
    assert not {"train", "train_fused", "analyze"} & local, sorted(local)


def test_a_time_limit_as_sinfo_prints_it_is_read_as_written(tmp_path):
    """Before, reading ``max_runtime=1-00:00:00`` (what ``sinfo -o "%P %l"`` prints) raised Snakemake's "Resource must
    be evaluated within the context of a rule", which named neither the resource nor the value."""
    said = _run(tmp_path, "--cores", "1", "--set-resources", "work:max_runtime=1-00:00:00")
    assert said["PARSED"][0]["runtime"] == "1-00:00:00"
