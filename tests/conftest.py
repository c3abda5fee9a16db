"""Shared fixtures: the real datasets (see :func:`data_dir`; fetched when absent and the network allows, else the
tests that need them skip and the run ends with one line saying how many and how to run them) and tiny corpora."""

from __future__ import annotations

import os
from pathlib import Path

# CI has 2 cores: one BLAS/OpenMP thread per process keeps the many tiny matrices fast and results stable.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
import functools  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """The long tests first (the small scale end to end, the longest, before them all), then the slow and the SLURM
    ones: with several workers (pytest-xdist) the longest ones start at once instead of last. The tests of one
    ``xdist_group`` keep their order among themselves (they run on one worker, and a module's fixtures, the SLURM
    cluster's, are set up once)."""

    def order(item) -> int:
        if item.get_closest_marker("long"):
            return 0 if "small_scale_end_to_end" in item.name else 1
        return 2 if (item.get_closest_marker("slow") or item.get_closest_marker("slurm")) else 3

    def group(item) -> tuple[str, ...]:
        marks = item.iter_markers("xdist_group")
        return tuple(sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}))

    keys = {item.nodeid: (group(item), order(item)) for item in items}
    first: dict[tuple[str, ...], int] = {}  # a group's place: its earliest member's
    for name, place in keys.values():
        if name:
            first[name] = min(first.get(name, place), place)
    items.sort(key=lambda item: first.get(*keys[item.nodeid]))


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


@pytest.fixture(autouse=True)
def _workflow_record_variable_kept(monkeypatch) -> None:
    """``workflow_start.record`` names the workflow run's record in this process's environment, for the workflow's
    terminal: a test that writes one must not leave it to the next test of its worker (whose terminal would read it)."""
    from softmax_bottleneck.cluster.workflow_run import RECORD_VARIABLE

    monkeypatch.setenv(RECORD_VARIABLE, "")  # undone at the test's end: the variable is as it was before the test
    monkeypatch.delenv(RECORD_VARIABLE)


# --------------------------------------------------------------------------------------------- the real data
#: the one variable naming the folder of the real data (PTB, WikiText-2, the 13 word-similarity files), laid out
#: like resources/data: ptb/, wikitext-2/, word-sim/ (``python -m softmax_bottleneck fetch --list`` names the files)
DATA_VARIABLE = "SOFTMAX_BOTTLENECK_SHARED_DATA"
#: where CI and the development layout keep the data: ``shared/data`` beside the checkout
BESIDE = REPO.parent / "shared" / "data"
#: where the workflow of this checkout fetched the data (the quick start), each file verified by its pinned SHA-256
CHECKOUT = REPO / "resources" / "data"
#: where the tests fetch the data when the variable is unset and neither folder above holds it
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "softmax-bottleneck" / "data"
#: every skip for want of the data starts with this (the summary line at the end counts them)
NO_DATA = "no study data"


def data_dir() -> Path:
    """The data folder: ``$SOFTMAX_BOTTLENECK_SHARED_DATA`` when set, else ``../shared/data`` beside the checkout
    when it holds the data, else this checkout's ``resources/data`` when it holds every file with its pinned SHA-256
    (after the quick start), else the user's cache (``~/.cache/softmax-bottleneck/data``)."""
    if os.environ.get(DATA_VARIABLE):
        return Path(os.environ[DATA_VARIABLE]).expanduser().resolve()
    if has_data(BESIDE):
        return BESIDE
    return CHECKOUT if verified_data(CHECKOUT) else CACHE


def has_data(path: Path) -> bool:
    """Does ``path`` hold every data file of the study?"""
    from softmax_bottleneck.corpora.download import FILES

    return all((path / name).is_file() for name in FILES)


@functools.cache
def verified_data(path: Path) -> bool:
    """Does ``path`` hold every data file of the study, each with its pinned SHA-256 (about 0.1 s for the 15 files)?"""
    from softmax_bottleneck.corpora.download import FILES
    from softmax_bottleneck.corpora.integrity import file_sha256

    return has_data(path) and all(file_sha256(path / name) == spec.sha256 for name, spec in FILES.items())


def network_answers(timeout: float = 3.0) -> bool:
    """Does the first PTB source answer within ``timeout`` seconds (no name resolution, no route: at once)?"""
    import requests

    from softmax_bottleneck.corpora.download import FILES, USER_AGENT

    try:
        url = FILES["ptb/valid.txt"].sources[0].url
        requests.head(url, timeout=timeout, headers={"User-Agent": USER_AGENT}, allow_redirects=True)
    except requests.RequestException:
        return False
    return True


