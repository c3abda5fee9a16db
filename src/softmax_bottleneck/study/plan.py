"""The training plan (``snakemake plan``): every distinct run, the experiments that use it, its projected cost.

A run's projected V100 GPU-hours are the paper's seconds per epoch (Table 2, ``data/reported/main.csv``) × its
epochs. A variant whose time the paper does not report takes the time of the first of :func:`time_sources` that has
one: its registered cost proxy (e.g. LMS-PLIF for LMS-PLIF†), else its family's default (Softmax for the softmax
family, MoS for the mixture family). A plug-in layer priced so is marked :data:`PROXY_MARK`, with a footnote naming
the commands that measure it (:func:`proxy_notes`): its time is an assumption.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from softmax_bottleneck import paper_numbers, presets
from softmax_bottleneck.study.run_status import experiment_label
from softmax_bottleneck.study.runs import SWEEP_PREFIX, Run, Study, same_value

if TYPE_CHECKING:
    import pandas as pd

#: a family's stand-in for variants whose time the paper does not report and that declare no cost proxy
FAMILY_COST_PROXY: dict[str, str] = {"softmax": "softmax", "mixture": "mos"}
PLAN_COLUMNS = [
    "run", "experiments", "dataset", "variant", "schedule", "seed", "seed_kind", "tag", "runid", "epochs",
    "v100_s_per_epoch", "time_of", "gpu_hours",
]  # fmt: skip


@functools.cache
def paper_seconds_per_epoch() -> dict[tuple[str, str], float]:
    """(dataset, variant) → seconds per epoch on one V100 as the paper's Table 2 reports them ("~55s" ...)."""
    rows = paper_numbers.records("main")
    return {(r["dataset"], r["variant"]): float(r["seconds_per_epoch"]) for r in rows if r["seconds_per_epoch"]}


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


#: marks a line priced at another variant's time: a plug-in layer that nothing has timed (:func:`proxy_notes`)
PROXY_MARK = "*"
#: the plan table's column saying whether an experiment's new jobs hold such a plug-in (shown as the mark)
PROXY_COLUMN = "priced_by_proxy"


def priced_by_proxy(variant: str, time_of: str) -> bool:
    """Whether a plug-in ``variant`` is priced at another variant's time: ``time_of`` names whose time it is (a label
    of :func:`time_sources`, or of a measurement: empty or ``(...)`` when its own)."""
    source = time_of.split()[0] if time_of.strip() else variant
    return not presets.variant_info(variant).paper and source != variant and not source.startswith("(")


def proxy_priced(study: Study) -> dict[str, tuple[str, list[str]]]:
    """``{plug-in variant: (whose paper time prices it, its datasets)}`` of the study's training jobs that
    :func:`priced_by_proxy`."""
    priced: dict[str, tuple[str, list[str]]] = {}
    for run in study.jobs.values():
        _, time_of = seconds_per_epoch(run.dataset, run.variant)
        if priced_by_proxy(run.variant, time_of):
            datasets = priced.setdefault(run.variant, (time_of, []))[1]
            datasets += [] if run.dataset in datasets else [run.dataset]
    return priced


def proxy_notes(priced: dict[str, tuple[str, list[str]]]) -> list[str]:
    """One footnote per plug-in variant priced at another's time (:func:`proxy_priced`): assumed, and how to measure."""
    return [
        f"{PROXY_MARK} {variant}: priced at the paper's time per epoch of {label}, an assumption (nothing has timed "
        f"{variant}; a layer 10× slower costs 10× more): `python -m softmax_bottleneck check-layer {variant}` prints "
        f"its cost relative to Softmax, `python -m softmax_bottleneck bench --dataset {datasets[0]} --variant "
        f"{variant}` measures a run and `costs --bench` projects with it (docs/costs.md)"
        for variant, (label, datasets) in priced.items()
    ]


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
    import pandas as pd

    return pd.DataFrame(plan_rows(study), columns=PLAN_COLUMNS)


