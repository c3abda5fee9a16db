"""The runs of the study (paper §4; SM Table 6): a configuration expanded into its training runs.

An experiment of the configuration is datasets × variants × schedules × sweep points × seeds; a sweep of the
configuration's ``sweeps`` (one variant's own hyper-parameters) is datasets × grid points × seeds under one schedule.
A sweep point keeps only the values that differ from the effective preset (the package preset plus the config's
``model_overrides``), so the GSS grid point equal to the preset (c, k) or MoS with K = 15 *is* the E1/E2 run and is
trained once. A run's folder is ``results/runs/{dataset}/{variant}/{schedule}/seed{seed}/{tag}-{hash}``: the tag
names the swept values (``default``, ``c-1.0_k2.25``, ``K10``), the hash is the first 8 hex digits of the run's
identity hash (:mod:`softmax_bottleneck.training.identity`: every resolved hyper-parameter, the seed and the
SHA-256 of the corpus files; the trainer records the whole hash as the run's fingerprint). Every configuration that
asks for the same model shares its folder; a model that differs in anything has its own.

A run keeps the folder it was first trained in: the tag says what differs from the *effective* preset, so a config
edit can name a model another way (MoS K = 2 is ``default`` while K = 2 is the configuration's default, ``K2`` once it
is not). A study that reads the run folders (``Study(config, root)``: the workflow, ``status``, ``preview``) finds a
run whose folder holds its hash under another tag and uses that folder: the model is not trained again.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import string
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from softmax_bottleneck import presets
from softmax_bottleneck.corpora.download import corpus_checksums
from softmax_bottleneck.models.output_layers import output_layer
from softmax_bottleneck.models.output_layers.hyperparameters import format_value
from softmax_bottleneck.training.identity import (
    FOLDER_HASH_LENGTH,
    folder_hash,
    identity_hash,
    run_identity,
    training_held,
)

#: the run experiments of the configuration (paper §4-5, SM), each summarised in <results>/summary/<name>.csv
RUN_EXPERIMENTS = ("main", "frozen", "ntet", "gss_grid", "mos_k", "mos_dropoutl", "fair")
#: a run's place under results/runs/, logs/<rule>/ and benchmarks/<rule>/
RUN_PATH = "{dataset}/{variant}/{schedule}/seed{seed}/{runid}"
#: a run's wildcards, in RUN_PATH's order (the order of a job's wildcards in its SLURM comment)
RUN_WILDCARDS = tuple(name for _, name, _, _ in string.Formatter().parse(RUN_PATH) if name)
#: a run folder (shared by every configuration that asks for the same run)
RUN_DIR = f"results/runs/{RUN_PATH}"
#: a training job's log (the train rule's ``log:``; ``status`` reads its last line)
TRAIN_LOG = f"logs/train/{RUN_PATH}.log"
#: hex digits of the run hash in the folder name
HASH_LENGTH = FOLDER_HASH_LENGTH
#: short names of swept hyper-parameters in a run's tag (c-1.0_k2.25, K10)
SHORT_NAMES = {"gss_c": "c", "gss_k": "k", "n_experts": "K"}
#: the order of swept keys in a tag; other keys follow alphabetically
SWEEP_ORDER = ("gss_c", "gss_k", "n_experts", "dropoutl")
#: a sweep's summary, table, figure and rule are named ``sweep_<name>``
SWEEP_PREFIX = "sweep_"


def output_roots(config: dict) -> tuple[str, str, str]:
    """This configuration's own results, reports and logs folders: ``results``, ``reports``, ``logs`` for the paper's
    configuration (``output_subdir: null``), ``results/<subdir>``, ... for another one (run folders are shared)."""
    subdir = config.get("output_subdir")
    return tuple(f"{root}/{subdir}" if subdir else root for root in ("results", "reports", "logs"))


def analysis_names(config: dict) -> tuple[str, str, str]:
    """A run's analysis outputs as the configuration names them (by the log-P rows they use): ``rank-<rows>.json``,
    ``spectrum-<rows>.csv`` and E12's folder ``robustness-<rows>``."""
    rows, robustness_rows = config["analysis"]["rank_rows"], config["analysis"]["robustness"]["rows"]
    return f"rank-{rows}.json", f"spectrum-{rows}.csv", f"robustness-{robustness_rows}"


class StudyError(ValueError):
    """A configuration whose runs cannot be expanded; the message starts with the key path at fault."""


def same_value(a, b) -> bool:
    """Equal hyper-parameter values: numbers within 1e-12, anything else exactly."""
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)


