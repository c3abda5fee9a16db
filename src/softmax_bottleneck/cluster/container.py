"""The container image of the jobs (``container_image``, run with ``snakemake --sdm apptainer``): the image named
is there, and the host folders a job reads outside its working directory are bound into it.

Snakemake runs each job as ``apptainer exec --home WORKDIR IMAGE sh -c COMMAND``: only the working directory (the
study's folder) is bound. The rules also read this checkout's ``src/`` (their ``PYTHONPATH``) and, for the fetch
rules, the data mirror: :func:`binds` gives them, read-only, for ``APPTAINER_BIND`` (a comma-separated list of
``SOURCE:TARGET:ro``), each at its resolved path, and the jobs are given the mirror by that path. A job's own Snakemake
(a cluster job's) reads the workflow again and finds the binds already there: none is added twice.
"""

from __future__ import annotations

import os

#: what ``APPTAINER_BIND`` separates: a path holding one cannot be bound through it
SEPARATORS = (",", ":")


def bind(path: str) -> str:
    """The folder at ``path`` read-only at the same place in the container. A symbolic link is bound as the folder it
    names (Apptainer binds /tmp and the working directory as they are, where the job then follows the link)."""
    path = os.path.realpath(path)
    for separator in SEPARATORS:
        if separator in path:
            raise SystemExit(
                f"container_image: {path!r} holds {separator!r} and cannot be bound into the container "
                "(APPTAINER_BIND separates binds with ',' and ':'): move it to a path without"
            )
    return f"{path}:{path}:ro"


def binds(package_src: str, data_mirror: str | None) -> list[str]:
    """The binds of a job in the image: the package's ``src/``, and the data mirror where one is configured (a
    relative one is the job's, from its working directory)."""
    return [bind(package_src), *([bind(data_mirror)] if data_mirror else [])]


def check_image(image: str) -> None:
    """An image given as a path (not a ``docker://`` or ``library://`` address, which Apptainer pulls) must exist,
    else the study stops before any job in one line naming it."""
    if "://" not in image and not os.path.exists(image):
        raise SystemExit(
            f"container_image: {image!r} does not exist (from {os.getcwd()}): build it with "
            "`apptainer build softmax-bottleneck.sif envs/softmax-bottleneck.def` (docs/cluster.md)"
        )


def bind_for_jobs(package_src: str, data_mirror: str) -> str:
    """Adds :func:`binds` to this process's ``APPTAINER_BIND`` (after any the user set), which every job Snakemake
    starts inherits, and returns the data mirror as a job in the image names it: its resolved path ("" for none)."""
    mirror = os.path.realpath(data_mirror) if data_mirror else ""
    existing = [entry for entry in os.environ.get("APPTAINER_BIND", "").split(",") if entry]
    ours = [entry for entry in binds(package_src, mirror or None) if entry not in existing]
    os.environ["APPTAINER_BIND"] = ",".join([*existing, *ours])
    return mirror
