"""Tiny CPU runs must keep reproducing the numbers recorded in ``tests/data/trainer_reference.json``.

The fixture was written by the trainer as it was before the training step became sync-free (issue
#10) and before the train-ppl fix (issue #9), so it pins everything those changes must not touch:
per-epoch validation losses, the test loss, the best and switch epochs and the final weights.
Regenerate it only on purpose (e.g. when the initialisation changes): ``python tests/test_trainer_reference.py``.
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
from conftest import TINY, tiny_corpus  # noqa: E402

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
    assert reference_numbers(name, tmp_path) == expected


if __name__ == "__main__":
    import tempfile

    runs = {}
    for run in sorted(RUNS):
        with tempfile.TemporaryDirectory() as tmp:
            runs[run] = reference_numbers(run, Path(tmp))
    readme = (
        "Numbers of tiny CPU training runs (tests/test_trainer_reference.py, torch "
        f"{torch.__version__}, 1 thread), written before the sync-free training step; every later "
        "change of the trainer must reproduce them bit for bit. Issue #15 (replaying the authors' "
        "initial draws) will regenerate this file once, on purpose: python tests/test_trainer_reference.py"
    )
    FIXTURE.write_text(json.dumps({"readme": readme, "runs": runs}, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
