"""The CPU seconds of each kind of job of the small scale: the measured numbers of
``softmax_bottleneck.study.job_seconds`` (the weights of the terminal's time left).

Reads a folder where the small scale ran (``snakemake --cores 2 --configfile config/small.yaml``):

* Snakemake's benchmark files under ``benchmarks/<rule>/`` (``cpu_time``: user + system seconds of the job's
  processes), for the trainings (per dataset and variant: the median) and the analyses (per rule: the median);
* then renders, in that folder, one table and one figure as the workflow does (three times each), and measures their
  CPU seconds (``resource.getrusage`` of the children): they stand for the rules without a benchmark file
  (summaries, tables, figures: a Python start, pandas, matplotlib, small CSVs).

A job of several threads (:data:`THREADS`) counts its CPU seconds over its threads. Prints a Markdown table and the
constants to put in ``job_seconds.py``. CPU seconds rather than wall seconds: they
do not grow with the load of the machine, and the terminal takes the wall seconds per planned second from the run
itself. Usage::

    python benchmarks/job_seconds.py DIR
"""

from __future__ import annotations

import argparse
import csv
import resource
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import yaml

#: the rules whose jobs ran on several threads at ``--cores 2`` (their ``threads:`` scaled down to 2): their CPU seconds
#: are divided by it, so that each job's planned seconds are the wall seconds it holds its slots
THREADS = {"robustness_logp": 2, "robustness": 2}


def cpu_seconds(path: Path) -> float:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return float(rows[-1]["cpu_time"])


def children_cpu(command: list[str], cwd: Path) -> float:
    """CPU seconds (user + system) of ``command`` run to its end in ``cwd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tokens_read(config: dict, dataset: str) -> int:
    """Tokens a small-scale training reads over all its epochs: epochs × (train + valid) + test."""
    from softmax_bottleneck.corpora.datasets import dataset as corpus

    hp = {**config["model_overrides"]["all"], **config["model_overrides"].get("datasets", {}).get(dataset, {})}
    full = corpus(dataset).split_tokens
    return (
        hp["epochs"] * (hp.get("train_tokens") or full[0])
        + hp["epochs"] * (hp.get("valid_tokens") or full[1])
        + (hp.get("test_tokens") or full[2])
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the small scale ran")
    args = parser.parse_args()
    root = args.folder
    config = yaml.safe_load((root / "config" / "small.yaml").read_text())
    trainings: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in (root / "benchmarks" / "train").rglob("*.tsv"):
        dataset, variant = path.relative_to(root / "benchmarks" / "train").parts[:2]
        trainings[dataset, variant].append(cpu_seconds(path))
    rules: dict[str, list[float]] = defaultdict(list)
    for path in (root / "benchmarks").glob("*/**/*.tsv"):
        rule = path.relative_to(root / "benchmarks").parts[0]
        if rule != "train":
            rules[rule].append(cpu_seconds(path) / THREADS.get(rule, 1))
    python = [sys.executable, "-m", "softmax_bottleneck"]
    summary = root / "results" / "small" / "summary"
    renders = {
        "table": [*python, "table", "table2", "--summary-dir", str(summary), "--out", "/tmp/job-seconds-table2"],
        "figure": [*python, "figure", "sm_figure2", "--summary-dir", str(summary), "--out", "/tmp/job-seconds-fig"],
    }
    for name, command in renders.items():
        rules[f"({name})"] = [children_cpu(command, root) for _ in range(3)]
    print("| job | jobs measured | median CPU s |\n|---|---:|---:|")
    for (dataset, variant), values in sorted(trainings.items()):
        print(f"| train {dataset} {variant} | {len(values)} | {statistics.median(values):.1f} |")
    for rule, values in sorted(rules.items()):
        print(f"| {rule} | {len(values)} | {statistics.median(values):.1f} |")
    print("\nSMALL_TRAINING = {")
    for (dataset, variant), values in sorted(trainings.items()):
        print(f'    ("{dataset}", "{variant}"): ({statistics.median(values):.1f}, {tokens_read(config, dataset):_}),')
    print("}\nRULE_SECONDS = {")
    for rule, values in sorted(rules.items()):
        if not rule.startswith("("):
            print(f'    "{rule}": {statistics.median(values):.1f},')
    print("}")
    render = statistics.median([*rules["(table)"], *rules["(figure)"]])
    print(f"RENDER_SECONDS = {render:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
