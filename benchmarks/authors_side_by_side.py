"""The authors' training code and this package's, same seed and hyper-parameters, same device: s/batch and losses.

For PTB Softmax and PTB MoS (``--variants``) at the paper's hyper-parameters (this package's presets, passed to
the KIT as its flags), each side trains the first ``--batches`` SGD batches of epoch 1 on the real PTB, in a
process of its own:

* **the KIT** (quettabit/awd-lstm-lmkit, ``main.py``; a checkout given by ``--kit``) runs from a temporary copy of
  its Python files with only what modern PyTorch or the public KIT's gaps require (the patches of
  ``tests/data/README.md``, applied here at run time, nothing of the KIT's code being kept in this repository):
  (1) ``weight_drop.py``: the raw weight is cloned when ``F.dropout`` returns it unchanged (eval mode), else the
  LSTM re-registers it as a parameter; (2) ``utils/main.py``: ``torch.cuda.get_rng_state()`` only with CUDA;
  (3) stubs of the modules the public KIT imports but does not ship (``comet_ml``, four argument modules,
  ``SvdEmbed``). Its corpus is built from the text files (the KIT's ``corpus.pt`` pickles are never loaded) and the
  training stream cut to what the batches need, as this package's ``train_tokens`` cuts it.
* **this package**: ``train()`` (the workflow's training) with ``train_tokens`` the same cut and ``epochs=1``.

Both are observed from outside: ``torch.nn.utils.clip_grad_norm_`` marks the end of each batch (the device is
synchronised only at batch ``--warmup`` and at the last), and each training chunk's raw NLL is kept on the device
(the KIT's ``LossCriterion.forward``, this package's ``step.chunk_loss``) and read once at the end. Printed last:
s/batch of each side and their ratio (ours / theirs), and whether the per-batch losses agree (bit for bit, or
the largest relative difference and the first batch that differs). Without a card, a toy size checks the
script (``--set`` applies to both sides)::

    git -C <clone of quettabit/awd-lstm-lmkit> archive HEAD -- '*.py' | tar -x -C benchmarks/kit   # once
    python benchmarks/authors_side_by_side.py --kit benchmarks/kit --data-root ../shared/data --device cuda
    python benchmarks/authors_side_by_side.py --kit benchmarks/kit --data-root ../shared/data --device cpu \\
        --batches 4 --warmup 1 --set nemb=16 --set nhid=16 --set nhidlast=16 --set n_experts=2

``benchmarks/kit`` is ignored by git (``benchmarks/*``); a machine without internet gets it carried in the working
tree (the device tool's ``carry``).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

#: this package's hyper-parameter -> the KIT's flag (main.py's CLIParser)
KIT_FLAGS = {"nemb": "nemb", "nhid": "nhid", "nlayers": "nlayer", "bptt": "bptt", "batch_size": "batch_size",
             "small_batch_size": "small_batch_size", "eval_batch_size": "eval_batch_size",
             "test_batch_size": "test_batch_size", "log_interval": "log-interval", "clip": "clip",
             "wdecay": "wdecay", "alpha": "alpha", "beta": "beta", "max_seq_len_delta": "max_seq_len_delta",
             "dropout": "dropout", "dropoute": "dropoute", "dropouti": "dropouti", "dropouth": "dropouth",
             "wdrop": "wdrop", "seed": "seed", "lr": "lr", "switch_epoch": "switch_epoch"}  # fmt: skip
MIXTURE_FLAGS = {"nhidlast": "nhidlast", "n_experts": "mos_nexpert", "dropoutl": "mos_dropoutl"}
TOP_MODEL = {"softmax": "smax", "mos": "mos"}

#: (file, text, replacement): the run-time patches of the KIT copy (tests/data/README.md, patches 1 and 2)
PATCHES = [
    ("utils/base_models/dai/weight_drop.py",
     "w = torch.nn.functional.dropout(raw_w, p=self.dropout, training=self.training)\n",
     "w = torch.nn.functional.dropout(raw_w, p=self.dropout, training=self.training)\n"
     "                if w is raw_w:\n                    w = raw_w.clone()\n"),
    ("utils/main.py", "'torch_gpu': torch.cuda.get_rng_state()",
     "'torch_gpu': torch.cuda.get_rng_state() if torch.cuda.is_available() else None"),
]  # fmt: skip
#: modules the public KIT imports but does not ship (patch 3): file -> stub text
STUBS = {
    **{f"top_models/{name}/args/{name}.py": f"def add_{name}_args(parser):\n    pass\n"
       for name in ("sc_smax", "xmoc", "xmos", "mt")},
    "utils/models/svd_embed.py": "class SvdEmbed:\n    pass\n",
}  # fmt: skip


class Done(BaseException):
    """The last observed batch ended: leave the training loop (neither side catches a BaseException)."""


def hyperparameters(variant: str, overrides: dict) -> dict:
    from softmax_bottleneck import presets

    return presets.resolve("ptb", variant, "et", overrides)


def train_tokens(hp: dict, batches: int) -> int:
    """Enough training tokens for ``batches`` + 2 batches of the longest sampled length."""
    return (batches + 2) * (hp["bptt"] + hp["max_seq_len_delta"]) * hp["batch_size"]


def kit_argv(variant: str, hp: dict, data: Path, save: Path, cuda: bool) -> list[str]:
    """main.py's command line for the preset ``hp``: one epoch, no comet, no rank analysis."""
    flags = {**KIT_FLAGS, **(MIXTURE_FLAGS if variant == "mos" else {})}
    argv = ["main.py", "--data", str(data), "--save", str(save), "--epochs", "1", "--optimizer", "sgd",
            "--criterion", "cross", "--top_model", TOP_MODEL[variant], "--no_comet", "--no_analysis"]  # fmt: skip
    for key, flag in flags.items():
        argv += [f"--{flag}", str(hp[key])]
    return argv + (["--cuda", "--single_gpu"] if cuda else [])


