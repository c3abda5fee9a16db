"""What the study costs: ``python -m softmax_bottleneck costs --benchmarks benchmarks``.

Two tables:

1. **Measured**, per rule, from the Snakemake ``benchmark:`` files of a run (``benchmarks/<rule>/...``;
   TSV, or JSON lines for ``.jsonl``; ``--benchmark-extended`` columns are used when present): jobs,
   total / mean / max wall time, peak resident memory (``max_rss``, MB) and CPU time.
2. **Projected to paper scale** for training, which dominates the study: the paper's reported V100
   seconds per epoch (paper Table 2) × epochs (1000; MoS on WT2 500, from the presets)
   × the number of training runs of the paper-scale configuration, per experiment, dataset and variant.
   A variant whose time the paper does not report (a plug-in layer, MoC, E10's variants) uses its registered
   cost proxy's, else its family's (Softmax for the softmax family, MoS for the mixture family); the
   ``time_of`` column says which, e.g. ``mos (family default)``; a plug-in layer priced so is marked ``*``, with a
   footnote naming the commands that measure it (an assumption, not a measurement). With ``--bench FILE.json ...``
   the seconds per epoch are instead those that ``bench`` measured on your own device (:mod:`.bench_speeds`).

Under them, the study on the paper's V100 and on each card of ``data/measured/speeds.csv`` (:func:`cards_section`):
its GPU-hours, the share priced by proxy and the range if those proxies are off (:func:`proxy_range`), the analyses
and the days on N GPUs (``plan --card`` prints the days of one card, :func:`card_job_hours`).

The runs come from ``--plan`` (the workflow's training plan, ``snakemake plan`` →
``results/plan/training_jobs.csv``), else ``--config`` (a workflow config, by default ``config/config.yaml``,
the paper's study: expanded by :mod:`softmax_bottleneck.study` exactly as the workflow expands it).

``--out`` writes Markdown (``.md``) or CSV (``.csv``: the per-rule table; the projection goes next to
it as ``<name>.projection.csv``); without ``--out`` the Markdown report goes to stdout.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import pandas as pd

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.report.bench_speeds import BenchFileError, MeasuredSpeeds, load_speeds
from softmax_bottleneck.report.cards import cards_section
from softmax_bottleneck.report.projection import load_runs, project_training
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import (
    PROXY_MARK,
    WALL_CLOCK_GPUS,
    proxy_notes,
)
from softmax_bottleneck.study.runs import StudyError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# measured
# --------------------------------------------------------------------------------------------------

MEASURED_COLUMNS = [
    "rule",
    "jobs",
    "records",
    "total_wall_s",
    "mean_wall_s",
    "max_wall_s",
    "max_rss_mb",
    "mean_rss_mb",
    "total_cpu_s",
]


def _read_benchmark(path: Path) -> pd.DataFrame:
    """One Snakemake benchmark file through the bounded reader (TSV; JSON lines for ``.jsonl``, one object each)."""
    if path.suffix == ".jsonl":
        raw = readback.read_bytes(path, readback.MAX_CSV_BYTES, what="benchmark file")
        records = []
        for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
            if line.strip():
                record = readback.parse_json(line, f"{path}, line {number}")
                if not isinstance(record, dict):
                    raise readback.ReadbackError(path, f"line {number} is not a JSON object")
                records.append(record)
        frame = pd.DataFrame.from_records(records)
    else:
        frame = readback.read_csv(path, sep="\t", na_values=["", "NA", "-"])
    if "s" not in frame.columns:
        raise readback.ReadbackError(path, "not a Snakemake benchmark file (no 's' column)")
    return frame


def _rule_of(path: Path, root: Path, frame: pd.DataFrame) -> str:
    if "rule_name" in frame.columns and frame["rule_name"].notna().any():
        return str(frame["rule_name"].dropna().iloc[0])
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.name.split(".")[0]


def read_benchmarks(root: str | os.PathLike) -> pd.DataFrame:
    """Every record of every benchmark file under ``root``: columns ``rule, file, s, max_rss, cpu_time``."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"benchmark directory {root} does not exist")
    frames = []
    for path in sorted(p for p in root.rglob("*") if not p.is_dir() and p.suffix in (".tsv", ".txt", ".jsonl")):
        try:
            frame = _read_benchmark(path)
        except readback.ReadbackError as exc:  # names the file: a link, a FIFO, a binary file, no 's' column, ...
            log.warning("skipping %s", exc)
            continue
        except ValueError as exc:  # a file that is not UTF-8, pandas' parser errors
            log.warning("skipping %s: %s", path, exc)
            continue
        if frame.empty:
            continue
        seconds = pd.to_numeric(frame["s"], errors="coerce")
        bad = (seconds.isna() | (seconds < 0)).to_numpy().nonzero()[0]
        if len(bad):
            value = frame["s"].iloc[bad[0]]
            value = value.item() if hasattr(value, "item") else value  # -5, not np.int64(-5)
            log.warning("skipping %s: row %d, column s: %r is not a number of seconds", path, bad[0] + 1, value)
            continue
        part = pd.DataFrame(
            {
                "rule": _rule_of(path, root, frame),
                "file": str(path.relative_to(root)),
                "s": seconds,
                "max_rss": pd.to_numeric(frame.get("max_rss"), errors="coerce"),
                "cpu_time": pd.to_numeric(frame.get("cpu_time"), errors="coerce"),
            }
        )
        frames.append(part)
    if not frames:
        return pd.DataFrame(columns=["rule", "file", "s", "max_rss", "cpu_time"])
    return pd.concat(frames, ignore_index=True)


