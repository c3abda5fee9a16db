"""Time one training step of the model with the full-matrix path and with the loss path.

For each variant, at the paper's PTB hyper-parameters (``presets.resolve("ptb", variant)``: Softmax 400/1150,
batch 20; MoS 280/960/620, K 15, batch 12; bptt 70), one model forward + backward in training mode, with the
paper's loss (mean NLL + AR + TAR), on random tokens:

* ``forward``: ``model(tokens, hidden)`` → the full ``[L, B, V]`` log-probabilities → ``F.nll_loss``;
* ``nll``: ``model.nll(tokens, hidden, targets)`` → per-token NLL → mean (the loss path);
* ``kit`` (MoS only): the reference code's formula on the same modules, as the paper's SM §2.2 and the KIT
  compute it: ``log Σ_k π_k softmax(U z_k + b)`` (softmax per expert, weighted sum, log), then ``F.nll_loss``;
  a same-machine stand-in for the authors' code.

Every (variant, path) runs in its own subprocess, so that its peak memory is its own: the worker's peak resident
set size (``cluster.processes.peak_resident_bytes``, not the parent's; it includes Python, torch and the model) and
the increase of that peak over the steps (``step peak``: what the forward + backward itself holds at its
high-water mark; on CUDA, ``torch.cuda.max_memory_allocated`` instead). Seconds per step: the median over
``--steps`` steps after ``--warmup`` warm-up steps (wall clock; on CUDA, synchronised). Prints a markdown table,
and the MoS/Softmax ratio per path. The machine's load average is printed first: on a shared machine the times
move with it.
Usage::

    python benchmarks/loss_path.py                                 # softmax, lms_plif, mos, moc on CPU
    python benchmarks/loss_path.py --variants softmax mos --threads 2 --steps 5
    python benchmarks/loss_path.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PATHS = ("forward", "nll", "kit")


def worker(variant: str, path: str, device: str, threads: int, warmup: int, steps: int, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    from softmax_bottleneck import presets
    from softmax_bottleneck.cluster import processes
    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    torch.set_num_threads(threads)
    hp = presets.resolve("ptb", variant)
    vocab = presets.VOCAB_SIZES["ptb"]
    torch.manual_seed(seed)
    model = AWDLSTM(vocab, hp).to(device).train()
    batch, bptt = hp["batch_size"], hp["bptt"]
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab, (bptt + 1, batch), generator=gen).to(device)
    inputs, targets = tokens[:-1], tokens[1:]
    cuda = device.startswith("cuda")

    def step() -> float:
        model.zero_grad(set_to_none=True)
        hidden = model.init_hidden(batch)
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        if path == "forward":
            log_prob, _, raw, dropped = model(inputs, hidden)
            loss = F.nll_loss(log_prob.reshape(-1, vocab), targets.reshape(-1))
        elif path == "kit":
            _, raw = model._context(inputs, hidden)
            dropped = model.output_drop(raw)
            layer = model.output_layer
            z, log_prior = layer._latents_and_log_prior(dropped)
            prob = F.softmax(F.linear(z, model.encoder.weight, layer.bias), dim=-1)  # [L, B, K, V]
            log_prob = torch.log((log_prior.exp().unsqueeze(-1) * prob).sum(-2))
            loss = F.nll_loss(log_prob.reshape(-1, vocab), targets.reshape(-1))
        else:
            nll, _, raw, dropped = model.nll(inputs, hidden, targets)
            loss = nll.mean()
        loss = loss + hp["alpha"] * dropped.pow(2).mean() + hp["beta"] * (raw[1:] - raw[:-1]).pow(2).mean()
        loss.backward()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    base_rss = processes.peak_resident_bytes()  # model built, no step yet
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base_cuda = torch.cuda.memory_allocated()
    times = [step() for _ in range(steps)]
    peak_rss = processes.peak_resident_bytes()
    out = {
        "variant": variant,
        "path": path,
        "device": device,
        "batch": batch,
        "seconds_median": statistics.median(times),
        "seconds_min": min(times),
        "peak_rss_gib": peak_rss / 2**30,
        "step_peak_gib": (peak_rss - base_rss) / 2**30,
    }
    if cuda:
        out["step_peak_gib"] = (torch.cuda.max_memory_allocated() - base_cuda) / 2**30
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=["softmax", "lms_plif", "mos", "moc"], help="variants")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads per worker")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up steps, not timed")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (the median is reported)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and tokens")
    parser.add_argument("--worker", nargs=2, metavar=("VARIANT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = worker(*args.worker, args.device, args.threads, args.warmup, args.steps, args.seed)
        print(json.dumps(result))
        return 0
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; device {args.device}; "
          f"threads {args.threads}; warm-up {args.warmup}, timed steps {args.steps}")  # fmt: skip
    rows = []
    for variant in args.variants:
        for path in PATHS:
            if path == "kit" and variant != "mos":
                continue
            cmd = [sys.executable, __file__, "--worker", variant, path, "--device", args.device,
                   "--threads", str(args.threads), "--warmup", str(args.warmup), "--steps", str(args.steps),
                   "--seed", str(args.seed)]  # fmt: skip
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    step_mem = "step peak GiB (CUDA max allocated)" if args.device.startswith("cuda") else "step peak GiB (RSS)"
    print(f"| variant | batch | path | s/step (median) | s/step (min) | peak RSS GiB | {step_mem} |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['batch']} | {r['path']} | {r['seconds_median']:.3f} | {r['seconds_min']:.3f} "
              f"| {r['peak_rss_gib']:.2f} | {r['step_peak_gib']:.2f} |")  # fmt: skip
    by = {(r["variant"], r["path"]): r["seconds_median"] for r in rows}
    if ("softmax", "forward") in by and ("mos", "forward") in by:
        print("\n(ratios against Softmax's forward path, the trainer's path today; Softmax's nll path times the same)")
        for path in PATHS:
            print(f"MoS / Softmax s/step, {path} path: {by['mos', path] / by['softmax', 'forward']:.2f}")
        print(f"MoS speed-up of the nll path over the forward path: {by['mos', 'forward'] / by['mos', 'nll']:.2f}")
        print(f"MoS speed-up of the nll path over the KIT formula: {by['mos', 'kit'] / by['mos', 'nll']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
