"""Where a claim's numbers come from: the summary rows it rests on, and whether those runs are at the paper's scale.

* :class:`Basis`: the rows of one summary file a claim reads (its dataset, output layers, schedule, kind of seed);
  the claim's evidence is built from exactly these rows, and the preview counts its runs in and planned with them;
* :class:`Summaries`: the summary CSVs of a study, each read once through the strict readers of the tables
  (:func:`~softmax_bottleneck.report.common.read_runs`, :func:`~softmax_bottleneck.report.common.read_wordsim`,
  :func:`~softmax_bottleneck.report.common.read_top5`:
  a binary or malformed file, or an impossible number, is one line naming the file), then by the claims' own checks
  (:mod:`.inputs`: a run counted once, a rank within the vocabulary, a known dataset and schedule, a whole seed, a test
  perplexity in every row); an absent file reads as no runs, a link, FIFO or device in its place is refused;
* :func:`at_paper_scale`: a run is comparable with the paper when it has the paper's model size and training length,
  the #Param and epochs of its preset (the paper's hyper-parameters, §4 and SM Tables 6, 9) at its own swept values.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from softmax_bottleneck import presets
from softmax_bottleneck.models.output_layers import output_layer
from softmax_bottleneck.report.claims.inputs import TOP5_IDENTITY, check_once, check_runs
from softmax_bottleneck.report.common import read_runs, read_top5, read_wordsim
from softmax_bottleneck.report.summaries import RUN_COLUMNS, TOP5_COLUMNS
from softmax_bottleneck.report.tables.cells import missing

log = logging.getLogger(__name__)

#: the summary of word similarity (one row per model and benchmark) and of the top-5 predictions (one row per model
#: and context); every other basis file is a run summary
WORDSIM = "wordsim.csv"
TOP5 = "top5.csv"


@dataclass(frozen=True)
class Basis:
    """The rows of summary ``file`` a claim reads: ``dataset``, and where given the output layers (``variants``;
    None: every layer in the file, a plug-in's too), the ``schedule`` and the kind of seed (``authors``/``random``)."""

    file: str
    dataset: str
    variants: tuple[str, ...] | None = None
    schedule: str | None = None
    seed_kind: str | None = None

    def _wanted(self) -> dict:
        wanted = {"dataset": self.dataset, "schedule": self.schedule, "seed_kind": self.seed_kind}
        return {key: value for key, value in wanted.items() if value is not None}

    def select(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``frame`` (this basis's file) the claim reads."""
        keep = pd.Series(True, index=frame.index)
        for key, value in self._wanted().items():
            keep &= frame[key].astype(str) == value if key in frame else False
        if self.variants is not None:
            keep &= frame["variant"].isin(self.variants)
        return frame[keep]

    def matches(self, record: dict) -> bool:
        """Whether a planned run (its record: ``dataset``, ``variant``, ``schedule``, ``seed_kind`` where known)
        is one of this basis's rows."""
        for key, value in self._wanted().items():
            if key in record and str(record[key]) != value:
                return False
        return self.variants is None or record.get("variant") in self.variants


class Summaries:
    """The summary CSVs under ``summary_dir``, each read once (checked; an absent file reads as no runs)."""

    def __init__(self, summary_dir):
        self.dir = Path(summary_dir)
        self._frames: dict[str, pd.DataFrame] = {}

    def frame(self, file: str) -> pd.DataFrame:
        if file not in self._frames:
            path = self.dir / file
            if not os.path.lexists(path):  # a link, a FIFO or a device is there: the reader refuses it, naming it
                log.warning("%s: no such summary; its claims have no runs", path)
                columns = {WORDSIM: ["dataset", "variant", "benchmark", "spearman"], TOP5: TOP5_COLUMNS}
                self._frames[file] = pd.DataFrame(columns=columns.get(file, RUN_COLUMNS))
            elif file == WORDSIM:
                self._frames[file] = check_once(read_wordsim(self.dir), path)
            elif file == TOP5:
                self._frames[file] = check_once(_top5(self.dir, path), path, TOP5_IDENTITY)
            else:
                self._frames[file] = check_runs(read_runs(self.dir, file, extra=["n_experts"]), path)
        return self._frames[file]

    def rows(self, basis: Basis) -> pd.DataFrame:
        return basis.select(self.frame(basis.file))


def _top5(summary_dir, path) -> pd.DataFrame:
    """The top-5 summary with every column it should have (empty where missing: a summary written before it named
    each model's dataset, variant and schedule reads as no model of any layer, said once)."""
    frame = read_top5(summary_dir)
    if frame["variant"].isna().all() and not frame.empty:
        log.warning(
            "%s: no model's variant is named (an older summary); rebuild it (snakemake) for Figure 3's claim", path
        )
    return frame


# --------------------------------------------------------------------------------------------- the paper's scale
@functools.cache
def _paper_size(dataset: str, variant: str, schedule: str, swept: tuple) -> tuple[int, int]:
    """#Param and epochs of a run with the paper's hyper-parameters (its preset) at the swept values ``swept``."""
    hp = presets.resolve(dataset, variant, schedule, dict(swept))
    return presets.parameter_count(hp, presets.VOCAB_SIZES[dataset]), hp["epochs"]


def at_paper_scale(row) -> bool:
    """Whether a run (a row of a run summary) has the paper's model size and training length: its ``parameters`` and
    ``epochs_run`` equal the #Param and epochs of its preset, at the values of its layer's own hyper-parameters that
    the row records (a sweep's K, c, k); a run the presets cannot place (an unknown layer) is not."""
    try:
        layer = output_layer(presets.variant_info(row["variant"]).output_layer)
        recorded = {key: spec for key, spec in layer.hyperparameters.items() if key in row and not missing(row[key])}
        swept = tuple(
            sorted((key, float(row[key]) if spec.type in (int, float) else row[key]) for key, spec in recorded.items())
        )
        parameters, epochs = _paper_size(str(row["dataset"]), str(row["variant"]), str(row["schedule"]), swept)
    except (ValueError, KeyError, TypeError):
        return False
    if missing(row.get("parameters")) or missing(row.get("epochs_run")):
        return False
    return math.isclose(float(row["parameters"]), parameters) and int(row["epochs_run"]) == epochs


def comparable(frames: list[pd.DataFrame]) -> bool:
    """Whether every run of these basis rows is at the paper's scale (rows of the word-similarity summary name
    models, whose runs a run summary of the same claim holds)."""
    for frame in frames:
        if "epochs_run" in frame.columns and not all(at_paper_scale(row) for _, row in frame.iterrows()):
            return False
    return True
