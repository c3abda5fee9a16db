"""Everything BENCHMARKS.md asks of a lent GPU, in one call with a deadline: checks first, then timings.

Steps, in order of value (a step that cannot finish before ``--deadline`` is skipped, not started):

1. ``env``: torch, CUDA, cuDNN, the card (``nvidia-smi``).
2. ``tests``: the suite's CUDA tests (``pytest -m gpu``): DropConnect on CUDA, capturable ASGD, a CUDA run killed
   and resumed, the CUDA rank path, the loss paths, conformance.
3. ``bench_<dataset>_<variant>``: seconds per epoch at the paper's hyper-parameters (``bench``), SGD steps, on the
   real corpus; one ASGD row and one row of 4 runs sharing the card.
4. ``analysis_<dataset>``: a paper-size Softmax trained one tiny epoch on the device, then ``analyze --rows full``
   (the whole test set; the weights do not change the cost).

Each step's output is ``<out>/<step>.log`` (JSON rows as ``<step>.json``); a table of steps, return codes and
seconds is printed last. ``--smoke`` runs the same steps at toy sizes on any device, to check the script itself.
A machine without a package index needs jsonschema's wheels carried along
(``pip download jsonschema -d WHEELS --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64``,
then ``pip install --no-index --find-links WHEELS jsonschema`` there)::

    python benchmarks/gpu_session.py --data-root ../shared/data --out /tmp/gpu --device cuda --deadline 540
    python benchmarks/gpu_session.py --data-root ../shared/data --out /tmp/gpu --device cpu --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402  (dataset -> folder of --data-root)

GPU_TEST_FILES = ["test_weight_drop.py", "test_step.py", "test_training.py", "test_analysis_cli.py",
                  "test_conformance.py", "test_loss_path.py", "test_rank.py"]  # fmt: skip


def steps(args) -> list[tuple[str, list[str], int]]:
    """(name, command, time limit in seconds), in the order they run."""
    py = [sys.executable]
    cli = py + ["-m", "softmax_bottleneck"]
    batches, warmup, chunks = ("2", "1", "1") if args.smoke else ("100", "10", "20")
    out = Path(args.out)
    env_probe = (
        "import torch, json; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version(), 'device': "
        "torch.cuda.get_device_name() if c else None, 'memory_gib': "
        "torch.cuda.get_device_properties(0).total_memory / 2**30 if c else None}))"
    )
    plan = [("env", py + ["-c", env_probe], 60)]
    pytest = py + ["-m", "pytest", "-m", "gpu", "-o", "addopts=-ra", "-p", "no:cacheprovider", "-n", "4",
                   "--dist", "loadgroup", f"--junitxml={out / 'tests.xml'}"]  # fmt: skip
    plan.append(("tests", pytest + [str(REPO / "tests" / f) for f in GPU_TEST_FILES], 200))

    def bench(dataset: str, variant: str, *extra: str) -> list[str]:
        return cli + ["bench", "--dataset", dataset, "--variant", variant, "--device", args.device,
                      "--data", str(Path(args.data_root) / CORPUS_DIRS[dataset]), "--batches", batches,
                      "--warmup", warmup, "--valid-chunks", chunks, *extra]  # fmt: skip

    def analysis(dataset: str) -> list[str]:
        run = out / f"model-{dataset}"
        data = str(Path(args.data_root) / CORPUS_DIRS[dataset])
        tiny = ["--set", "epochs=1", "--set", "train_tokens=2000", "--set", "valid_tokens=2000",
                "--set", "test_tokens=2000"]  # fmt: skip
        if args.smoke:
            tiny += ["--set", "nemb=8", "--set", "nhid=8", "--set", "nhidlast=8"]
        train = cli + ["train", "--dataset", dataset, "--variant", "softmax", "--out", str(run), "--data", data,
                       "--device", args.device, *tiny]  # fmt: skip
        analyze = cli + ["analyze", "--checkpoint", str(run / "model.pt"), "--data", data,
                         "--rows", "3000" if args.smoke else "full", "--out-json", str(out / f"rank-{dataset}.json"),
                         "--device", args.device, "--memory-budget-gb", "60"]  # fmt: skip
        timed = ["/usr/bin/time", "-v"] if shutil.which("/usr/bin/time") else []
        return ["bash", "-c", " ".join(train) + " && " + " ".join(timed + analyze)]

    for variant in ("softmax", "mos", "lms_plif"):
        plan.append((f"bench_ptb_{variant}", bench("ptb", variant), 90))
    plan.append(("analysis_ptb", analysis("ptb"), 150))
    for variant in ("softmax", "mos", "lms_plif"):
        plan.append((f"bench_wt2_{variant}", bench("wt2", variant), 90))
    plan.append(("analysis_wt2", analysis("wt2"), 330))
    plan.append(("bench_ptb_softmax_asgd", bench("ptb", "softmax", "--phase", "asgd"), 90))
    plan.append(("bench_ptb_softmax_runs4", bench("ptb", "softmax", "--runs", "4"), 120))
    return plan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-session"), help="folder for logs")
    parser.add_argument("--data-root", required=True, help="folder with ptb/ and wikitext-2/")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--deadline", type=float, default=540, help="seconds from start; later steps are skipped")
    parser.add_argument("--only", default=None, help="comma-separated step names to run (default: all)")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, to check the script on any device")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SOFTMAX_BOTTLENECK_SHARED_DATA": str(args.data_root)}
    start = time.monotonic()
    rows = []
    for name, cmd, limit in steps(args):
        if args.only and name not in args.only.split(","):
            continue
        left = args.deadline - (time.monotonic() - start)
        if left < min(limit, 45):
            rows.append((name, "skipped", 0.0, f"{left:.0f} s left"))
            continue
        t0 = time.monotonic()
        with open(out / f"{name}.log", "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            try:
                proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                      timeout=min(limit, left))  # fmt: skip
                rc = str(proc.returncode)
            except subprocess.TimeoutExpired:
                rc = "timeout"
        seconds = time.monotonic() - t0
        lines = (out / f"{name}.log").read_text(errors="replace").splitlines()
        text = "\n".join(lines)
        if "\n{" in text:  # the command's JSON answer (bench prints one object)
            found, _ = json.JSONDecoder().raw_decode(text[text.index("\n{") + 1 :])
            (out / f"{name}.json").write_text(json.dumps(found, indent=1) + "\n")
        rows.append((name, rc, seconds, lines[-1][:150] if lines else ""))
        print(f"{name}: rc {rc}, {seconds:.0f} s", flush=True)
    print("\n| step | rc | s | last line |\n|---|---|---:|---|")
    for name, rc, seconds, last in rows:
        print(f"| {name} | {rc} | {seconds:.0f} | {last} |")
    for name in (row[0] for row in rows if row[0].startswith("bench_")):
        path = out / f"{name}.json"
        if path.exists():
            row = json.loads(path.read_text())
            keys = ("seconds_per_batch", "tokens_per_second", "projected_seconds_per_epoch", "peak_memory_bytes")
            print(name, {k: row.get(k) for k in keys})
    for dataset in CORPUS_DIRS:
        path = out / f"rank-{dataset}.json"
        if path.exists():
            print(dataset, path.read_text()[:600])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
