"""Summary tables: the small CSVs under ``results/summary/`` that every table and figure reads.

* :func:`collect_runs` — one row per trained model, from its ``metrics.json`` (+ ``rank.json``);
* :func:`collect_sweep` — one row per model of a sweep (``sweeps`` of the configuration): its swept
  hyper-parameters, what training recorded (perplexities, epochs, time) and its ranks, from its ``metrics.json``
  (+ ``rank.json``);
* :func:`collect_spectra`, :func:`collect_wordsim`, :func:`collect_top5` — concatenate per-model analysis CSVs;
* :func:`collect_coverage` — SM Table 13: the benchmark pairs each corpus's vocabulary misses (no model).

Every summary of models has a ``layer_source`` column: ``<layer>@<first 16 hex digits of the SHA-256 of its module
file>``, the code of the output layer that trained the row's model (``metrics.json``; an analysis record names it with
``metrics=``), so a table or figure can say which results an older source of a layer made; and ``older_source``:
True where that is another source than the one installed when the summary was written (the workflow writes a
summary again when a layer it shows changes), False where the same, empty where the model's source is unknown.

Command line (one ``--record`` per input, ``key=value`` pairs separated by commas)::

    python -m softmax_bottleneck summarize --kind runs --out results/summary/main.csv \\
        --record experiment=main,dataset=ptb,variant=ss,schedule=et,seed=141,seed_kind=authors,\\
metrics=results/.../metrics.json,rank=results/.../rank.json ...
    python -m softmax_bottleneck summarize --kind sweep --hyperparameter taylor_scale \\
        --out results/summary/sweep_NAME.csv --record experiment=sweep_NAME,dataset=ptb,variant=taylor,...,\\
metrics=results/.../metrics.json ...
    python -m softmax_bottleneck summarize --kind spectra --out results/summary/spectra.csv \\
        --record dataset=ptb,variant=ss,csv=results/.../spectrum.csv,metrics=results/.../metrics.json ...
    python -m softmax_bottleneck summarize --kind wordsim --out ... --record dataset=ptb,variant=ss,csv=...
    python -m softmax_bottleneck summarize --kind top5 --out ... --record model=MoS*,dataset=ptb,variant=mos,\\
schedule=nt,csv=...
    python -m softmax_bottleneck summarize --kind coverage --out results/summary/wordsim_coverage.csv \\
        --record dataset=ptb,corpus=resources/corpus/ptb.pt,benchmarks=resources/data/word-sim ...

The output CSV is written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from softmax_bottleneck import bounds, readback
from softmax_bottleneck.analysis.outputs import OutputError, check_writable
from softmax_bottleneck.analysis.rank import EPSILONS
from softmax_bottleneck.atomic import atomic_write_csv, write_error
from softmax_bottleneck.models.output_layers import output_layers
from softmax_bottleneck.models.output_layers.provenance import layer_source_tag, older_tag_layer
from softmax_bottleneck.study.summary_records import FILE_KEYS

log = logging.getLogger(__name__)

#: the last columns of every summary: which source of its layer trained the row's model, and whether it is an older
#: one than the source installed
SOURCE_COLUMNS: list[str] = ["layer_source", "older_source"]
#: columns of a run summary (docs/architecture.md, "Summary tables"), in order
RUN_COLUMNS: list[str] = [
    "experiment",
    "dataset",
    "variant",
    "schedule",
    "seed",
    "seed_kind",
    "gss_c",
    "gss_k",
    "n_experts",
    "dropoutl",
    "parameters",
    "train_ppl",
    "valid_ppl",
    "test_ppl",
    "seconds_per_epoch",
    "fused_runs",
    "epochs_run",
    "switch_epoch",
    "press_rank",
    "erank_1e-3",
    "erank_1e-4",
    "erank_1e-5",
    *SOURCE_COLUMNS,
]
#: columns of a sweep summary: the run's identity, then its swept hyper-parameters, then these
SWEEP_ID_COLUMNS: list[str] = RUN_COLUMNS[:6]
SPECTRA_COLUMNS: list[str] = ["dataset", "variant", "index", "sigma", "sigma_normalised", *SOURCE_COLUMNS]
#: what a top-5 row's model is, beside its display name: its dataset, variant and schedule (the record's, where given)
TOP5_MODEL_COLUMNS: list[str] = ["dataset", "variant", "schedule"]
WORDSIM_COLUMNS: list[str] = [
    "dataset",
    "variant",
    "benchmark",
    "pairs",
    "found",
    "not_found",
    "spearman",
    *SOURCE_COLUMNS,
]
TOP5_COLUMNS: list[str] = [
    "model",
    *TOP5_MODEL_COLUMNS,
    "group",
    "number",
    "token_index",
    "true_token",
    *[f"word_{i}" for i in range(1, 6)],
    *[f"prob_{i}" for i in range(1, 6)],
    "hit",
    *SOURCE_COLUMNS,
]
#: run-summary columns taken from ``metrics.json`` / its ``hyperparameters`` / ``rank.json``
_METRIC_KEYS = ["parameters", "train_ppl", "valid_ppl", "test_ppl", "seconds_per_epoch", "epochs_run", "switch_epoch"]
#: the output-layer hyper-parameters the paper sweeps (E4, E8, E9): always columns of a run summary
_HP_KEYS = ["gss_c", "gss_k", "n_experts", "dropoutl"]
_RUN_SORT = ["experiment", "dataset", "variant", "schedule", "gss_c", "gss_k", "n_experts", "dropoutl", "seed_kind"]
SEED_KINDS = ("authors", "random")

#: record keys each kind needs (``rank`` is optional for runs and sweeps: its columns are then empty; ``metrics`` is
#: optional for spectra, wordsim and top5: it fills ``layer_source``, the code of the layer that trained the model)
RECORD_KEYS: dict[str, list[str]] = {
    "runs": ["experiment", "dataset", "variant", "schedule", "seed", "seed_kind", "metrics"],
    "sweep": ["experiment", "dataset", "variant", "schedule", "seed", "seed_kind", "metrics"],
    "spectra": ["dataset", "variant", "csv"],
    "wordsim": ["dataset", "variant", "csv"],
    "top5": ["model", "csv"],
    "coverage": ["dataset", "corpus", "benchmarks"],
}


#: the optional record keys of each kind, as ``--help`` shows them
OPTIONAL_RECORD_KEYS = {"runs": " [, rank]", "sweep": " [, rank]", "spectra": " [, metrics]", "wordsim": " [, metrics]",
                        "top5": " [, dataset, variant, schedule, metrics]"}  # fmt: skip


class RecordError(ValueError):
    """A bad ``--record`` / record dict (the message names it)."""


# --------------------------------------------------------------------------------------------- helpers
def _describe(record: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in record.items())


def _check_keys(record: dict, kind: str) -> None:
    missing = [k for k in RECORD_KEYS[kind] if record.get(k) in (None, "")]
    if missing:
        raise RecordError(
            f"record [{_describe(record)}] lacks {', '.join(missing)} (a {kind} record needs "
            f"{', '.join(RECORD_KEYS[kind])})"
        )


def _read_json(path, record: dict) -> dict:
    """A run's JSON file, strictly (:func:`softmax_bottleneck.readback.load_json`)."""
    path = Path(path)
    why = readback.not_a_file(path)
    if why:
        raise FileNotFoundError(f"{path}: {why} (record [{_describe(record)}])")
    try:
        return readback.load_json(path)
    except readback.ReadbackError as err:
        raise RecordError(f"{err} (record [{_describe(record)}])") from None


