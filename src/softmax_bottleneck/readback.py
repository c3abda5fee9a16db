"""Files read back from a run, checked for what is possible (the reading side of :mod:`softmax_bottleneck.atomic`).

Every JSON and CSV the package reads back from a run (``metrics.json``, ``rank.json``, ``curve.csv``, the progress
file, the summaries, spectra, word-similarity and top-5 CSVs, ``analyze-lm``'s summary), a training log's last line
and a configuration file go through this module:

* :func:`read_bytes` (and :func:`read_tail`): a regular file only, opened without blocking (a FIFO or a device is
  named as such, never waited on or read forever) and without following a link, its size checked before a byte is
  read and the read bounded even if it grows meanwhile;
* :func:`load_json`: UTF-8, a strict parser (no ``NaN``/``Infinity``), no key given twice in one object (JSON keeps
  the last silently), nesting at most :data:`MAX_JSON_DEPTH` deep, at most :data:`MAX_JSON_BYTES`;
* :func:`read_csv`: UTF-8 text (a binary file is named as such), no column named twice (pandas renames the second
  ``a.1`` in silence), words such as ``NA`` kept as strings;
* :data:`~softmax_bottleneck.bounds.BOUNDS`: the one table of what each number can be (a perplexity ≥ 1, a loss
  ≥ 0, an epoch ≥ 1, ...), and the relations between numbers: ranks within [1, min(rows, columns)] of their matrix,
  ε-effective ranks growing as ε shrinks, epochs within the run's (``epochs_run`` ≤ its ``epochs``, ``best_epoch``
  and ``switch_epoch`` ≤ ``epochs_run``), ``found + not_found = pairs``.

A file that breaks any of these raises :class:`ReadbackError`, one line naming the file and the key (or column and
row) at fault; a table built on an impossible number would be wrong without a sign.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import re
import stat
import sys
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from softmax_bottleneck.bounds import (
    BOUNDS,
    EPOCH,
    MAX_SECONDS,
    PERPLEXITY,
    PID,
    POSITIVE_COUNT,
    RANK,
    ROUNDING,
    SECONDS,
    TIMESTAMP,
    Bound,
    violation,
)

#: deepest nesting of a JSON file read back (the package writes 3 levels); deeper is refused
MAX_JSON_DEPTH = 32
#: largest JSON file read back (the package's are a few KB)
MAX_JSON_BYTES = 16 * 2**20


class ReadbackError(ValueError):
    """A file read back that is unreadable or holds an impossible value; the message names the file and the key."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


class TooLarge(ReadbackError):
    """A file larger than its reader's limit (``size`` bytes), refused before a byte of it is read."""

    def __init__(self, path, size: int, reason: str):
        super().__init__(path, reason)
        self.size = size


def check_value(path, key: str, value) -> None:
    """:class:`ReadbackError` ``<path>: <key> = <value> <why>`` if ``value`` is impossible for ``key``."""
    why = violation(key.rsplit(".", 1)[-1], value)
    if why:
        raise ReadbackError(path, f"{key} = {value!r} {why}")


