"""Everything this project measures on a CUDA card, in one call with a deadline: steps in order of value, each with
its limit, sized so that ``--part measure`` ends within 7 minutes (a lent card has 15 minutes, start-up included).

``--part`` chooses the steps (comma-separated, run in this order; default ``fused,proxies,threads,workflow,measure``),
``--only`` some of them by name:

* ``install``: always first when ``--wheels DIR`` is given: ``pip install --no-index --no-deps --target`` of the
  wheels ``benchmarks/device_wheels.py`` fetched (Snakemake and what the machine lacks), put on ``PYTHONPATH``.
* ``env``: torch, CUDA, cuDNN, the card.
* ``fused``: fused training first (``benchmarks/fused_speed.py``: tokens/s of K = 1, 4, 8, 16, 32 PTB Softmax runs,
  then K = 1, 4, 8, 16 WikiText-2 Softmax runs, trained fused in one process beside one run alone, with peak memory
  and the K runs' validation together against K passes alone); ``fused_invariance``
  (``benchmarks/fused_invariance.py``: a run's weights after 30 updates alone, first of K and last of K, K = 4, 8, and
  its validation loss alone and in those slots of K runs validated together: equal? if not, which operation of the
  batched recurrence gives other bits: ``benchmarks/fused_ops_invariance.py``); ``fused_graphs``
  (``benchmarks/fused_graphs_check.py``: K = 16 and 4 PTB Softmax runs in lock-step, 160 updates eagerly and from
  CUDA graphs of the fused update: the same numbers? the seconds per update and per epoch, against one run alone);
  ``fused_speed_mos`` (K = 1, 4, 16 PTB MoS runs).
* ``proxies``: ``proxy_bench`` (``benchmarks/proxy_bench.py``: ``bench`` of the 10 models that the H200's
  measurements price at another model's time, 59 % of the study's hours, the most hours first), before ``cost``.
* ``threads``: ``benchmarks/packing.py --threads 1``: 1 and 4 PTB Softmax processes with one CPU thread each, without
  and with MPS: do separate processes gain once their host threads stop competing?
* ``graphs``: ``benchmarks/cuda_graphs_check.py`` on PTB Softmax, 80 updates, synchronising after each: do CUDA
  graphs of the cuDNN LSTM's update now replay cleanly (they did not on torch 2.11 / cuDNN 9.19)?
* ``workflow``: the workflow's own jobs on the card (``benchmarks/smoke_workflow.py``, ``config/gpu-smoke.yaml``):
  ``smoke_gpu1``: ``table3`` (4 trainings, their analyses, the table) under ``--resources gpu=1``, one training
  killed at its first logged batches and resumed by the next ``snakemake``; ``smoke_per_gpu2``: then every table
  and figure (``all``) in the same folder with ``SOFTMAX_BOTTLENECK_GPU_SLOTS=2 --resources gpu=2`` (MPS), again
  one training killed and resumed; the step reports how far it got.
* ``measure``: ``packing`` (``benchmarks/packing.py``: aggregate tokens/s of 1 and 4 PTB Softmax and PTB MoS runs
  on the card, without and with MPS); ``identity`` (4 packed PTB Softmax runs through ``gpu-lease --per-gpu 4``,
  each bit-identical to its solo run after 300 batches); ``mps_probe`` (the control binary, a daemon started and
  stopped by the lease's code); ``profile`` (``benchmarks/profile_step.py``: 30 steps of PTB Softmax, PTB MoS, WT2
  MoS under ``torch.profiler``); ``authors`` (``benchmarks/authors_side_by_side.py``: the KIT's ``main.py`` and
  ``train`` on 60 batches of PTB Softmax and MoS, ``--authors-variants``); ``cost`` (WT2 Softmax and MoS ``bench``,
  then ``costs --bench`` over every bench file, the fused and proxies parts' too: the study's device-hours on this
  card, each model at its cheapest measured packing or fusion).
* ``legacy``: the steps whose results BENCHMARKS.md already holds from an H200 (``pytest -m gpu``, ``bench`` of six
  models, ``analyze --rows full`` of PTB and WT2), to repeat them on another card.

A step that cannot finish before ``--deadline`` is skipped, not started. Each step's output is
``<out>/<step>.log`` (a JSON answer as ``<step>.json``); ``--archive FILE`` rewrites a ``.tar.gz`` of ``<out>``
after every step (a device machine returns a few files only, and a call cut off keeps what had finished); a table
of steps, return codes and seconds, then the steps' Markdown tables are printed last. What a card's machine without
internet access needs beside the working tree (folders git ignores): the data (``benchmarks/data``: ptb/,
wikitext-2/, word-sim/ of the mirror), the KIT (``benchmarks/kit``: ``git archive`` of quettabit/awd-lstm-lmkit's
``*.py``) and the wheels (``benchmarks/wheels``: ``python benchmarks/device_wheels.py``). ``--smoke`` runs every
step at toy sizes on any device (the workflow on ``config/small.yaml``), to check the script::

    python benchmarks/gpu_session.py --data-root benchmarks/data --wheels benchmarks/wheels --part measure \\
        --out /tmp/gs --archive $OUT/session.tar.gz --deadline 400
    python benchmarks/gpu_session.py --data-root ../shared/data --out /tmp/gpu --device cpu --smoke
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from softmax_bottleneck.corpora.download import CORPUS_DIRS  # noqa: E402  (dataset -> folder of --data-root)

GPU_TEST_FILES = ["test_weight_drop.py", "test_step.py", "test_training.py", "test_analysis_cli.py",
                  "test_conformance.py", "test_loss_path.py", "test_rank.py"]  # fmt: skip
PARTS = ("fused", "proxies", "threads", "graphs", "workflow", "measure", "legacy")
DEFAULT_PARTS = "fused,proxies,threads,workflow,measure"
TOY = ["--set", "nemb=8", "--set", "nhid=8", "--set", "nhidlast=8"]
MPS_PROBE = """
import json, shutil, subprocess, sys, tempfile
from pathlib import Path
from softmax_bottleneck.cluster import mps
found = {"control": shutil.which(mps.CONTROL), "uuids": mps.gpu_uuids()}
if found["control"] and 0 in found["uuids"]:
    lock = Path(tempfile.mkdtemp(prefix="mps-probe-"))
    d = mps.Daemon(0, found["uuids"][0], lock / "mps" / "gpu0")
    (d.root / "pipe").mkdir(parents=True)
    before = mps._control(d, "get_server_list")  # no daemon yet: must fail
    found["query_without_daemon"] = [before.returncode, (before.stdout + before.stderr).strip()[:200]]
    daemon = mps.join(lock, 0, found["uuids"])
    found["started"] = daemon is not None and mps.running(daemon)
    found["stopped"] = daemon is not None and mps.leave(lock, daemon) and not mps.running(daemon)