def _read_csv(path, record: dict, needed: Iterable[str], key: Sequence[str] = ()) -> pd.DataFrame:
    """A per-model CSV, its numbers checked (:func:`softmax_bottleneck.readback.check_columns`); with ``key`` (the
    columns naming a row: a benchmark, a context), at least one row and no two rows of one key."""
    path = Path(path)
    why = readback.not_a_file(path)
    if why:
        raise FileNotFoundError(f"{path}: {why} (record [{_describe(record)}])")
    try:
        frame = readback.read_csv(path)
        readback.check_columns(frame, path)
    except readback.ReadbackError as err:
        raise RecordError(f"{err} (record [{_describe(record)}])") from None
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise RecordError(f"{path}: missing column(s) {', '.join(missing)} (record [{_describe(record)}])")
    if key and frame.empty:
        raise RecordError(f"{path}: holds no row (record [{_describe(record)}])")
    twice = frame.duplicated(list(key)).to_numpy().nonzero()[0] if key else ()
    if len(twice):
        named = ", ".join(f"{column} {frame[column].iloc[twice[0]]}" for column in key)
        raise RecordError(f"{path}: row {twice[0] + 1} repeats {named} (record [{_describe(record)}])")
    return frame


def _checked(check, data: dict, path, record: dict) -> dict:
    """``check(data, path)`` (a bound of :mod:`softmax_bottleneck.readback`), its error naming the record."""
    try:
        return check(data, path)
    except readback.ReadbackError as err:
        raise RecordError(f"{err} (record [{_describe(record)}])") from None


