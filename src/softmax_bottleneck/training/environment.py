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
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name}: not a device; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine; use --device cpu or auto")
    return device


def configure_precision(tf32: bool) -> None:
    """Exact FP32 (the paper's V100s had no TF32) unless ``tf32``: cuDNN (LSTMs) and cuBLAS (matmuls) alike.

    PyTorch's own default lets cuDNN use TF32 on Ampere and later GPUs; here the preset key ``tf32``
    (default false) decides both switches and the float32 matmul precision.
    """
    if not isinstance(tf32, bool):
        raise ValueError(f"tf32 must be true or false, got {tf32!r}")
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def environment(device: torch.device) -> dict:
    """Host, scheduler job, numerics switches and software versions, recorded in ``metrics.json["environment"]``.

    ``torch_threads`` matters: a CPU run resumed with another thread count is not bit-identical.
    """
    env = {
        "tf32": bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "torch_threads": torch.get_num_threads(),
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
