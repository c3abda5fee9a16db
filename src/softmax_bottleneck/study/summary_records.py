"""What each summary under ``<results>/summary/`` reads: one record per run or reference model, as ``summarize
--record`` takes it (:mod:`softmax_bottleneck.report.summaries`), its files relative to the working directory.

The workflow's summarize rules (their inputs and ``--record`` arguments) and the preview of a study still running
(:mod:`softmax_bottleneck.report.preview`) both read them here:

* ``<experiment>.csv`` (kind ``runs``) and ``sweep_<name>.csv`` (``sweep``): per run ``experiment, dataset,
  variant, schedule, seed, seed_kind, metrics, rank``;
* ``spectra.csv``, ``wordsim.csv``: per reference model ``dataset, variant, csv, metrics``; ``top5.csv``: per
  model ``model, dataset, variant, schedule, csv, metrics``;
* ``robustness.csv`` (``copy``): E12's result, ``csv``;
* ``wordsim_coverage.csv`` (``coverage``, SM Table 13): no model, per dataset of the word-similarity analysis
  ``dataset, corpus, benchmarks``, its tokenised corpus and the benchmarks' folder (:func:`coverage_records`).

A table or figure that reads only some runs of its summaries says which (``runs=`` of its registration,
:func:`selected`); it is then built from its own copies of them, ``for/<item>/<file>`` (:func:`item_summary_records`),
whose records are those runs only: ``snakemake table4`` trains the LMS-PLIF runs of E1 and E7, not all of E1.
"""

from __future__ import annotations

from softmax_bottleneck.corpora.datasets import CORPUS_CACHE, WORDSIM_FOLDER
from softmax_bottleneck.study.runs import SWEEP_PREFIX, Run, Study, analysis_names

#: the record keys that name a file (of a run folder; a corpus, the benchmarks' folder)
FILE_KEYS = ("metrics", "rank", "csv", "corpus", "benchmarks")
#: the summary of the benchmark pairs each vocabulary misses (SM Table 13): read from the corpora, no model
COVERAGE_SUMMARY = "wordsim_coverage.csv"
#: the fields a table or figure selects its runs by (``runs=`` of its registration)
SELECTION_FIELDS = ("dataset", "variant", "schedule", "seed_kind")
#: the folder, under ``<results>/summary/``, of the summaries of one table or figure that selects its runs
ITEM_FOLDER = "for/{item}"


def check_selection(selection) -> tuple[dict[str, tuple[str, ...]], ...] | None:
    """``selection`` as :func:`selected` takes it: None (every run), or alternatives, each a mapping of some of
    :data:`SELECTION_FIELDS` to the values allowed; a :class:`ValueError` naming what is wrong otherwise."""
    if selection is None:
        return None
    for alt in selection:
        unknown = set(alt) - set(SELECTION_FIELDS)
        if not alt or unknown:
            raise ValueError(f"runs={list(selection)}: each alternative maps some of {', '.join(SELECTION_FIELDS)} "
                             f"to the values allowed{f', not {sorted(unknown)}' if unknown else ''}")  # fmt: skip
        if any(isinstance(values, str) or not values for values in alt.values()):
            raise ValueError(f"runs={list(selection)}: give each field a list of values")
    return tuple({key: tuple(values) for key, values in alt.items()} for alt in selection)


def selected(run, selection) -> bool:
    """Whether ``run`` is read by an item whose registration selects ``selection`` (:func:`check_selection`): it
    matches one alternative in each of its fields. ``run`` is a :class:`Run` or a summary row (a mapping); a field
    the row lacks (``spectra.csv`` has no schedule) is not tested."""
    if selection is None:
        return True
    row = run if hasattr(run, "keys") else {key: getattr(run, key) for key in SELECTION_FIELDS}
    return any(all(key not in row or row[key] in values for key, values in alt.items()) for alt in selection)


def item_summary_records(records: dict, items) -> dict[str, tuple[str, list[tuple[Run, dict]]]]:
    """``for/<item>/<file>`` → (kind, records) of each table or figure of ``items`` (``.name``, ``.requires``,
    ``.runs``) that selects its runs: the records of ``records[<file>]`` whose runs it reads, in their order."""
    out = {}
    for item in items:
        if item.runs is None:
            continue
        for file in item.requires:
            kind, rows = records[file]
            if kind not in ("runs", "spectra", "wordsim", "top5"):
                raise ValueError(f"{item.name}: selects its runs, but {file} ({kind}) is not a summary of runs")
            chosen = [(run, record) for run, record in rows if selected(run, item.runs)]
            out[f"{ITEM_FOLDER.format(item=item.name)}/{file}"] = (kind, chosen)
    return out


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


def coverage_records(study: Study) -> list[dict]:
    """The records of :data:`COVERAGE_SUMMARY`: per dataset of the word-similarity analysis (``analysis/wordsim``), its
    tokenised corpus and the benchmarks' folder. SM Table 13 counts the vocabularies' misses, so nothing trains."""
    datasets = dict.fromkeys(study.config["analysis"]["wordsim"]["datasets"])
    return [{"dataset": ds, "corpus": CORPUS_CACHE.format(dataset=ds), "benchmarks": WORDSIM_FOLDER} for ds in datasets]


def record_files(record: dict) -> list[str]:
    """The files ``record`` names, in its order."""
    return [value for key, value in record.items() if key in FILE_KEYS]
