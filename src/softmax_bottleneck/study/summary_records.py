"""What each summary under ``<results>/summary/`` reads: one record per run or reference model, as ``summarize
--record`` takes it (:mod:`softmax_bottleneck.report.summaries`), its files relative to the working directory.

The workflow's summarize rules (their inputs and ``--record`` arguments) and the preview of a study still running
(:mod:`softmax_bottleneck.report.preview`) both read them here:

* ``<experiment>.csv`` (kind ``runs``) and ``sweep_<name>.csv`` (``sweep``): per run ``experiment, dataset,
  variant, schedule, seed, seed_kind, metrics, rank``;
* ``spectra.csv``, ``wordsim.csv``: per reference model ``dataset, variant, csv, metrics``; ``top5.csv``: per
  model ``model, dataset, variant, schedule, csv, metrics``;
* ``robustness.csv`` (``copy``): E12's result, ``csv``.
"""

from __future__ import annotations

from softmax_bottleneck.study.runs import SWEEP_PREFIX, Run, Study, analysis_names

#: the record keys that name a file (of a run folder)
FILE_KEYS = ("metrics", "rank", "csv")


def _run_record(experiment: str, run: Run, rank: str) -> dict:
    return {"experiment": experiment, "dataset": run.dataset, "variant": run.variant, "schedule": run.schedule,
            "seed": run.seed, "seed_kind": run.seed_kind, "metrics": run.file("metrics.json"),
            "rank": run.file(rank)}  # fmt: skip


def summary_records(study: Study) -> dict[str, tuple[str, list[tuple[Run, dict]]]]:
    """Summary file → (its kind: ``runs``, ``sweep``, ``spectra``, ``wordsim``, ``top5`` or ``copy``; per run or
    model read, the run and its record), in the order the records are given to ``summarize``."""
    rank, spectrum, robustness = analysis_names(study.config)
    out: dict[str, tuple[str, list[tuple[Run, dict]]]] = {}
    for name, runs in study.experiments.items():
        out[f"{name}.csv"] = ("runs", [(r, _run_record(name, r, rank)) for r in runs])
    for name, runs in study.sweeps.items():
        out[f"{SWEEP_PREFIX}{name}.csv"] = ("sweep", [(r, _run_record(SWEEP_PREFIX + name, r, rank)) for r in runs])
    for kind, file in (("spectra", spectrum), ("wordsim", "wordsim.csv")):
        records = [(r, {"dataset": r.dataset, "variant": r.variant, "csv": r.file(file),
                        "metrics": r.file("metrics.json")}) for r in study.model_set(kind)]  # fmt: skip
        out[f"{kind}.csv"] = (kind, records)
    out["top5.csv"] = ("top5", [(r, {"model": name, "dataset": r.dataset, "variant": r.variant, "schedule": r.schedule,
                                     "csv": r.file("top5.csv"), "metrics": r.file("metrics.json")})
                                for name, r in study.top5_models.items()])  # fmt: skip
    model = study.robustness_model
    out["robustness.csv"] = ("copy", [(model, {"csv": model.file(f"{robustness}/robustness.csv")})])
    return out


def record_files(record: dict) -> list[str]:
    """The files ``record`` names, in its order."""
    return [value for key, value in record.items() if key in FILE_KEYS]
