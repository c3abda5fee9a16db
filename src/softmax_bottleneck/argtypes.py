"""argparse ``type=`` checks shared by the commands: a bad value fails in one line naming it, before any work."""

from __future__ import annotations

import argparse
import math


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def positive_int(text: str) -> int:
    """An integer ≥ 1 (``--batches``, ``--chunk-rows``, ...)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def positive_int_up_to(limit: int):
    """An integer in [1, ``limit``] (``plan --gpus``: more GPUs than any cluster has is a typo)."""

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"expected a positive integer up to {limit:,}, not {text!r}")
        return value

    return parse


def positive_float(text: str) -> float:
    """A finite number > 0 (``--memory-budget-gb``, ``--poll``, ...)."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


def seconds(text: str) -> float:
    """A number of seconds ≥ 0; ``inf`` means never (e.g. ``--checkpoint-seconds inf``: only on SIGTERM)."""
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, not {text!r}")
    return value


def npy_path(text: str) -> str:
    """A file name ending in ``.npy`` (``--save-logp``): the matrix is written in NumPy's binary ``.npy`` format,
    which a name such as ``logp.txt`` or ``logp.csv`` would misdescribe."""
    if not text.endswith(".npy"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the matrix is written as NumPy's binary .npy; give a name ending in .npy"
        )
    return text