def pytest_configure(config):
    """Once per run (not in pytest-xdist's workers): find the data, fetch it into :func:`data_dir` with the
    package's own ``fetch`` when it is absent and the network answers, and hand the folder to the workers."""
    if hasattr(config, "workerinput"):
        return
    path = data_dir()
    if not has_data(path) and network_answers():
        from softmax_bottleneck.corpora.download import FILES, ChecksumError, FetchError, fetch

        writer = config.get_terminal_writer() if hasattr(config, "get_terminal_writer") else None
        if writer is not None:
            writer.line(f"fetching the study data into {path} (set {DATA_VARIABLE} to use another folder)")
        try:
            fetch(list(FILES), path, timeout=30.0)
        except (ChecksumError, FetchError, OSError) as err:
            if writer is not None:
                writer.line(f"fetch failed: {err}")
    os.environ[DATA_VARIABLE] = str(path)


def lacks(path: Path) -> str:
    """What ``path`` lacks of the study data, in words: the folder absent, or its first missing file (and how many of
    the files are there), or for this checkout's ``resources/data`` a file that does not match its pinned SHA-256."""
    from softmax_bottleneck.corpora.download import FILES
    from softmax_bottleneck.corpora.integrity import file_sha256

    if not path.is_dir():
        return f"{path} does not exist"
    missing = [name for name in FILES if not (path / name).is_file()]
    if missing:
        return f"{path} lacks {missing[0]} ({len(FILES) - len(missing)} of the {len(FILES)} data files are there)"
    if path == CHECKOUT:
        wrong = next((name for name, spec in FILES.items() if file_sha256(path / name) != spec.sha256), None)
        if wrong:
            return f"{path / wrong} does not match its pinned SHA-256 (a fetch still under way?)"
    return f"{path} holds every data file"


def no_data_reason(path: Path) -> str:
    """Why a test that needs the data skips: the folder it looked in and the file it missed; where the tests fell back
    to the user's cache, what the folders looked in before it lack too (a quick start still fetching into
    resources/data, say)."""
    looked = [path]
    if path.resolve() == CACHE.resolve():
        looked = [folder for folder in (BESIDE, CHECKOUT) if folder.is_dir()] + [path]
    return f"{NO_DATA}: " + "; ".join(lacks(folder) for folder in looked)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The data folder; the test skips (counted at the end of the run) where it lacks the data."""
    path = data_dir()
    if not has_data(path):
        pytest.skip(no_data_reason(path))
    return path


#: for tests that reach the data by :func:`data_dir` (Snakemake's data_mirror, a copied layout) rather than the fixture
needs_data = pytest.mark.usefixtures("shared_data")

#: the one line a run ends with when every test it selected skipped (set by :func:`pytest_sessionfinish`)
_ALL_SKIPPED = pytest.StashKey[str]()


def pytest_sessionfinish(session, exitstatus):
    """A run in which every selected test skipped tested nothing: it fails (exit status 5, as when pytest finds no
    test), and its summary ends with one line saying why and what to do. pytest-xdist: on the controller, which holds
    every worker's reports."""
    config = session.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if hasattr(config, "workerinput") or reporter is None or exitstatus != pytest.ExitCode.OK:
        return
    ran = [key for key in ("passed", "failed", "error", "xfailed", "xpassed") if reporter.stats.get(key)]
    skipped = reporter.stats.get("skipped", [])
    if ran or not skipped:
        return
    no_data = [r for r in skipped if NO_DATA in str(getattr(r, "longrepr", ""))]
    if no_data:
        what = (f"{no_data_reason(data_dir())}. Put the data there (the README's quick start fetches it into "
                f"resources/data; wait for it to finish) or set {DATA_VARIABLE}=DIR, DIR holding ptb/, wikitext-2/ "
                "and word-sim/ (python -m softmax_bottleneck fetch --list names the files)")  # fmt: skip
    else:
        what = "see why with pytest -rs, and run where what they need is there"
    config.stash[_ALL_SKIPPED] = f"All {len(skipped)} selected tests skipped, none ran: a failure. {what}"
    session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Instead of a "SKIPPED" line per test that wants the data (``-ra``), one line after the short summary: how many
    did not run for want of it and the command that runs them. pytest-xdist: the controller holds every worker's
    reports; the final count ("N skipped") still includes them."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing = [report for report in skipped if NO_DATA in str(getattr(report, "longrepr", ""))]
    terminalreporter.stats["skipped"] = [report for report in skipped if report not in missing]
    try:
        result = yield
    finally:
        terminalreporter.stats["skipped"] = skipped
    line = config.stash.get(_ALL_SKIPPED, None)
    if line:
        terminalreporter.write_line(line, red=True, bold=True)
    elif missing:
        terminalreporter.write_line(
            f"{len(missing)} tests did not run: {no_data_reason(data_dir())}, and no network to fetch it. Run them "
            f"with {DATA_VARIABLE}=DIR pytest, DIR holding ptb/, wikitext-2/ and word-sim/ "
            "(python -m softmax_bottleneck fetch --list names the files), or after the README's quick start, which "
            "fetches them into resources/data",
            yellow=True,
            bold=True,
        )
    return result


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