def _number(value, path, key: str, record: dict):
    """A JSON value of ``key`` in ``path`` -> int/float; ``None``/missing -> NaN (an empty cell); anything else (a
    string such as ``"abc"``, a list, a boolean) is a :class:`RecordError` naming the file and the key, never an
    empty cell."""
    if value is None:
        return math.nan
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise RecordError(f"{path}: {key} = {value!r} is not a number (record [{_describe(record)}])")


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


# --------------------------------------------------------------------------------------------- runs
def run_row(record: dict) -> dict:
    """One run-summary row from one record (see :data:`RECORD_KEYS`)."""
    _check_keys(record, "runs")
    if record["seed_kind"] not in SEED_KINDS:
        raise RecordError(f"record [{_describe(record)}]: seed_kind must be one of {', '.join(SEED_KINDS)}")
    try:
        seed = int(record["seed"])
    except (TypeError, ValueError) as err:
        raise RecordError(f"record [{_describe(record)}]: seed {record['seed']!r} is not an integer") from err
    metrics = _checked(readback.check_metrics, _read_json(record["metrics"], record), record["metrics"], record)
    _check_identity(metrics, record["metrics"], record, ("dataset", "variant", "schedule", "seed"))
    missing = [k for k in ("train_ppl", "valid_ppl", "test_ppl") if metrics.get(k) is None]  # a finished run has all
    if missing:
        raise RecordError(f"{record['metrics']}: missing key(s) {', '.join(missing)} (record [{_describe(record)}])")
    hp = metrics.get("hyperparameters") or {}
    row = {
        "experiment": str(record["experiment"]),
        "dataset": str(record["dataset"]),
        "variant": str(record["variant"]),
        "schedule": str(record["schedule"]),
        "seed": seed,
        "seed_kind": str(record["seed_kind"]),
    }
    if not isinstance(hp, dict):
        raise RecordError(f"{record['metrics']}: hyperparameters is not an object (record [{_describe(record)}])")
    row.update({k: _number(hp.get(k), record["metrics"], f"hyperparameters.{k}", record) for k in _HP_KEYS})
    row.update({k: _number(metrics.get(k), record["metrics"], k, record) for k in _METRIC_KEYS})
    environment = metrics.get("environment") if isinstance(metrics.get("environment"), dict) else {}
    # trained in a fused group of K runs: its seconds per epoch are the group's (empty: trained alone)
    row["fused_runs"] = _number(environment.get("fused_runs"), record["metrics"], "environment.fused_runs", record)
    rank_path = record.get("rank")
    if rank_path:
        rank = _checked(readback.check_rank, _read_json(rank_path, record), rank_path, record)
        if "press_rank" not in rank:
            raise RecordError(f"{rank_path}: missing key press_rank (record [{_describe(record)}])")
        _check_identity(rank, rank_path, record, ("dataset", "variant"))  # not another model's rank in this row
        row["press_rank"] = _number(rank["press_rank"], rank_path, "press_rank", record)
        eranks = rank.get("effective_rank") or {}
        if not isinstance(eranks, dict):
            raise RecordError(f"{rank_path}: effective_rank is not an object (record [{_describe(record)}])")
        for eps in EPSILONS:
            value = eranks.get(eps)
            if value is None:  # tolerate keys written as floats ("0.001")
                value = next((v for k, v in eranks.items() if _same(k, eps)), None)
            row[f"erank_{eps}"] = _number(value, rank_path, f"effective_rank.{eps}", record)
    else:
        row.update({"press_rank": math.nan, **{f"erank_{e}": math.nan for e in EPSILONS}})
    row.update(_sources(layer_source_tag(metrics)))
    return row


def _check_identity(data: dict, path, record: dict, keys) -> None:
    """Each of ``keys`` that file ``path`` (its ``data``) states is the record's: a :class:`RecordError` otherwise."""
    for key in keys:
        if data.get(key) is not None and not _same(data[key], record[key]):
            raise RecordError(f"{path}: {key} = {data[key]!r} but the record says {record[key]!r} "
                              f"(record [{_describe(record)}])")  # fmt: skip