def summarize_rules(records: pd.DataFrame) -> pd.DataFrame:
    """Per rule: jobs (files), records (rows; >1 per file with ``repeat()``), wall time and memory.

    With ``repeat()``, a job's wall time is the mean of its repeats, so ``total_wall_s`` stays the
    time the rule took once per job.
    """
    if records.empty:
        return pd.DataFrame(columns=MEASURED_COLUMNS)
    per_job = records.groupby(["rule", "file"], sort=True).agg(
        s=("s", "mean"), max_rss=("max_rss", "max"), cpu_time=("cpu_time", "mean"), records=("s", "size")
    )
    grouped = per_job.groupby("rule", sort=True)
    out = pd.DataFrame(
        {
            "jobs": grouped.size(),
            "records": grouped["records"].sum(),
            "total_wall_s": grouped["s"].sum(),
            "mean_wall_s": grouped["s"].mean(),
            "max_wall_s": grouped["s"].max(),
            "max_rss_mb": grouped["max_rss"].max(),
            "mean_rss_mb": grouped["max_rss"].mean(),
            "total_cpu_s": grouped["cpu_time"].sum(min_count=1),
        }
    ).reset_index()
    return out[MEASURED_COLUMNS].sort_values("total_wall_s", ascending=False, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def _fmt(frame: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col].map(lambda x: "" if pd.isna(x) else f"{x:,.{digits}f}")
    return out


def render_markdown(
    measured: pd.DataFrame,
    projection: pd.DataFrame,
    *,
    source: str,
    runs_source: str,
    speeds: MeasuredSpeeds | None = None,
    gpus=WALL_CLOCK_GPUS,
    notes: list[str] = (),
) -> str:
    lines = [f"## Measured cost per rule ({source})", ""]
    if measured.empty:
        lines.append("_no benchmark files found_")
    else:
        lines.append(_fmt(measured).to_markdown(index=False))
        total_s = float(measured["total_wall_s"].sum())
        lines += [
            "",
            f"{int(measured['jobs'].sum())} jobs, {total_s:,.1f} s ({total_s / 3600:.2f} h) of wall time "
            "summed over jobs (not the run's elapsed time: jobs run in parallel), of every configuration run in this "
            "folder (the smoke test's jobs and the small scale's alike: Snakemake writes one benchmark folder). "
            "Memory is the peak resident set size (`max_rss`) in MB.",
        ]
    total_h = float(projection["gpu_hours"].iloc[-1]) if not projection.empty else 0.0
    body = projection.iloc[:-1]
    by_experiment = (
        body.groupby("experiment", sort=False)
        .agg(runs=("runs", "sum"), gpu_hours=("gpu_hours", "sum"))
        .reset_index()
        .astype({"gpu_hours": float})
    )
    lines += [
        "",
        f"## Projected training cost at paper scale ({runs_source})",
        "",
        _fmt(by_experiment, 0).to_markdown(index=False),
        "",
        _fmt(projection.assign(gpu_hours=projection["gpu_hours"].astype(float)), 0).to_markdown(index=False),
        "",
        _total_line(total_h, speeds),
        *(f"\n{note}" for note in [*notes, *proxy_notes(_proxy_priced(body))]),
        "",
        *cards_section(projection, gpus),
    ]
    return "\n".join(lines) + "\n"


def _proxy_priced(projection: pd.DataFrame) -> dict[str, tuple[str, list[str]]]:
    """The projection's lines marked :data:`~softmax_bottleneck.study.plan.PROXY_MARK`, as ``proxy_notes`` takes
    them."""
    priced: dict[str, tuple[str, list[str]]] = {}
    for row in projection.itertuples():
        if str(row.time_of).endswith(f" {PROXY_MARK}"):
            datasets = priced.setdefault(row.variant, (str(row.time_of).removesuffix(f" {PROXY_MARK}"), []))[1]
            datasets += [] if row.dataset in datasets else [row.dataset]
    return priced


def _total_line(total_h: float, speeds: MeasuredSpeeds | None) -> str:
    days = f"({total_h / 24:,.0f} GPU-days; {total_h / 24 / 4:,.0f} days on a 4-GPU workstation)"
    if speeds is not None:
        days = f"({total_h / 24:,.0f} device-days; {total_h / 24 / 4:,.0f} days on 4 such devices)"
    tail = "The analyses' GPU time is below, with the cost on the cards measured so far."
    if speeds is None:
        return (
            f"Total: {total_h:,.0f} V100 GPU-hours {days}. Seconds per epoch are the paper's V100 times "
            "(Table 2); `time_of` names the reported variant used for one whose time the paper does not give "
            f"(its cost proxy, or its family's default). {tail}"
        )
    packed = [k for k in speeds.packings if k > 1]
    ks = " or ".join(map(str, packed))
    packing = f", runs packed or fused {ks} per device (time_of says which)" if packed else ""
    return (
        f"Total: {total_h:,.0f} device-hours on {speeds.device}{packing} {days}. Seconds per epoch are those "
        f"`bench` measured there ({len(speeds.files)} file(s)); `time_of` names the measured variant used for one "
        f"that was not measured (its cost proxy, or its family's default) and the phases measured. {tail}"
    )


def add_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Wall time and memory per rule from the workflow's benchmark files, and the training cost projected to "
        "paper scale in GPU-hours (seconds per epoch × epochs × runs; the paper's V100 times, or your device's "
        "measured by `bench` with --bench)."
    )
    parser.add_argument(
        "--benchmarks", default="benchmarks", help="folder of Snakemake benchmark files, benchmarks/<rule>/..."
    )
    study_config.add_config_option(parser, "whose training runs to project (the paper's study)")
    parser.add_argument(
        "--plan", default=None, help="the workflow's training plan (snakemake plan: results/plan/training_jobs.csv)"
    )
    parser.add_argument(
        "--bench", nargs="+", default=None, metavar="JSON",
        help="project with the seconds per epoch that `bench` measured on your device (its JSON output files, "
        "paper hyper-parameters, one device) instead of the paper's V100 times",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="report file: .md (Markdown) or .csv (default: Markdown to stdout)")
    from softmax_bottleneck.argtypes import positive_int_up_to
    from softmax_bottleneck.study.plan import MAX_GPUS

    parser.add_argument(
        "--gpus", nargs="+", type=positive_int_up_to(MAX_GPUS), default=list(WALL_CLOCK_GPUS), metavar="N",
        help="the numbers of cards of the days on each measured card (default: %(default)s)",
    )  # fmt: skip