@functools.cache
def _resolve(dataset: str, variant: str, schedule: str, sets: tuple) -> dict:
    return presets.resolve(dataset, variant, schedule, dict(sets))


def model_overrides(config: dict, dataset: str, variant: str) -> dict:
    """The config's ``model_overrides`` for one variant on one dataset: ``all``, then the dataset's, then the
    variant's family, then the variant (a later block wins on a key they share)."""
    block = config.get("model_overrides") or {}
    merged = dict(block.get("all") or {})
    merged.update((block.get("datasets") or {}).get(dataset) or {})
    merged.update((block.get("families") or {}).get(presets.family(variant)) or {})
    merged.update((block.get("variants") or {}).get(variant) or {})
    return merged


@dataclass(frozen=True)
class Run:
    """One trained model of the study.

    ``overrides`` are the experiment's swept values that differ from the effective preset (they name the run);
    ``sets`` every ``--set`` of the run (the config's ``model_overrides``, then ``overrides``), sorted by key.
    """

    dataset: str
    variant: str
    schedule: str
    seed: int
    seed_kind: str  # authors | random
    overrides: tuple = ()
    sets: tuple = ()
    folder: str = ""  # the folder it was trained in, where that is not ``<tag>-<hash>`` (:meth:`Study.run`)

    @property
    def tag(self) -> str:
        parts = [f"{SHORT_NAMES.get(key, key)}{format_value(value)}" for key, value in self.overrides]
        return "_".join(parts) or "default"

    @property
    def hyperparameters(self) -> dict:
        """The run's hyper-parameters as the trainer resolves them (preset + ``sets``), without the seed."""
        return dict(_resolve(self.dataset, self.variant, self.schedule, self.sets))

    @cached_property
    def identity(self) -> dict:
        """The run's identity (:mod:`softmax_bottleneck.training.identity`), as the trainer computes it."""
        return run_identity({**self.hyperparameters, "seed": self.seed}, corpus_checksums(self.dataset))

    @property
    def runid(self) -> str:
        """``<tag>-<hash>``: readable swept values, then the hash of the run's identity (or the folder it was trained
        in under another tag)."""
        return self.folder or f"{self.tag}-{identity_hash(self.identity)[:HASH_LENGTH]}"

    @property
    def wildcards(self) -> dict:
        """The run's wildcards (:data:`RUN_WILDCARDS`), in RUN_PATH's order."""
        return {key: getattr(self, key) for key in RUN_WILDCARDS}

    @property
    def dir(self) -> str:
        return RUN_DIR.format(**self.wildcards)

    def file(self, name: str) -> str:
        return f"{self.dir}/{name}"

    @property
    def set_arguments(self) -> list[str]:
        """The run's ``train --set KEY=VALUE`` arguments: its ``sets`` that change the model from the plain preset,
        each value as resolved (a float written ``0`` is ``0.0``), so that one model has one command however the
        configuration writes it (all of ``sets``, as resolved, where leaving some out would resolve to another model).
        """
        resolved = self.hyperparameters
        plain = _resolve(self.dataset, self.variant, self.schedule, ())
        every = tuple((key, resolved[key]) for key, _ in self.sets if key in resolved)
        kept = tuple((key, value) for key, value in every if key not in plain or not same_value(plain[key], value))
        if dict(_resolve(self.dataset, self.variant, self.schedule, kept)) != resolved:
            kept = every
        return [f"{key}={format_value(value)}" for key, value in kept]