print(json.dumps(found))
"""


def plan(args) -> list[tuple[str, str, int, list[str]]]:
    """(name, part, time limit in seconds, command), in the order they run."""
    py = [sys.executable]
    cli = py + ["-m", "softmax_bottleneck"]
    out, data, dev, smoke = Path(args.out), str(Path(args.data_root).resolve()), args.device, args.smoke
    steps: list[tuple[str, str, int, list[str]]] = []
    env_probe = (
        "import torch, json; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version(), 'device': "
        "torch.cuda.get_device_name() if c else None, 'memory_gib': "
        "torch.cuda.get_device_properties(0).total_memory / 2**30 if c else None}))"
    )
    steps.append(("env", "env", 60, py + ["-c", env_probe]))

    slow = 4 if smoke else 1  # a CPU's toy runs take longer than the card's
    # fused training: the study's price with K runs per process (most valuable first)
    fused = py + [str(REPO / "benchmarks" / "fused_speed.py"), "--data-root", data, "--device", dev, "--out",
                  str(out / "fused")]  # fmt: skip

    def fused_in(folder: str) -> list[str]:  # the same command, its tables in another folder of out
        return [str(out / folder) if part == str(out / "fused") else part for part in fused]

    if smoke:
        fused += ["--batches", "1", "--warmup", "1", *TOY]
        steps.append(("fused_speed", "fused", 120 * slow, fused + ["--models", "ptb/softmax", "--groups", "1,2"]))
        steps.append(("fused_speed_wt2", "fused", 60 * slow, fused_in("fused-wt2") + ["--models", "wt2/softmax",
                                                                                    "--groups", "2"]))  # fmt: skip
    else:
        # each row also as a bench file of out/bench: the cost step's `costs --bench` prices fused runs from them
        fused += ["--bench-dir", str(out / "bench")]
        steps.append(("fused_speed", "fused", 100, fused + ["--models", "ptb/softmax", "--groups", "1,4,8,16,32"]))
        # WikiText-2's Softmax family is 681 of the H200's 1,811 study hours (PTB's MoS 122): its fused price next
        wt2 = ["--models", "wt2/softmax", "--groups", "1,4,8,16", "--batches", "10", "--warmup", "2"]
        steps.append(("fused_speed_wt2", "fused", 70, fused_in("fused-wt2") + wt2))
    invariance = py + [str(REPO / "benchmarks" / "fused_invariance.py"), "--device", dev, "--out", str(out / "fused"),
                       "--diagnose"]  # fmt: skip
    invariance += ["--groups", "2", "--updates", "2", *TOY] if smoke else ["--groups", "4,8", "--updates", "30"]
    steps.append(("fused_invariance", "fused", 50 * slow, invariance))
    graphed = py + [str(REPO / "benchmarks" / "fused_graphs_check.py"), "--data-root", data, "--device", dev, "--out",
                    str(out / "fused-graphs")]  # fmt: skip
    short = ["--set", "bptt=5", "--set", "max_seq_len_delta=1"]  # two lengths: the smoke replays some updates
    tiny = ["--groups", "2", "--updates", "10", "--solo-updates", "2", *TOY, *short]
    graphed += tiny if smoke else ["--groups", "16,4"]
    steps.append(("fused_graphs", "fused", 90 * slow, graphed))
    if not smoke:  # PTB's MoS last of the fused part (its runs' hours are a sixth of the Softmax family's)
        mos = ["--models", "ptb/mos", "--groups", "1,4,16", "--batches", "10", "--warmup", "2"]
        steps.append(("fused_speed_mos", "fused", 50, fused_in("fused-mos") + mos))
    # do separate processes gain once their host threads stop competing? (why packing bought nothing)
    threads = py + [str(REPO / "benchmarks" / "packing.py"), "--data-root", data, "--device", dev, "--threads", "1",
                    "--skip", "identity", "--out", str(out / "threads")]  # fmt: skip
    threads += ["--smoke"] if smoke else ["--softmax-runs", "1,4", "--mos-runs", "", "--batches", "40", "--warmup", "5"]
    steps.append(("threads", "threads", 100 * slow, threads))

    # the workflow's jobs on the card
    smoke_wf = py + [str(REPO / "benchmarks" / "smoke_workflow.py"), "--data-root", data, "--workdir",
                     str(Path(args.workdir).resolve()), "--cores", str(os.cpu_count() or 2)]  # fmt: skip
    # a paper-size training of gpu-smoke.yaml ends seconds after its first logged batches on a card: kill at once
    smoke_wf += ["--smoke", "--kill-after", "1"] if smoke else ["--kill-after", "0"]
    first = ["--target", "table3", "--slots", "1", "--resources", "1", "--deadline", str(230 * slow)]
    steps.append(("smoke_gpu1", "workflow", 240 * slow, smoke_wf + first))
    every = "table5" if smoke else "all"  # a CPU runs two small trainings, a card every table and figure
    then = ["--target", every, "--slots", "2", "--resources", "2", "--deadline", str(320 * slow)]
    steps.append(("smoke_per_gpu2", "workflow", 330 * slow, smoke_wf + then))

    # CUDA graphs of the update: the same losses and weights as the plain update? how much faster?
    # (the cuDNN LSTM's graphs failed on torch 2.11 / cuDNN 9.19: this asks again, synchronising after every update)
    graphs = py + [str(REPO / "benchmarks" / "cuda_graphs_check.py"), "--data-root", data, "--out", str(out / "graphs"),
                   "--sync-each-step", "--model", "ptb/softmax"]  # fmt: skip
    graphs += ["--steps", "6", *TOY] if smoke else ["--steps", "80"]
    steps.append(("graphs", "graphs", 60 * slow, graphs))

    # the measurements, in order of value, sized to end within 7 minutes on a card (env and install included)
    packing = py + [str(REPO / "benchmarks" / "packing.py"), "--data-root", data, "--device", dev,
                    "--bench-dir", str(out / "bench")] + (["--smoke"] if smoke else [])  # fmt: skip
    sized = [] if smoke else ["--softmax-runs", "1,4", "--mos-runs", "1,4", "--batches", "40", "--warmup", "5"]
    steps.append(("packing", "measure", 130 * slow, packing + sized + ["--skip", "identity", "--out",
                                                                        str(out / "packing")]))  # fmt: skip
    steps.append(("identity", "measure", 70 * slow, packing + ["--skip", "table", "--out", str(out / "identity")]))
    steps.append(("mps_probe", "measure", 15 * slow, py + ["-c", MPS_PROBE]))
    profile = py + [str(REPO / "benchmarks" / "profile_step.py"), "--data-root", data, "--device", dev,
                    "--out", str(out / "profile")]  # fmt: skip
    profile += ["--steps", "2", "--warmup", "1", "--model", "ptb/softmax", *TOY] if smoke else ["--steps", "30"]
    steps.append(("profile", "measure", 45 * slow, profile))
    authors = py + [str(REPO / "benchmarks" / "authors_side_by_side.py"), "--kit", str(Path(args.kit).resolve()),
                    "--data-root", data, "--device", dev, "--out", str(out / "authors")]  # fmt: skip
    authors += (
        ["--batches", "3", "--warmup", "1", *TOY, "--set", "n_experts=2"]
        if smoke
        else ["--batches", "60", "--warmup", "5"]
    )
    authors += ["--variants", args.authors_variants]
    steps.append(("authors", "measure", 80 * slow, authors))
    # the study's models that the H200's measurements price at another model's time, the most hours first
    proxies = py + [str(REPO / "benchmarks" / "proxy_bench.py"), "--data-root", data, "--device", dev,
                    "--bench-dir", str(out / "bench"), "--out", str(out / "proxy")]  # fmt: skip
    proxies += ["--only", "1", "--batches", "1", "--warmup", "1"] if smoke else []
    steps.append(("proxy_bench", "proxies", 150 * slow, proxies))
    bench_dir = out / ("bench-cost" if smoke else "bench")  # toy benches (smoke) are not the paper's models
    cost_benches = [[*cli, "bench", "--dataset", d, "--variant", v, "--device", dev, "--data",
                     str(Path(data) / CORPUS_DIRS[d]), "--valid-chunks", "1",
                     *(["--batches", "1", "--warmup", "1"] if smoke else ["--batches", "40", "--warmup", "5"])]
                    for d, v in ([("ptb", "softmax"), ("ptb", "mos")] if smoke else []) + [("wt2", "softmax"),
                                                                                           ("wt2", "mos")]]  # fmt: skip
    script = f"mkdir -p {bench_dir} && " + " && ".join(
        f"{' '.join(c)} > {bench_dir}/{c[c.index('--dataset') + 1]}-{c[c.index('--variant') + 1]}-cost.json"
        for c in cost_benches
    )
    script += (f" && {' '.join(cli)} costs --benchmarks {out / 'no-benchmarks'} --config {REPO}/config/config.yaml"
               f" --bench {bench_dir}/*.json --out {out / 'costs.md'} && cat {out / 'costs.md'}")  # fmt: skip
    cost = ["bash", "-c", f"mkdir -p {out / 'no-benchmarks'} && {script}"]
    steps.append(("cost", "measure", 70 * slow * slow // 2, cost))  # paper-size benches: minutes on a CPU

    # the steps whose H200 results BENCHMARKS.md holds
    batches, warmup, chunks = ("2", "1", "1") if smoke else ("100", "10", "20")
    pytest = py + ["-m", "pytest", "-m", "gpu", "-o", "addopts=-ra", "-p", "no:cacheprovider", "-n", "4",
                   "--dist", "loadgroup", f"--junitxml={out / 'tests.xml'}"]  # fmt: skip
    steps.append(("tests", "legacy", 200, pytest + [str(REPO / "tests" / f) for f in GPU_TEST_FILES]))
    for d in ("ptb", "wt2"):
        for v in ("softmax", "mos", "lms_plif"):
            steps.append((f"bench_{d}_{v}", "legacy", 90, cli + ["bench", "--dataset", d, "--variant", v, "--device",
                          dev, "--data", str(Path(data) / CORPUS_DIRS[d]), "--batches", batches, "--warmup", warmup,
                          "--valid-chunks", chunks]))  # fmt: skip
        run = out / f"model-{d}"
        tiny = "--set epochs=1 --set train_tokens=2000 --set valid_tokens=2000 --set test_tokens=2000"
        tiny += " " + " ".join(TOY) if smoke else ""
        train = f"{' '.join(cli)} train --dataset {d} --variant softmax --out {run} --data {data}/{CORPUS_DIRS[d]} " \
                f"--device {dev} {tiny}"  # fmt: skip
        analyze = f"{' '.join(cli)} analyze --checkpoint {run}/model.pt --data {data}/{CORPUS_DIRS[d]} --rows " \
                  f"{'3000' if smoke else 'full'} --out-json {out}/rank-{d}.json --device {dev} " \
                  "--memory-budget-gb 60"  # fmt: skip
        steps.append((f"analysis_{d}", "legacy", 150 if d == "ptb" else 330, ["bash", "-c", f"{train} && {analyze}"]))
    return steps


def install(wheels: Path, site: Path) -> tuple[str, float, str]:
    """The carried wheels into ``site`` (no index, no dependencies resolved: the folder holds them all)."""
    start = time.monotonic()
    files = sorted(glob.glob(str(wheels / "*.whl")))
    if not files:
        return "skipped", 0.0, f"no wheels in {wheels}"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
           "--no-cache-dir", "--upgrade", "--target", str(site), *files]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    last = (proc.stdout + proc.stderr).strip().splitlines()
    return str(proc.returncode), time.monotonic() - start, (last[-1] if last else f"{len(files)} wheels")


def archive(out: Path, target: Path) -> None:
    """Everything under ``out`` as one ``.tar.gz`` at ``target``, replaced whole (written beside it, then renamed):
    a device machine returns a few files only, and a call cut off keeps the archive of the last finished step."""
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    partial.replace(target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-session"), help="folder for logs")
    parser.add_argument("--data-root", required=True, help="folder with ptb/, wikitext-2/ and word-sim/")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--deadline", type=float, default=540, help="seconds from start; later steps are skipped")
    parser.add_argument("--part", default=DEFAULT_PARTS, help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--only", default=None, help="comma-separated step names to run (default: all of --part)")
    parser.add_argument("--wheels", default=None, help="folder of wheels to install first (device_wheels.py)")
    parser.add_argument("--kit", default=str(REPO / "benchmarks" / "kit"), help="the KIT's files (authors step)")
    parser.add_argument("--workdir", default="/tmp/gpu-smoke-workflow", help="the smoke workflow's folder")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, to check the script on any device")
    parser.add_argument("--authors-variants", default="softmax,mos", help="the authors step's variants")
    parser.add_argument("--archive", default=None, help="a .tar.gz of --out, rewritten after every step")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [str(REPO / "src")]
    start = time.monotonic()
    rows = []
    if args.wheels:
        site = Path("/tmp/gpu-session-site")
        rc, seconds, last = install(Path(args.wheels), site)
        rows.append(("install", rc, seconds, last))
        paths.append(str(site))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "SOFTMAX_BOTTLENECK_SHARED_DATA": args.data_root,
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    parts = ["env", *args.part.split(",")]
    steps = [s for part in parts for s in plan(args) if s[1] == part]
    for name, _part, limit, cmd in steps:
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
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                    start_new_session=True)  # fmt: skip
            try:
                rc = str(proc.wait(timeout=min(limit, left)))
            except subprocess.TimeoutExpired:  # the step and every process it started (benches, trainings)
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                rc = "timeout"
        seconds = time.monotonic() - t0
        lines = (out / f"{name}.log").read_text(errors="replace").splitlines()
        text = "\n".join(lines)
        if "\n{" in text:  # the command's JSON answer (bench and the probes print one object)
            try:
                found, _ = json.JSONDecoder().raw_decode(text[text.index("\n{") + 1 :])
                (out / f"{name}.json").write_text(json.dumps(found, indent=1) + "\n")
            except json.JSONDecodeError:
                pass
        rows.append((name, rc, seconds, lines[-1][:150] if lines else ""))
        print(f"{name}: rc {rc}, {seconds:.0f} s ({time.monotonic() - start:.0f} s since the start)", flush=True)
        if args.archive:
            archive(out, Path(args.archive))
    print("\n| step | rc | s | last line |\n|---|---|---:|---|")
    for name, rc, seconds, last in rows:
        print(f"| {name} | {rc} | {seconds:.0f} | {last} |")
    for table in (
        "fused/fused-speed.md",
        "fused-wt2/fused-speed.md",
        "fused-mos/fused-speed.md",
        "fused/fused-ops-invariance.md",
        "fused-graphs/fused-graphs.md",
        "threads/packing.md",
        "graphs/cuda-graphs.md",
        "packing/packing.md",
        "identity/packing.md",
        "profile/profile.md",
        "costs.md",
    ):
        path = out / table
        if path.exists():
            print(f"\n{table}:\n{path.read_text()[:2500]}")
    for name in ("smoke_gpu1", "smoke_per_gpu2", "mps_probe", "authors"):
        path = out / f"{name}.log"
        if path.exists() and name.startswith(("mps", "authors")):
            tail = path.read_text(errors="replace").splitlines()[-(1 if name == "mps_probe" else 4) :]
            print(f"\n{name}:", "\n".join(tail))
        elif (out / f"{name}.json").exists():
            keep = ("finished", "seconds", "killed_run_resumed", "models_trained", "tables_md", "figures_png")
            found = json.loads((out / f"{name}.json").read_text())
            print(f"\n{name}:", {k: found.get(k) for k in keep})
    if shutil.which("nvidia-smi") and not args.smoke:
        subprocess.run(["nvidia-smi", "--query-gpu=name,memory.used,compute_mode", "--format=csv"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
