"""The shared argparse checks: a bad number fails in one line naming it, before any work."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

import pytest
from conftest import REPO

from softmax_bottleneck.argtypes import positive_float, positive_int, seconds

ACCEPTED = [
    (positive_int, "1", 1), (positive_int, "4096", 4096), (positive_int, " 7 ", 7),
    (positive_float, "0.5", 0.5), (positive_float, "40", 40.0), (positive_float, "1e-3", 0.001),
    (seconds, "0", 0.0), (seconds, "600", 600.0), (seconds, "inf", math.inf),  # inf: never (only on SIGTERM)
]  # fmt: skip
REFUSED = [
    *[(positive_int, text) for text in ["0", "-3", "2.5", "abc", "", "1e3"]],
    *[(positive_float, text) for text in ["0", "-1", "nan", "inf", "-inf", "x"]],
    *[(seconds, text) for text in ["-1", "nan", "soon"]],
]


@pytest.mark.parametrize("check,text,value", ACCEPTED)
def test_a_good_value_is_read(check, text, value):
    assert check(text) == value


@pytest.mark.parametrize("check,text", REFUSED)
def test_a_bad_value_is_refused_naming_it(check, text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"not {text!r}$"):
        check(text)


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
