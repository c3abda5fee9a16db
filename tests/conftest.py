"""Shared fixtures: the real datasets in ``../shared/data`` (skip only where absent) and tiny corpora."""

from __future__ import annotations

import os
from pathlib import Path

# CI has 2 cores: one BLAS/OpenMP thread per process keeps the many tiny matrices fast and results stable.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def _scontrol_without_controller(tmp_path_factory) -> Path:
    """A folder holding an ``scontrol`` that answers "no controller" at once."""
    folder = tmp_path_factory.mktemp("no-slurm-controller")
    shim = folder / "scontrol"
    shim.write_text("#!/bin/sh\necho 'scontrol: no SLURM controller outside the tests marked slurm' >&2\nexit 1\n")
    shim.chmod(0o755)
    return folder


@pytest.fixture(autouse=True)
def _no_wait_for_a_slurm_controller(request, monkeypatch, _scontrol_without_controller) -> None:
    """Every Snakemake call imports the SLURM executor plugin, which runs ``scontrol show config`` (10 s timeout).

    Where the SLURM client is installed but no controller runs (CI installs it for the tests marked ``slurm``),
    that costs each Snakemake call of a test 10 s of waiting. Outside the tests marked ``slurm`` ``scontrol``
    answers at once that there is none, which is the truth for those tests.
    """
    if request.node.get_closest_marker("slurm") is None:
        monkeypatch.setenv("PATH", f"{_scontrol_without_controller}{os.pathsep}{os.environ.get('PATH', '')}")


def shared_data_dir() -> Path:
    return Path(os.environ.get("SOFTMAX_BOTTLENECK_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "ptb" / "train.txt").is_file():
        pytest.skip(f"real datasets not found at {path}")
    return path


@pytest.fixture(scope="session")
def ptb_cache(shared_data, tmp_path_factory) -> Path:
    """The PTB corpus read once and cached as tensors for the whole session."""
    from softmax_bottleneck.corpora.corpus import load_corpus

    cache = tmp_path_factory.mktemp("corpus") / "ptb.pt"
    load_corpus(shared_data / "ptb", cache)
    return cache


def tiny_corpus(vocab: int = 12, tokens: int = 3000, seed: int = 0):
    """A synthetic corpus with learnable structure: each token mostly determines the next."""
    from softmax_bottleneck.corpora.corpus import Corpus, Dictionary

    gen = torch.Generator().manual_seed(seed)
    nxt = torch.randperm(vocab, generator=gen)
    stream = [0]
    for _ in range(tokens - 1):
        if torch.rand((), generator=gen) < 0.9:
            stream.append(int(nxt[stream[-1]]))
        else:
            stream.append(int(torch.randint(vocab, (), generator=gen)))
    data = torch.tensor(stream)
    dictionary = Dictionary()
    for i in range(vocab):
        dictionary.add(f"w{i}")
    n = len(data)
    return Corpus(dictionary, data[: int(0.8 * n)], data[int(0.8 * n) : int(0.9 * n)], data[int(0.9 * n) :])


#: a model small enough for CPU tests in a second
TINY = {
    "nemb": 8,
    "nhid": 16,
    "nhidlast": 8,
    "batch_size": 4,
    "small_batch_size": 2,
    "eval_batch_size": 2,
    "bptt": 10,
    "max_seq_len_delta": 5,
    "epochs": 3,
    "log_interval": 5,
    "plif_knots": 1000,
}


#: torch's CPU kernels on this machine (``AVX2``, ``AVX512``, ...). The numbers pinned in tests/data (the authors'
#: golden trajectory, trainer_reference.json) were recorded where torch ran other kernels than AVX2: with its AVX2
#: kernels (measured on an AMD EPYC, torch 2.13.0+cpu, 2026-11-25) the first training batch already differs in the
#: last bits (loss 9.209012985 vs 9.209013939), and a chaotic tiny run (LMS-PLIF at lr 20) drifts by 10 % within
#: 3 epochs. Bit-for-bit comparisons with those numbers hold only on the recording kernels.
CPU_KERNELS = torch.backends.cpu.get_cpu_capability()
RECORDING_KERNELS = CPU_KERNELS != "AVX2"
