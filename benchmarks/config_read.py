"""Time and memory of reading a hostile or large configuration, by the package and by Snakemake's own loader.

Each case is a file of at most 1 MB (1,048,576 bytes, the largest configuration the package reads) written to a
temporary folder; each reader runs in a fresh subprocess, which prints its wall and CPU seconds (on a busy machine
the wall time is longer), the growth of its peak resident memory (``ru_maxrss`` after reading minus before, so the
interpreter and its imports do not count) and whether the file was accepted or refused (the first words of the
one-line reason). Readers:

* ``package``: :func:`softmax_bottleneck.study.config.read` (the reader of the workflow, ``plan`` and ``costs``);
* ``snakemake``: ``snakemake.common.configfile.load_configfile``, what ``snakemake --configfile FILE`` runs before
  the workflow (the package's reading follows it);
* ``check``: ``read`` then :func:`softmax_bottleneck.study.config.check` on an accepted file (``--check``).

Prints a Markdown table. Usage::

    python benchmarks/config_read.py                 # every case, package and snakemake
    python benchmarks/config_read.py --cases bomb,scalars --readers package
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
SMALL = Path(__file__).resolve().parents[1] / "config" / "small.yaml"
MB = 2**20


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = [f"  l0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"  l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "x_anchors:\n" + "\n".join(lines) + "\n"


def _fill(head: str, line: str, tail: str = "") -> str:
    """``head`` + as many copies of ``line`` (with ``{i}``) as fit under 1 MB + ``tail``."""
    parts, size, i = [head], len(head.encode()) + len(tail.encode()), 0
    while True:
        item = line.format(i=i)
        if size + len(item.encode()) > MB:
            return "".join(parts) + tail
        parts.append(item)
        size += len(item.encode())
        i += 1


def cases() -> dict[str, str]:
    small = SMALL.read_text(encoding="utf-8")
    return {
        "small.yaml": small,
        "bomb": billion_laughs()
        + small.replace('report_banner: "small scale — pipeline check, not the paper"', "report_banner: *a9"),
        "scalars": _fill(small + "x_list:\n", "  - {i}\n"),
        "keys": _fill(small + "x_map:\n", "  key{i}: {i}\n"),
        "long string": small + "x_text: " + "x" * (MB - len(small.encode()) - 20) + "\n",
        "flow 60 deep": small + "x_deep: " + "[" * 60 + "]" * 60 + "\n",
        "flow 500,000 deep": small + "x_deep: " + "[" * 500_000 + "]" * 500_000 + "\n",
        "aliases 10,000": small + "x_a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nx_b: [" + ", ".join(["*a"] * 999) + "]\n",
    }


READ = """
import json, resource, sys, time
sys.path.insert(0, {src!r})
reader, path, check = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if reader == "package":
    from softmax_bottleneck.study import config as c
    def run():
        data = c.read(path)
        if check:
            c.check(data)
else:
    from snakemake.common.configfile import load_configfile as run_path
    def run():
        run_path(path)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.monotonic(), time.process_time()
try:
    run()
    outcome = "accepted"
except Exception as err:
    outcome = "refused: " + " ".join(str(err).split())[:70]
seconds, cpu = time.monotonic() - start, time.process_time() - cpu
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({{"seconds": seconds, "cpu": cpu, "mb": grown, "outcome": outcome}}))
"""


NOTHING = {"seconds": float("nan"), "cpu": float("nan"), "mb": float("nan")}


def measure(reader: str, path: Path, check: bool, timeout: float) -> dict:
    code = READ.format(src=SRC)
    try:
        out = subprocess.run([sys.executable, "-c", code, reader, str(path), "1" if check else "0"],
                             capture_output=True, text=True, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {**NOTHING, "seconds": timeout, "outcome": f"no answer in {timeout:.0f} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        return {**NOTHING, "outcome": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    parser.add_argument("--readers", default="package,snakemake", help="package and/or snakemake")
    parser.add_argument("--check", action="store_true", help="package: also check() an accepted file")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a reader counts as hung")
    args = parser.parse_args()
    chosen = cases()
    if args.cases:
        chosen = {name: chosen[name] for name in args.cases.split(",")}
    print("| case | bytes | reader | wall s | CPU s | peak memory growth (MB) | outcome |", flush=True)
    print("|---|---:|---|---:|---:|---:|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in chosen.items():
            path = Path(tmp) / "config.yaml"
            path.write_text(text, encoding="utf-8")
            for reader in args.readers.split(","):
                r = measure(reader, path, args.check, args.timeout)
                print(f"| {name} | {os.path.getsize(path):,} | {reader} | {r['seconds']:.2f} | {r['cpu']:.2f} | "
                      f"{r['mb']:.0f} | "
                      f"{r['outcome']} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
