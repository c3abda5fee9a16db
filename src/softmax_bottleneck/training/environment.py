"""Where a run executes: the device it asks for and the software and host it ran on (``metrics.json``)."""

from __future__ import annotations

import os
import platform
import sys

import numpy as np
import torch


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda``/``cuda:N`` must be available."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for but CUDA is not available")
    return torch.device(name)


def environment(device: torch.device) -> dict:
    """Host, scheduler job and software versions, recorded in ``metrics.json["environment"]``."""
    env = {
        "hostname": platform.node(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "numpy": np.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        },
    }
    return env
