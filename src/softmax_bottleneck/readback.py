"""Files read back from a run, checked for what is possible (the reading side of :mod:`softmax_bottleneck.atomic`).

Every JSON and CSV the package reads back from a run (``metrics.json``, ``rank.json``, ``curve.csv``, the summaries,
spectra, word-similarity and top-5 CSVs, ``analyze-lm``'s summary) goes through this module:

* :func:`load_json`: UTF-8, a strict parser (no ``NaN``/``Infinity``), no key given twice in one object (JSON keeps
  the last silently), nesting at most :data:`MAX_JSON_DEPTH` deep, at most :data:`MAX_JSON_BYTES`;
* :func:`read_csv`: UTF-8 text (a binary file is named as such), words such as ``NA`` kept as strings;
* :data:`BOUNDS`: the one table of what each number can be (a perplexity ≥ 1, a loss ≥ 0, an epoch ≥ 1, ...), and
  the relations between numbers: ranks within [1, min(rows, columns)] of their matrix, ε-effective ranks growing as
  ε shrinks, epochs within the run's (``epochs_run`` ≤ its ``epochs``, ``best_epoch`` and ``switch_epoch`` ≤
  ``epochs_run``), ``found + not_found = pairs``.

A file that breaks any of these raises :class:`ReadbackError`, one line naming the file and the key (or column and
row) at fault; a table built on an impossible number would be wrong without a sign.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

#: deepest nesting of a JSON file read back (the package writes 3 levels); deeper is refused before parsing
MAX_JSON_DEPTH = 32
#: largest JSON file read back (the package's are a few KB)
MAX_JSON_BYTES = 16 * 2**20


class ReadbackError(ValueError):
    """A file read back that is unreadable or holds an impossible value; the message names the file and the key."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


# --------------------------------------------------------------------------------------------- bounds
#: the slack of a bound on a computed (floating-point) number: ``exp(log_softmax)`` of a sure prediction can be
#: 1 + 1e-7 in float32, a mean loss of one −1e-8; a real violation is far larger
ROUNDING = 1e-6


@dataclass(frozen=True)
class Bound:
    """What a number can be: ``low ≤ x ≤ high`` (up to :data:`ROUNDING` for a non-integer), an integer if
    ``integer``; ``what`` says why in words."""

    low: float
    high: float = math.inf
    integer: bool = False
    what: str = ""

    def violation(self, value) -> str | None:
        """Why ``value`` is impossible, or None."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if not math.isfinite(value):
            return "is not finite"
        if self.integer and value != int(value):
            return "is not a whole number"
        slack = 0.0 if self.integer else ROUNDING
        if not self.low - slack <= value <= self.high + slack:
            return f"is impossible ({self.what})"
        return None


PERPLEXITY = Bound(1.0, what="a perplexity is at least 1")
LOSS = Bound(0.0, what="a loss is at least 0")
COUNT = Bound(0, integer=True, what="a count is a whole number ≥ 0")
POSITIVE_COUNT = Bound(1, integer=True, what="a whole number ≥ 1")
EPOCH = Bound(1, integer=True, what="epochs count from 1")
SECONDS = Bound(0.0, what="a duration is at least 0")
RANK = Bound(1, integer=True, what="a rank is at least 1 (and at most min(rows, columns) of its matrix)")
SIGMA = Bound(0.0, what="a singular value is at least 0")
FRACTION = Bound(0.0, 1.0, what="within [0, 1]")
CORRELATION = Bound(-1.0, 1.0, what="a correlation is within [-1, 1]")

#: key or column -> its bound, wherever it appears in a file read back (JSON keys and CSV columns alike)
BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(["train_ppl", "valid_ppl", "test_ppl", "perplexity"], PERPLEXITY),
    **dict.fromkeys(["train_loss", "valid_loss", "test_loss", "logp_test_loss"], LOSS),
    **dict.fromkeys(["parameters", "rows", "columns", "softmax_bound"], POSITIVE_COUNT),
    **dict.fromkeys(["trainable_parameters", "pairs", "found", "not_found", "index"], COUNT),
    **dict.fromkeys(["epochs_run", "best_epoch", "epoch"], EPOCH),
    **dict.fromkeys(["seconds_per_epoch", "seconds", "seconds_rows"], SECONDS),
    **dict.fromkeys(["press_rank", "erank_1e-3", "erank_1e-4", "erank_1e-5"], RANK),
    **dict.fromkeys(["sigma", "sigma_max", "tolerance"], SIGMA),
    **dict.fromkeys(["sigma_normalised", *(f"prob_{k}" for k in range(1, 6))], FRACTION),
    "spearman": CORRELATION,
}


def violation(key: str, value) -> str | None:
    """Why ``value`` cannot be ``key`` (:data:`BOUNDS`), or None (also for a key without a bound, or None)."""
    bound = BOUNDS.get(key)
    return None if bound is None or value is None else bound.violation(value)


def check_value(path, key: str, value) -> None:
    """:class:`ReadbackError` ``<path>: <key> = <value> <why>`` if ``value`` is impossible for ``key``."""
    why = violation(key.rsplit(".", 1)[-1], value)
    if why:
        raise ReadbackError(path, f"{key} = {value!r} {why}")


# --------------------------------------------------------------------------------------------- JSON
def _refuse_duplicates(path):
    def hook(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise ReadbackError(path, f"key {key!r} is given twice in one object (which one is meant?)")
            seen[key] = value
        return seen

    return hook


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json(text: str, path):
    """JSON ``text`` of file ``path``, strictly (see the module's docstring)."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ReadbackError(path, f"JSON nested {depth} deep (at most {MAX_JSON_DEPTH}): not a file this package wrote")
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicates(path))
    except ReadbackError:
        raise
    except (ValueError, RecursionError) as err:  # JSONDecodeError is a ValueError
        raise ReadbackError(path, f"not valid JSON ({_first_line(err)})") from None


