"""The fused update (:func:`.fused_step.fused_update`) replayed from CUDA graphs, one graph per batch length, for
runs that step in lock-step (one ``seq_len`` and one batch length for all: runs of one seed, as the GSS grid's). An
experiment measured by ``benchmarks/fused_graphs_check.py`` (the same numbers as the eager fused update? how much
faster?); ``train-fused`` does not use it.

A graph replays the kernels it captured on the memory it captured them with. The batch's tokens and the carried
hidden states therefore live in static buffers: the update reads them, and at its end overwrites the hidden states.
Every other output (weights, optimizer state, loss sums) already lives outside the graph's memory pool. The lr
scaled by ``seq_len/bptt`` is captured with its graph, so a new optimizer (the ASGD switch), new loss sums or a new
base lr drops every graph. A length's first update runs eagerly (it warms that shape up). Its second is captured and
replayed, and every later one replayed.

Random streams: a captured kernel draws from the generator state current at capture, at the Philox offset that state
holds when the graph replays (PyTorch's graph-safe RNG states, ``CUDAGeneratorImpl.h``). ``torch.cuda.set_rng_state``
is refused during a capture, and :class:`.RunRNG` uses it. :class:`GraphSafeRNG` instead keeps each run's CUDA stream
as a generator state of its own and switches it in with ``graphsafe_set_state``. Each graph registers every run's
state, so each replay advances each run's offset by what that run drew, as the eager update does.

:class:`Rerun` stands in for CUDA graphs on any device: a "capture" keeps the update, a "replay" runs it again on the
static buffers. It checks the buffers and the bookkeeping, not the graphs (``tests/test_fused_graphs.py``);
:class:`CudaGraphs` is the real thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from softmax_bottleneck.training.fused_step import fused_update
from softmax_bottleneck.training.run_rng import RunRNG
from softmax_bottleneck.training.schedule import longest_seq_len


class GraphSafeRNG(RunRNG):
    """A run's streams (:class:`.RunRNG`) whose CUDA part is a generator state of its own, switched in and out of the
    device's default generator with ``graphsafe_set_state`` (allowed during a capture)."""

    def __init__(self, device: torch.device | str):
        super().__init__(device)
        torch.cuda.init()  # the default generators exist from here
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        self._generator = torch.cuda.default_generators[index]

    def _read_torch(self) -> tuple:
        return torch.get_rng_state(), self._generator.graphsafe_get_state()

    def _write_torch(self, states: tuple) -> None:
        cpu, cuda = states
        torch.set_rng_state(cpu)
        self._generator.graphsafe_set_state(cuda)

    def capture(self) -> GraphSafeRNG:
        python, numpy_state, cpu, _ = self._read()
        self._states = (python, numpy_state, cpu, self._generator.clone_state())  # a state of its own
        return self

    @property
    def cuda_state(self) -> torch.Generator:
        """The run's CUDA generator state, which a graph that draws for the run must register."""
        if self._states is None:
            raise RuntimeError("GraphSafeRNG: no states captured yet")
        return self._states[3]

    @classmethod
    def of(cls, rng: RunRNG) -> GraphSafeRNG:
        """The streams of ``rng`` where they are now, graph-safe (``rng`` itself is left as it was)."""
        with rng:
            return cls(rng.device).capture()


class Rerun:
    """Stands in for CUDA graphs: a capture keeps the function and what a graph binds beside its buffers (each run's
    optimizer, loss sums and lrs); a replay calls the function again with those bound, as a graph would."""

    def eager(self, fn: Callable[[], None]) -> None:
        fn()

    def capture(self, fn: Callable[[], None], runs) -> Callable[[], None]:
        bound = [(run.optimizer, run.sums, [g["lr"] for g in run.optimizer.param_groups]) for run in runs]

        def replay() -> None:
            now = [(run.optimizer, run.sums, [g["lr"] for g in run.optimizer.param_groups]) for run in runs]
            for run, binding in zip(runs, bound, strict=True):
                _bind(run, *binding)
            try:
                fn()
            finally:
                for run, binding in zip(runs, now, strict=True):
                    _bind(run, *binding)

        return replay

    def replay(self, graph: Callable[[], None]) -> None:
        graph()