# --------------------------------------------------------------------------------------------- bounded reading
#: how a file read back is opened: never blocking (a FIFO without a writer answers at once), never becoming the
#: process's terminal
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_a_file(path) -> str | None:
    """Why ``path`` (links followed) is no regular file to read, e.g. ``"no such file"`` or ``"not a regular file
    (a FIFO)"``; None where it is one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    return None if stat.S_ISREG(mode) else f"not a regular file ({_kind(mode)})"


@contextmanager
def _open_regular(path, follow_links: bool):
    """A file descriptor of the regular file ``path`` and its ``os.stat_result``; :class:`ReadbackError` for anything
    else (a link unless ``follow_links``, a FIFO, a device, a folder, no permission); ``FileNotFoundError`` where it
    is absent."""
    flags = _OPEN_FLAGS | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as err:
        if err.errno == errno.ELOOP and not follow_links:
            raise ReadbackError(path, "a symbolic link (a file read back is never read through a link)") from None
        raise ReadbackError(path, f"unreadable ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ReadbackError(path, f"not a regular file ({_kind(info.st_mode)})")
        yield fd, info
    finally:
        os.close(fd)


def _read_fd(fd: int, size: int, path) -> bytes:
    chunks, left = [], size
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise ReadbackError(path, f"unreadable ({err.strerror or err})") from None
    return b"".join(chunks)


def read_bytes(path, limit: int, *, follow_links: bool = False, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``: at most ``limit`` (its size is checked before reading, and a file that
    grows meanwhile is refused too); :class:`ReadbackError` naming the file for a larger file, a link (unless
    ``follow_links``), a FIFO, a device or a folder; ``FileNotFoundError`` where it is absent. ``what`` names the
    kind of file in the size error (``JSON``, ``CSV``, ``configuration``)."""
    with _open_regular(path, follow_links) as (fd, info):
        if info.st_size > limit:
            size = info.st_size
            raise TooLarge(path, size, f"{size:,} bytes, larger than any {what} this package reads ({limit:,})")
        raw = _read_fd(fd, limit + 1, path)
    if len(raw) > limit:
        raise ReadbackError(path, f"grew past {limit:,} bytes while it was read")
    return raw


def read_tail(path, size: int, *, follow_links: bool = False) -> bytes:
    """The last ``size`` bytes of the regular file ``path`` (all of a shorter one), read as :func:`read_bytes` reads."""
    with _open_regular(path, follow_links) as (fd, info):
        try:
            os.lseek(fd, max(0, info.st_size - size), os.SEEK_SET)
        except OSError as err:
            raise ReadbackError(path, f"unreadable ({err.strerror or err})") from None
        return _read_fd(fd, size, path)


# --------------------------------------------------------------------------------------------- JSON
def _refuse_duplicates(path):
    def hook(pairs):
        obj = dict(pairs)
        if len(obj) < len(pairs):
            seen = set()
            for key, _ in pairs:
                if key in seen:
                    raise ReadbackError(path, f"key {key!r} is given twice in one object (which one is meant?)")
                seen.add(key)
        return obj

    return hook


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_finite_float = lambda text: float(text) if math.isfinite(float(text)) else _refuse_constant(text)  # noqa: E731 (1e999)
#: most digits of an integer read back: int64's 19 (a larger one is no count, epoch, time or rank of this package)
MAX_INT_DIGITS = 19


