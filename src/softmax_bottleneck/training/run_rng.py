"""A run's own random streams in a process that trains several runs at once (:mod:`.fused_step`).

A run trained alone draws from the global generators (python, numpy, torch CPU and its CUDA device; seeded by
:func:`.state.seed_everything`). In a fused group every run keeps its own copy of their states: ``with run.rng:``
makes them the global states for the block, and keeps where they got to when it ends. Each run therefore draws the
very numbers, in the very order, of its solo training, whatever the other runs of its group draw in between.

``with run.rng.torch_streams():`` swaps torch's generators only, for a forward pass: python's and numpy's states are
the dearest to swap (in and out, all four take 203 µs on this project's CPU, torch's two 8 µs), and a forward pass
of the study's layers draws from neither. :class:`HostStreams` checks that promise around a fused pass
(:func:`.fused_step.fused_forward`).
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

    def _read_torch(self) -> tuple:
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return torch.get_rng_state(), cuda

    def _write_torch(self, states: tuple) -> None:
        cpu, cuda = states
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self.device)

    def _read(self) -> tuple:
        return random.getstate(), np.random.get_state(), *self._read_torch()

    def _write(self, states: tuple) -> None:
        python, numpy_state, *torch_states = states
        random.setstate(python)
        np.random.set_state(numpy_state)
        self._write_torch(tuple(torch_states))

    def capture(self) -> RunRNG:
        self._states = self._read()
        return self

    def _check(self) -> None:
        if self._states is None:
            raise RuntimeError("RunRNG: no states captured yet")
        if self._outside is not None:
            raise RuntimeError("RunRNG: already active")

    def __enter__(self) -> RunRNG:
        self._check()
        self._outside = self._read()
        self._write(self._states)
        return self

    def __exit__(self, *exc) -> None:
        self._states = self._read()
        self._write(self._outside)
        self._outside = None

    def torch_streams(self) -> _TorchStreams:
        """``with``: the run's torch generators (CPU, and CUDA on a CUDA device) only; python's and numpy's stay the
        process's."""
        return _TorchStreams(self)


class _TorchStreams:
    def __init__(self, rng: RunRNG):
        self.rng = rng

    def __enter__(self) -> _TorchStreams:
        rng = self.rng
        rng._check()
        rng._outside = rng._read_torch()
        rng._write_torch(rng._states[2:])
        return self

    def __exit__(self, *exc) -> None:
        rng = self.rng
        rng._states = (*rng._states[:2], *rng._read_torch())
        rng._write_torch(rng._outside)
        rng._outside = None


class HostStreams:
    """``with HostStreams(names):`` RuntimeError at the end of the block if it drew from python's or numpy's global
    stream (a run's forward pass under :meth:`RunRNG.torch_streams` would have drawn from the process's, not its
    own); ``names``: what to blame, e.g. the runs' output layers."""

    def __init__(self, names):
        self.names = names

    @staticmethod
    def _read() -> tuple:
        python, (kind, keys, pos, has_gauss, gauss) = random.getstate(), np.random.get_state()
        return python, kind, keys.tobytes(), pos, has_gauss, gauss

    def __enter__(self) -> HostStreams:
        self.before = self._read()
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None and self._read() != self.before:
            raise RuntimeError(
                f"an output layer of {', '.join(sorted(set(self.names)))} drew from python's or numpy's random "
                "stream in its forward pass; fused training keeps only torch's generators per run there: draw from "
                "torch, or train these runs alone (fusion: off)"
            )