def plan_table(study: Study, trained: set[str] | frozenset = frozenset()) -> pd.DataFrame:
    """Per experiment: its jobs, the jobs it adds (a run several experiments use counts in the first),
    their projected V100 GPU-hours, how many of those are trained (``trained``: run folders), whether those hold a
    plug-in priced at another variant's time (:data:`PROXY_COLUMN`); then the total."""
    rows, seen = [], set()
    members = study.members()
    priced = proxy_priced(study)
    for name in [*study.experiments, *(SWEEP_PREFIX + sweep for sweep in study.sweeps), "analysis"]:
        jobs = [path for path in study.jobs if name in members[path]]
        new = [path for path in jobs if path not in seen]
        seen.update(new)
        if not jobs:
            continue
        hours = sum(gpu_hours(study.jobs[path]) for path in new)
        done = sum(path in trained for path in new)
        rows.append({"experiment": experiment_label(name), "jobs": len(jobs), "new jobs": len(new),
                     "V100 GPU-hours (new jobs)": hours, "trained": done,
                     PROXY_COLUMN: any(study.jobs[path].variant in priced for path in new)})  # fmt: skip
    import pandas as pd

    table = pd.DataFrame(rows)
    total = {"experiment": "total", "jobs": "", "new jobs": int(table["new jobs"].sum()),
             "V100 GPU-hours (new jobs)": float(table["V100 GPU-hours (new jobs)"].sum()),
             "trained": int(table["trained"].sum()), PROXY_COLUMN: bool(table[PROXY_COLUMN].any())}  # fmt: skip
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)


def plan_markdown(table: pd.DataFrame) -> str:
    """The plan table as Markdown, GPU-hours to the hour with thousands separators."""
    shown = table.copy()
    shown["V100 GPU-hours (new jobs)"] = shown["V100 GPU-hours (new jobs)"].map(lambda h: f"{h:,.0f}")
    if PROXY_COLUMN in shown:  # hours that hold a plug-in priced at another variant's time (proxy_notes)
        marked = shown.pop(PROXY_COLUMN).fillna(False).astype(bool)
        shown.loc[marked, "V100 GPU-hours (new jobs)"] += f" {PROXY_MARK}"
    return shown.to_markdown(index=False, colalign=("left", "right", "right", "right", "right"))


def stale_runs(study: Study) -> list[str]:
    """``<run folder>: trained with an older source of <layer>`` for each trained run whose plug-in layer's code
    changed since (recorded in its ``metrics.json``). Such runs are never retrained by themselves: delete a run
    folder to retrain it with the new code."""
    from pathlib import Path

    from softmax_bottleneck import readback
    from softmax_bottleneck.models.output_layers.provenance import older_layer_source

    notes = []
    for path in study.jobs:
        metrics = Path(path) / "metrics.json"
        if metrics.is_file():
            try:
                note = older_layer_source(readback.load_json(metrics))
            except (OSError, ValueError):  # ReadbackError is a ValueError
                continue
            if note:
                notes.append(f"{path}: {note}")
    return notes


def add_cli(parser) -> None:
    parser.description = (
        "Print the training plan of a workflow configuration: per experiment its jobs, the jobs it adds (a run "
        "that several experiments use is trained once), their projected V100 GPU-hours (the paper's seconds per "
        "epoch × epochs) and how many are trained already."
    )
    from softmax_bottleneck.study.config import add_config_option

    add_config_option(parser, "to plan")
    parser.add_argument("--csv", default=None, metavar="FILE", help="also write every job (one row per run folder)")
    from softmax_bottleneck.argtypes import positive_int_up_to

    parser.add_argument(
        "--gpus", nargs="+", type=positive_int_up_to(MAX_GPUS), default=list(WALL_CLOCK_GPUS), metavar="N",
        help="the numbers of GPUs of the wall-clock table (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--per-gpu", type=positive_int_up_to(MAX_PER_GPU), default=PACKED_PER_GPU, metavar="K",
        help="runs sharing one GPU in the wall-clock's second row, at the gain measured for K (default: %(default)s)",
    )  # fmt: skip


def run_cli(args, on_card=None) -> int:
    """The plan of ``args``; ``on_card(study)``: the wall-clock's hours per job on another card and how they were
    priced (``(card, hours, whose)``, from the report layer's ``plan --card``), else the paper's V100 hours."""
    import os

    from softmax_bottleneck.atomic import atomic_write_text
    from softmax_bottleneck.study import config as study_config

    study, source = study_config.load_study(args, "plan")
    if study is None:
        return 1
    trained = {path for path in study.jobs if os.path.exists(f"{path}/model.pt")}
    table = plan_table(study, trained)
    if args.csv:
        atomic_write_text(plan_frame(study).to_csv(index=False), args.csv)
    print(f"Training plan of {source}: {len(study.jobs)} training jobs (a run that several experiments use "
          "is trained once); projected with the paper's V100 seconds per epoch × epochs.\n")  # fmt: skip
    print(plan_markdown(table))
    for note in [*size_note(study), *proxy_notes(proxy_priced(study)), *stale_runs(study)]:
        print(note)
    print("\n".join(plan_footer(study, args.gpus, args.per_gpu, on_card(study) if on_card else None)))
    return 0