def _sources(tag: str | None) -> dict:
    """The :data:`SOURCE_COLUMNS` of a model whose layer's source is ``tag`` (``layer@<16 hex digits>``, or None)."""
    return {"layer_source": tag, "older_source": None if tag is None else older_tag_layer(tag) is not None}


def _layer_source(record: dict) -> dict:
    """:func:`_sources` of the run behind an analysis record (its optional ``metrics``)."""
    return _sources(layer_source_tag(_read_json(record["metrics"], record)) if record.get("metrics") else None)


def plugin_hyperparameters() -> list[str]:
    """The hyper-parameters of installed plug-in layers (the output-layer registry), sorted."""
    return sorted({key for spec in output_layers().values() if not spec.builtin for key in spec.hyperparameters})


def _plugin_values(record: dict, keys: list[str]) -> dict:
    """A run's values of plug-in hyper-parameters (``keys``) from its ``metrics.json``; absent keys are left out."""
    if not keys:
        return {}
    hp = _read_json(record["metrics"], record).get("hyperparameters") or {}
    return {k: _number(hp[k], record["metrics"], f"hyperparameters.{k}", record) for k in keys if k in hp}


def collect_runs(records: list[dict]) -> pd.DataFrame:
    """Run summary, one row per record, deterministically sorted: columns :data:`RUN_COLUMNS`, and after
    ``dropoutl`` a column for each plug-in layer's hyper-parameter that a run has (swept or overridden values of
    your own layer reach the tables and figures)."""
    extra = plugin_hyperparameters()
    rows = [{**run_row(r), **_plugin_values(r, extra)} for r in records]
    extra = [k for k in extra if any(k in row for row in rows)]
    at = RUN_COLUMNS.index("dropoutl") + 1
    columns = [*RUN_COLUMNS[:at], *extra, *RUN_COLUMNS[at:]]
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    dup = frame.duplicated(["experiment", "dataset", "variant", "schedule", *_HP_KEYS, *extra, "seed"], keep=False)
    if dup.any():
        raise RecordError(f"duplicate runs in the records: {frame.loc[dup, RUN_COLUMNS[:6]].to_dict('records')}")
    for col in ("seed", "parameters", "epochs_run"):
        if frame[col].notna().all():
            frame[col] = frame[col].astype("int64")
    frame = frame.sort_values([*_RUN_SORT, *extra, "seed"], kind="mergesort", na_position="last")
    return frame.reset_index(drop=True)


# --------------------------------------------------------------------------------------------- sweeps
#: columns of a sweep summary after its swept hyper-parameters (what training records, a sweep of switch_epoch has it
#: as a swept column; the ranks of the analysis; the layer's source)
SWEEP_METRIC_COLUMNS: list[str] = [key for key in _METRIC_KEYS if key != "switch_epoch"] + [
    "press_rank",
    *(f"erank_{eps}" for eps in EPSILONS),
    *SOURCE_COLUMNS,
]


def _swept_value(value, path, key: str, record: dict):
    """A swept hyper-parameter's value as ``metrics.json`` records it: a number, a boolean, a string or None."""
    if value is None or isinstance(value, bool | str):
        return value
    return _number(value, path, key, record)


def collect_sweep(records: list[dict], hyperparameters: list[str]) -> pd.DataFrame:
    """Sweep summary, one row per record: :data:`SWEEP_ID_COLUMNS`, the swept ``hyperparameters`` (in their order,
    each run's resolved value from its ``metrics.json``), then :data:`SWEEP_METRIC_COLUMNS`; sorted by dataset,
    the swept values and the seed."""
    if not hyperparameters:
        raise RecordError("a sweep summary needs its swept hyper-parameters (--hyperparameter KEY)")
    rows = []
    for record in records:
        _check_keys(record, "sweep")
        row = run_row(record)
        hp = _read_json(record["metrics"], record).get("hyperparameters") or {}
        for key in hyperparameters:
            if key not in hp:
                raise RecordError(f"{record['metrics']}: hyperparameters has no {key} (record [{_describe(record)}])")
            row[key] = _swept_value(hp[key], record["metrics"], f"hyperparameters.{key}", record)
        rows.append(row)
    columns = [*SWEEP_ID_COLUMNS, *hyperparameters, *SWEEP_METRIC_COLUMNS]
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    dup = frame.duplicated(["dataset", "variant", "schedule", *hyperparameters, "seed"], keep=False)
    if dup.any():
        raise RecordError(f"duplicate runs in the records: {frame.loc[dup, columns[:6]].to_dict('records')}")
    for col in ("seed", "parameters", "epochs_run"):
        if frame[col].notna().all():
            frame[col] = frame[col].astype("int64")
    frame = frame.sort_values(["dataset", *hyperparameters, "seed_kind", "seed"], kind="mergesort", na_position="last")
    return frame.reset_index(drop=True)