def prepare_kit(kit: Path, work: Path) -> Path:
    """A copy of the KIT's Python files in ``work`` with the patches and stubs; its path."""
    copy = work / "kit"
    shutil.copytree(kit, copy, ignore=lambda d, names: [n for n in names if n in ("data", "pdfs", ".git")])
    for rel, old, new in PATCHES:
        path = copy / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{kit / rel}: the text to patch ({old.strip()!r}) is not there once; another KIT?")
        path.write_text(text.replace(old, new))
    for rel, text in STUBS.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        if not (copy / rel).exists():
            (copy / rel).write_text(text)
    return copy


class Observer:
    """Batch boundaries (``clip_grad_norm_``), chunk losses kept on the device, the timed span."""

    def __init__(self, batches: int, warmup: int, device: str):
        import torch

        self.torch, self.batches, self.warmup, self.cuda = torch, batches, warmup, device.startswith("cuda")
        self.count, self.losses, self.t0, self.t1 = 0, [], None, None
        real = torch.nn.utils.clip_grad_norm_

        def clip(*args, **kwargs):
            self.count += 1
            if self.count in (warmup, batches):
                if self.cuda:
                    torch.cuda.synchronize()
                if self.count == warmup:
                    self.t0 = time.perf_counter()
                else:
                    self.t1 = time.perf_counter()
                    raise Done
            return real(*args, **kwargs)

        torch.nn.utils.clip_grad_norm_ = clip

    def loss(self, raw) -> None:
        if self.count < self.batches:
            self.losses.append(raw.detach().reshape(()).clone())

    def result(self, side: str) -> dict:
        losses = self.torch.stack(self.losses).tolist() if self.losses else []
        timed = self.batches - self.warmup
        return {"side": side, "batches": self.count, "timed_batches": timed, "chunk_losses": losses,
                "s_per_batch": (self.t1 - self.t0) / timed if self.t1 is not None else None}  # fmt: skip


def run_kit(args) -> dict:
    """In this process: the KIT's main.py on a patched copy, observed."""
    import torch

    work = Path(args.work)
    copy = prepare_kit(Path(args.kit), work)
    data = work / "ptb"
    data.mkdir()
    for split in ("train", "valid", "test"):
        os.symlink(Path(args.data).resolve() / f"{split}.txt", data / f"{split}.txt")
    hp = json.loads(args.hp)
    sys.modules["comet_ml"] = comet = types.ModuleType("comet_ml")
    comet.Experiment = type("Experiment", (), {"__init__": lambda self, *a, **k: None,
                                               "__getattr__": lambda self, name: (lambda *a, **k: None)})  # fmt: skip
    os.chdir(copy)  # main.py copies its own scripts by relative path
    sys.path.insert(0, str(copy))
    import utils.data
    import utils.loss_criterion

    def load(cls, path):  # the corpus from the text files (never the KIT's pickles), then cut (patch 4)
        corpus = utils.data.Corpus(path)
        corpus.train = corpus.train[: args.train_tokens]
        corpus.valid, corpus.test = corpus.valid[:2000], corpus.test[:2000]
        return corpus

    utils.data.CorpusLoader.load = classmethod(load)
    observer = Observer(args.batches, args.warmup, args.device)
    forward = utils.loss_criterion.LossCriterion.forward

    def observed(self, *a, **k):
        loss, raw = forward(self, *a, **k)
        observer.loss(raw)
        return loss, raw

    utils.loss_criterion.LossCriterion.forward = observed
    torch.set_num_threads(args.threads) if args.threads else None
    sys.argv = kit_argv(args.variant, hp, data, work / "save", args.device.startswith("cuda"))
    try:
        runpy.run_path(str(copy / "main.py"), run_name="__main__")
    except Done:
        pass
    return observer.result("kit")


