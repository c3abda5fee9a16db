"""How right the terminal's time left is: the small scale run in a fresh copy of this checkout, every terminal line
timed as it arrives, then each time left it printed against the wall time the run actually took from then on.

Copies the committed files of this checkout (``git archive HEAD``) into a new folder, runs the README's small-scale
command there (``snakemake --cores 2 --configfile config/small.yaml``, ``--config data_mirror=DIR`` appended so that
nothing is downloaded) with the Python environment this script runs in, and prints a Markdown table: each progress
line with a time left (``about 4m 10s left``), when it came, the time left it said, the time the run actually took
from then to its end, and their ratio (every line, timed, is kept in ``terminal.txt`` of the folder as it
comes); the first after the first training is the one the README's reader sees. The
load average of the machine is printed at the start and the end: other work on the machine makes any time left
wrong. Usage::

    python benchmarks/time_left_check.py --data-mirror ../shared/data [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT = re.compile(r"^(?:\[\d\d:\d\d:\d\d\] )?trainings: (\d+) of (\d+) done, jobs: (\d+) of (\d+); about (.+) left \(")


def seconds(text: str) -> float:
    """``7m 05s``, ``42s``, ``3h 20m``, ``2d 04h`` (softmax_bottleneck.durations) in seconds."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return float(sum(int(value) * units[unit] for value, unit in re.findall(r"(\d+)([dhms])", text)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-mirror", required=True, type=Path, help="a folder laid out like resources/data")
    parser.add_argument("--keep", type=Path, default=None, help="run in this (new) folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="time-left-"))
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    command = [str(Path(sys.executable).parent / "snakemake"), "--cores", "2", "--configfile", "config/small.yaml",
               "--config", f"data_mirror={args.data_mirror.resolve()}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(folder / "src"))
    print(f"{' '.join(command)}\nin {folder}; load average at the start: {os.getloadavg()}", flush=True)
    lines: list[tuple[float, str]] = []
    started = time.time()
    with (subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, bufsize=1) as proc,
          open(folder / "terminal.txt", "w") as timed):  # fmt: skip
        for line in proc.stdout:  # each line timed and kept as it comes: a run cut short keeps what it printed
            lines.append((time.time(), line.rstrip("\n")))
            timed.write(f"{lines[-1][0] - started:9.1f} {lines[-1][1]}\n")
            timed.flush()
    ended = time.time()
    print(f"exit status {proc.returncode}; {ended - started:.0f} s; {len(lines)} lines; load average at the end: "
          f"{os.getloadavg()}\n")  # fmt: skip
    print("| at (s) | line | time left said (s) | time it took (s) | said ÷ took |\n|---:|---|---:|---:|---:|")
    for when, line in lines:
        found = LEFT.match(line)
        if found:
            said, took = seconds(found.group(5)), ended - when
            print(f"| {when - started:.0f} | {line.split(';')[0]} | {said:.0f} | {took:.0f} | {said / took:.2f} |")
    if args.keep is None:
        shutil.rmtree(folder)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