#: hyper-parameters that set what one epoch computes: a run whose value differs from its preset's is not paper-size
SIZE_KEYS = ("nemb", "nhid", "nhidlast", "nlayers", "batch_size", "bptt", "train_tokens")


def size_note(study: Study) -> list[str]:
    """A note when some of ``study``'s runs are not of the paper's size (:data:`SIZE_KEYS` set otherwise than their
    preset): the paper's seconds per epoch price an epoch of the paper's model on the whole corpus, not theirs."""
    keys: dict[str, None] = {}
    odd = 0
    for run in study.jobs.values():
        preset = presets.resolve(run.dataset, run.variant, run.schedule)
        own = [key for key in SIZE_KEYS if not same_value(run.hyperparameters.get(key), preset.get(key))]
        odd += bool(own)
        keys.update(dict.fromkeys(own))
    if not odd:
        return []
    changed = ", ".join(key for key in SIZE_KEYS if key in keys)
    return [
        f"Note: {odd} of {len(study.jobs)} runs are not of the paper's size ({changed} set by the configuration): "
        "the GPU-hours here price paper-size epochs, not theirs (the small scale trains on a CPU in minutes, "
        "docs/running.md)."
    ]


#: attempts after which a training job's memory stops growing (a time-limit or pre-emption retry is not an
#: out-of-memory one: the SLURM profile allows 30 attempts per run)
MEMORY_ATTEMPTS = 2


def train_memory_mb(dataset: str, attempt: int) -> int:
    """Host memory of one training attempt: 8 GB (PTB) or 16 GB (WT2), doubled for attempt 2 and kept there."""
    return (8000 if dataset == "ptb" else 16000) * min(attempt, MEMORY_ATTEMPTS)


def fused_memory_mb(dataset: str, runs: int, attempt: int) -> int:
    """Host memory of one attempt of a fused group of ``runs`` runs: one training's (:func:`train_memory_mb`) plus a
    quarter of it for each further run (one Python and one corpus; each run adds its model, optimizer and batches)."""
    one = train_memory_mb(dataset, attempt)
    return one + (runs - 1) * one // 4


def train_runtime_minutes(run: Run, attempt: int) -> int:
    """Minutes for one training attempt: 1.5 × the paper's V100 time (at least 10), growing with the attempt;
    a killed or timed-out job resumes from its checkpoint (``<run>/.resume``) on retry."""
    return max(10, math.ceil(90 * gpu_hours(run) * attempt))


# --------------------------------------------------------------------------------------------- the epoch caps
def epoch_caps_text(jobs) -> str:
    """What the epochs of ``jobs`` (``(dataset, variant, schedule, epochs)`` each) are: every epoch is trained (no
    early stop), so they are the cost; where they are the presets' caps, where those come from (the paper states
    none: the authors' code's PTB settings, and their answer to a reviewer for MoS on WT2)."""
    caps: dict[int, set[str]] = {}
    presets_caps = True
    for dataset, variant, schedule, epochs in jobs:
        caps.setdefault(int(epochs), set()).add(f"{dataset} {variant}")
        presets_caps &= int(epochs) == presets.resolve(dataset, variant, schedule)["epochs"]
    common = max(caps, key=lambda epochs: len(caps[epochs]))
    others = "; ".join(f"{epochs} for {', '.join(sorted(caps[epochs]))}" for epochs in sorted(caps) if epochs != common)
    text = (
        f"Epochs: every run trains all its epochs, {common}" + (f" ({others})" if others else "") + "; the training "
        "has no early stop, so the epochs are the cost."
    )
    if presets_caps:
        text += (
            " They are the presets' caps: the paper states none; 1000 is what the authors' code sets for PTB (assumed "
            "for WT2 and MoC), MoS on WT2's 500 the authors' answer to a reviewer."
        )
    return text


