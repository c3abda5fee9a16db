"""``apptainer build IMAGE DEFINITION`` stood in for by Charliecloud, for tests/test_container.py. The image's start:
for ``Bootstrap: docker`` / ``From: python:3.11-slim-bookworm``, a Debian 12 root file system from debootstrap with
Python 3.11 (the same Debian and Python minor release); for ``Bootstrap: localimage``, a copy of the image ``From``
names. Then the definition's sections as Apptainer runs them (apptainer.org, "Definition Files"): ``%arguments``
defaults and ``--build-arg``s filled into ``{{ NAME }}``, ``%files`` copied from the working directory, ``%post`` run
in the image with ``/bin/sh -e``, ``%environment`` added where Apptainer keeps it
(``/.singularity.d/env/90-environment.sh``, sourced by tests/container/apptainer), then ``%test``. The result is a
directory image for tests/container/apptainer."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

#: the image the definition bootstraps from, and what stands in for it
BASE = ("docker", "python:3.11-slim-bookworm")
DEBOOTSTRAP = ["debootstrap", "--variant=minbase", "--include=python3,python3-venv", "bookworm"]
SECTION = re.compile(r"^%(\w+)\s*$")


def sections(definition: str) -> tuple[dict[str, str], dict[str, str]]:
    """(header, sections) of an Apptainer definition file: ``Key: value`` lines before the first ``%section``, then
    each section's text."""
    header: dict[str, str] = {}
    body: dict[str, list[str]] = {}
    current = None
    for line in definition.splitlines():
        match = SECTION.match(line)
        if match:
            current = match.group(1)
            body[current] = []
        elif current is not None:
            body[current].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition(":")
            header[key.strip()] = value.strip()
    return header, {name: "\n".join(lines) for name, lines in body.items()}


def base_rootfs(dest: Path) -> Path:
    """The stand-in of the definition's base image: a Debian 12 minbase with Python 3.11 (about 45 s)."""
    subprocess.run([*DEBOOTSTRAP, str(dest)], check=True, capture_output=True, text=True)
    return dest


def run_in(image: Path, script: str, env: dict, binds: tuple[str, ...] = ()) -> None:
    """``script`` in the image with ``/bin/sh -e``, as Apptainer runs %post, the image writable."""
    mounts = [arg for path in binds for arg in ("-b", path)]
    done = subprocess.run(["ch-run", "-w", *mounts, str(image), "--", "/bin/sh", "-e", "-c", script],
                          env=env, capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{image}: exit {done.returncode} of\n{script}\n{(done.stdout + done.stderr)[-3000:]}")


def build(definition: Path, image: Path, base: Path | None = None, build_args: dict[str, str] | None = None,
          binds: tuple[str, ...] = (), env: dict | None = None) -> Path:  # fmt: skip
    """``apptainer build IMAGE DEFINITION`` from the working directory. ``base`` stands in for the docker image the
    definition bootstraps from (:func:`base_rootfs`); ``binds`` are host folders the build may read (this machine's
    certificates and local wheels, standing in for the network)."""
    header, parts = sections(definition.read_text())
    bootstrap = (header.get("Bootstrap"), header.get("From"))
    if bootstrap == BASE and base is not None:
        start = base
    elif bootstrap[0] == "localimage":
        start = Path(bootstrap[1])
    else:
        raise ValueError(f"{definition}: bootstraps from {header}; the stand-in knows {BASE} and localimage")
    arguments = dict(line.strip().split("=", 1) for line in parts.get("arguments", "").splitlines() if "=" in line)
    arguments.update(build_args or {})
    for name, text in parts.items():
        parts[name] = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: arguments[m.group(1)], text)
    subprocess.run(["cp", "-a", str(start), str(image)], check=True)  # device files as such, not their contents
    for line in parts.get("files", "").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            source, target = line.split()
            destination = image / target.lstrip("/")
            destination.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if Path(source).is_dir() else shutil.copy)(source, destination)
    env = dict(env or os.environ)
    env.setdefault("USER", pwd.getpwuid(os.getuid()).pw_name)  # ch-run needs it
    run_in(image, parts.get("post", ""), env, binds)  # without %environment, as Apptainer runs %post
    environment = image / ".singularity.d" / "env" / "90-environment.sh"
    environment.parent.mkdir(parents=True, exist_ok=True)
    with environment.open("a") as out:  # a localimage keeps its base's environment
        out.write(parts.get("environment", "") + "\n")
    run_in(image, f". /{environment.relative_to(image)}\n{parts.get('test', '')}", env, binds)
    return image
