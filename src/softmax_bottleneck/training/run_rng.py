"""A run's own random streams in a process that trains several runs at once (:mod:`.fused_step`).

A run trained alone draws from the global generators (python, numpy, torch CPU and its CUDA device; seeded by
:func:`.state.seed_everything`). In a fused group every run keeps its own copy of their states: ``with run.rng:``
makes them the global states for the block, and keeps where they got to when it ends. Each run therefore draws the
very numbers, in the very order, of its solo training, whatever the other runs of its group draw in between.
"""

from __future__ import annotations

import random

import numpy as np
import torch


class RunRNG:
    """The generator states of one run; :meth:`capture` takes the global ones as they are now."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self._states: tuple | None = None
        self._outside: tuple | None = None

    def _read(self) -> tuple:
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda

    def _write(self, states: tuple) -> None:
        python, numpy_state, cpu, cuda = states
        random.setstate(python)
        np.random.set_state(numpy_state)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self.device)

    def capture(self) -> RunRNG:
        self._states = self._read()
        return self

    def __enter__(self) -> RunRNG:
        if self._states is None:
            raise RuntimeError("RunRNG: no states captured yet")
        if self._outside is not None:
            raise RuntimeError("RunRNG: already active")
        self._outside = self._read()
        self._write(self._states)
        return self

    def __exit__(self, *exc) -> None:
        self._states = self._read()
        self._write(self._outside)
        self._outside = None
