"""``cuda-check``: which cards a PyTorch build's kernels run, and one line where this machine cannot train."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from softmax_bottleneck.training.cuda_check import arch_covers

#: the kernels of PyPI's torch 2.13.0 for Linux x86-64 (2.13.0+cu130), read from the -gencode flags of its
#: libtorch_cuda.so (the list torch.cuda.get_arch_list() returns on a GPU)
PYPI_2_13_0 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


@pytest.mark.parametrize(
    "card, capability, runs",
    [
        ("P100", (6, 0), False),
        ("V100, the paper's card", (7, 0), False),
        ("T4", (7, 5), True),
        ("A100", (8, 0), True),
        ("L40S (sm_86 code runs on 8.9)", (8, 9), True),
        ("H100, H200", (9, 0), True),
        ("B200", (10, 0), True),
        ("RTX 5090", (12, 0), True),
    ],
)
def test_the_pypi_build_runs_from_turing_on(card, capability, runs):
    assert arch_covers(PYPI_2_13_0, capability) is runs, card


def test_ptx_runs_on_later_cards_and_arch_specific_code_only_on_its_own():
    assert arch_covers(["compute_90"], (10, 0)) and not arch_covers(["compute_90"], (8, 9))
    assert arch_covers(["sm_90a"], (9, 0)) and not arch_covers(["sm_90a"], (10, 0))
    assert not arch_covers(["sm_80"], (9, 0))  # machine code never crosses a major version


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a usable GPU passes the check")
def test_a_machine_that_cannot_train_on_a_gpu_is_said_in_one_line():
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "cuda-check"], capture_output=True, text=True)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"torch {torch.__version__}, CUDA ")
    assert len(lines) == 2 and lines[1].startswith("cuda-check: ") and "Traceback" not in done.stderr