def epoch_caps_line(study: Study) -> str:
    """:func:`epoch_caps_text` of the plan's jobs."""
    return epoch_caps_text((r.dataset, r.variant, r.schedule, r.hyperparameters["epochs"]) for r in study.jobs.values())


# --------------------------------------------------------------------------------------------- disk
def _measured_runs() -> dict[str, list[dict]]:
    """The runs of ``data/measured/disk.csv`` by dataset, sizes as numbers."""
    from softmax_bottleneck import measured

    out: dict[str, list[dict]] = {}
    for row in measured.records("disk"):
        if row["kind"] == "run":
            numbers = {k: float(row[k]) for k in ("parameters", "bytes", "state_bytes", "peak_bytes", "metrics_bytes",
                                                  "text_bytes_per_epoch")}  # fmt: skip
            out.setdefault(row["dataset"], []).append({**row, **numbers})
    return out


def run_disk(run: Run) -> tuple[float, float]:
    """Bytes of one run: ``(finished, while training)``. Finished: ``model.pt`` (its kept hard links in
    ``.resume/final`` take no more), ``metrics.json``, and the curve and log over its epochs; while training: the
    largest its folder grew to beyond that (the resume state, and a new one written beside it). From the measured run
    of its dataset nearest in parameters, scaled by the parameters (the same size: the measured bytes)."""
    count = presets.parameter_count(run.hyperparameters, presets.VOCAB_SIZES[run.dataset])
    rows = _measured_runs().get(run.dataset)
    if not rows:
        raise ValueError(f"no measured run of {run.dataset} in data/measured/disk.csv")
    near = min(rows, key=lambda row: abs(row["parameters"] - count))
    scale = count / near["parameters"]
    text = near["text_bytes_per_epoch"] * run.hyperparameters["epochs"]
    finished = near["bytes"] * scale + near["metrics_bytes"] + text
    training = max(near["peak_bytes"] - near["bytes"], 0.0) * scale
    return finished, training


def analysis_disk(study: Study, run: Run) -> float:
    """Bytes of one run's rank and spectrum files (one singular value per row up to the vocabulary's size)."""
    from softmax_bottleneck import measured

    rows = {row["kind"]: row for row in measured.records("disk")}
    limit = study.config["analysis"]["rank_rows"]
    vocab = presets.VOCAB_SIZES[run.dataset]
    values = vocab if isinstance(limit, str) else min(int(limit), vocab)
    spectrum = rows["spectrum"]
    return float(rows["rank"]["bytes"]) + float(spectrum["bytes"]) / float(spectrum["rows"]) * values


def slice_disk(study: Study) -> float:
    """Bytes of E12's log-P slice (float32, rows × vocabulary; deleted once E12 has read it)."""
    from softmax_bottleneck import measured

    e12 = study.config["analysis"]["robustness"]
    row = next(row for row in measured.records("disk") if row["kind"] == "logp")
    measured_cells = float(row["rows"]) * presets.VOCAB_SIZES[row["dataset"]]
    return float(row["bytes"]) * int(e12["rows"]) * presets.VOCAB_SIZES[e12["dataset"]] / measured_cells


def disk_line(study: Study, at_once: int) -> str:
    """What the study needs on disk: every run trained and analysed, and the most while ``at_once`` train."""
    sizes = [run_disk(run) for run in study.jobs.values()]
    finished = sum(f for f, _ in sizes) + sum(analysis_disk(study, run) for run in study.jobs.values())
    per_training = max(t for _, t in sizes)
    e12 = slice_disk(study)
    peak = finished + min(at_once, len(sizes)) * per_training + e12

    def gb(n: float) -> str:
        return f"{n / 1e9:,.1f} GB"

    return (
        f"Disk: {gb(finished)} once every run is trained and analysed; each training adds up to {gb(per_training)} "
        f"while it runs (its resume state, and the next one written beside it), the robustness analysis's log-P slice "
        f"(E12, SM §5) {gb(e12)} while it runs: "
        f"{gb(peak)} with {at_once} trainings at once. Measured from real runs' files (benchmarks/disk_per_run.py)."
    )


