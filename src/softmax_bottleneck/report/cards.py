"""The study on each card measured so far (the paper's V100 and ``data/measured/speeds.csv``): its GPU-hours, the share
priced by proxy and the range if those proxies are off (:func:`proxy_range`), the analyses, the days on N GPUs
(:func:`cards_section`), and each job's hours on one card (:func:`card_job_hours`, ``plan --card``)."""

from __future__ import annotations

import logging
from typing import NamedTuple

import pandas as pd

from softmax_bottleneck.report.bench_speeds import MeasuredSpeeds
from softmax_bottleneck.report.projection import load_runs, project_training
from softmax_bottleneck.study.plan import (
    WALL_CLOCK_GPUS,
    makespan_hours,
)

log = logging.getLogger(__name__)

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


def proxied_models(device: str, config_path) -> list[tuple[str, str, float]]:
    """``(dataset, variant, training GPU-hours)`` of the models of a configuration's study that the measured card
    ``device`` prices at another model's time (:func:`proxy_share`'s lines), the most hours first: what to ``bench``
    there next (``benchmarks/proxy_bench.py``)."""
    runs = load_runs(config_path)[0]
    body = project_training(runs, card_speeds()[device][0]).iloc[:-1]
    hours: dict[tuple[str, str], float] = {}
    for dataset, variant, time_of, gpu_hours in zip(body["dataset"], body["variant"], body["time_of"],
                                                    body["gpu_hours"], strict=True):  # fmt: skip
        if _proxy_of(variant, time_of):
            hours[dataset, variant] = hours.get((dataset, variant), 0.0) + float(gpu_hours)
    return sorted(((d, v, h) for (d, v), h in hours.items()), key=lambda row: -row[2])


def study_price(device: str, config_path) -> float:
    """The training GPU-hours of a configuration's study (``config/config.yaml``: the paper's) on the measured card
    ``device``: the figure `costs` prints, and the one every document quotes."""
    runs = load_runs(config_path)[0]
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
    runs = load_runs(config_path)[0]
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
