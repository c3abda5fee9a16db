"""Time the MoS output layer against the authors' own module, same weights and inputs, interleaved.

The authors' ``Mos`` (the KIT, https://github.com/quettabit/awd-lstm-lmkit, ``top_models/mos/mos.py``: softmax per
expert, weighted sum, log) is imported from a checkout given by ``--kit``; it runs unmodified on torch 2.x. At
the paper's PTB sizes (V 10,000, d 280, d' 620, K 15, bptt 70, batch 12) one round times, in turn, the forward
+ mean NLL + backward of: the authors' module, this package's loss path (``MixtureOfSoftmaxes.nll``) and its full
path (``forward`` → ``F.nll_loss``), on the same contexts and targets, with the prior, latent and decoder
weights copied from the authors' module. The order rotates each round; the median over the rounds is printed
with the machine's load average. Usage::

    git clone https://github.com/quettabit/awd-lstm-lmkit /tmp/kit
    python benchmarks/authors_mos.py --kit /tmp/kit --threads 2 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", required=True, help="checkout of quettabit/awd-lstm-lmkit")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds (the median is reported)")
    args = parser.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from softmax_bottleneck.models.awd_lstm import mean_nll
    from softmax_bottleneck.models.output_layers.mixtures import MixtureOfSoftmaxes

    sys.path.insert(0, args.kit)
    from top_models.mos.mos import Mos  # the authors' module

    torch.set_num_threads(args.threads)
    vocab, nemb, nhidlast, experts, bptt, batch = 10_000, 280, 620, 15, 70, 12
    torch.manual_seed(0)
    kit = Mos(vocab, nhidlast, nemb, experts, 0.29).train()
    ours = MixtureOfSoftmaxes(vocab, nemb, nhidlast, n_experts=experts, dropoutl=0.29).train()
    with torch.no_grad():
        ours.prior.weight.copy_(kit.prior.weight)
        ours.latent.weight.copy_(kit.latent[0].weight)
        ours.latent.bias.copy_(kit.latent[0].bias)
        ours.bias.copy_(kit.decoder.bias)
    weight = torch.nn.Parameter(kit.decoder.weight.detach().clone())  # the tied embedding
    context = torch.randn(bptt, batch, nhidlast) * 0.5
    targets = torch.randint(vocab, (bptt, batch))

    def authors() -> None:
        log_prob = kit(context.clone().requires_grad_(), {"return_f_logits": False})["output"]
        F.nll_loss(log_prob, targets.view(-1)).backward()

    def loss_path() -> None:
        mean_nll(ours.nll(context.clone().requires_grad_(), weight, targets)).backward()

    def full_path() -> None:
        log_prob = ours(context.clone().requires_grad_(), weight)
        F.nll_loss(log_prob.view(-1, vocab), targets.view(-1)).backward()

    runs = {"authors' Mos": authors, "loss path (nll)": loss_path, "full path": full_path}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for step in runs.values():  # warm-up
        step()
    load_before = os.getloadavg()
    for r in range(args.rounds):
        names = list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]
        for name in names:
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
        kit.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
        weight.grad = None
    load_after = os.getloadavg()
    loads = [" ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after)]
    print(f"load average {loads[0]} before, {loads[1]} after; {args.threads} threads, {args.rounds} rounds\n")
    print("| output layer, forward + loss + backward | s (median) | all rounds |")
    print("|---|---:|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.3f} | {', '.join(f'{t:.3f}' for t in ts)} |")
    ratio = statistics.median(times["authors' Mos"]) / statistics.median(times["loss path (nll)"])
    print(f"\nthe loss path is {ratio:.2f}x as fast as the authors' module")
    return 0


if __name__ == "__main__":
    sys.exit(main())