def _bind(run, optimizer, sums, lrs: list[float]) -> None:
    run.optimizer, run.sums = optimizer, sums
    for group, lr in zip(optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr


class CudaGraphs:
    """Eager updates, captures and replays on one side stream; every graph in one memory pool, with every run's
    generator state (:class:`GraphSafeRNG`) registered."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.stream = torch.cuda.Stream(self.device)
        self.pool = None

    def _on_stream(self, fn: Callable[[], None]) -> None:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            fn()
        current.wait_stream(self.stream)

    def eager(self, fn: Callable[[], None]) -> None:
        self._on_stream(fn)

    def capture(self, fn: Callable[[], None], runs) -> torch.cuda.CUDAGraph:
        if not all(isinstance(run.rng, GraphSafeRNG) for run in runs):
            raise TypeError("CUDA graphs of the fused update need each run's streams as a GraphSafeRNG")
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        for run in runs:
            graph.register_generator_state(run.rng.cuda_state)
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            fn()
        return graph

    def replay(self, graph: torch.cuda.CUDAGraph) -> None:
        self._on_stream(graph.replay)


class GraphedFusedUpdates:
    """:func:`.fused_update` of ``runs`` in lock-step, through ``graphs`` (:class:`CudaGraphs` or :class:`Rerun`):
    per ``(seq_len, rows)``, eager the first time, captured (and replayed) the second, replayed after. ``counts``
    holds how many updates went each way, ``last`` the way of the latest."""

    def __init__(self, runs, graphs, loss_path: str = "nll", batched: bool | None = None):
        self.runs, self.graphs, self.loss_path, self.batched = list(runs), graphs, loss_path, batched
        self.counts: Counter = Counter()
        self.last = ""
        self._drop(None)

    def _drop(self, owner) -> None:
        self.owner = owner
        self.replays: dict[tuple[int, int], object] = {}
        self.seen: set[tuple[int, int]] = set()
        self.inputs: list[torch.Tensor] | None = None
        self.targets: list[torch.Tensor] | None = None
        self.hidden: list | None = None

    def _owner(self) -> tuple:
        """What a graph captures beside the buffers: each run's optimizer, loss sums and base lrs (the objects
        themselves, compared by identity: held here, a dropped optimizer's id cannot come back as a new one's)."""
        return tuple((run.optimizer, run.sums, tuple(g["lr"] for g in run.optimizer.param_groups)) for run in self.runs)

    def update(self, batches: list[tuple]) -> None:
        """One update of every run on its ``(inputs, targets, seq_len)``; each run's ``hidden`` as the eager one."""
        seq_len, length = batches[0][2], batches[0][0].size(0)
        shapes = [(s, x.size(0)) for x, _, s in batches]
        if any(shape != (seq_len, length) for shape in shapes):
            raise ValueError(f"graphed fused updates need runs in lock-step (one seq_len, one length): got {shapes}")
        owner = self._owner()
        if owner != self.owner:
            self._drop(owner)
        key = (seq_len, length)
        if key not in self.replays and key not in self.seen:
            self.seen.add(key)
            self.last = "eager"
            self.graphs.eager(lambda: fused_update(self.runs, batches, self.loss_path, self.batched))
        else:
            self._load(batches, length)
            self.last = "replay"
            if key not in self.replays:
                self.last = "capture"
                self.replays[key] = self.graphs.capture(lambda: self._static_update(seq_len, length), self.runs)
            self.graphs.replay(self.replays[key])
            for run, static in zip(self.runs, self.hidden, strict=True):
                run.hidden = [list(chunk) for chunk in static]
        self.counts[self.last] += 1

    def _load(self, batches: list[tuple], length: int) -> None:
        """The batch into the static buffers (allocated on first use, as long as the longest batch
        :func:`.schedule.sample_seq_len` draws), and each run's carried hidden state where it is not there yet."""
        if self.inputs is None:
            rows = max(longest_seq_len(run.hp) for run in self.runs)
            self.inputs = [x.new_empty((rows, *x.shape[1:])) for x, _, _ in batches]
            self.targets = [y.new_empty((rows, *y.shape[1:])) for _, y, _ in batches]
            self.hidden = [[[(h.detach().clone(), c.detach().clone()) for h, c in chunk] for chunk in run.hidden]
                           for run in self.runs]  # fmt: skip
        for static_x, static_y, (x, y, _) in zip(self.inputs, self.targets, batches, strict=True):
            static_x[:length].copy_(x)
            static_y[:length].copy_(y)
        with torch.no_grad():
            for static, carried in self._hidden_pairs():
                if static is not carried:
                    static.copy_(carried)

    def _static_update(self, seq_len: int, length: int) -> None:
        """The update of the static buffers' batch; the runs' new hidden states copied into the static ones."""
        for run, static in zip(self.runs, self.hidden, strict=True):
            run.hidden = [list(chunk) for chunk in static]
        batches = [(x[:length], y[:length], seq_len) for x, y in zip(self.inputs, self.targets, strict=True)]
        fused_update(self.runs, batches, self.loss_path, self.batched)
        with torch.no_grad():
            for static, carried in self._hidden_pairs():
                static.copy_(carried)

    def _hidden_pairs(self):
        """Every (static buffer, run's hidden tensor) pair: each h and c of each layer, chunk and run."""
        for static, run in zip(self.hidden, self.runs, strict=True):
            for static_chunk, chunk in zip(static, run.hidden, strict=True):
                for static_state, state in zip(static_chunk, chunk, strict=True):
                    yield from zip(static_state, state, strict=True)
