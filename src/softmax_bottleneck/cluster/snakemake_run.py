"""What the workflow reads of the Snakemake that runs it, in one place: the values that no directive, profile or
plug-in interface hands a Snakefile. Each function takes the Snakefile's ``workflow`` object and returns plain values.

* the ``--configfile`` files and ``--config`` values as given: the package's bounded reader reads them
  (``study.config.load``), not Snakemake's, which merges ``configfile:`` underneath;
* one rule's ``--set-resources`` value (the site's time limit a profile gives ``train``);
* whether this process is the controller, not the Snakemake a job runs in;
* the jobs the run will start and its job slots (the time left, recorded at its start);
* the workflow's local rules, also of a Snakefile parsed by Snakemake's API (the site check leaves them out: they
  never go through ``sbatch``).

Read from Snakemake 9 (``requirements.lock`` pins the version CI runs); where a later Snakemake lacks one,
:class:`SnakemakeChanged` names it. ``tests/test_snakemake_run.py`` reads every value from a real run.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path


class SnakemakeChanged(RuntimeError):
    """This Snakemake lacks a value the workflow reads of it (one line: the version and the attribute)."""


def _read(workflow, path: str):
    """``workflow.<path>`` (dotted), or :class:`SnakemakeChanged` naming it."""
    value = workflow
    try:
        for name in path.split("."):
            value = getattr(value, name)
    except AttributeError as err:
        raise SnakemakeChanged(
            f"Snakemake {version('snakemake')} has no workflow.{path} ({err}): this workflow reads it "
            "(softmax_bottleneck.cluster.snakemake_run); install the Snakemake of requirements.lock"
        ) from None
    return value


def is_controller(workflow) -> bool:
    """True in the Snakemake that plans and submits the jobs, False in the one a job runs in."""
    return bool(_read(workflow, "is_main_process"))


def given_configfiles(workflow) -> list[str]:
    """The ``--configfile`` files as given on the command line (a profile's ``configfile:`` too), in order."""
    return [str(path) for path in _read(workflow, "overwrite_configfiles") or ()]


def given_config(workflow) -> dict:
    """The ``--config KEY=VALUE`` values, as Snakemake parsed them."""
    return dict(_read(workflow, "config_settings.config") or {})


def set_resource(workflow, rule: str, resource: str):
    """The value ``--set-resources RULE:RESOURCE=VALUE`` gives (a profile's ``set-resources:`` too), or None; a string
    Snakemake would evaluate in a job's context (``1-00:00:00``) as written."""
    overrides = _read(workflow, "resource_settings.overwrite_resources") or {}
    value = (overrides.get(rule) or {}).get(resource)
    if hasattr(value, "is_evaluable") and value.is_evaluable():
        return value.raw
    return getattr(value, "value", value)


def jobs_to_run(workflow) -> list[tuple[int, str, dict, int]]:
    """``(jobid, rule, wildcards, threads)`` of every job this run will start (``onstart:`` only: the DAG is built)."""
    jobs = _read(workflow, "dag").needrun_jobs()
    return [(job.jobid, job.rule.name, dict(job.wildcards), job.threads) for job in jobs]


def job_slots(workflow) -> tuple[bool, int]:
    """``(local, slots)``: whether jobs run on this machine, and how many at once: the lesser of ``--cores`` and the
    ``gpu`` of ``--resources`` there, ``--jobs`` through an executor plug-in (SLURM)."""
    local = bool(_read(workflow, "local_exec"))
    if not local:
        return False, _read(workflow, "nodes")
    gpus = _read(workflow, "global_resources").get("gpu")
    gpus = getattr(gpus, "value", gpus)
    return True, min(v for v in (_read(workflow, "cores"), gpus) if v)


def local_rules(workflow) -> set[str]:
    """The rules that run on the controller's machine (``localrules:``, ``localrule: True``, rules without a
    command)."""
    # not workflow.is_local(rule): that is every rule when the jobs run on this machine
    return set(_read(workflow, "_localrules")) | {rule.name for rule in _read(workflow, "rules") if rule.norun}


def parsed_local_rules(snakefile: Path, workdir: Path, configfiles: list[Path]) -> set[str]:
    """:func:`local_rules` of ``snakefile`` as Snakemake's API parses it in ``workdir`` (no DAG built, no job run)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings()) as api:
        parsed = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=snakefile,
                              config_settings=ConfigSettings(configfiles=configfiles), workdir=workdir)  # fmt: skip
        return local_rules(_read(parsed, "_workflow"))
