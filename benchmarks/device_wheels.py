"""Wheels of what the lent GPU machine lacks to run the workflow (it has no package index), for carrying along.

The machine's Python packages are listed in the device notes (``/work/.library/device/KINDS.md``, "Python packages
already there"). This script walks the dependencies of this package and of Snakemake as installed in the running
environment (their versions pinned to the installed ones), drops those the machine has (and the SLURM plugins,
which a local run does not load), and downloads each missing one as a wheel for CPython 3.12 on manylinux x86-64
(the machine's Python) into ``--dest``, one ``pip download --no-deps`` each. ``benchmarks/gpu_session.py
--wheels DIR`` installs them there (``pip install --no-index --no-deps --target``) before anything else::

    python benchmarks/device_wheels.py --list                       # what would be fetched
    python benchmarks/device_wheels.py --dest benchmarks/wheels     # fetch (benchmarks/* is ignored by git)
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import subprocess
import sys
from pathlib import Path

KINDS = Path("/work/.library/device/KINDS.md")
ROOTS = ("softmax-bottleneck", "snakemake")
#: not needed on the machine: this package comes from src/ (PYTHONPATH); SLURM plugins load only under SLURM; pulp
#: (a 16 MB wheel) only for Snakemake's ILP scheduler, which smoke_workflow.py replaces by ``--scheduler greedy``
SKIP = {"softmax-bottleneck", "snakemake-executor-plugin-slurm", "snakemake-executor-plugin-slurm-jobstep", "pulp"}
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34)] + ["manylinux2014_x86_64"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def device_packages(kinds: Path = KINDS) -> set[str]:
    """The names of the "Python packages already there" line of the device notes."""
    text = kinds.read_text()
    line = text[text.index("Packages: ") + len("Packages: ") :].splitlines()[0]
    return {normalise(name.strip().rstrip(".")) for name in line.split(",") if name.strip()}


def closure(roots=ROOTS) -> dict[str, str]:
    """``{name: installed version}`` of the roots and everything they require (no extras)."""
    found: dict[str, str] = {}

    def walk(name: str) -> None:
        key = normalise(name)
        if key in found:
            return
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return
        found[key] = dist.version
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                walk(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))

    for root in roots:
        walk(root)
    return found


def missing(kinds: Path = KINDS) -> dict[str, str]:
    there = device_packages(kinds)
    return {name: v for name, v in sorted(closure().items()) if name not in there and name not in SKIP}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default="benchmarks/wheels", help="folder for the wheels")
    parser.add_argument("--kinds", type=Path, default=KINDS, help="the device notes listing the installed packages")
    parser.add_argument("--list", action="store_true", help="print name==version and download nothing")
    args = parser.parse_args(argv)
    wanted = missing(args.kinds)
    if args.list:
        print("\n".join(f"{name}=={version}" for name, version in wanted.items()))
        return 0
    Path(args.dest).mkdir(parents=True, exist_ok=True)
    flags = ["--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    for name, version in wanted.items():
        cmd = [sys.executable, "-m", "pip", "download", "-q", *flags, "-d", args.dest, f"{name}=={version}"]
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit(f"no wheel of {name}=={version} for CPython 3.12 on manylinux x86-64")
    print(f"{len(wanted)} wheels in {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
