"""Wheels of what a GPU machine without a package index lacks to run the workflow, to copy over with the tree.

This script walks the dependencies of this package and of Snakemake as installed in the running environment (their
versions pinned to the installed ones), drops those the card's machine already has (``--have FILE``: its
``python3 -m pip list --format=freeze``, or names separated by commas or lines; without it, torch and its CUDA
libraries, which such a machine brings with its own build) and the SLURM plugins (a local run does not load them),
and downloads each missing one as a wheel for CPython 3.12 on manylinux x86-64 into ``--dest``, one ``pip download
--no-deps`` each. ``benchmarks/gpu_session.py --wheels DIR`` installs them there (``pip install --no-index
--no-deps --target``) before anything else::

    python benchmarks/device_wheels.py --have there.txt --list                     # what would be fetched
    python benchmarks/device_wheels.py --have there.txt --dest benchmarks/wheels   # (benchmarks/* is git-ignored)
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import subprocess
import sys
from pathlib import Path

ROOTS = ("softmax-bottleneck", "snakemake")
#: not needed on the machine: this package comes from src/ (PYTHONPATH); SLURM plugins load only under SLURM; pulp
#: (a 16 MB wheel) only for Snakemake's ILP scheduler, which smoke_workflow.py replaces by ``--scheduler greedy``
SKIP = {"softmax-bottleneck", "snakemake-executor-plugin-slurm", "snakemake-executor-plugin-slurm-jobstep", "pulp"}
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34)] + ["manylinux2014_x86_64"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def packages_there(have: Path | None) -> set[str]:
    """The normalised names in ``have`` (``name==version`` per line, or names separated by commas); None: torch's."""
    if have is None:
        return {"torch", "triton"}
    names = re.split(r"[,\n]", have.read_text())
    return {normalise(re.split(r"[=<>~! ]", name.strip(), maxsplit=1)[0].rstrip(".")) for name in names if name.strip()}


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


def missing(have: Path | None = None) -> dict[str, str]:
    there = packages_there(have)
    cuda_libraries = have is None  # torch's own CUDA libraries come with the machine's torch
    return {
        name: version
        for name, version in sorted(closure().items())
        if name not in there and name not in SKIP and not (cuda_libraries and name.startswith("nvidia-"))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default="benchmarks/wheels", help="folder for the wheels")
    parser.add_argument("--have", type=Path, metavar="FILE",
                        help="what the card's machine has: its `pip list --format=freeze` (default: torch and its "
                        "CUDA libraries only)")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print name==version and download nothing")
    args = parser.parse_args(argv)
    wanted = missing(args.have)
    if args.list:
        print("\n".join(f"{name}=={version}" for name, version in wanted.items()))
        return 0
    Path(args.dest).mkdir(parents=True, exist_ok=True)
    flags = ["--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    for name, version in wanted.items():
        cmd = [sys.executable, "-m", "pip", "download", "-q", *flags, "-d", args.dest, f"{name}=={version}"]
        if subprocess.run(cmd).returncode == 0:
            continue
        # no published wheel (an sdist only, as connection-pool 0.0.3): build one here; a pure-Python wheel
        # (``py3-none-any``) installs anywhere, a compiled one would not match the card's machine and is refused
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", args.dest,
                                f"{name}=={version}"])  # fmt: skip
        pure = list(Path(args.dest).glob(f"{name.replace('-', '_')}-{version}-*-none-any.whl"))
        if built.returncode != 0 or not pure:
            raise SystemExit(f"no wheel of {name}=={version} for CPython 3.12 on manylinux x86-64")
    print(f"{len(wanted)} wheels in {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
