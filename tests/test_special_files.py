"""A device, FIFO or socket where a file is expected: as an output it is never replaced (as root, renaming a file over
/dev/null makes it a plain file), as an input it is named for what it is (not "no such file"); a command whose output
cannot be written says so in one line, without a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from conftest import REPO

from softmax_bottleneck.analysis.inputs import InputError, load_matrix
from softmax_bottleneck.atomic import WriteError, atomic_link, atomic_write_text
from softmax_bottleneck.corpora.corpus import CorpusError, load_corpus
from softmax_bottleneck.training.checkpoint import CheckpointError, load_model

REFUSAL = "cannot write (it is a device, FIFO or socket, not a regular file: give a file's path); nothing was written"


def _fifo(folder, name="out.fifo"):
    path = folder / name
    os.mkfifo(path)
    return path


def _is_fifo(path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_fifo_is_never_written_over(tmp_path):
    fifo, source = _fifo(tmp_path), tmp_path / "source.txt"
    source.write_text("x")
    for write in (lambda: atomic_write_text("x", fifo), lambda: atomic_link(source, fifo)):
        with pytest.raises(WriteError) as err:
            write()
        assert str(err.value) == f"{fifo}: {REFUSAL}" and _is_fifo(fifo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fifo", "source.txt"]  # no temporary left behind


def test_a_link_to_a_file_is_replaced_never_what_it_points_to_and_a_link_to_a_fifo_is_refused(tmp_path):
    """Before, a link to a FIFO was replaced by a file: as root, `--out-spectrum /dev/stdout` would have made
    /dev/stdout (a link to /proc/self/fd/1) a plain file."""
    target, link = tmp_path / "target.txt", tmp_path / "link"
    target.write_text("kept")
    link.symlink_to(target)
    atomic_write_text("x", link)
    assert not link.is_symlink() and link.read_text() == "x" and target.read_text() == "kept"
    fifo, to_fifo = _fifo(tmp_path), tmp_path / "to-fifo"
    to_fifo.symlink_to(fifo)
    from softmax_bottleneck.analysis.outputs import OutputError, write_text

    for write, error in ((atomic_write_text, WriteError), (write_text, OutputError)):
        with pytest.raises(error) as err:
            write("x", to_fifo)
        assert str(err.value) == (f"{to_fifo}: cannot write (it links to a device, FIFO or socket, not a regular file: "
                                  "give a file's path); nothing was written")  # fmt: skip
        assert to_fifo.is_symlink() and _is_fifo(fifo)


def test_a_corpus_cache_that_is_a_fifo_is_refused_not_replaced(tmp_path):
    data = tmp_path / "toy"
    data.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.txt").write_text(" a b c d e f \n" * 20)
    fifo = _fifo(tmp_path)
    with pytest.raises(CorpusError, match=rf"^{fifo}: the corpus cache is not a regular file"):
        load_corpus(data, fifo)
    assert _is_fifo(fifo)


@pytest.mark.parametrize("option", [("costs", "--out"), ("plan", "--csv")], ids=["costs", "plan"])
def test_a_command_whose_output_cannot_be_written_says_so_in_one_line(tmp_path, option):
    fifo = _fifo(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "softmax_bottleneck", *option, str(fifo)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"{option[0]}: {fifo}: {REFUSAL}"
    assert _is_fifo(fifo)


def test_an_input_that_is_a_fifo_is_named_for_what_it_is(tmp_path):
    fifo = _fifo(tmp_path)
    for read, error in ((load_model, CheckpointError), (load_matrix, InputError)):
        with pytest.raises(error, match=rf"^{fifo}: not a regular file \(a FIFO\)$"):
            read(fifo)


def test_an_analysis_output_that_is_a_fifo_is_never_written_over(tmp_path):
    """Before, the analyses' own writer renamed its temporary over a FIFO (as root, over /dev/null too)."""
    from softmax_bottleneck.analysis.outputs import OutputError, npy_writer, write_text

    fifo = _fifo(tmp_path)
    with pytest.raises(OutputError) as err:
        write_text("x", fifo)
    assert str(err.value) == f"{fifo}: {REFUSAL}" and _is_fifo(fifo)
    with pytest.raises(OutputError, match="FIFO"), npy_writer(fifo, (2, 3)):
        pass
    assert _is_fifo(fifo) and sorted(p.name for p in tmp_path.iterdir()) == ["out.fifo"]


@pytest.mark.parametrize("command", ["analyze", "analyze-lm"])
def test_an_analysis_refuses_an_output_it_cannot_write_before_any_work(tmp_path, command):
    """Before, an analysis computed the whole matrix (hours for WT2) and then failed on its output: '[Errno 17] File
    exists' for an output under a file. Each output is now checked first, so the missing model is not even read."""
    afile = tmp_path / "model.pt"
    afile.write_text("not a folder")
    fifo = _fifo(tmp_path, "out.npy")  # --save-logp takes only .npy names
    model = (
        ["--checkpoint", str(tmp_path / "missing.pt")]
        if command == "analyze"
        else ["--model", "missing-model", "--text", "missing.txt"]
    )
    cases = {
        ("--out-json", str(afile / "rank.json")): f"a file is where a folder is expected at {afile}",
        ("--out-json", str(tmp_path)): "a folder is where a file is expected",
        ("--save-logp", str(fifo)): "it is a device, FIFO or socket, not a regular file: give a file's path",
    }
    for (option, path), reason in cases.items():
        outputs = (
            ["--out-json", str(tmp_path / "rank.json"), option, path] if option != "--out-json" else [option, path]
        )
        result = subprocess.run([sys.executable, "-m", "softmax_bottleneck", command, *model, *outputs], cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)  # fmt: skip
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1] == f"{command}: error: {path}: cannot write ({reason}); " + (
            "nothing was written"
        )
    assert _is_fifo(fifo) and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt", "out.npy"]


@pytest.mark.parametrize(("command", "option"), [("rank", "--spectrum-out"), ("robustness", "--out")])
def test_a_matrix_command_refuses_an_output_it_cannot_write_before_reading_the_matrix(tmp_path, command, option):
    afile = tmp_path / "taken"
    afile.write_text("not a folder")
    argv = [command, str(tmp_path / "missing.npy"), option, str(afile / "o.csv")]
    result = subprocess.run([sys.executable, "-m", "softmax_bottleneck", *argv], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"{command}: error: {afile / 'o.csv'}: cannot write (a file is where a folder is expected at {afile}); "
        "nothing was written"
    )


@pytest.mark.parametrize(("command", "option"), [("rank", "--spectrum-out"), ("robustness", "--out")])
def test_a_matrix_command_never_writes_over_its_matrix(tmp_path, command, option):
    """Before, `rank M.npy --spectrum-out M.npy` replaced the matrix by its spectrum's CSV and exited 0."""
    import numpy as np

    matrix = tmp_path / "m.npy"
    np.save(matrix, np.random.default_rng(0).standard_normal((20, 10)).astype(np.float32))
    before = matrix.read_bytes()
    result = subprocess.run([sys.executable, "-m", "softmax_bottleneck", command, str(matrix), option, str(matrix)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode != 0 and matrix.read_bytes() == before, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"{command}: error: {matrix}: cannot write (it is an input of this command, {matrix}: choose another path); "
        "nothing was written"
    )
