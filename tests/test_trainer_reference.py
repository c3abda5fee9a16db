"""Tiny CPU runs must keep reproducing the numbers recorded in ``tests/data/trainer_reference.json``.

It pins what a change of the trainer's internals must not touch: per-epoch validation losses, the test loss, the
best and switch epochs and the final weights (SHA-256), for a Softmax, an LMS-PLIF and a MoS run.

How the pinned numbers were produced: by this package at commit d5b12f1 (the authors' initial draws,
parameter order and ``padding_idx``; training and evaluation on the loss path), after
``tests/test_golden_trajectory.py`` had passed there (bit-identical to the authors' code for the Softmax family),
with ``python tests/test_trainer_reference.py`` (torch 2.13.0+cpu, one thread). The Softmax and LMS-PLIF numbers
are the same on the full-matrix path (tests/test_step.py checks both paths step by step); MoS's loss path differs
from it by rounding. The previous fixture had been reproduced bit for bit by every change until the authors'
initial draw order, whose new initial weights change every trained number.
Regenerate only on purpose (a deliberate change of the numbers) and say so in the commit.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from conftest import RECORDING_KERNELS, TINY, tiny_corpus  # noqa: E402

from softmax_bottleneck import presets  # noqa: E402
from softmax_bottleneck.training.trainer import Trainer  # noqa: E402

FIXTURE = Path(__file__).parent / "data" / "trainer_reference.json"
RUNS = {
    "softmax-et": ("softmax", "et", {"epochs": 3, "switch_epoch": 2}),
    "lms_plif-et": ("lms_plif", "et", {"epochs": 3, "switch_epoch": 2}),
    "mos-et": ("mos", "et", {"epochs": 3, "switch_epoch": 2, "n_experts": 2, "lr": 5.0}),
}


def weights_sha256(state_dict: dict) -> str:
    """SHA-256 over the raw bytes of every tensor, in key order."""
    digest = hashlib.sha256()
    for key in sorted(state_dict):
        digest.update(key.encode())
        digest.update(state_dict[key].contiguous().numpy().tobytes())
    return digest.hexdigest()


def reference_numbers(name: str, out_dir: Path) -> dict:
    variant, schedule, overrides = RUNS[name]
    torch.set_num_threads(1)
    hp = presets.resolve("ptb", variant, schedule, {**TINY, "seed": 5, **overrides})
    metrics = Trainer(dataset="ptb", variant=variant, hp=hp, corpus=tiny_corpus(), out_dir=out_dir).fit()
    with open(out_dir / "curve.csv", newline="") as handle:
        valid = [float(row["valid_loss"]) for row in csv.DictReader(handle)]
    weights = torch.load(out_dir / "model.pt", weights_only=True)["state_dict"]
    return {
        "valid_losses": valid,
        "test_loss": metrics["test_loss"],
        "best_epoch": metrics["best_epoch"],
        "switch_epoch": metrics["switch_epoch"],
        "weights_sha256": weights_sha256(weights),
    }


@pytest.mark.parametrize("name", sorted(RUNS))
def test_tiny_runs_reproduce_the_recorded_numbers(tmp_path, name):
    expected = json.loads(FIXTURE.read_text())["runs"][name]
    if not RECORDING_KERNELS and name == "lms_plif-et":
        pytest.skip(
            "other CPU kernels (conftest.RECORDING_KERNELS): LMS-PLIF's tiny run at lr 20 is chaotic, its knot lookups "
            "flip with the last bit (measured: 3 % apart after epoch 1 on AVX2, diverged in epoch 1 on an "
            "AVX-512 Xeon listed in tests/data/kernels.json); it is compared bit for bit on the recording kernels only"
        )
    got = reference_numbers(name, tmp_path)
    if RECORDING_KERNELS:
        assert got == expected
        return
    # other CPU kernels: the same run within rounding
    assert (got["best_epoch"], got["switch_epoch"]) == (expected["best_epoch"], expected["switch_epoch"])
    losses = [*got["valid_losses"], got["test_loss"]]
    assert losses == pytest.approx([*expected["valid_losses"], expected["test_loss"]], rel=1e-6)


if __name__ == "__main__":
    import tempfile

    runs = {}
    for run in sorted(RUNS):
        with tempfile.TemporaryDirectory() as tmp:
            runs[run] = reference_numbers(run, Path(tmp))
    readme = (
        "Numbers of tiny CPU training runs (tests/test_trainer_reference.py, torch "
        f"{torch.__version__}, 1 thread), written by python tests/test_trainer_reference.py after the golden "
        "trajectory test passed (the authors' initial draws, the loss path); every later "
        "change of the trainer must reproduce them bit for bit. Provenance: the test's docstring."
    )
    FIXTURE.write_text(json.dumps({"readme": readme, "runs": runs}, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
