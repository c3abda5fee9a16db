"""Tests of softmax_bottleneck.corpora.download: verified, atomic fetching from URLs, zips and mirrors.

The network is replaced by a fake pooch downloader (the callable pooch hands each URL and a temporary file to
write), so pooch's own checksum test and temporary files run as they do on a real download."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import logging
import os
import signal
import threading
import zipfile
from pathlib import Path

import pytest
import requests

from softmax_bottleneck.corpora import download
from softmax_bottleneck.corpora.integrity import file_sha256


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and (p.name.endswith(".tmp") or ".fetch-" in str(p))]


@pytest.fixture
def fake_files(monkeypatch):
    """Replace FILES by three small files: two plain URLs and one zip member."""
    plain = b"a b c\n"
    member = b" = Title = \n \n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("wikitext-2/wiki.test.tokens", member)
        zf.writestr("wikitext-2/wiki.valid.tokens", plain)
    archive = buf.getvalue()
    files = {
        "ptb/test.txt": download.DataFile(
            "ptb/test.txt", _sha(plain), (download.Source("https://dead.example/x"), download.Source("https://ok/x"))
        ),
        "wikitext-2/test.txt": download.DataFile(
            "wikitext-2/test.txt", _sha(member), (download.Source("https://ok/wt2.zip", "wikitext-2/wiki.test.tokens"),)
        ),
        "wikitext-2/valid.txt": download.DataFile(
            "wikitext-2/valid.txt",
            _sha(plain),
            (download.Source("https://ok/wt2.zip", "wikitext-2/wiki.valid.tokens"),),
        ),
    }
    served = {"https://ok/x": plain, "https://ok/wt2.zip": archive}
    calls: list[str] = []

    def fake_downloader(timeout):
        def download_to(url, output_file, pooch, check_only=False):
            calls.append(url)
            if url not in served:
                raise requests.exceptions.HTTPError(f"403 Client Error: Forbidden for url: {url}")
            Path(output_file).write_bytes(served[url])

        return download_to

    monkeypatch.setattr(download, "FILES", files)
    monkeypatch.setattr(download, "_downloader", fake_downloader)
    return files, served, calls


def test_registry_covers_the_study():
    assert len(download.FILES) == 6 + 13
    assert len(download.WORDSIM_BENCHMARKS) == 13
    for spec in download.FILES.values():
        assert len(spec.sha256) == 64 and spec.sources
        assert all(s.url.startswith("https://") for s in spec.sources)
    wt2 = download.FILES["wikitext-2/train.txt"]
    assert wt2.sources[0].url == "https://wikitext.smerity.com/wikitext-2-v1.zip"
    assert wt2.sources[0].member == "wikitext-2/wiki.train.tokens"
    assert download.FILES["word-sim/SimLex-999.txt"].sources[0].url.endswith("/EN-SIMLEX-999.txt")


def test_registry_matches_the_data_checksums(shared_data):
    """The pinned SHA-256 of every file is that of the real file (and of the folder's SHA256SUMS, where it has one)."""
    assert {p: file_sha256(shared_data / p) for p in download.FILES} == {p: f.sha256 for p, f in download.FILES.items()}
    if (shared_data / "SHA256SUMS").is_file():
        listed = dict(reversed(line.split()) for line in (shared_data / "SHA256SUMS").read_text().splitlines())
        assert listed == {p: f.sha256 for p, f in download.FILES.items()}


def test_download_plain_url_with_fallback_and_zip_once(tmp_path, fake_files):
    files, served, calls = fake_files
    out = download.fetch(list(files), tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in out] == list(files)
    assert (tmp_path / "ptb/test.txt").read_bytes() == served["https://ok/x"]
    assert (tmp_path / "wikitext-2/test.txt").read_bytes() == b" = Title = \n \n"
    assert calls.count("https://ok/wt2.zip") == 1  # one archive download for both members
    assert calls[0] == "https://dead.example/x"  # the dead source was tried, then the next one
    assert _leftovers(tmp_path) == []
    mask = os.umask(0)
    os.umask(mask)
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~mask for p in out)  # not the temporaries' 0600


