"""Does a fused run's training or evaluation depend on its group? One run (PTB Softmax, the preset's seed) is updated
``--updates`` times alone (K = 1), as the first of K runs and as the last of K, for each K of ``--groups``; the table
gives, per group, whether its weights equal the K = 1 run's bit for bit, and the largest difference. Then the K = 1
run's weights are validated (``--valid-chunks`` chunks) alone and in the same slot of the K runs evaluated together
(:func:`.fused_evaluation.evaluate_group`, a fused group's validation): the same loss? On the CPU with the per-run
recurrence both must be equal (``tests/test_fused.py``); on a GPU with the batched one this is the measurement of
K-invariance (cuBLAS may choose other kernels for other batch counts). With ``--diagnose``, a difference found
runs ``benchmarks/fused_ops_invariance.py`` next, in this process: which operation of the batched recurrence gives
other bits at another K?

    python benchmarks/fused_invariance.py --device cuda --groups 4,8 --updates 30 --diagnose --out /tmp/fused
    python benchmarks/fused_invariance.py --device cpu --groups 2 --updates 2 --set nemb=16 --set nhid=32 \\
        --set nhidlast=16 --out /tmp/fused
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.corpora.corpus import batchify  # noqa: E402
from softmax_bottleneck.training.bench import RECURRENCES, BenchRun, synthetic_corpus  # noqa: E402
from softmax_bottleneck.training.environment import resolve_device  # noqa: E402
from softmax_bottleneck.training.fused_evaluation import evaluate_group  # noqa: E402
from softmax_bottleneck.training.fused_step import fused_update  # noqa: E402


def group(hp: dict, corpus, device, k: int, slot: int) -> list[BenchRun]:
    """``k`` runs of ``hp``, run ``hp`` (its seed) in slot ``slot``, the others of other seeds."""
    seeds = [hp["seed"] + 1000 + i for i in range(k)]
    seeds[slot] = hp["seed"]
    return [BenchRun({**hp, "seed": seed}, corpus, device, "sgd") for seed in seeds]


def trained(hp: dict, corpus, device, k: int, slot: int, updates: int, batched) -> dict:
    """The weights of run ``hp`` after ``updates`` fused updates in slot ``slot`` of a group of ``k`` runs."""
    runs = group(hp, corpus, device, k, slot)
    for _ in range(updates):
        batches = [run.batch()[0] for run in runs]
        fused_update(runs, batches, batched=batched)
    return {name: value.detach().cpu().clone() for name, value in runs[slot].model.state_dict().items()}


def validated(hp: dict, corpus, device, k: int, slot: int, weights: dict, chunks: int, batched) -> float:
    """The validation loss of ``weights`` (``chunks`` chunks) in slot ``slot`` of ``k`` runs evaluated together."""
    runs = group(hp, corpus, device, k, slot)
    runs[slot].model.load_state_dict(weights)
    data = batchify(corpus.valid, hp["eval_batch_size"])[: chunks * hp["bptt"] + 1].to(device)
    return evaluate_group(runs, [data] * k, batched)[slot]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--groups", default="4,8")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--valid-chunks", type=int, default=10)
    parser.add_argument("--recurrence", choices=tuple(RECURRENCES), default="auto")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--diagnose", action="store_true",
                        help="where a run's numbers depend on K, probe each operation of the batched recurrence next "
                        "(fused_ops_invariance.py, its default models and K)")  # fmt: skip
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    hp = presets.resolve("ptb", "softmax", "et", presets.parse_overrides(args.overrides))
    corpus = synthetic_corpus("ptb").limited(hp["train_tokens"], hp["valid_tokens"], hp["test_tokens"])
    batched = RECURRENCES[args.recurrence]
    alone = trained(hp, corpus, device, 1, 0, args.updates, batched)
    alone_loss = validated(hp, corpus, device, 1, 0, alone, args.valid_chunks, batched)
    rows = []
    for k in (int(x) for x in args.groups.split(",")):
        for slot in (0, k - 1):
            other = trained(hp, corpus, device, k, slot, args.updates, batched)
            diff = max(float((alone[n].double() - other[n].double()).abs().max()) for n in alone)
            loss = validated(hp, corpus, device, k, slot, alone, args.valid_chunks, batched)
            rows.append({"K": k, "slot": slot, "equal": all(torch.equal(alone[n], other[n]) for n in alone),
                         "max_abs_difference": diff, "updates": args.updates,
                         "valid_loss_equal": loss == alone_loss, "valid_loss_difference": abs(loss - alone_loss),
                         "valid_chunks": args.valid_chunks, "device": str(device)})  # fmt: skip
            print(rows[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fused-invariance.json").write_text(json.dumps(rows, indent=2))
    if args.diagnose and not all(row["equal"] and row["valid_loss_equal"] for row in rows):
        print("a run's numbers depend on its group: which operation? (fused_ops_invariance.py)", flush=True)
        import fused_ops_invariance

        return fused_ops_invariance.main(["--device", args.device, "--out", args.out,
                                          *(f"--set={override}" for override in args.overrides)])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
