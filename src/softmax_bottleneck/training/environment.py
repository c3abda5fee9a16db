"""Where a run executes: the device it asks for, whether the model fits its memory, and the software and host it ran on
(``metrics.json``).

:func:`software` says which code trained a run: this package's version (and ``git describe --always --dirty`` of its
checkout when there is one) and the output layer's source (:func:`~softmax_bottleneck.models.output_layers.
registry.layer_source`: distribution, version, SHA-256 of its module file), which :mod:`~softmax_bottleneck.models.
output_layers.provenance` compares with the layer registered now. A code change never retrains anything by itself: it is
only reported.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck import __version__, presets
from softmax_bottleneck.models.output_layers.registry import layer_source


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


class TooLarge(ValueError):
    """A model whose weights alone would not fit the device's memory; refused before anything is allocated."""


def _memory_bytes(device: torch.device) -> int | None:
    """The device's memory: the GPU's for CUDA, else the machine's physical memory (None where unknown)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device.index or 0).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"


def check_model_fits(hp: dict, vocab_size: int, device: torch.device) -> None:
    """:class:`TooLarge`, naming the sizes, when the float32 weights alone exceed the device's memory (before torch
    tries, and fails with "Storage size calculation overflowed" or an out-of-memory kill)."""
    count = presets.parameter_count(hp, vocab_size)
    memory = _memory_bytes(device)
    if memory is not None and 4 * count > memory:
        sizes = ", ".join(f"{k}={hp[k]}" for k in ("nemb", "nhid", "nhidlast", "n_experts") if hp.get(k) is not None)
        raise TooLarge(
            f"the model ({sizes}, {vocab_size:,} words) has {count:.3g} parameters, {_bytes(4.0 * count)} of weights "
            f"alone, more than the {_bytes(memory)} of memory of {device}; lower the sizes"
        )


def check_group_fits(hps: list[dict], vocab_size: int, device: torch.device) -> None:
    """:class:`TooLarge` when the float32 weights of a fused group's models (:mod:`.fused_trainer`) together exceed the
    device's memory, each of which :func:`check_model_fits` lets through alone."""
    count = sum(presets.parameter_count(hp, vocab_size) for hp in hps)
    memory = _memory_bytes(device)
    if memory is not None and 4 * count > memory:
        raise TooLarge(
            f"the {len(hps)} models of the group have {count:.3g} parameters, {_bytes(4.0 * count)} of weights alone, "
            f"more than the {_bytes(memory)} of memory of {device}; train fewer runs together (fusion: runs_per_job)"
        )


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


@functools.cache
def git_describe() -> str | None:
    """``git describe --always --dirty`` of the checkout this package is imported from; None when it is not a git
    checkout (an installed package), git is missing or fails."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and text else None


def software(output_layer: str | None = None) -> dict:
    """Which code trains a run: ``{"softmax_bottleneck": {"version", "git"}, "output_layer": layer_source}``.

    ``output_layer`` (the run's ``hyperparameters["output_layer"]``) adds the layer's source; a layer whose source
    cannot be read is recorded with what is known, never failing the run.
    """
    out: dict = {"softmax_bottleneck": {"version": __version__, "git": git_describe()}}
    if output_layer is not None:
        try:
            out["output_layer"] = layer_source(output_layer)
        except (OSError, ValueError) as err:
            out["output_layer"] = {"name": output_layer, "error": f"{type(err).__name__}: {err}"}
    return out


def environment(device: torch.device, output_layer: str | None = None, fused_runs: int | None = None) -> dict:
    """Host, scheduler job, container image, numerics switches and software versions, recorded in
    ``metrics.json["environment"]``.

    ``torch_threads`` matters: a CPU run resumed with another thread count is not bit-identical. ``software``
    (:func:`software`) names the code that trained the run, the output layer's source when ``output_layer`` is
    given. ``recurrence`` says which LSTM kernels the process that finished it ran: ``fused`` (``fused_runs`` runs
    together, PyTorch's own cell operations, :mod:`.fused_step`), else PyTorch's LSTM: ``onednn`` on a CPU whose
    oneDNN is on, ``cudnn`` on a GPU, else ``native``. Their float32 roundings differ, and training carries that on.
    """
    if fused_runs is not None:
        recurrence = "fused"
    elif device.type == "cuda":
        recurrence = "cudnn" if torch.backends.cudnn.enabled else "native"
    else:
        recurrence = "onednn" if torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available() else "native"
    env = {
        "recurrence": recurrence,
        "fused_runs": fused_runs,
        "tf32": bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "torch_threads": torch.get_num_threads(),
        "hostname": platform.node(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        # the image the job ran in (`container_image`), as Apptainer (or Singularity) names it to the process
        "container": os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER"),
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "numpy": np.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "softmax_bottleneck": __version__,
        },
        "software": software(output_layer),
    }
    return env