def test_a_real_http_download_through_pooch(tmp_path, monkeypatch):
    """pooch's own HTTP downloader against a server on this machine: a file and an archive member arrive verified,
    a 404 falls through to the next source, a tampered file is refused, a file whose every source fails is named
    with each source's HTTP status."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ptb.txt").write_bytes(b"a b c\n")
    with zipfile.ZipFile(site / "wt2.zip", "w") as zf:
        zf.writestr("wikitext-2/wiki.test.tokens", b" = Title = \n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    files = {
        "ptb/test.txt": download.DataFile(
            "ptb/test.txt",
            _sha(b"a b c\n"),
            (download.Source(f"{base}/missing.txt"), download.Source(f"{base}/ptb.txt")),
        ),
        "wikitext-2/test.txt": download.DataFile(
            "wikitext-2/test.txt",
            _sha(b" = Title = \n"),
            (download.Source(f"{base}/wt2.zip", "wikitext-2/wiki.test.tokens"),),
        ),
        "word-sim/MC-30.txt": download.DataFile("word-sim/MC-30.txt", _sha(b"x"), (download.Source(f"{base}/no.txt"),)),
    }
    monkeypatch.setattr(download, "FILES", files)
    try:
        out = download.fetch(list(files)[:2], tmp_path / "out", timeout=10)
        assert [p.read_bytes() for p in out] == [b"a b c\n", b" = Title = \n"]
        tampered = b"tampered\n"
        (site / "ptb.txt").write_bytes(tampered)
        with pytest.raises(download.ChecksumError, match=rf"ptb/test\.txt: .*{_sha(tampered)}"):
            download.fetch(["ptb/test.txt"], tmp_path / "again", timeout=10)
        with pytest.raises(
            download.FetchError, match=r"word-sim/MC-30\.txt: every source failed \(\S+/no\.txt: HTTP 404\)"
        ):
            download.fetch(["word-sim/MC-30.txt"], tmp_path / "again", timeout=10)
    finally:
        server.shutdown()
        server.server_close()
    assert not (tmp_path / "again" / "ptb" / "test.txt").exists()
    assert _leftovers(tmp_path) == []


def test_checksum_mismatch_names_file_and_both_checksums(tmp_path, fake_files):
    files, served, _ = fake_files
    served["https://ok/x"] = b"tampered\n"
    with pytest.raises(download.ChecksumError) as err:
        download.fetch(["ptb/test.txt"], tmp_path)
    message = str(err.value)
    assert "ptb/test.txt" in message
    assert files["ptb/test.txt"].sha256 in message and _sha(b"tampered\n") in message
    assert not (tmp_path / "ptb/test.txt").exists()
    assert _leftovers(tmp_path) == []


def test_every_source_failing_leaves_nothing(tmp_path, fake_files):
    files, served, _ = fake_files
    del served["https://ok/wt2.zip"]
    with pytest.raises(download.FetchError, match="wikitext-2/test.txt") as err:
        download.fetch(["wikitext-2/test.txt"], tmp_path)
    assert "without network access" in str(err.value) and "--config data_mirror=DIR" in str(err.value)
    assert "python -m softmax_bottleneck fetch --mirror DIR" in str(err.value)  # the command's own option too
    assert not (tmp_path / "wikitext-2/test.txt").exists()
    assert _leftovers(tmp_path) == []


def test_a_failed_download_says_so_in_its_one_line_error_only(tmp_path, fake_files, caplog):
    """Before, each source that failed printed a WARNING line ahead of the error that names them all."""
    files, served, _ = fake_files
    del served["https://ok/wt2.zip"]
    files["wikitext-2/test.txt"] = download.DataFile(
        "wikitext-2/test.txt",
        files["wikitext-2/test.txt"].sha256,
        tuple(
            download.Source(url, "wikitext-2/wiki.test.tokens") for url in ("https://a/wt2.zip", "https://ok/wt2.zip")
        ),
    )
    caplog.set_level(logging.INFO, logger="softmax_bottleneck")
    with pytest.raises(download.FetchError) as err:
        download.fetch(["wikitext-2/test.txt"], tmp_path)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    for url in ("https://a/wt2.zip", "https://ok/wt2.zip"):  # every source named, in one line
        assert f"{url} [wikitext-2/wiki.test.tokens]: HTTPError" in str(err.value) and "\n" not in str(err.value)
    assert "trying the next source" in caplog.text  # the first failure, at INFO in the rule's log


def test_mirror_copy_and_mismatch(tmp_path, fake_files):
    files, served, calls = fake_files
    mirror = tmp_path / "mirror"
    (mirror / "ptb").mkdir(parents=True)
    (mirror / "ptb/test.txt").write_bytes(served["https://ok/x"])
    out = tmp_path / "out"
    download.fetch(["ptb/test.txt"], out, mirror=mirror)
    assert (out / "ptb/test.txt").read_bytes() == served["https://ok/x"]
    assert calls == []  # no network with a mirror
    mask = os.umask(0)
    os.umask(mask)
    assert (out / "ptb/test.txt").stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600

    (mirror / "ptb/test.txt").write_bytes(b"corrupt")
    (out / "ptb/test.txt").unlink()
    with pytest.raises(download.ChecksumError, match=r"ptb/test\.txt.*expected [0-9a-f]{64}, got [0-9a-f]{64}"):
        download.fetch(["ptb/test.txt"], out, mirror=mirror)
    assert not (out / "ptb/test.txt").exists()
    with pytest.raises(download.FetchError, match="not found in the data mirror"):
        download.fetch(["wikitext-2/test.txt"], out, mirror=mirror)
    assert _leftovers(tmp_path) == []


def test_unknown_file(tmp_path):
    with pytest.raises(KeyError, match="unknown data file"):
        download.fetch(["ptb/nope.txt"], tmp_path)


def test_cli_mismatch_exit_message(tmp_path, fake_files, capsys):
    _, served, _ = fake_files
    mirror = tmp_path / "mirror"
    (mirror / "ptb").mkdir(parents=True)
    (mirror / "ptb/test.txt").write_bytes(b"corrupt")
    with pytest.raises(SystemExit, match="ptb/test.txt: SHA-256 mismatch"):
        download.main(["--out-dir", str(tmp_path / "out"), "--mirror", str(mirror), "ptb/test.txt"])
    assert download.main(["--list"]) == 0
    assert "ptb/test.txt" in capsys.readouterr().out


def test_real_mirror_copy(tmp_path, shared_data):
    paths = ["ptb/valid.txt", "word-sim/MC-30.txt", "word-sim/SimLex-999.txt"]
    out = download.fetch(paths, tmp_path, mirror=shared_data)
    for path, dest in zip(paths, out, strict=True):
        assert file_sha256(dest) == download.FILES[path].sha256


def test_corpus_checksums_of_each_dataset():
    assert download.corpus_checksums("wt2") == {
        split: download.FILES[f"wikitext-2/{split}.txt"].sha256 for split in ("train", "valid", "test")
    }
    assert (
        download.corpus_checksums("ptb")["train"] == "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"
    )
    with pytest.raises(KeyError, match="unknown dataset"):
        download.corpus_checksums("wikitext-103")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_fetch_stopped_by_a_signal_leaves_no_temporary(tmp_path, fake_files, monkeypatch, capsys, signum):
    """Before, SIGTERM mid-copy killed the process at once: its temporary and scratch folder stayed in the output. It
    ends as the analyses do: one line, exit status 128 + the signal (as a shell reports a command the signal killed)."""
    _, served, _ = fake_files
    mirror = tmp_path / "mirror"
    (mirror / "ptb").mkdir(parents=True)
    (mirror / "ptb/test.txt").write_bytes(served["https://ok/x"])

    def copy_then_stop(source, tmp):
        Path(tmp).write_bytes(b"a b")  # half the file, then the signal arrives (as from scancel or Ctrl-C)
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(download.shutil, "copyfile", copy_then_stop)
    before = signal.getsignal(signum)
    with pytest.raises(SystemExit) as stopped:
        download.main(["--out-dir", str(tmp_path / "out"), "--mirror", str(mirror), "ptb/test.txt"])
    assert stopped.value.code == 128 + signum
    assert capsys.readouterr().err == f"fetch: stopped by {signal.Signals(signum).name}; partial outputs removed\n"
    assert _leftovers(tmp_path / "out") == [] and not (tmp_path / "out" / "ptb" / "test.txt").exists()
    assert list((tmp_path / "out").rglob(".*")) == [] and signal.getsignal(signum) == before


def test_a_relative_mirror_says_where_it_was_looked_for(tmp_path, fake_files, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(download.FetchError) as err:
        download.fetch(["ptb/test.txt"], tmp_path / "out", mirror="shared/data")
    assert str(err.value) == (
        f"ptb/test.txt: not found in the data mirror (shared/data/ptb/test.txt = {tmp_path}/shared/data/ptb/test.txt: "
        "a relative data_mirror is taken from the folder the command runs in, Snakemake's --directory for the workflow)"
    )