def load_json(path, expect: type | None = dict):
    """The JSON file ``path``, strictly (see the module's docstring); ``expect``: the type of its top level."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise ReadbackError(path, f"{size:,} bytes, larger than any file this package writes (JSON)")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ReadbackError(path, f"unreadable ({err.strerror or err})") from None
    data = parse_json(_text(raw, path, "not valid JSON"), path)
    if expect is not None and not isinstance(data, expect):
        raise ReadbackError(path, f"expected a JSON {'object' if expect is dict else expect.__name__}")
    return data


def _text(raw: bytes, path, kind: str) -> str:
    """``raw`` as UTF-8 text; a binary or non-UTF-8 file is a :class:`ReadbackError` naming the line, e.g.
    ``not valid JSON (a binary file: a NUL byte on line 1)`` (``kind``: the first words)."""
    if b"\0" in raw:
        line = raw[: raw.index(b"\0")].count(b"\n") + 1
        raise ReadbackError(path, f"{kind} (a binary file: a NUL byte on line {line})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ReadbackError(path, f"{kind} (not UTF-8 text: byte 0x{raw[err.start]:02x} on line {line})") from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:160]


# --------------------------------------------------------------------------------------------- CSV
#: how the package's CSVs are parsed: words such as ``N``, ``NA`` or ``null`` stay strings; only ``""`` is missing
CSV_OPTIONS = {"keep_default_na": False, "na_values": [""]}


def read_csv(path, **kwargs):
    """``pandas.read_csv`` of UTF-8 text, keeping words such as ``N``, ``NA`` or ``null`` as strings (only ``""`` is
    missing); an empty file is an empty frame; a binary or malformed file is a :class:`ReadbackError`."""
    import pandas as pd

    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ReadbackError(path, f"unreadable ({err.strerror or err})") from None
    text = _text(raw, path, "not a readable CSV")
    kwargs = {**CSV_OPTIONS, **kwargs}
    try:
        return pd.read_csv(io.StringIO(text), **kwargs)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except ValueError as err:  # pandas' ParserError is a ValueError
        raise ReadbackError(path, f"not a readable CSV ({_first_line(err)})") from None


def check_columns(frame, path) -> None:
    """Every cell of a column with a bound (:data:`BOUNDS`) is possible (empty cells are left alone), and a
    word-similarity row has ``found + not_found = pairs``; the error names the column and the row (1 = first data
    row)."""
    import pandas as pd

    for column in frame.columns:
        if str(column) not in BOUNDS:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        for row, (raw, value) in enumerate(zip(frame[column], values, strict=True), start=1):
            if pd.isna(raw) or raw == "":
                continue
            why = "is not a number" if pd.isna(value) else BOUNDS[str(column)].violation(float(value))
            if why:
                raise ReadbackError(path, f"column {column}, row {row}: {raw!r} {why}")
    if {"pairs", "found", "not_found"} <= set(frame.columns):
        wrong = frame["found"] + frame["not_found"] != frame["pairs"]
        if wrong.any():
            row = int(wrong.to_numpy().nonzero()[0][0]) + 1
            raise ReadbackError(path, f"row {row}: found + not_found is not pairs")


# --------------------------------------------------------------------------------------------- a run's files
def check_metrics(metrics: dict, path) -> dict:
    """A ``metrics.json`` (training's record of a run) holds only possible numbers: every key of :data:`BOUNDS`,
    ``epochs_run`` ≤ ``hyperparameters.epochs``, ``best_epoch`` and ``switch_epoch`` (the epoch after which ASGD
    began; null: none) within [1, ``epochs_run``]."""
    for key, value in metrics.items():
        if key in BOUNDS:
            check_value(path, key, value)
    hp = metrics.get("hyperparameters")
    epochs = hp.get("epochs") if isinstance(hp, dict) else None
    run = metrics.get("epochs_run")
    if isinstance(epochs, int) and isinstance(run, int) and run > epochs:
        raise ReadbackError(path, f"epochs_run = {run} is impossible: the run has hyperparameters.epochs = {epochs}")
    for key in ("best_epoch", "switch_epoch"):
        value = metrics.get(key)
        if value is None:
            continue
        why = EPOCH.violation(value)
        if why:
            raise ReadbackError(path, f"{key} = {value!r} {why}")
        if isinstance(run, int) and value > run:
            raise ReadbackError(path, f"{key} = {value} is impossible: the run stopped after epochs_run = {run}")
    return metrics


def check_rank(rank: dict, path, rank_keys=("press_rank",), eranks_key: str = "effective_rank") -> dict:
    """A rank summary (``analyze``'s ``rank.json``, ``analyze-lm``'s JSON) holds possible ranks: each within
    [1, min(shape)] of its ``shape`` [rows, columns], and the ε-effective ranks not shrinking as ε does."""
    shape = rank.get("shape")
    if shape is not None:
        ok = isinstance(shape, list) and len(shape) == 2
        ok = ok and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)
        if not ok:
            raise ReadbackError(path, f"shape = {shape!r} is not [rows, columns] of whole numbers ≥ 1")
    top = min(shape) if shape else math.inf
    named = [(key, rank.get(key)) for key in rank_keys if key in rank]
    eranks = rank.get(eranks_key)
    if eranks is not None:
        if not isinstance(eranks, dict):
            raise ReadbackError(path, f"{eranks_key} is not an object")
        named += [(f"{eranks_key}.{eps}", value) for eps, value in eranks.items()]
    for key, value in named:
        if value is None:
            continue
        why = RANK.violation(value)
        if why:
            raise ReadbackError(path, f"{key} = {value!r} {why}")
        if value > top:
            raise ReadbackError(path, f"{key} = {value} is impossible: above min(rows, columns) = {top} of {shape}")
    by_eps = sorted(((_eps(e), v) for e, v in (eranks or {}).items() if v is not None), reverse=True)
    for (eps_a, a), (eps_b, b) in pairwise(by_eps):
        if b < a:
            raise ReadbackError(path, f"{eranks_key}: {b} at ε = {eps_b:g} is below {a} at ε = {eps_a:g} (impossible)")
    return rank


def _eps(key) -> float:
    try:
        return float(key)
    except ValueError:
        return math.nan


def check_curve(frame, path, epochs_run: int | None = None) -> None:
    """A ``curve.csv`` (one row per epoch): possible numbers, and its epochs within ``epochs_run``."""
    check_columns(frame, path)
    if epochs_run is not None and "epoch" in frame.columns and len(frame):
        last = int(frame["epoch"].max())
        if last > epochs_run:
            raise ReadbackError(path, f"column epoch: {last} is beyond the run's epochs_run = {epochs_run}")
