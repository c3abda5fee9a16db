"""Freed host memory kept for reuse while a CPU training runs (glibc's ``mallopt``).

A training step on the CPU allocates and frees the same large blocks at every update: the logits and their
gradients, [rows × columns, vocabulary] floats (8 MB at the small scale's PTB shapes, 56 MB at the paper's). glibc's
``malloc`` serves a block above its mmap threshold (at most 32 MB) with a fresh ``mmap`` and gives it back with
``munmap`` when it is freed, and returns the free top of its heap to the kernel beyond its trim threshold; the kernel
then zero-fills every page of the next step's blocks again, one page fault at a time. :func:`keep_freed_host_memory`
sets ``M_MMAP_MAX = 0`` (every block from the heap) and ``M_TRIM_THRESHOLD`` to 2 GiB (the heap's free top kept), so
freed blocks are reused as they are. Nothing computed changes (the same models, bit for bit); the process keeps its
largest working set until it ends.

Measured (``benchmarks/host_memory.py``, BENCHMARKS.md, 2 cores of an AMD EPYC, 2026-12-03): the small scale's
WikiText-2 step 119 → 93 ms (its PTB step unchanged within noise), a paper-size PTB step 4.76 → 4.64 s with 0.4 GB
more resident; the fused example of docs/fused-training.md 74.0 s → 42.6 s, its models bit-identical.

Only the commands that own their process call it (``train``, ``train-fused``, ``bench`` on the CPU): a program that
imports the package keeps its own allocator settings. Elsewhere than glibc (macOS, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import logging
import platform

import torch

log = logging.getLogger(__name__)

#: ``mallopt`` parameters of glibc's ``<malloc.h>``
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
#: the free top of the heap kept before any of it is given back (the largest value ``mallopt`` takes, 2 GiB - 1)
TRIM_THRESHOLD = 2**31 - 1


def keep_freed_host_memory(device: torch.device) -> bool:
    """On the CPU with glibc: every block from the heap, its free top given back only beyond 2 GiB (see the module
    docstring). Returns whether the settings were applied (False on a CUDA device, where the steps' blocks are the
    caching allocator's, or without glibc)."""
    if device.type != "cpu" or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not applied:
        log.warning("mallopt refused M_MMAP_MAX=0 or M_TRIM_THRESHOLD: freed host memory is given back as before")
    return applied
