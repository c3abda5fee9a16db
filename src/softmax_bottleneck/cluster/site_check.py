"""``site-check``: before the pilot, ask SLURM whether the study's heaviest requests are accepted, and check the file
system the study needs.

``python -m softmax_bottleneck site-check --profile PROFILE [--configfile config/config.yaml] [--directory DIR]``

1. A dry run of the study through the profile (``snakemake --dry-run --profile PROFILE``, in a scratch folder, so
   that every job of the study is listed with what the profile gives it) yields, for each rule that goes through
   ``sbatch``, its heaviest request: the most memory, time, CPUs and GPUs any of its jobs asks, with the partition,
   account, QOS, reservation and extra options the profile gives it.
2. Each is put to SLURM with ``sbatch --test-only`` (nothing runs): accepted, or refused with SLURM's reason and the
   fix. The pilot never asks these (its trainings ask minutes), so a site limit would otherwise be found weeks in.
3. The study's folder: hard links (a finished run's outputs are hard links of its kept copy), and, with one short
   job (``--no-job`` leaves it out), a lock held on a compute node is seen from this machine (``flock`` across the
   cluster: one writer per run folder) and the node's file times agree with this machine's clock.

Each item prints ``PASS`` or ``FAIL`` with what to change; the exit status is 1 when one fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from softmax_bottleneck import readback

#: what one job of the dry run's listing asks, by Snakemake's name of the resource
JOB_BLOCK = re.compile(r"^(local)?rule (\w+):\n((?:    .*\n?)+)", re.M)
#: seconds the file-system job may wait for a CPU and run
FS_JOB_SECONDS = 300
#: cores the dry run is given: a rule's threads as a node gets them, not capped at this machine's cores
DRY_RUN_CORES = 1024
#: the most a compute node's file times may differ from this machine's clock
CLOCK_SKEW_SECONDS = 60

#: SLURM's refusal -> what to change
FIXES = (
    ("invalid account", "set slurm_account under default-resources to an account you may charge (sacctmgr show "
                        "assoc user=$USER)"),  # fmt: skip
    ("invalid partition", "set slurm_partition (default-resources, or the rule's set-resources) to a partition of "
                          "sinfo -o '%P'"),  # fmt: skip
    ("time limit", "lower train's max_runtime (or the rule's runtime) to the partition's MaxTime (sinfo -o '%P %l')"),
    ("qos", "set slurm-qos (or the rule's qos) to a QOS your account may use (sacctmgr show assoc user=$USER "
            "format=qos)"),  # fmt: skip
    ("reservation", "check slurm-reservation: scontrol show reservation"),
    ("node configuration is not available", "no node of the partition has this many CPUs, this much memory or "
     "these GPUs: pick a partition that has (sinfo -o '%P %c %m %G'), or lower the rule's mem_mb or threads in "
     "set-resources"),
    ("memory", "lower the rule's mem_mb in set-resources, or pick a partition with larger nodes (sinfo -o '%P %m')"),
    ("gres", "the partition has no such GPUs: set slurm_partition to a GPU partition, gpu_model to one of sinfo -o %G"),
)  # fmt: skip


@dataclass
class Request:
    """The heaviest request of one rule: the largest of each resource over its jobs."""

    rule: str
    jobs: int = 0
    cpus: int = 1
    mem_mb: int = 0
    runtime: int = 0
    gpus: int = 0
    options: dict[str, str] = field(default_factory=dict)  # partition, account, qos, gres, ... (the first job's)

    def sbatch(self, settings: dict[str, str]) -> list[str]:
        """``sbatch --test-only`` with this request, as the SLURM plugin would submit it."""
        cmd = ["sbatch", "--test-only", "--job-name", f"site-check-{self.rule}", f"--cpus-per-task={self.cpus}"]
        if self.runtime:
            cmd += ["-t", str(self.runtime)]
        if self.mem_mb:
            cmd += ["--mem", str(self.mem_mb)]
        opts = self.options
        for key, flag in (("slurm_partition", "-p"), ("slurm_account", "-A")):
            if opts.get(key):
                cmd += [flag, opts[key]]
        qos = opts.get("qos") or settings.get("slurm-qos")
        if qos:
            cmd.append(f"--qos={qos}")
        if settings.get("slurm-reservation"):
            cmd.append(f"--reservation={settings['slurm-reservation']}")
        if opts.get("gres"):
            cmd.append(f"--gres={opts['gres']}")
        elif self.gpus:
            model = opts.get("gpu_model")
            cmd.append(f"--gpus={model}:{self.gpus}" if model else f"--gpus={self.gpus}")
        if cluster := job_cluster(opts):
            cmd += ["--clusters", cluster]
        if opts.get("slurm_extra"):
            cmd += shlex.split(opts["slurm_extra"])
        return [*cmd, "--wrap", "true"]


#: the resources by which the SLURM plug-in sends a job to another cluster of a multi-cluster site, first found wins
CLUSTER_KEYS = ("cluster", "clusters", "slurm_cluster")


def job_cluster(resources: dict[str, str]) -> str | None:
    """The cluster (``sbatch --clusters``) a job's resources name, as the SLURM plug-in reads them, else None."""
    return next((str(resources[key]) for key in CLUSTER_KEYS if resources.get(key) not in (None, "", "None")), None)


