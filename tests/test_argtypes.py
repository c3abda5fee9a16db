"""The shared argparse checks: a bad number fails in one line naming it, before any work."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

import pytest
from conftest import REPO

from softmax_bottleneck.argtypes import positive_float, positive_int, seconds


@pytest.mark.parametrize("text,value", [("1", 1), ("4096", 4096), (" 7 ", 7)])
def test_positive_int_accepts(text, value):
    assert positive_int(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "2.5", "abc", "", "1e3"])
def test_positive_int_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"not {text!r}$"):
        positive_int(text)


@pytest.mark.parametrize("text,value", [("0.5", 0.5), ("40", 40.0), ("1e-3", 0.001)])
def test_positive_float_accepts(text, value):
    assert positive_float(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "-inf", "x"])
def test_positive_float_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"not {text!r}$"):
        positive_float(text)


@pytest.mark.parametrize("text,value", [("0", 0.0), ("600", 600.0), ("inf", math.inf)])
def test_seconds_accepts_zero_and_never(text, value):
    assert seconds(text) == value


@pytest.mark.parametrize("text", ["-1", "nan", "soon"])
def test_seconds_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"not {text!r}$"):
        seconds(text)


@pytest.mark.parametrize(
    "argv,option",
    [
        (["bench", "--dataset", "ptb", "--variant", "softmax", "--batches", "0"], "--batches"),
        (["train", "--dataset", "ptb", "--variant", "softmax", "--out", "x", "--checkpoint-seconds", "-5"],
         "--checkpoint-seconds"),
        (["rank", "--logp", "x.npy", "--out-json", "y.json", "--chunk-rows", "zero"], "--chunk-rows"),
        (["gpu-lease", "--poll", "nan", "--", "true"], "--poll"),
        (["analyze", "--checkpoint", "model.pt", "--rows", "0"], "--rows"),
    ],
)  # fmt: skip
def test_each_command_names_the_bad_option_in_one_line(argv, option, tmp_path):
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", *argv], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert f"argument {option}: expected" in last and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # nothing was written