# --------------------------------------------------------------------------------------------- wall-clock
#: the numbers of GPUs of the plan's wall-clock table, and the runs per GPU of its packed row
WALL_CLOCK_GPUS = (1, 4, 16, 64)
PACKED_PER_GPU = 4
#: the most GPUs and runs per GPU `plan` takes (more is a typo: no cluster is larger, no card holds more runs)
MAX_GPUS, MAX_PER_GPU = 1_000_000, 64
#: the card and model whose measured packing gain the packed row uses (the only packing measured so far)
PACKING_MEASURED_ON = ("NVIDIA H200", "ptb", "softmax")


def makespan_hours(hours, gpus: int, per_gpu: int = 1, gain: float = 1.0) -> float:
    """Wall-clock hours of jobs of ``hours`` on ``gpus`` GPUs, the longest job first onto the least-loaded slot.
    With ``per_gpu`` runs sharing a GPU (``gpus × per_gpu`` slots) whose throughput together is ``gain`` × one run's,
    each run takes ``per_gpu / gain`` times as long."""
    import heapq

    if gpus < 1 or per_gpu < 1 or gain <= 0:
        raise ValueError(f"gpus {gpus}, runs per GPU {per_gpu} and gain {gain} must be positive")
    hours = sorted(hours, reverse=True)
    slots = [0.0] * max(1, min(gpus * per_gpu, len(hours)))  # a slot without a job changes nothing
    for length in hours:
        heapq.heapreplace(slots, slots[0] + length * per_gpu / gain)
    return max(slots)


def packing_gain(per_gpu: int) -> tuple[float, str]:
    """The throughput of ``per_gpu`` runs sharing a GPU over one run's, and where it comes from."""
    from softmax_bottleneck import measured

    device, dataset, variant = PACKING_MEASURED_ON
    gain = measured.packing_gain(device, dataset, variant, per_gpu) if per_gpu > 1 else 1.0
    if gain is None:
        return 1.0, "not measured: counted as no gain"
    return gain, f"{gain:.2f}×, as measured on an {device.removeprefix('NVIDIA ')}" if per_gpu > 1 else "1.00×"


def wall_clock_text(study: Study, gpus=WALL_CLOCK_GPUS, per_gpu: int = PACKED_PER_GPU, on_card=None) -> str:
    """Days to train the plan's jobs on each number of ``gpus``, one run per GPU and ``per_gpu`` per GPU, from the
    plan's V100 hours, or ``on_card`` = (card, hours per job, how they were priced: ``plan --card``); and the floor
    no number of GPUs goes under: the longest run."""
    import pandas as pd

    hours = {path: gpu_hours(run) for path, run in study.jobs.items()}
    whose, on = "the plan's V100 hours,", "GPUs"
    if on_card is not None:
        card, hours, whose = on_card
        on = f"{card} GPUs"
    gain, source = packing_gain(per_gpu)
    rows = {"days, one run per GPU": [makespan_hours(hours.values(), n) / 24 for n in gpus]}
    if per_gpu > 1:
        rows[f"days, {per_gpu} runs per GPU ({source})"] = [
            makespan_hours(hours.values(), n, per_gpu, gain) / 24 for n in gpus
        ]
    table = pd.DataFrame(
        [[label, *(f"{d:,.0f}" if d >= 10 else f"{d:.1f}" if d >= 0.1 else "< 0.1" for d in days)]
         for label, days in rows.items()],
        columns=["GPUs", *map(str, gpus)],
    )  # fmt: skip
    longest = max(hours, key=hours.get)
    run = study.jobs[longest]
    floor = f"{hours[longest] / 24:.1f} days" if hours[longest] >= 24 else f"{hours[longest]:.1f} hours"
    return (
        f"Wall-clock on N {on} ({whose} the longest run first onto the first free GPU; never under "
        f"{floor}, its longest run, {run.dataset} {run.variant} {run.schedule}):\n\n"
        + table.to_markdown(index=False, colalign=("left", *["right"] * len(gpus)))
    )


def plan_footer(study: Study, gpus=WALL_CLOCK_GPUS, per_gpu: int = PACKED_PER_GPU, on_card=None) -> list[str]:
    """The lines under the plan's table: the epoch caps, the disk (with as many trainings at once as the most GPUs
    of the wall-clock table) and the wall-clock table (``on_card``: :func:`wall_clock_text`)."""
    return ["", epoch_caps_line(study), disk_line(study, max(gpus)), wall_clock_text(study, gpus, per_gpu, on_card)]