def _cluster_flag(extra: str) -> str | None:
    """The cluster that ``-M X`` / ``--clusters=X`` in an ``slurm_extra`` names, else None."""
    words = shlex.split(extra)
    for i, word in enumerate(words):
        if word in ("-M", "--clusters") and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(("--clusters=", "-M")) and word not in ("-M", "--clusters="):
            return word.removeprefix("--clusters=").removeprefix("-M")
    return None


def profile_cluster(settings: dict) -> str | None:
    """The cluster the profiles' ``default-resources`` send every job to (a resource of :data:`CLUSTER_KEYS`, or
    ``-M``/``--clusters`` in ``slurm_extra``), else None: the controller ``sinfo`` must ask."""
    defaults = settings.get("default-resources") or {}
    if isinstance(defaults, list):  # ["slurm_partition=gpu", ...], as on the command line
        defaults = dict(str(item).partition("=")[::2] for item in defaults)
    if not isinstance(defaults, dict):
        return None
    defaults = {str(key): _value(str(value)) for key, value in defaults.items()}
    return job_cluster(defaults) or _cluster_flag(defaults.get("slurm_extra", ""))


def _value(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def heaviest_requests(listing: str, local: set[str] = frozenset()) -> dict[str, Request]:
    """rule -> its heaviest request, from a dry run's job listing; the rules in ``local`` (and those the listing marks
    local) are left out: they run on the controller's machine, never through sbatch."""
    requests: dict[str, Request] = {}
    for match in JOB_BLOCK.finditer(listing):
        marked, rule, body = match.groups()
        if marked or rule in local:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", body, flags=re.M))
        resources = dict(re.findall(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,]+)", fields.get("resources", "")))
        resources = {key: _value(value) for key, value in resources.items()}
        req = requests.setdefault(rule, Request(rule))
        req.jobs += 1
        req.cpus = max(req.cpus, int(fields.get("threads", 1)))
        for attr, key in (("mem_mb", "mem_mb"), ("runtime", "runtime"), ("gpus", "gpu")):
            if resources.get(key, "").isdigit():
                setattr(req, attr, max(getattr(req, attr), int(resources[key])))
        if not req.options:
            keys = ("slurm_partition", "slurm_account", "qos", "gres", "gpu_model", *CLUSTER_KEYS, "slurm_extra")
            req.options = {key: resources[key] for key in keys if resources.get(key) not in (None, "", "None")}
    return requests


def fix_for(message: str) -> str:
    """What to change for SLURM's refusal ``message``."""
    lower = message.lower()
    return next((fix for pattern, fix in FIXES if pattern in lower), "see SLURM's reason above (scontrol show config)")


#: seconds SLURM's controller has to answer ``sinfo`` before every request is put to it
PROBE_SECONDS = 120


def controller_answers(cluster: str | None = None) -> tuple[bool, str]:
    """Whether SLURM's controller (``cluster``'s, on a multi-cluster site) answers ``sinfo`` from this machine in
    :data:`PROBE_SECONDS`, and what was seen: an unreachable one makes each ``sbatch --test-only`` wait minutes, then
    fail without a reason of the site's."""
    probe = ["sinfo", "--noheader", "--format=%P", *(["--clusters", cluster] if cluster else [])]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except FileNotFoundError:
        return False, "sinfo not found: run site-check where SLURM's commands are (a login node)"
    except (OSError, subprocess.TimeoutExpired) as err:
        why = f"no answer in {PROBE_SECONDS} s" if isinstance(err, subprocess.TimeoutExpired) else str(err)
        return False, f"sinfo: {why}: the controller is not reachable from this machine; run site-check on a login node"
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[-300:]
        return False, f"sinfo exited {proc.returncode} ({said}): the controller is not reachable from this machine"
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("CLUSTER:")]  # --clusters' header
    partitions = " ".join(lines).split()
    listed = " ".join(partitions[:8]) + (f" and {len(partitions) - 8} more" if len(partitions) > 8 else "")
    whose = f"cluster {cluster}'s controller" if cluster else "the controller"
    return True, f"{whose} answers (partitions: {listed or 'none listed'})"


