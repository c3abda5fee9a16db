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
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from softmax_bottleneck.atomic import atomic_write_text
from softmax_bottleneck.report.bench_speeds import BenchFileError, MeasuredSpeeds, load_speeds
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import (
    PROXY_MARK,
    WALL_CLOCK_GPUS,
    makespan_hours,
    plan_frame,
    priced_by_proxy,
    proxy_notes,
    seconds_per_epoch,
)
from softmax_bottleneck.study.runs import Study, StudyError

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
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        frame = pd.DataFrame.from_records(records)
    else:
        frame = pd.read_csv(path, sep="\t", na_values=["NA", "-"])
    if "s" not in frame.columns:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no 's' column)")
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
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".tsv", ".txt", ".jsonl")):
        try:
            frame = _read_benchmark(path)
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, json.JSONDecodeError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if frame.empty:
            continue
        part = pd.DataFrame(
            {
                "rule": _rule_of(path, root, frame),
                "file": str(path.relative_to(root)),
                "s": pd.to_numeric(frame["s"], errors="coerce"),
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
# projection
# --------------------------------------------------------------------------------------------------

PROJECTION_COLUMNS = [
    "experiment",
    "dataset",
    "variant",
    "schedule",
    "runs",
    "epochs",
    "s_per_epoch",
    "time_of",
    "gpu_hours",
]


def runs_from_study(study: Study) -> list[dict]:
    """Training runs of an expanded configuration, grouped by the first experiment that uses each run."""
    return runs_from_plan(plan_frame(study))


def runs_from_plan(plan: pd.DataFrame) -> list[dict]:
    """Training runs of the workflow's own plan (``snakemake plan``: results/plan/training_jobs.csv)."""
    plan = plan.copy()
    plan["experiment"] = plan["experiments"].astype(str).str.split().str[0]
    grouped = plan.groupby(["experiment", "dataset", "variant", "schedule", "epochs"], sort=False).size()
    return [
        dict(experiment=e, dataset=d, variant=v, schedule=s, epochs=int(ep), runs=int(n))
        for (e, d, v, s, ep), n in grouped.items()
    ]


def project_training(runs: Iterable[dict], speeds: MeasuredSpeeds | None = None) -> pd.DataFrame:
    """GPU-hours per (experiment, dataset, variant, schedule) row, plus a total row.

    Seconds per epoch are the paper's V100 times, or with ``speeds`` those measured by ``bench`` on your device
    (:mod:`.bench_speeds`); measured with K runs sharing a device, a run holds 1/K of it (``gpu_hours``), while
    ``s_per_epoch`` stays the run's own wall time.
    """
    rows = []
    for run in runs:
        epochs = int(run["epochs"])
        if speeds is None:
            sec, time_of = seconds_per_epoch(run["dataset"], run["variant"])
            device_sec = sec
        else:
            sec, time_of = speeds.seconds_per_epoch(run["dataset"], run["variant"], run["schedule"], epochs)
            device_sec = speeds.device_seconds_per_epoch(run["dataset"], run["variant"], run["schedule"], epochs)
            time_of = " ".join(filter(None, [time_of, speeds.packing_of(run["dataset"], run["variant"])]))
        if priced_by_proxy(run["variant"], time_of):
            time_of = f"{time_of} {PROXY_MARK}"  # a plug-in priced at another variant's time (render: footnote)
        rows.append(
            {
                "experiment": run["experiment"],
                "dataset": run["dataset"],
                "variant": run["variant"],
                "schedule": run["schedule"],
                "runs": int(run["runs"]),
                "epochs": epochs,
                "s_per_epoch": sec,
                "time_of": time_of if time_of != run["variant"] else "",
                "gpu_hours": int(run["runs"]) * epochs * device_sec / 3600.0,
            }
        )
    frame = pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
    total = {c: "" for c in PROJECTION_COLUMNS}
    total.update(experiment="total", runs=int(frame["runs"].sum()), gpu_hours=float(frame["gpu_hours"].sum()))
    return pd.concat([frame, pd.DataFrame([total])], ignore_index=True)


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
            "summed over jobs (not the run's elapsed time: jobs run in parallel). "
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
        *(f"\n{note}" for note in proxy_notes(_proxy_priced(body))),
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
    packing = f", runs packed {' or '.join(map(str, packed))} per device (time_of says which)" if packed else ""
    return (
        f"Total: {total_h:,.0f} device-hours on {speeds.device}{packing} {days}. Seconds per epoch are those "
        f"`bench` measured there ({len(speeds.files)} file(s)); `time_of` names the measured variant used for one "
        f"that was not measured (its cost proxy, or its family's default) and the phases measured. {tail}"
    )


def load_runs(
    config_path: str | os.PathLike | list | None, plan_path: str | os.PathLike | None = None
) -> tuple[list[dict], str]:
    """The training runs to project: the workflow's plan, else a workflow configuration's (one file, or several
    merged in order; checked as the workflow checks it)."""
    if plan_path:
        return runs_from_plan(pd.read_csv(plan_path)), f"runs of {plan_path}"
    files = config_path if isinstance(config_path, list) else [config_path]
    config = study_config.check(study_config.load(files))
    return runs_from_study(Study(config)), f"runs of {study_config.describe_files(files)}"


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
        runs, runs_source = load_runs(files, args.plan)
        projection = project_training(runs, speeds)
    except BenchFileError as exc:
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
                           gpus=args.gpus)  # fmt: skip
    if args.out:
        atomic_write_text(text, Path(args.out))
        log.info("wrote %s", args.out)
    else:
        print(text, end="")
    return 0


# --------------------------------------------------------------------------------------------------
# the cards measured so far
# --------------------------------------------------------------------------------------------------

#: the paper's card, whose seconds per epoch the plan projects with (Table 2)
PAPER_CARD = "NVIDIA V100 (the paper's)"
#: cards users have that no ``bench`` of this package has measured yet: named, never priced
UNMEASURED_CARDS = ("NVIDIA H100", "NVIDIA A100")
MEASURED_SOURCE = "data/measured/speeds.csv"


def card_speeds() -> dict[str, tuple[MeasuredSpeeds, str]]:
    """Per card of ``data/measured/speeds.csv``: the seconds per epoch that ``bench`` measured for one run alone
    (:class:`.bench_speeds.MeasuredSpeeds`, as ``costs --bench`` would read its files) and when and with what."""
    from softmax_bottleneck import measured

    cards: dict[str, tuple[MeasuredSpeeds, str]] = {}
    for row in measured.records("speeds"):
        if not row["projected_seconds_per_epoch"] or row["runs"] != "1" or row["mps"] != "false":
            continue
        speeds, _ = cards.setdefault(row["device"], (MeasuredSpeeds(row["device"]), f"torch {row['torch']}"))
        pair = (row["dataset"], row["variant"])
        speeds.seconds.setdefault(pair, {})[row["phase"]] = float(row["projected_seconds_per_epoch"])
        speeds.runs.setdefault(pair, {})[row["phase"]] = 1
        speeds.mps.setdefault(pair, {})[row["phase"]] = False
        speeds.files[(*pair, row["phase"], 1, False)] = f"{MEASURED_SOURCE} ({row['date']})"
    return {device: (speeds, f"`bench`, {len(speeds.files)} models × phases, "
                     f"{', '.join(sorted({f.split('(')[1].rstrip(')') for f in speeds.files.values()}))}, {what}")
            for device, (speeds, what) in cards.items()}  # fmt: skip


def job_hours(projection: pd.DataFrame) -> list[float]:
    """One entry per training job of a projection: its device-hours (the projection's rows hold ``runs`` jobs)."""
    body = projection.iloc[:-1]
    return [float(h) / int(n) for h, n in zip(body["gpu_hours"], body["runs"], strict=True) for _ in range(int(n))]


def analyses_hours(runs_per_dataset: dict[str, int], device: str) -> tuple[float, str] | None:
    """The ``analyze`` jobs' hours on ``device`` (one per run, the workflow's default memory budget), at most, from
    ``data/measured/analyses.csv``, and how; None where the card's analyses were not measured."""
    from softmax_bottleneck import measured

    rows = measured.records("analyses")
    on_card = {(r["dataset"], r["memory_budget_gb"], r["what"].startswith("of which")): float(r["seconds"])
               for r in rows if r["device"] == device and r["rule"] == "analyze"}  # fmt: skip
    host = [float(r["seconds"]) for r in rows if r["device"] != device and r["dataset"] == "wt2"]
    if ("ptb", "17", False) not in on_card or ("wt2", "50", False) not in on_card or not host:
        return None
    ptb = on_card["ptb", "17", False]
    # under the default budget (17 GiB) WT2's eigenvalues run on the host instead of the card
    wt2 = on_card["wt2", "50", False] - on_card.get(("wt2", "50", True), 0.0) + max(host)
    hours = (runs_per_dataset.get("ptb", 0) * ptb + runs_per_dataset.get("wt2", 0) * wt2) / 3600
    how = (
        f"{runs_per_dataset.get('ptb', 0)} PTB analyses at {ptb:.1f} s each and {runs_per_dataset.get('wt2', 0)} WT2 "
        f"ones at {wt2 / 60:.1f} min, measured on the whole test sets (more rows than the paper's for WT2), the "
        f"eigenvalues of WT2's Gram on the host, where the default memory budget puts them ({max(host):.0f} s on 2 CPU "
        "cores)"
    )
    return hours, how


def _proxy_of(variant: str, time_of: str) -> str:
    """Whose time prices a projection line of ``variant`` (``time_of``: ``"mos (NT: ...)"``...); empty: its own."""
    other = str(time_of).split("(", 1)[0].strip()
    return "" if other == variant else other


def proxy_share(projection: pd.DataFrame) -> float:
    """The share of a projection's GPU-hours whose seconds per epoch are another model's (``time_of`` set)."""
    body = projection.iloc[:-1]
    total = float(body["gpu_hours"].sum())
    proxied = [_proxy_of(v, t) != "" for v, t in zip(body["variant"], body["time_of"], strict=True)]
    return float(body.loc[proxied, "gpu_hours"].sum()) / total if total else 0.0


def study_price(device: str, config_path) -> float:
    """The training GPU-hours of a configuration's study (``config/config.yaml``: the paper's) on the measured card
    ``device``: the figure `costs` prints, and the one every document quotes."""
    runs, _ = load_runs(config_path)
    speeds, _ = card_speeds()[device]
    return sum(job_hours(project_training(runs, speeds)))


# --------------------------------------------------------------------------------------------------
# the range of the hours priced by proxy
# --------------------------------------------------------------------------------------------------

#: per card, the device-seconds per epoch of each (dataset, variant) timed there, by phase
CardTimes = dict[str, dict[tuple[str, str], dict[str, float]]]


def card_times() -> CardTimes:
    """What each card timed: the paper's V100 (Table 2, one time per epoch) and each card of ``speeds.csv`` (one run
    alone, per phase)."""
    from softmax_bottleneck.study.plan import paper_seconds_per_epoch

    times: CardTimes = {PAPER_CARD: {pair: {"epoch": s} for pair, s in paper_seconds_per_epoch().items()}}
    for device, (speeds, _) in card_speeds().items():
        times[device] = {pair: {phase: s / speeds.runs[pair][phase] for phase, s in phases.items()}
                         for pair, phases in speeds.seconds.items()}  # fmt: skip
    return times


def layer_ratios(dataset: str, layer: str, proxy: str, times: CardTimes) -> list[float]:
    """``layer``'s time per epoch over ``proxy``'s on ``dataset``, on every card (and phase) that timed both."""
    ratios = []
    for timed in times.values():
        mine, theirs = timed.get((dataset, layer), {}), timed.get((dataset, proxy), {})
        ratios += [mine[phase] / theirs[phase] for phase in mine if phase in theirs]
    return ratios


class ProxyRange(NamedTuple):
    """A projection's GPU-hours with its lines priced by proxy at the lowest (``low``) and highest (``high``) measured
    ratio of their layer's time to their proxy's; ``unknown``: the share of the hours whose layer no card timed beside
    its proxy (``untimed``: those layers), kept at their proxy's time in both ends; ``proxied``: the share of the
    hours priced by proxy (:func:`proxy_share`)."""

    low: float
    high: float
    unknown: float
    untimed: list[str]
    proxied: float


def proxy_range(projection: pd.DataFrame, times: CardTimes | None = None) -> ProxyRange:
    """:class:`ProxyRange` of a projection: each line priced by proxy (``time_of`` names another variant) taken at
    the lowest and at the highest ratio of its layer's time per epoch to its proxy's measured on any card where both
    were timed (:func:`card_times`), or at its proxy's own time (the one price) where that is lower, or higher: the
    range holds the one price. A layer that no card timed beside its proxy has no range: its hours stay at the
    proxy's time and count in ``unknown``."""
    times = card_times() if times is None else times
    body = projection.iloc[:-1]
    low = high = unknown = proxied = 0.0
    untimed: list[str] = []
    for dataset, variant, time_of, hours in zip(body["dataset"], body["variant"], body["time_of"],
                                                body["gpu_hours"].astype(float), strict=True):  # fmt: skip
        proxy = _proxy_of(variant, time_of)
        ratios = layer_ratios(dataset, variant, proxy, times) if proxy else [1.0]
        proxied += hours if proxy else 0.0
        if not ratios:
            unknown += hours
            untimed += [] if variant in untimed else [variant]
            ratios = [1.0]
        low += hours * min(1.0, *ratios)
        high += hours * max(1.0, *ratios)
    total = float(body["gpu_hours"].astype(float).sum()) or 1.0
    return ProxyRange(low, high, unknown / total, untimed, proxied / total)


def study_price_range(device: str, config_path) -> ProxyRange:
    """:func:`proxy_range` of a configuration's study on the measured card ``device``: the range that `costs` prints
    beside :func:`study_price`, and the one every document quotes."""
    runs, _ = load_runs(config_path)
    speeds, _ = card_speeds()[device]
    return proxy_range(project_training(runs, speeds))


def _range_cell(found: ProxyRange) -> str:
    if not found.proxied:
        return "none priced by proxy"
    if found.unknown >= found.proxied * (1 - 1e-9):
        return "unknown (no card timed those layers beside their proxy)"
    unknown = f" ({found.unknown:.0%} of the hours unknown)" if found.unknown else ""
    return f"{found.low:,.0f}–{found.high:,.0f}{unknown}"


# --------------------------------------------------------------------------------------------------
# a card by name (plan --card)
# --------------------------------------------------------------------------------------------------


def card_names() -> dict[str, str]:
    """The cards whose times price a run, by their short name: ``V100`` (the paper's Table 2), then each card of
    ``speeds.csv`` (``H200``)."""
    cards = [PAPER_CARD, *card_speeds()]
    return {card.removeprefix("NVIDIA ").removesuffix(" (the paper's)"): card for card in cards}


def card_named(name: str) -> str:
    """The card :func:`card_names` knows as ``name`` (its short or full name, in any case); ValueError naming it and
    the cards measured otherwise."""
    wanted = name.strip().casefold()
    for short, card in card_names().items():
        if wanted in {short.casefold(), card.casefold(), card.removesuffix(" (the paper's)").casefold()}:
            return card
    raise ValueError(f"{name!r} is not a measured card (measured: {', '.join(card_names())})")


def card_job_hours(jobs: dict, card: str) -> tuple[dict[str, float], pd.DataFrame]:
    """Each training job's hours on ``card`` (``jobs``: run folder → :class:`~softmax_bottleneck.study.runs.Run`) as
    `costs` prices it (:func:`project_training`: the paper's times, or the card's measured ones), and that projection
    (one line per job)."""
    runs = [dict(experiment=path, dataset=run.dataset, variant=run.variant, schedule=run.schedule,
                 epochs=int(run.hyperparameters["epochs"]), runs=1) for path, run in jobs.items()]  # fmt: skip
    projection = project_training(runs, None if card == PAPER_CARD else card_speeds()[card][0])
    return dict(zip(jobs, projection["gpu_hours"].iloc[:-1].astype(float), strict=True)), projection


def cards_section(projection: pd.DataFrame, gpus=WALL_CLOCK_GPUS) -> list[str]:
    """The study's training (and analyses') GPU-hours and wall-clock days on the paper's V100 (the projection's own
    times when they are the paper's) and on each card ``bench`` measured, and which common cards are not measured."""
    from softmax_bottleneck.study.plan import epoch_caps_text

    body = projection.iloc[:-1]
    plan_runs = [dict(r) for r in body[["experiment", "dataset", "variant", "schedule", "epochs", "runs"]]
                 .to_dict("records")]  # fmt: skip
    per_dataset = body.groupby("dataset")["runs"].sum().astype(int).to_dict()
    rows = []
    times = card_times()
    untimed: set[str] = set()

    def add(card: str, source: str, frame: pd.DataFrame, analyses: tuple[float, str] | None) -> None:
        hours = job_hours(frame)
        share = proxy_share(frame)
        found = proxy_range(frame, times)
        untimed.update(found.untimed)
        rows.append({"card": card, "seconds per epoch": source,
                     "training GPU-hours": f"{sum(hours):,.0f}",
                     "priced by proxy": f"{share:.0%} of the hours" if share else "none",
                     "range if proxies are off": _range_cell(found),
                     "analyses GPU-hours": f"≤ {analyses[0]:,.1f}" if analyses else "not measured",
                     **{f"days on {n}": _days(makespan_hours(hours, n) / 24) for n in gpus}})  # fmt: skip

    add(PAPER_CARD, "the paper's Table 2", project_training(plan_runs), None)
    notes = []
    for device, (speeds, source) in card_speeds().items():
        analyses = analyses_hours(per_dataset, device)
        add(device, source, project_training(plan_runs, speeds), analyses)
        if analyses:
            notes.append(f"{device} analyses, at most: {analyses[1]}.")
    for card in UNMEASURED_CARDS:
        rows.append({"card": card, "seconds per epoch": "no bench measured yet", "training GPU-hours": "—",
                     "priced by proxy": "—", "range if proxies are off": "—", "analyses GPU-hours": "—",
                     **{f"days on {n}": "—" for n in gpus}})  # fmt: skip
    from softmax_bottleneck.study.plan import PACKED_PER_GPU, packing_gain

    _, packed = packing_gain(PACKED_PER_GPU)
    unknown = ". "
    if untimed:
        unknown = f"; {', '.join(sorted(untimed))}: timed beside their proxy on no card, their range unknown (kept at "
        unknown += "the proxy's time). "
    return [
        "## The study on the cards measured so far",
        "",
        epoch_caps_text(zip(body["dataset"], body["variant"], body["schedule"], body["epochs"], strict=True)),
        "",
        pd.DataFrame(rows).to_markdown(index=False),
        "",
        "Days: the jobs' hours on that card, the longest first onto the first free GPU, one run per GPU "
        f"({PACKED_PER_GPU} runs sharing a GPU went {packed}: `plan --per-gpu K`). A card's unmeasured variants take "
        "their cost proxy's or family's measurement, as `costs --bench` does (\"priced by proxy\": the share of the "
        "hours so priced, a lower bound where the layer costs more per step than its proxy: `bench` those layers on "
        "the next card). Range if proxies are off: each run priced by proxy at the lowest and at the highest ratio "
        "of its layer's time per epoch to its proxy's measured on any card where both were timed (the paper's V100 "
        "included), or at its proxy's own time where that is lower (higher): ratios between layers change from card "
        "to card"
        + unknown
        + " ".join(notes)
        + " The V100's analyses were never timed; the paper reports none. An H100 or A100 is priced once `bench` "
        "has measured it: `costs --bench` with its files.",
    ]


def _days(days: float) -> str:
    return f"{days:,.0f}" if days >= 10 else f"{days:.1f}"