@pytest.fixture(scope="session")
def tiny_word_sim(tmp_path_factory) -> Path:
    """A generated word-similarity folder for the words of :func:`tiny_corpus` (``w0`` ... ``w11``): every benchmark
    file the study reads, each with a few ``word1<TAB>word2<TAB>score`` lines (not the real benchmarks' pairs)."""
    from softmax_bottleneck.analysis.wordsim import BENCHMARKS

    folder = tmp_path_factory.mktemp("word-sim")
    gen = torch.Generator().manual_seed(0)
    for fname in BENCHMARKS.values():
        pairs = torch.randint(12, (6, 2), generator=gen).tolist()
        lines = [f"w{a}\tw{b}\t{(a * 7 + b) % 10}.5" for a, b in pairs]
        (folder / fname).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


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


def kernel_fingerprint() -> str:
    """What this machine's torch computes, bit for bit, for one step of a tiny seeded LSTM language model (vocabulary
    10,000, embedding 16, LSTMs 16→32→16, tied decoder, batch 10 × 20 tokens, clipped SGD at lr 20, one thread): the
    first 16 hex digits of the SHA-256 of the loss before and after the step and of the updated weights.

    Float32 results depend on the CPU kernels that torch and MKL pick for the CPU (its instruction sets and model),
    so this tells machines apart whose training differs in the last bits.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            embedding = torch.nn.Embedding(10_000, 16)
            lstms = torch.nn.ModuleList([torch.nn.LSTM(16, 32), torch.nn.LSTM(32, 16)])
            bias = torch.nn.Parameter(torch.zeros(10_000))
            params = [embedding.weight, *lstms.parameters(), bias]
            tokens = torch.randint(0, 10_000, (21, 10))

            def loss() -> torch.Tensor:
                hidden = embedding(tokens[:-1])
                for lstm in lstms:
                    hidden, _ = lstm(hidden)
                logits = F.linear(hidden, embedding.weight, bias)
                return F.nll_loss(F.log_softmax(logits, -1).view(-1, 10_000), tokens[1:].reshape(-1))

            before = loss()
            before.backward()
            torch.nn.utils.clip_grad_norm_(params, 0.25)
            with torch.no_grad():
                for param in params:
                    param -= 20.0 * param.grad
                after = loss()
            digest = hashlib.sha256(before.detach().numpy().tobytes() + after.numpy().tobytes())
            for param in params:
                digest.update(param.detach().numpy().tobytes())
            return digest.hexdigest()[:16]
    finally:
        torch.set_num_threads(threads)


#: torch's CPU kernels on this machine (``AVX2``, ``AVX512``, ...) and their :func:`kernel_fingerprint`
CPU_KERNELS = torch.backends.cpu.get_cpu_capability()
KERNELS = kernel_fingerprint()
#: machines measured to train differently in the last bits from the one that recorded the numbers pinned in
#: tests/data (the authors' golden trajectory, trainer_reference.json), by fingerprint (tests/data/kernels.json)
OTHER_KERNELS = json.loads((REPO / "tests" / "data" / "kernels.json").read_text(encoding="utf-8"))["differ"]
#: whether this machine computes as the recording one did: torch's AVX-512 kernels (with its AVX2 kernels, on an AMD
#: EPYC, 2026-11-25, the first training batch already differs in the last bits: loss 9.209012985 vs 9.209013939) and
#: no fingerprint measured to differ. Bit-for-bit comparisons with the pinned numbers hold only there; elsewhere the
#: tests compare within rounding.
RECORDING_KERNELS = CPU_KERNELS == "AVX512" and KERNELS not in OTHER_KERNELS
