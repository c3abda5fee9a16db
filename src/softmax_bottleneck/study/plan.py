"""The training plan (``snakemake plan``): every distinct run, the experiments that use it, its projected cost.

A run's projected V100 GPU-hours are the paper's seconds per epoch (Table 2, ``data/reported/main.csv``) × its
epochs. A variant whose time the paper does not report takes the time of the first of :func:`time_sources` that has
one: its registered cost proxy (e.g. LMS-PLIF for LMS-PLIF†), else its family's default (Softmax for the softmax
family, MoS for the mixture family).
"""

from __future__ import annotations

import functools
import io
from importlib import resources

import pandas as pd

from softmax_bottleneck import presets
from softmax_bottleneck.study.runs import Run, Study

#: a family's stand-in for variants whose time the paper does not report and that declare no cost proxy
FAMILY_COST_PROXY: dict[str, str] = {"softmax": "softmax", "mixture": "mos"}
PLAN_COLUMNS = [
    "run", "experiments", "dataset", "variant", "schedule", "seed", "seed_kind", "tag", "runid", "epochs",
    "v100_s_per_epoch", "time_of", "gpu_hours",
]  # fmt: skip


@functools.cache
def paper_seconds_per_epoch() -> dict[tuple[str, str], float]:
    """(dataset, variant) → seconds per epoch on one V100 as the paper's Table 2 reports them ("~55s" ...)."""
    text = resources.files("softmax_bottleneck").joinpath("data/reported/main.csv").read_text(encoding="utf-8")
    main = pd.read_csv(io.StringIO(text), usecols=["dataset", "variant", "seconds_per_epoch"]).dropna()
    return {(r.dataset, r.variant): float(r.seconds_per_epoch) for r in main.itertuples()}


def time_sources(variant: str) -> list[tuple[str, str]]:
    """Whose time stands for ``variant``'s, in order, as ``(variant, label)``: itself, its registered cost proxy,
    its family's default (``"<proxy> (family default)"``). ValueError for a variant that is not registered."""
    info = presets.variant_info(variant)
    family = FAMILY_COST_PROXY[info.family]
    sources = [(variant, variant)]
    if info.cost_proxy:
        sources.append((info.cost_proxy, info.cost_proxy))
    return [*sources, (family, f"{family} (family default)")]


def first_time(table: dict, dataset: str, variant: str):
    """``(table[dataset, name], label)`` for the first of :func:`time_sources` in ``table``, else None."""
    sources = time_sources(variant)
    return next(((table[dataset, name], label) for name, label in sources if (dataset, name) in table), None)


def seconds_per_epoch(dataset: str, variant: str) -> tuple[float, str]:
    """The paper's V100 seconds per epoch standing for ``variant`` on ``dataset``, and whose time it is."""
    found = first_time(paper_seconds_per_epoch(), dataset, variant)
    if found is None:
        raise ValueError(f"no reported time per epoch for dataset {dataset!r} (variant {variant!r})")
    return found


def gpu_hours(run: Run) -> float:
    """Projected V100 GPU-hours of one run: the paper's seconds per epoch × the run's epochs."""
    seconds, _ = seconds_per_epoch(run.dataset, run.variant)
    return run.hyperparameters["epochs"] * seconds / 3600.0


def plan_rows(study: Study) -> list[dict]:
    """One row per training job: its folder, experiments, identity, epochs and projected V100 GPU-hours."""
    members = study.members()
    rows = []
    for path, run in study.jobs.items():
        seconds, time_of = seconds_per_epoch(run.dataset, run.variant)
        rows.append(
            dict(
                run=path,
                experiments=" ".join(members[path]),
                dataset=run.dataset,
                variant=run.variant,
                schedule=run.schedule,
                seed=run.seed,
                seed_kind=run.seed_kind,
                tag=run.tag,
                runid=run.runid,
                epochs=run.hyperparameters["epochs"],
                v100_s_per_epoch=seconds,
                time_of=time_of,
                gpu_hours=round(gpu_hours(run), 4),
            )
        )
    return rows


def plan_frame(study: Study) -> pd.DataFrame:
    return pd.DataFrame(plan_rows(study), columns=PLAN_COLUMNS)