# --------------------------------------------------------------------------------------------- analyses
def collect_spectra(records: list[dict]) -> pd.DataFrame:
    """Concatenate per-model spectra (``index, sigma[, sigma_normalised]``) -> :data:`SPECTRA_COLUMNS`."""
    parts = []
    for record in records:
        _check_keys(record, "spectra")
        frame = _read_csv(record["csv"], record, ["index", "sigma"])
        _check_spectrum(frame, record)
        if "sigma_normalised" not in frame.columns:
            top = frame["sigma"].max() if len(frame) else math.nan
            frame["sigma_normalised"] = frame["sigma"] / top
        frame = frame.assign(dataset=str(record["dataset"]), variant=str(record["variant"]))
        parts.append(frame.assign(**_layer_source(record))[SPECTRA_COLUMNS])
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=SPECTRA_COLUMNS)
    return out.sort_values(["dataset", "variant", "index"], kind="mergesort").reset_index(drop=True)


def _check_spectrum(frame: pd.DataFrame, record: dict) -> None:
    """A spectrum is singular values in decreasing order (up to :data:`~softmax_bottleneck.bounds.ROUNDING` of the
    largest), indexed 0, 1, 2, ..., none of them missing; else a :class:`RecordError` naming the first bad row."""
    sigma = pd.to_numeric(frame["sigma"], errors="coerce")
    why = "holds no singular value" if frame.empty else None
    if why is None and sigma.isna().any():
        why = f"row {int(sigma.isna().to_numpy().nonzero()[0][0]) + 1}: no singular value"
    if why is None and list(frame["index"]) != list(range(len(frame))):
        why = "its index is not 0, 1, 2, ... (one row per singular value, in order)"
    rises = sigma.diff() > bounds.ROUNDING * float(sigma.max())
    if why is None and rises.any():
        why = f"row {int(rises.to_numpy().nonzero()[0][0]) + 1}: a singular value above the one before (impossible)"
    if why:
        raise RecordError(f"{record['csv']}: not a spectrum: {why} (record [{_describe(record)}])")


def collect_wordsim(records: list[dict]) -> pd.DataFrame:
    """Concatenate per-model word-similarity CSVs (``benchmark, pairs, found, not_found, spearman``)."""
    parts = []
    for record in records:
        _check_keys(record, "wordsim")
        frame = _read_csv(record["csv"], record, WORDSIM_COLUMNS[2 : -len(SOURCE_COLUMNS)], key=["benchmark"])
        frame = frame.assign(dataset=str(record["dataset"]), variant=str(record["variant"]))
        parts.append(frame.assign(**_layer_source(record))[WORDSIM_COLUMNS])
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=WORDSIM_COLUMNS)
    return out.sort_values(["dataset", "variant"], kind="mergesort").reset_index(drop=True)


def collect_top5(records: list[dict]) -> pd.DataFrame:
    """Concatenate per-model top-5 CSVs; the record's ``model`` (display name, e.g. ``MoS*``) fills ``model``, its
    ``dataset``, ``variant`` and ``schedule`` (the model behind the name; empty where the record gives none) theirs."""
    parts = []
    for record in records:
        _check_keys(record, "top5")
        own = ("model", *TOP5_MODEL_COLUMNS, *SOURCE_COLUMNS)
        frame = _read_csv(record["csv"], record, [c for c in TOP5_COLUMNS if c not in own], key=["group", "number"])
        model = {key: str(record[key]) if record.get(key) else None for key in TOP5_MODEL_COLUMNS}
        frame = frame.assign(model=str(record["model"]), **model, **_layer_source(record))
        parts.append(frame[TOP5_COLUMNS])
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=TOP5_COLUMNS)
    return out.sort_values(["model", "group", "number"], kind="mergesort").reset_index(drop=True)