def _bounded_int(path):
    def hook(text: str) -> int:
        digits = len(text.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            raise ReadbackError(
                path, f"an integer of {digits} digits (at most {MAX_INT_DIGITS}): not a number it holds"
            )
        return int(text)

    return hook


def json_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _deeper_than(data, limit: int) -> bool:
    """Whether parsed JSON ``data`` nests objects and arrays more than ``limit`` deep (as :func:`json_depth` counts)."""
    level, depth = [data] if type(data) in _CONTAINERS else [], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below = []
        for value in level:
            members = value.values() if type(value) is dict else value
            below += [child for child in members if type(child) in _CONTAINERS]
        level = below
    return False


_CONTAINERS = (dict, list)


def parse_json(text: str, path):
    """JSON ``text`` of file ``path``, strictly (see the module's docstring). The C parser reads it first (deeper than
    Python's recursion limit it stops); a file nested deeper than :data:`MAX_JSON_DEPTH` is refused, its depth
    counted in its text."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          parse_int=_bounded_int(path), object_pairs_hook=_refuse_duplicates(path))  # fmt: skip
    except ReadbackError:
        raise
    except (ValueError, RecursionError) as err:  # JSONDecodeError is a ValueError
        _refuse_depth(text, path)
        raise ReadbackError(path, f"not valid JSON ({error_line(err)})") from None
    if _deeper_than(data, MAX_JSON_DEPTH):
        _refuse_depth(text, path)
    return data


def _refuse_depth(text: str, path) -> None:
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ReadbackError(path, f"JSON nested {depth} deep (at most {MAX_JSON_DEPTH}): not a file this package wrote")


def load_json(path, expect: type | None = dict, *, follow_links: bool = False):
    """The JSON file ``path``, strictly (see the module's docstring); ``expect``: the type of its top level;
    ``follow_links``: read a link's target (a Hugging Face cache links every file), still a regular file only."""
    path = Path(path)
    raw = read_bytes(path, MAX_JSON_BYTES, follow_links=follow_links, what="JSON file")
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


def error_line(err: BaseException) -> str:
    """The first line of an exception's message (at most 160 characters; its type's name when it has none): the
    readers' one-line errors, and the package's."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:160]


# --------------------------------------------------------------------------------------------- CSV
#: largest CSV read back (a log-P spectrum of the whole WikiText-2 test set: 33,278 rows, under 2 MB)
MAX_CSV_BYTES = 256 * 2**20
#: how the package's CSVs are parsed: words such as ``N``, ``NA`` or ``null`` stay strings; only ``""`` is missing
CSV_OPTIONS = {"keep_default_na": False, "na_values": [""]}


def read_csv(path, **kwargs):
    """``pandas.read_csv`` of UTF-8 text, keeping words such as ``N``, ``NA`` or ``null`` as strings (only ``""`` is
    missing); an empty file is an empty frame; a binary or malformed file, a column named twice, a row with fewer
    fields than the header (a file cut short: pandas fills them in as missing) or an integer of more than
    :data:`MAX_INT_DIGITS` digits is a :class:`ReadbackError`."""
    import csv

    import pandas as pd

    path = Path(path)
    text = _text(read_bytes(path, MAX_CSV_BYTES, what="CSV"), path, "not a readable CSV")
    kwargs = {**CSV_OPTIONS, **kwargs}
    try:
        header = next(csv.reader(io.StringIO(text), delimiter=kwargs.get("sep", ",")), [])
        frame = pd.read_csv(io.StringIO(text), **kwargs)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (ValueError, csv.Error) as err:  # pandas' ParserError is a ValueError
        raise ReadbackError(path, f"not a readable CSV ({error_line(err)})") from None
    if kwargs.get("header", "infer") is None:
        return frame
    twice = next((name for i, name in enumerate(header) if name in header[:i]), None)
    if twice is not None:  # pandas reads the second as "<name>.1"
        raise ReadbackError(path, f"column {twice!r} given twice: not a table this package wrote")
    rows = csv.reader(io.StringIO(text), delimiter=kwargs.get("sep", ","))
    short = next(((row, len(fields)) for row, fields in enumerate(rows) if fields and len(fields) < len(header)), None)
    if short is not None:
        raise ReadbackError(
            path, f"row {short[0]} has {short[1]} of the header's {len(header)} fields (a file cut short?)"
        )
    for column in frame.select_dtypes(include=["object", "string"]).columns:
        long = frame[column].astype(str).str.fullmatch(rf"[+-]?\d{{{MAX_INT_DIGITS + 1},}}")
        if long.any():
            row = int(long.to_numpy().nonzero()[0][0]) + 1
            raise ReadbackError(path, f"column {column}, row {row}: an integer of more than {MAX_INT_DIGITS} digits")
    return frame


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
    """A ``metrics.json`` (training's record of a run) holds only possible numbers: every key of :data:`BOUNDS` (and
    ``environment.fused_runs``), ``epochs_run`` ≤ ``hyperparameters.epochs``, ``best_epoch`` and ``switch_epoch`` (the
    epoch after which ASGD began; null: none) within [1, ``epochs_run``]; ``hyperparameters``, ``environment`` and
    what it nests objects where they are given."""
    for key, value in metrics.items():
        if key in BOUNDS:
            check_value(path, key, value)
    for where in ("hyperparameters", "environment", "environment.software", "environment.software.output_layer"):
        *above, last = where.split(".")
        holder = metrics
        for key in above:
            holder = holder.get(key) or {}
        if holder.get(last) is not None and not isinstance(holder[last], dict):
            raise ReadbackError(path, f"{where} is not an object")
    if isinstance(metrics.get("environment"), dict):  # a fused group's size (null: trained alone)
        check_value(path, "environment.fused_runs", metrics["environment"].get("fused_runs"))
    hp = metrics.get("hyperparameters")
    epochs = hp.get("epochs") if isinstance(hp, dict) else None
    run = metrics.get("epochs_run")
    if isinstance(epochs, int | float) and isinstance(run, int | float) and run > epochs:  # 100000.0 as 100000
        raise ReadbackError(path, f"epochs_run = {run} is impossible: the run has hyperparameters.epochs = {epochs}")
    for key in ("best_epoch", "switch_epoch"):
        value = metrics.get(key)
        if value is None:
            continue
        why = EPOCH.violation(value)
        if why:
            raise ReadbackError(path, f"{key} = {value!r} {why}")
        if isinstance(run, int | float) and value > run:
            raise ReadbackError(path, f"{key} = {value} is impossible: the run stopped after epochs_run = {run}")
    return metrics


def check_rank(rank: dict, path, rank_keys=("press_rank",), eranks_key: str = "effective_rank") -> dict:
    """A rank summary (``analyze``'s ``rank.json``, ``analyze-lm``'s JSON) holds possible values (:data:`BOUNDS`): ranks
    within [1, min(shape)] of its ``shape`` [rows, columns], the ε-effective ranks not shrinking as ε does."""
    for key in set(rank) & set(BOUNDS):
        check_value(path, key, rank[key])
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
        odd = next((eps for eps in eranks if not 0 < _eps(eps) < 1), None)
        if odd is not None:
            raise ReadbackError(path, f"{eranks_key} has a key {odd!r}, not an ε (a number between 0 and 1)")
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


#: how far a progress file's epoch times may exceed the time from its start to its last write: one wall clock
#: (``started``, ``updated``) against another (each epoch's, monotonic); a clock set back by NTP
CLOCK_SLACK = 3600.0
#: the identity a progress file records of its run, as the run folder's path says it
PROGRESS_IDENTITY = ("dataset", "variant", "schedule", "seed")


def _progress_value(path, key: str, value, bound: Bound, optional: bool = True) -> None:
    if value is None and optional:
        return
    why = bound.violation(value)
    if why:
        raise ReadbackError(path, f"{key} = {_short(value)} {why}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


#: a curve row's numbers and their ranges, for :func:`_possible_row` (a NaN fails every comparison, an infinity the
#: upper end)
_ROW_RANGES = (("valid_ppl", 1.0 - ROUNDING, sys.float_info.max), ("seconds", -ROUNDING, MAX_SECONDS + ROUNDING),
               ("wall_seconds", -ROUNDING, MAX_SECONDS + ROUNDING))  # fmt: skip
_NUMBER_TYPES = (int, float)


def _possible_row(row, previous: int, epoch: int) -> bool:
    """Whether a progress file's curve row is possible (:func:`check_progress`), fast, without building a message."""
    if type(row) is not dict:
        return False
    number = row.get("epoch")
    if type(number) is not int or not previous < number <= epoch:
        return False
    for key, low, high in _ROW_RANGES:
        value = row.get(key)
        if value is not None and not (type(value) in _NUMBER_TYPES and low <= value <= high):
            return False
    return True


def _row_violation(path, where: str, row, previous: int, epoch: int) -> None:
    """The :class:`ReadbackError` of an impossible curve row, naming the row and the key."""
    if not isinstance(row, dict):
        raise ReadbackError(path, f"{where} is not an object")
    if "epoch" not in row:
        raise ReadbackError(path, f"{where} has no epoch")
    bound = Bound(previous + 1, epoch, integer=True, what=f"rising, within [1, epoch = {epoch}]")
    _progress_value(path, f"{where}.epoch", row["epoch"], bound, optional=False)
    _progress_value(path, f"{where}.valid_ppl", row.get("valid_ppl"), PERPLEXITY)
    for key in ("seconds", "wall_seconds"):
        _progress_value(path, f"{where}.{key}", row.get(key), SECONDS)


def check_progress(progress: dict, path, epochs: int | None = None, run: dict | None = None) -> dict:
    """A progress file (``.resume/progress.json``, :mod:`softmax_bottleneck.training.run_files`) holds only possible
    values: format 1; ``epochs`` (E) a whole number ≥ 1, the run's own (``epochs``) where given; ``epoch`` within
    [0, E]; ``best_valid_ppl`` ≥ 1; ``best_epoch`` within [0, ``epoch``] (0: none yet); durations within
    :data:`SECONDS`; Unix times within :data:`TIMESTAMP`; ``attempts`` ≥ 1; a :data:`PID`; texts where texts belong;
    ``curve`` a list of rows, each with its ``epoch`` (rising, within [1, ``epoch``]), a ``valid_ppl`` ≥ 1 and
    durations, which add up to at most the time from ``started`` to ``updated`` (+ :data:`CLOCK_SLACK`); the dataset,
    variant, schedule and seed ``run``'s where given (a file copied from another run is not this run's)."""
    if progress.get("format") != 1:
        raise ReadbackError(path, f"format = {_short(progress.get('format'))}: not a progress file of format 1")
    total = progress.get("epochs")
    _progress_value(path, "epochs", total, POSITIVE_COUNT, optional=False)
    if epochs is not None and total != epochs:
        raise ReadbackError(path, f"epochs = {total} is impossible: the run has {epochs} epochs")
    epoch = progress.get("epoch")
    _progress_value(path, "epoch", epoch, Bound(0, total, integer=True, what=f"within [0, epochs = {total}]"), False)
    _progress_value(path, "best_valid_ppl", progress.get("best_valid_ppl"), PERPLEXITY)
    _progress_value(path, "best_epoch", progress.get("best_epoch"),
                    Bound(0, epoch, integer=True, what=f"within [0, epoch = {epoch}]"))  # fmt: skip
    _progress_value(path, "checkpoint_seconds", progress.get("checkpoint_seconds"), SECONDS)
    for key in ("started", "attempt_started", "updated"):
        _progress_value(path, key, progress.get(key), TIMESTAMP)
    _progress_value(path, "attempts", progress.get("attempts"), POSITIVE_COUNT)
    _progress_value(path, "pid", progress.get("pid"), PID)
    for key in ("host", "phase", "stopped", "error", "dataset", "variant", "schedule"):
        value = progress.get(key)
        if value is not None and not isinstance(value, str):
            raise ReadbackError(path, f"{key} = {_short(value)} is not a text")
    for key, expected in (run or {}).items():
        if key in progress and progress[key] != expected:
            raise ReadbackError(
                path, f"{key} = {_short(progress[key])}, but this run's is {expected!r} (copied from another run?)"
            )
    curve = progress.get("curve")
    if not isinstance(curve, list):
        raise ReadbackError(path, "curve is not a list (one row per epoch)")
    previous, walls = 0, 0.0
    for number, row in enumerate(curve):
        if not _possible_row(row, previous, epoch):  # the common case checked fast, a failure named below
            _row_violation(path, f"curve[{number}]", row, previous, epoch)
        previous = row["epoch"]
        walls += row.get("wall_seconds") or 0.0
    started, updated = progress.get("started"), progress.get("updated")
    if started is not None and updated is not None and walls > updated - started + CLOCK_SLACK:
        raise ReadbackError(
            path,
            f"the epochs' wall_seconds add up to {walls:,.0f} s, more than the {updated - started:,.0f} s from "
            "started to updated (impossible: the epochs run one after another)",
        )
    return progress