def test_only(request: Request, settings: dict[str, str]) -> tuple[bool, str, str]:
    """``(accepted, the command, SLURM's answer)`` of ``sbatch --test-only`` for ``request``."""
    cmd = request.sbatch(settings)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, shlex.join(cmd), f"sbatch could not be run: {err}"
    answer = " ".join((proc.stderr + " " + proc.stdout).split())
    return proc.returncode == 0, shlex.join(cmd), answer


def hard_links(directory: Path) -> tuple[bool, str]:
    """Whether ``directory``'s file system makes hard links (a finished run's outputs are links of its kept copy)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".site-check-") as tmp:
        first, second = Path(tmp) / "a", Path(tmp) / "b"
        first.write_text("x")
        try:
            os.link(first, second)
        except OSError as err:
            return False, f"{directory}: no hard links ({err.strerror}): put --directory on a file system that has them"
        return first.stat().st_nlink == 2, f"{directory}: hard links work"


NODE_SCRIPT = """
import fcntl, os, sys, time
lock, held, release, stamp = sys.argv[1:5]
fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(stamp, "w").write(str(time.time()))
open(held + ".tmp", "w").write(os.uname().nodename)
os.replace(held + ".tmp", held)  # whole when it appears: this machine reads it as soon as it is there
deadline = time.time() + 120
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.5)
"""


def file_system_job(directory: Path, request: Request, settings: dict[str, str]) -> list[tuple[bool, str, str]]:
    """Hold a lock in ``directory`` from a compute node (one short job, the CPU rules' partition and account): this
    machine must see it held, and the node's file times must agree with this machine's clock."""
    with tempfile.TemporaryDirectory(dir=directory, prefix=".site-check-") as tmp:
        lock, held, release, stamp = (Path(tmp) / name for name in ("lock", "held", "release", "stamp"))
        job = Request("file-system", cpus=1, mem_mb=500, runtime=5, options=dict(request.options))
        job.options.pop("slurm_extra", None)
        cmd = [c for c in job.sbatch(settings) if c not in ("--test-only", "--wrap", "true")]
        cmd = ["srun" if c == "sbatch" else c for c in cmd]
        cmd += [sys.executable, "-c", NODE_SCRIPT, str(lock), str(held), str(release), str(stamp)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + FS_JOB_SECONDS
        while not held.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if not held.exists():
            proc.kill()
            out = " ".join((proc.communicate()[0] or "").split())[-400:]
            why = f"the job did not start within {FS_JOB_SECONDS} s" if proc.returncode is None else out
            return [(False, "cluster-wide lock", f"no job held the lock ({why}); rerun later or with --no-job")]
        node = readback.read_bytes(held, 1024, what="host name").decode(errors="replace").strip()
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen = False
        except BlockingIOError:
            seen = True
        except OSError as err:
            seen = None
            error = err.strerror
        finally:
            os.close(fd)
        skew = time.time() - stamp.stat().st_mtime
        release.touch()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    results = []
    if seen:
        results.append((True, "cluster-wide lock", f"a lock held on {node} is seen here"))
    elif seen is None:
        results.append((False, "cluster-wide lock", f"{directory}: flock fails here ({error}): put --directory on "
                        "a file system with locks (not every NFS mount has them)"))  # fmt: skip
    else:
        results.append((False, "cluster-wide lock", f"a lock held on {node} is NOT seen here: two jobs could write "
                        "one run; put --directory on a file system whose locks reach the whole cluster"))  # fmt: skip
    ok = abs(skew) <= CLOCK_SKEW_SECONDS
    results.append((ok, "file times", f"a file written on {node} is {skew:+.0f} s from this machine's clock" +
                    ("" if ok else ": the nodes' clocks or the file server's differ; Snakemake's mtime checks and "
                     "`status` need them within a minute (NTP)")))  # fmt: skip
    return results


def profile_settings(profiles: list[Path]) -> dict:
    """The profiles' top-level settings, a later profile's key replacing an earlier one's (as Snakemake does)."""
    import yaml

    settings: dict = {}
    for profile in profiles:
        path = profile / "config.yaml" if profile.is_dir() else profile
        data = yaml.safe_load(readback.read_bytes(path, 1 << 20, follow_links=True, what="profile").decode())
        if not isinstance(data, dict):
            raise SiteCheckError(f"{path}: not a Snakemake profile (a mapping of options)")
        settings.update(data)
    return settings


class SiteCheckError(RuntimeError):
    """The check cannot be made (a profile that cannot be read, a dry run that fails)."""


#: prints the workflow's local rules (a dry run's listing does not mark them), as Snakemake's API parses the Snakefile
LOCAL_RULES_SCRIPT = """
import json, sys
from pathlib import Path
from softmax_bottleneck.cluster.snakemake_run import parsed_local_rules
snakefile, workdir, *configs = sys.argv[1:]
local = parsed_local_rules(Path(snakefile), Path(workdir), [Path(c) for c in configs])
print("LOCAL-RULES " + json.dumps(sorted(local)))
"""


def local_rules(args, scratch: Path) -> set[str]:
    """The workflow's local rules (``localrules:``, ``localrule: True``, rules without a command)."""
    configs = [str(Path(c).resolve()) for c in args.configfile]
    cmd = [sys.executable, "-c", LOCAL_RULES_SCRIPT, str(args.snakefile), str(scratch), *configs]
    package_root = str(Path(__file__).resolve().parents[2])  # the script imports this package as this process does
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    found = [line for line in proc.stdout.splitlines() if line.startswith("LOCAL-RULES ")]
    if proc.returncode != 0 or not found:
        raise SiteCheckError(f"the workflow's local rules could not be read: {_tail(proc, 2)[-400:]}")
    return set(json.loads(found[-1].removeprefix("LOCAL-RULES ")))


def study_listing(args) -> tuple[str, set[str]]:
    """The dry run's job listing of the whole study through the profiles, in a scratch folder (every job listed), and
    the workflow's local rules."""
    scratch = Path(tempfile.mkdtemp(prefix="site-check-"))
    try:
        local = local_rules(args, scratch)
        configs = [str(Path(c).resolve()) for c in args.configfile]
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(args.snakefile), "--directory", str(scratch),
               "--configfile", *configs, "--dry-run", "--cores", str(DRY_RUN_CORES)]  # fmt: skip
        for profile in args.profile:
            cmd += ["--profile", str(Path(profile).resolve())]
        cmd += [*(["--config", *args.config] if args.config else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        raise SiteCheckError(f"the study's dry run through the profile failed: {_tail(proc, 3)[-600:]}")
    return proc.stdout, local


def add_cli(parser) -> None:
    parser.description = (
        "Ask SLURM (sbatch --test-only, nothing runs) whether each rule's heaviest request of the study is accepted on "
        "the profile's partition, account and QOS; check hard links, cluster-wide locks and file times of the study's "
        "folder (one short job). PASS or FAIL per item, with the fix; exit 1 when one fails."
    )
    parser.add_argument("--profile", action="append", required=True, metavar="DIR",
                        help="the Snakemake profile(s) of the study, as given to snakemake (repeatable)")  # fmt: skip
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"], metavar="FILE",
                        help="the study's configuration (config/config.yaml)")  # fmt: skip
    parser.add_argument("--config", nargs="+", metavar="KEY=VALUE", help="passed to snakemake's --config")
    parser.add_argument("--directory", type=Path, default=Path("."), metavar="DIR",
                        help="the study's folder (snakemake --directory): its file system is checked")  # fmt: skip
    parser.add_argument("--snakefile", type=Path, default=Path(__file__).resolve().parents[3] / "Snakefile",
                        help="the workflow's Snakefile (this checkout's)")  # fmt: skip
    parser.add_argument("--no-job", action="store_true", help="leave out the file-system job (locks, file times)")


def missing_inputs(args) -> str | None:
    """The one line naming a ``--profile`` folder or a ``--configfile`` that is not there, else None: checked before
    anything is asked of SLURM."""
    for profile in args.profile:
        if not (Path(profile) / "config.yaml").is_file():
            return (
                f"--profile {profile}: no profile there (a folder holding config.yaml, e.g. a copy of profiles/slurm)"
            )
    for config in args.configfile:
        if not Path(config).is_file():
            return f"--configfile {config}: no such file"
    return None


def _tail(proc, lines: int) -> str:
    """The last ``lines`` lines that say something of a failed command's output (stderr, else stdout): not Snakemake's
    "Using profile ..." line, nor a traceback's ``^^^`` markers."""
    for text in (proc.stderr, proc.stdout):
        said = [line.strip() for line in (text or "").splitlines()
                if line.strip() and not line.startswith("Using ") and set(line.strip()) - set("^~ ")]  # fmt: skip
        if said:
            return " ".join(said[-lines:])
    return "(no output)"


def run_cli(args) -> int:
    missing = missing_inputs(args)
    if missing:
        print(f"site-check: {missing}")
        return 1
    try:
        settings = profile_settings([Path(p) for p in args.profile])
    except (SiteCheckError, OSError, ValueError) as err:
        print(f"site-check: {err}")
        return 1
    reachable, said = controller_answers(profile_cluster(settings))
    print(f"{'PASS' if reachable else 'FAIL'} SLURM: {said}")
    if not reachable:  # each request would wait minutes for the same answer
        ok, text = hard_links(args.directory.resolve())
        print(f"{'PASS' if ok else 'FAIL'} hard links: {text}")
        print(f"site-check: {2 - ok} failed; the requests were not put to SLURM")
        return 1
    try:
        requests = heaviest_requests(*study_listing(args))
    except (SiteCheckError, OSError, ValueError) as err:
        print(f"site-check: {err}")
        return 1
    if not requests:
        print("site-check: the study's dry run lists no job that goes through sbatch: is the profile's executor slurm?")
        return 1
    failed = 0
    for rule, request in sorted(requests.items()):
        accepted, cmd, answer = test_only(request, settings)
        what = (f"{rule} ({request.jobs} jobs; heaviest: {request.cpus} CPUs, {request.mem_mb} MB, "
                f"{request.runtime} min, {request.gpus} GPUs)")  # fmt: skip
        if accepted:
            print(f"PASS {what}: accepted ({answer})")
        else:
            failed += 1
            print(f"FAIL {what}: refused: {answer} [{cmd}]. Fix: {fix_for(answer)}")
    ok, text = hard_links(args.directory.resolve())
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'} hard links: {text}")
    if not args.no_job:
        cpu = next((r for r in requests.values() if not r.gpus), next(iter(requests.values())))
        for ok, item, text in file_system_job(args.directory.resolve(), cpu, settings):
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {item}: {text}")
    print(f"site-check: {'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0