class Study:
    """A checked configuration (:func:`.config.check`) and the runs it asks for; with ``root`` (the working directory
    of the study's ``results/``), each run in the folder it was trained in (:meth:`trained_folder`)."""

    def __init__(self, config: dict, root: str | Path | None = None):
        self.config = config
        self.root = None if root is None else Path(root)
        self._folders: dict[Path, dict[str, list[Path]]] = {}

    def trained_folder(self, run: Run) -> str:
        """The folder beside ``run``'s own (same dataset, layer, schedule and seed) that holds its identity hash under
        another tag and more of its training than its own folder (a model, else a resume state): ``""`` where there is
        none (or without ``root``)."""
        if self.root is None:
            return ""
        own = self.root / run.dir
        if own.parent not in self._folders:
            found: dict[str, list[Path]] = {}
            try:
                children = sorted(own.parent.iterdir()) if own.parent.is_dir() else []
            except OSError:  # unreadable: the run is named as the configuration names it
                children = []
            for child in children:  # a link is never taken for a run folder
                if folder_hash(child.name) and child.is_dir() and not child.is_symlink():
                    found.setdefault(folder_hash(child.name), []).append(child)
            self._folders[own.parent] = found
        twins = [f for f in self._folders[own.parent].get(folder_hash(own.name) or "", []) if f.name != own.name]
        best = max(twins, key=training_held, default=None)
        return best.name if best is not None and training_held(best) > training_held(own) else ""

    # ------------------------------------------------------------------ one run
    def model_overrides(self, dataset: str, variant: str) -> dict:
        """:func:`model_overrides` of this configuration."""
        return model_overrides(self.config, dataset, variant)

    def run(self, dataset: str, variant: str, schedule: str, seed: int, seed_kind: str, point: tuple = ()) -> Run:
        """The run of one sweep point; values equal to the effective preset, keys the variant does not own and values
        that resolving overrules are dropped from its name and its ``--set`` arguments (so the same model is one run).
        """
        base_sets = self.model_overrides(dataset, variant)
        base = _resolve(dataset, variant, schedule, tuple(sorted(base_sets.items())))
        swept = _resolve(dataset, variant, schedule, tuple(sorted({**base_sets, **dict(point)}.items())))
        # a swept key names the run only where it changes the resolved model: a key the variant does not own
        # (resolve drops it) or a value resolving overrules is the same model, which must keep one name; the name
        # holds the resolved value (a float's 2 is 2.0), so one model has one name however the config writes it
        overrides = tuple(
            (key, swept[key])
            for key, value in point
            if key in swept and not same_value(base.get(key), value) and not same_value(base.get(key), swept[key])
        )
        sets = {**base_sets, **dict(overrides)}
        run = Run(dataset, variant, schedule, seed, seed_kind, overrides, tuple(sorted(sets.items())))
        folder = self.trained_folder(run)
        return dataclasses.replace(run, folder=folder) if folder else run

    def seeds(self, dataset: str, variant: str, which: str) -> list[tuple[int, str]]:
        """``[(seed, kind)]`` for ``which`` in authors | random | all (the authors' seed by family, SM Table 6)."""
        out = []
        if which in ("authors", "all"):
            out.append((int(self.config["seeds"]["authors"][dataset][presets.family(variant)]), "authors"))
        if which in ("random", "all"):
            out.extend((int(seed), "random") for seed in self.config["seeds"]["random"])
        return out

    def reference_run(self, dataset: str, variant: str, schedule: str) -> Run:
        """The authors'-seed, preset-hyper-parameter run behind spectra, word similarity and top-5."""
        seed, kind = self.seeds(dataset, variant, "authors")[0]
        return self.run(dataset, variant, schedule, seed, kind)

    # ------------------------------------------------------------------ experiments
    @staticmethod
    def grid_points(grid: dict) -> list[tuple]:
        """Cartesian product of ``{key: [values]}``: ``[((key, value), ...)]``, keys in a tag's order."""
        keys = sorted(grid, key=lambda k: (SWEEP_ORDER.index(k) if k in SWEEP_ORDER else len(SWEEP_ORDER), k))
        return [tuple(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]

    def sweep_points(self, name: str, dataset: str) -> list[tuple]:
        """Cartesian product of one experiment's sweep for one dataset: ``[((key, value), ...)]``."""
        return self.grid_points((self.config["experiments"][name].get("sweep") or {}).get(dataset) or {})

    def experiment_runs(self, name: str) -> list[Run]:
        """The runs of one experiment, in config order."""
        experiment = self.config["experiments"][name]
        try:
            return [
                self.run(dataset, variant, schedule, seed, kind, point)
                for dataset in experiment["datasets"]
                for variant in experiment["variants"]
                for schedule in experiment["schedules"]
                for point in self.sweep_points(name, dataset)
                for seed, kind in self.seeds(dataset, variant, experiment["seeds"])
            ]
        except ValueError as err:
            raise StudyError(f"experiments/{name}: {err}") from None

    @cached_property
    def experiments(self) -> dict[str, list[Run]]:
        """``{experiment: [Run]}`` for :data:`RUN_EXPERIMENTS`."""
        return {name: self.experiment_runs(name) for name in RUN_EXPERIMENTS}

    # ------------------------------------------------------------------ sweeps of one variant's own hyper-parameters
    def sweep_runs(self, name: str) -> list[Run]:
        """The runs of ``sweeps/<name>``: datasets × grid points × seeds, named as every other run (a point equal
        to the effective preset is the ``default`` run other experiments train too)."""
        sweep = self.config["sweeps"][name]
        variant, schedule = sweep["variant"], sweep["schedule"]
        try:
            return [
                self.run(dataset, variant, schedule, seed, kind, point)
                for dataset in sweep["datasets"]
                for point in self.grid_points(sweep["grid"])
                for seed, kind in self.seeds(dataset, variant, sweep["seeds"])
            ]
        except ValueError as err:
            raise StudyError(f"sweeps/{name}: {err}") from None

    @cached_property
    def sweeps(self) -> dict[str, list[Run]]:
        """``{sweep name: [Run]}`` of the configuration's ``sweeps`` (none when absent)."""
        return {name: self.sweep_runs(name) for name in self.config.get("sweeps") or {}}

    def sweep_keys(self, name: str) -> list[str]:
        """The swept keys of ``sweeps/<name>``, in the configuration's order (the first is the figure's x axis)."""
        return list(self.config["sweeps"][name]["grid"])

    # ------------------------------------------------------------------ analyses' reference models
    def model_set(self, key: str) -> list[Run]:
        """The reference models of ``analysis/<key>`` (spectra, wordsim)."""
        block = self.config["analysis"][key]
        return [
            self.reference_run(dataset, variant, block["schedule"])
            for dataset in block["datasets"]
            for variant in block["variants"]
        ]

    @cached_property
    def top5_models(self) -> dict[str, Run]:
        models = self.config["analysis"]["top5"]["models"]
        return {name: self.reference_run("ptb", m["variant"], m["schedule"]) for name, m in models.items()}

    @cached_property
    def robustness_model(self) -> Run:
        block = self.config["analysis"]["robustness"]
        return self.reference_run(block["dataset"], block["variant"], block["schedule"])

    def analysis_models(self) -> list[Run]:
        """Reference models of the analyses (spectra, word similarity, top-5, robustness)."""
        return [
            *self.model_set("spectra"),
            *self.model_set("wordsim"),
            *self.top5_models.values(),
            self.robustness_model,
        ]

    # ------------------------------------------------------------------ the training jobs
    @cached_property
    def jobs(self) -> dict[str, Run]:
        """The distinct training runs, by run folder, in first-use order (experiments, then analyses).

        Every run's hyper-parameters and hash are resolved here: a bad combination fails before any job, and so do
        two folders of one model (same identity hash under two names, e.g. two variants whose hyper-parameters an
        override made equal): a model is trained once.
        """
        jobs: dict[str, Run] = {}
        folders: dict[str, str] = {}  # identity hash -> run folder
        runs = itertools.chain(*self.experiments.values(), *self.sweeps.values(), self.analysis_models())
        for run in runs:
            try:
                folder = run.dir
                digest = identity_hash(run.identity)
            except ValueError as err:
                raise StudyError(f"{run.dataset} {run.variant} {run.schedule} {run.tag}: {err}") from None
            if folders.setdefault(digest, folder) != folder:
                raise StudyError(
                    f"{folder} is the same model as {folders[digest]} (identity {digest[:HASH_LENGTH]}): a model is "
                    "trained once, under one name; make the variants' hyper-parameters differ"
                )
            jobs.setdefault(folder, run)
        return jobs

    def layer_points(self, layer: str) -> list[dict]:
        """The distinct values of output layer ``layer``'s own hyper-parameters over the training jobs whose variant
        uses it, in first-use order: what ``check-layer`` checks before any of them trains (a sweep over K = 1, 5
        gives both points)."""
        spec = output_layer(layer)
        points: list[dict] = []
        for run in self.jobs.values():
            if presets.variant_info(run.variant).output_layer == layer:
                point = spec.layer_hp(run.hyperparameters)
                if point not in points:
                    points.append(point)
        return points

    def job(self, wildcards) -> Run:
        """The training job of a rule's wildcards (``dataset``, ``variant``, ``schedule``, ``seed``, ``runid``)."""
        return self.jobs[RUN_DIR.format(**{key: wildcards[key] for key in RUN_WILDCARDS})]

    def members(self) -> dict[str, list[str]]:
        """Run folder → the experiments that use it (``sweep_<name>`` for a sweep, ``analysis`` for the analyses'
        reference models)."""
        members: dict[str, list[str]] = {}
        groups = [
            *self.experiments.items(),
            *((SWEEP_PREFIX + name, runs) for name, runs in self.sweeps.items()),
            ("analysis", self.analysis_models()),
        ]
        for name, runs in groups:
            for run in runs:
                names = members.setdefault(run.dir, [])
                if name not in names:
                    names.append(name)
        return members