def run_ours(args) -> dict:
    """In this process: this package's train() on the same cut, observed."""
    import torch

    from softmax_bottleneck.training import step
    from softmax_bottleneck.training.trainer import train

    observer = Observer(args.batches, args.warmup, args.device)
    chunk_loss = step.chunk_loss

    def observed(*a, **k):
        loss, raw, hidden = chunk_loss(*a, **k)
        observer.loss(raw)
        return loss, raw, hidden

    step.chunk_loss = observed
    torch.set_num_threads(args.threads) if args.threads else None
    overrides = {**json.loads(args.overrides), "epochs": 1, "train_tokens": args.train_tokens,
                 "valid_tokens": 2000, "test_tokens": 2000}  # fmt: skip
    try:
        train(dataset="ptb", variant=args.variant, schedule="et", out_dir=Path(args.work) / "ours",
              overrides=overrides, data_dir=args.data, device=args.device)  # fmt: skip
    except Done:
        pass
    return observer.result("ours")


def compare(kit: dict, ours: dict) -> dict:
    """s/batch ratio (ours / kit) and the agreement of the chunk losses."""
    a, b = kit["chunk_losses"], ours["chunk_losses"]
    n = min(len(a), len(b))
    rel = [abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a[:n], b[:n], strict=True)]
    differ = [i for i, r in enumerate(rel) if r > 0]
    ratio = ours["s_per_batch"] / kit["s_per_batch"] if kit["s_per_batch"] and ours["s_per_batch"] else None
    return {"ratio_ours_over_kit": ratio, "chunks_compared": n, "same_count": len(a) == len(b),
            "identical": not differ and len(a) == len(b), "first_differing_chunk": differ[0] if differ else None,
            "max_rel_diff": max(rel) if rel else None}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", default=str(REPO / "benchmarks" / "kit"), help="the KIT's files (main.py, utils/)")
    parser.add_argument("--data-root", required=True, help="folder with ptb/{train,valid,test}.txt")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--variants", default="softmax,mos")
    parser.add_argument("--batches", type=int, default=200, help="batches per side (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed batches first (default 20)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (CPU runs)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override (both sides)")
    parser.add_argument("--out", default=None, help="folder for side-<variant>.json")
    parser.add_argument("--side", choices=("kit", "ours"), help=argparse.SUPPRESS)  # one side, in a child process
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--hp", help=argparse.SUPPRESS)
    parser.add_argument("--overrides", help=argparse.SUPPRESS)
    parser.add_argument("--train-tokens", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        result = (run_kit if args.side == "kit" else run_ours)(args)
        Path(args.result).write_text(json.dumps(result))
        return 0

    from softmax_bottleneck import presets

    if not (Path(args.kit) / "main.py").is_file():
        raise SystemExit(f"--kit {args.kit}: no main.py (see the docstring: git archive of the KIT into it)")
    overrides = presets.parse_overrides(args.set)
    out = Path(args.out) if args.out else None
    rows = []
    for variant in args.variants.split(","):
        hp = hyperparameters(variant, overrides)
        tokens = train_tokens(hp, args.batches)
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            for side in ("kit", "ours"):
                work = Path(tmp) / side
                work.mkdir()
                cmd = [sys.executable, __file__, "--side", side, "--work", str(work), "--variant", variant,
                       "--kit", str(Path(args.kit).resolve()), "--data", str(Path(args.data_root) / "ptb"),
                       "--hp", json.dumps(hp), "--overrides", json.dumps(overrides), "--train-tokens", str(tokens),
                       "--batches", str(args.batches), "--warmup", str(args.warmup), "--device", args.device,
                       "--data-root", args.data_root, "--result", str(work / "result.json")]  # fmt: skip
                cmd += ["--threads", str(args.threads)] if args.threads else []
                env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
                    raise SystemExit(f"{side} side of {variant} failed ({proc.returncode}):\n" + "\n".join(tail))
                results[side] = json.loads((work / "result.json").read_text())
        row = {"variant": variant, "device": args.device, "batches": args.batches, "train_tokens": tokens,
               "kit": results["kit"], "ours": results["ours"], **compare(results["kit"], results["ours"])}  # fmt: skip
        rows.append(row)
        if out:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"side-{variant}.json").write_text(json.dumps(row, indent=1) + "\n")
    print("| PTB | KIT s/batch | ours s/batch | ours / KIT | chunk losses | identical | max rel. diff |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in rows:
        ratio = f"{r['ratio_ours_over_kit']:.2f}" if r["ratio_ours_over_kit"] else "—"
        diff = f"{r['max_rel_diff']:.1e}" if r["max_rel_diff"] is not None else "—"
        print(f"| {r['variant']} | {r['kit']['s_per_batch']:.4f} | {r['ours']['s_per_batch']:.4f} | {ratio} | "
              f"{r['chunks_compared']} | {r['identical']} | {diff} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
