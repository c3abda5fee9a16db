"""The training commands keep freed host memory for reuse on the CPU (training/host_memory.py): a step's large blocks
are not mapped and zero-filled by the kernel again at every update. That the models stay the same bit for bit is
checked where a command's training (with the setting) meets the same runs trained in the test's own process (without
it): tests/test_fused_trainer.py's guide example."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: in a fresh process: the page faults of 20 allocations of a 64 MB tensor, each written and freed (as a step's
#: logits are), first after the call for a CUDA device, then after the call for the CPU
SCRIPT = """
import json, resource, torch
from softmax_bottleneck.training.host_memory import keep_freed_host_memory

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        block = torch.empty(16 * 2**20)
        block.fill_(1.0)
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

cuda = keep_freed_host_memory(torch.device("cuda"))
given_back = faults()
cpu = keep_freed_host_memory(torch.device("cpu"))
faults()  # the heap grows once
kept = faults()
print(json.dumps({"cuda": cuda, "cpu": cpu, "given_back": given_back, "kept": kept}))
"""


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's (Linux)"
)
def test_a_cpu_training_process_reuses_its_freed_blocks_and_a_cuda_one_is_left_as_it_is():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["cuda"] is False and seen["cpu"] is True, seen
    pages = 20 * 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    assert seen["given_back"] > pages // 2, seen  # every block mapped and zero-filled anew (glibc's default)
    assert seen["kept"] < pages // 20, seen  # the same blocks reused