#: columns of the coverage summary (SM Table 13)
COVERAGE_COLUMNS: list[str] = ["dataset", "benchmark", "pairs", "found", "not_found"]


def collect_coverage(records: list[dict]) -> pd.DataFrame:
    """Per dataset, the pairs of each word-similarity benchmark its vocabulary misses (SM Table 13): the corpus's
    tokenised cache (loaded without unpickling, and checked to be the published dataset's) and the published
    benchmarks (checked by SHA-256); :func:`softmax_bottleneck.analysis.wordsim.vocabulary_coverage`."""
    from softmax_bottleneck.analysis import wordsim
    from softmax_bottleneck.corpora.corpus import load_cached_corpus, verify_sources
    from softmax_bottleneck.corpora.datasets import DATASETS

    parts = []
    for record in records:
        _check_keys(record, "coverage")
        if record["dataset"] not in DATASETS:
            raise RecordError(f"record [{_describe(record)}]: dataset must be one of {', '.join(DATASETS)}")
        try:
            files = wordsim.benchmark_files(record["benchmarks"])
            pairs = {name: wordsim.read_benchmark(path) for name, path in files.items()}
            corpus = load_cached_corpus(record["corpus"])
            verify_sources(corpus, str(record["dataset"]), record["corpus"])
        except ValueError as err:  # a corpus or benchmark that is not the published one, or unreadable
            raise RecordError(f"{err} (record [{_describe(record)}])") from None
        frame = wordsim.vocabulary_coverage(corpus.dictionary.idx2word, pairs)
        parts.append(frame.assign(dataset=str(record["dataset"]))[COVERAGE_COLUMNS])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COVERAGE_COLUMNS)


COLLECTORS = {
    "runs": collect_runs,
    "sweep": collect_sweep,
    "spectra": collect_spectra,
    "wordsim": collect_wordsim,
    "top5": collect_top5,
    "coverage": collect_coverage,
}


# --------------------------------------------------------------------------------------------- CLI
def parse_record(text: str) -> dict:
    """``"k1=v1,k2=v2"`` -> ``{"k1": "v1", "k2": "v2"}`` (values may contain ``=``, not ``,``)."""
    record: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RecordError(f"--record {text!r}: {item!r} is not key=value")
        if key.strip() in record:
            raise RecordError(f"--record {text!r}: key {key.strip()!r} given twice")
        record[key.strip()] = value.strip()
    return record


def add_cli(parser) -> None:
    parser.description = (
        "Collect per-run metrics (metrics.json, rank.json) or per-model analysis CSVs into one summary CSV, "
        "the input of the tables and figures."
    )
    parser.add_argument(
        "--kind",
        required=True,
        choices=sorted(COLLECTORS),
        help="runs: one row per trained model; sweep: one row per model of a sweep, its swept hyper-parameters as "
        "columns; spectra, wordsim, top5: per-model analysis CSVs concatenated; coverage: the benchmark pairs each "
        "corpus's vocabulary misses (SM Table 13)",
    )
    parser.add_argument(
        "--hyperparameter",
        action="append",
        default=[],
        metavar="KEY",
        help="--kind sweep: a swept hyper-parameter, a column of the summary (repeatable, in the sweep's order)",
    )
    parser.add_argument("--out", required=True, help="output CSV (written atomically)")
    parser.add_argument(
        "--record",
        action="append",
        default=[],
        metavar="KEY=VALUE,...",
        help="one input; keys: "
        + "; ".join(f"{k}: {', '.join(v)}" + OPTIONAL_RECORD_KEYS.get(k, "") for k, v in RECORD_KEYS.items()),
    )


def run_cli(args) -> int:
    try:
        records = [parse_record(text) for text in args.record]
        check_writable(args.out, inputs=[record[key] for record in records for key in FILE_KEYS if record.get(key)])
        if args.kind == "sweep":
            frame = collect_sweep(records, args.hyperparameter)
        elif args.hyperparameter:
            raise RecordError(f"--hyperparameter is for --kind sweep, not {args.kind}")
        else:
            frame = COLLECTORS[args.kind](records)
    except (RecordError, FileNotFoundError, OutputError) as err:
        raise SystemExit(f"summarize: {err}") from None
    try:
        atomic_write_csv(frame, args.out)
    except OSError as err:
        raise SystemExit(f"summarize: {write_error(args.out, err)}") from None
    log.info("wrote %s (%d rows from %d records)", args.out, len(frame), len(records))
    return 0