def run_cli(args: argparse.Namespace) -> int:
    try:
        records = read_benchmarks(args.benchmarks)
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 1
    measured = summarize_rules(records)
    files = study_config.config_files(args)
    source = args.plan or study_config.describe_files(files)
    try:
        speeds = load_speeds(args.bench) if args.bench else None
        runs, runs_source, notes = load_runs(files, args.plan)
        projection = project_training(runs, speeds)
    except (BenchFileError, readback.ReadbackError) as exc:  # each names its file
        log.error("costs: %s", exc)
        return 1
    except study_config.ConfigError as exc:
        log.error("costs: %s: %s", exc.source or source, exc)
        return 1
    except FileNotFoundError as exc:
        log.error("costs: %s: no such file", exc.filename or source)
        return 1
    except (StudyError, ValueError, KeyError, OSError, pd.errors.ParserError) as exc:
        log.error("costs: cannot project the runs of %s: %s", source, exc)
        return 1
    if args.out and str(args.out).endswith(".csv"):
        out = Path(args.out)
        atomic_write_text(measured.to_csv(index=False), out)
        atomic_write_text(projection.to_csv(index=False), out.with_suffix(".projection.csv"))
        log.info("wrote %s and %s", out, out.with_suffix(".projection.csv"))
        return 0
    text = render_markdown(measured, projection, source=str(args.benchmarks), runs_source=runs_source, speeds=speeds,
                           gpus=args.gpus, notes=notes)  # fmt: skip
    if args.out:
        atomic_write_text(text, Path(args.out))
        log.info("wrote %s", args.out)
    else:
        print(text, end="")
    return 0
