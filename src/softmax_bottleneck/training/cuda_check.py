"""``cuda-check``: whether this PyTorch build can train on this machine's GPU, in one line when it cannot.

A build of PyTorch carries kernels for a list of GPU architectures (``torch.cuda.get_arch_list()``: ``sm_XY``
machine code, which runs on cards of compute capability X.y with y ≥ Y; ``compute_XY`` PTX, which the driver
compiles for any capability ≥ X.Y) and needs a driver that knows its CUDA release. A card outside the list fails at
its first kernel ("no kernel image is available for execution on the device"); a driver older than the build
makes ``torch.cuda.is_available()`` false, and a training that asks for ``auto`` would run on the CPU. Run it on
a GPU node before the study (``srun ... python -m softmax_bottleneck cuda-check``).
"""

from __future__ import annotations

import re


def arch_covers(arch_list: list[str], capability: tuple[int, int]) -> bool:
    """Whether a build with kernels for ``arch_list`` runs on a card of compute ``capability`` (major, minor)."""
    major, minor = capability
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)([a-z]?)", arch)
        if not match:
            continue
        kind, digits, suffix = match.groups()
        arch_major, arch_minor = int(digits[:-1]), int(digits[-1])
        if suffix:  # sm_90a, sm_100f: kernels for exactly that architecture (family)
            if (arch_major, arch_minor) == (major, minor):
                return True
        elif kind == "sm" and arch_major == major and arch_minor <= minor:
            return True
        elif kind == "compute" and (arch_major, arch_minor) <= (major, minor):
            return True
    return False


def check() -> tuple[bool, list[str]]:
    """``(usable, lines)``: the build and every visible GPU, each GPU said usable or not and why."""
    import torch

    lines = [f"torch {torch.__version__}, CUDA {torch.version.cuda or 'none (a CPU build)'}, "
             f"kernels for {', '.join(torch.cuda.get_arch_list()) or 'no GPU'}"]  # fmt: skip
    if torch.version.cuda is None:
        return False, [*lines, "cuda-check: this PyTorch is a CPU build: install a CUDA build (docs/cluster.md)"]
    if not torch.cuda.is_available():
        return False, [*lines, "cuda-check: CUDA is not available: no GPU visible (CUDA_VISIBLE_DEVICES, the job's "
                               "GPU request), or a driver older than CUDA " + str(torch.version.cuda) + " needs "
                               "(nvidia-smi shows the highest CUDA it supports)"]  # fmt: skip
    usable = True
    for index in range(torch.cuda.device_count()):
        name, capability = torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index)
        ok = arch_covers(torch.cuda.get_arch_list(), capability)
        usable &= ok
        where = "usable" if ok else "NOT usable: this build has no kernels for it; install a build that has"
        lines.append(f"GPU {index}: {name}, compute capability {capability[0]}.{capability[1]}: {where}")
    return usable, lines


def add_cli(parser) -> None:
    parser.description = (
        "Say whether this PyTorch build trains on this machine's GPUs: the build's CUDA and kernel architectures, "
        "each visible GPU and its compute capability; exit 1 with one line saying why when it cannot."
    )


def run_cli(args) -> int:
    usable, lines = check()
    print("\n".join(lines))
    return 0 if usable else 1
