"""What the GPU session's scripts compute without a GPU: the profile summary, the side-by-side comparison, the wheels,
the session's time plan and its archive.

The scripts themselves (``benchmarks/gpu_session.py --smoke`` runs each at toy size) are checked by hand; here
their arithmetic on made-up inputs, so that a number they print on a card means what their docstrings say.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from softmax_bottleneck import presets

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_profile_summary_counts_busy_time_once_and_per_step():
    profile = load("profile_step")
    assert profile.union_length([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    kernel = lambda name, ts, dur: {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}  # noqa: E731
    launch = lambda ts: {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1}  # noqa: E731
    events = [kernel("gemm", 0, 400), kernel("lstm", 300, 200), kernel("gemm", 1000, 400), launch(0), launch(1),
              launch(2), {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 30},
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 1500, "dur": 100},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 1900, "dur": 100}]  # fmt: skip
    summary = profile.summarise_trace({"traceEvents": events}, steps=2, wall_seconds=0.002)
    # kernels cover [0, 500) and [1000, 1400): 900 µs of the 2,000 µs span
    assert summary["gpu_busy"] == pytest.approx(0.45) and summary["gpu_idle"] == pytest.approx(0.55)
    assert summary["gpu_busy_ms_per_step"] == pytest.approx(0.45)
    assert summary["kernels_per_step"] == 1.5 and summary["launches_per_step"] == 1.5
    assert summary["memcpy_memset_per_step"] == 0.5 and summary["synchronizations_per_step"] == 0.5
    assert summary["wall_ms_per_step"] == pytest.approx(1.0)
    top = summary["top_kernels"]
    assert [k["name"] for k in top] == ["gemm", "lstm"] and top[0]["share"] == pytest.approx(0.8)
    assert top[0]["per_step"] == 1.0 and top[0]["ms_per_step"] == pytest.approx(0.4)
    cpu = profile.summarise_trace({"traceEvents": events[3:7]}, steps=1, wall_seconds=0.001)  # no kernel: a CPU
    assert cpu["gpu_busy"] is None and cpu["top_host_ops"][0]["name"] == "aten::mm"


def test_side_by_side_flags_cover_the_presets_and_the_comparison_finds_the_first_difference(tmp_path):
    side = load("authors_side_by_side")
    for variant in ("softmax", "mos"):
        hp = presets.resolve("ptb", variant, "et")
        argv = side.kit_argv(variant, hp, tmp_path, tmp_path / "save", cuda=True)
        value = lambda flag, argv=argv: argv[argv.index(flag) + 1] if flag in argv else None  # noqa: E731
        assert value("--nlayer") == "3" and value("--seed") == str(hp["seed"]) and value("--lr") == str(hp["lr"])
        assert value("--epochs") == "1" and value("--top_model") == {"softmax": "smax", "mos": "mos"}[variant]
        assert argv[-2:] == ["--cuda", "--single_gpu"] and "--no_analysis" in argv
        assert value("--mos_nexpert") == (str(hp["n_experts"]) if variant == "mos" else None)
        assert side.train_tokens(hp, 200) == 202 * (hp["bptt"] + hp["max_seq_len_delta"]) * hp["batch_size"]
    kit = {"chunk_losses": [4.0, 3.0, 2.0], "s_per_batch": 0.04}
    same = side.compare(kit, {"chunk_losses": [4.0, 3.0, 2.0], "s_per_batch": 0.02})
    assert same["identical"] and same["ratio_ours_over_kit"] == 0.5 and same["max_rel_diff"] == 0
    off = side.compare(kit, {"chunk_losses": [4.0, 3.0, 2.5], "s_per_batch": 0.02})
    assert not off["identical"] and off["first_differing_chunk"] == 2 and off["max_rel_diff"] == 0.25


def test_a_kit_whose_patched_text_moved_is_refused(tmp_path):
    side = load("authors_side_by_side")
    kit = tmp_path / "kit"
    for rel, old, _new in side.PATCHES:
        (kit / rel).parent.mkdir(parents=True, exist_ok=True)
        (kit / rel).write_text(f"# before\n                {old}")
    work = tmp_path / "work"
    work.mkdir()
    copy = side.prepare_kit(kit, work)
    assert "w = raw_w.clone()" in (copy / side.PATCHES[0][0]).read_text()
    assert all((copy / rel).is_file() for rel in side.STUBS) and not (kit / "utils/models/svd_embed.py").exists()
    (kit / side.PATCHES[1][0]).write_text("# another version\n")
    with pytest.raises(SystemExit, match="utils/main.py: the text to patch"):
        side.prepare_kit(kit, tmp_path / "again")


def test_device_wheels_are_what_the_machine_lacks(tmp_path):
    wheels = load("device_wheels")
    there = tmp_path / "there.txt"
    there.write_text("absl-py==2.1.0\nPyYAML==6.0.2\ntorch==2.9.0\njinja2==3.1.4\n")
    assert wheels.packages_there(there) == {"absl-py", "pyyaml", "torch", "jinja2"}
    there.write_text("absl-py, PyYAML, torch, jinja2.")
    assert wheels.packages_there(there) == {"absl-py", "pyyaml", "torch", "jinja2"}
    wanted = wheels.missing(there)
    assert "snakemake" in wanted and "jsonschema" in wanted and "pyyaml" not in wanted and "torch" not in wanted
    assert not set(wanted) & wheels.SKIP
    default = wheels.missing()
    assert "torch" not in default and not any(name.startswith("nvidia-") for name in default) and "pyyaml" in default
    assert not set(wanted) & wheels.SKIP


def test_the_measure_part_fits_seven_minutes_of_a_lent_card_in_order_of_value(tmp_path):
    session = load("gpu_session")
    args = session.argparse.Namespace(out=str(tmp_path), data_root=str(tmp_path), device="cuda", smoke=False,
                                      workdir=str(tmp_path / "wf"), kit=str(tmp_path / "kit"),
                                      authors_variants="softmax,mos")  # fmt: skip
    steps = session.plan(args)
    measure = [(name, limit) for name, part, limit, _ in steps if part == "measure"]
    env = next(limit for name, _, limit, _ in steps if name == "env")
    assert [name for name, _ in measure] == ["packing", "identity", "mps_probe", "profile", "authors", "cost"]
    assert sum(limit for _, limit in measure) <= 7 * 60 - 10 < sum(limit for _, limit in measure) + env
    fused = [(name, limit) for name, part, limit, _ in steps if part == "fused"]
    assert [name for name, _ in fused] == ["fused_speed", "fused_speed_wt2", "fused_invariance", "fused_graphs",
                                           "fused_speed_mos"]  # fmt: skip
    assert sum(limit for _, limit in fused) <= 7 * 60 - env  # the fused part alone also fits one call
    assert session.DEFAULT_PARTS.split(",")[0] == "fused"  # a lent card measures fused training first
    proxies = [(name, limit) for name, part, limit, _ in steps if part == "proxies"]
    assert [name for name, _ in proxies] == ["proxy_bench"] and proxies[0][1] <= 7 * 60 - env
    parts = session.DEFAULT_PARTS.split(",")
    assert parts.index("proxies") < parts.index("measure")  # the cost step prices the proxies' bench files
    assert set(parts) <= set(session.PARTS) and all(any(part == p for _, p, _, _ in steps) for part in session.PARTS)
    proxy_cmd = next(cmd for name, _, _, cmd in steps if name == "proxy_bench")
    cost_cmd = next(cmd for name, _, _, cmd in steps if name == "cost")
    assert proxy_cmd[proxy_cmd.index("--bench-dir") + 1] + "/*.json" in cost_cmd[-1]  # where the cost step reads
    for name in ("fused_speed", "fused_speed_wt2", "fused_speed_mos"):  # the study's price with fusion: both corpora
        cmd = next(cmd for step, _, _, cmd in steps if step == name)
        assert cmd[cmd.index("--bench-dir") + 1] + "/*.json" in cost_cmd[-1], name
    tables = {cmd[cmd.index("--out") + 1] for step, _, _, cmd in steps if step.startswith("fused_speed")}
    assert len(tables) == 3  # each its own folder: none overwrites another's fused-speed.md
    kill = next(cmd for name, _, _, cmd in steps if name == "smoke_gpu1")
    assert kill[kill.index("--kill-after") + 1] == "0"  # a card's short trainings end seconds after their first log


def test_the_session_archive_holds_each_finished_step_and_is_replaced_whole(tmp_path):
    session = load("gpu_session")
    out, target = tmp_path / "gs", tmp_path / "OUT" / "session.tar.gz"
    target.parent.mkdir()
    (out / "packing").mkdir(parents=True)
    (out / "packing" / "packing.md").write_text("| model |\n")
    session.archive(out, target)
    (out / "identity.log").write_text("all identical: True\n")
    session.archive(out, target)
    with session.tarfile.open(target) as tar:
        names = sorted(tar.getnames())
        text = tar.extractfile("gs/identity.log").read().decode()
    assert names == ["gs", "gs/identity.log", "gs/packing", "gs/packing/packing.md"] and "True" in text
    assert [p.name for p in target.parent.iterdir()] == ["session.tar.gz"]  # no partial archive left beside it


def test_the_operations_probe_flags_an_operation_whose_bits_depend_on_k_and_probes_what_autograd_runs():
    probe = load("fused_ops_invariance")
    # the control: run by run, a layer has one run's shapes whatever K, so its bits are its own at every K and slot
    control = probe.compare(lambda k, slot: probe.layer_result(k, slot, 3, 4, 5, 6, "cpu", batched=False), [2, 3])
    assert control["differ_at_K"] == {"slot 0": [], "slot K-1": []} and control["max_abs_difference"] == 0
    assert control["max_abs_value"] > 0
    # an operation that mixes the runs is flagged at every K and in both slots
    mixing = ({"x": (2, 3)}, lambda o: o["x"] + o["x"].sum(0, keepdim=True))
    found = probe.compare(lambda k, slot: probe.operation_result(mixing, k, slot, "cpu"), [2, 3])
    assert found["differ_at_K"] == {"slot 0": [2, 3], "slot K-1": [2, 3]} and found["max_abs_difference"] > 0
    # the slot's own operands, whatever the slot: slot K-1 of 3 sees what slot 0 of 1 sees
    own = ({"x": (2, 3)}, lambda o: o["x"] * 2)
    assert torch.equal(probe.operation_result(own, 3, 2, "cpu"), probe.operation_result(own, 1, 0, "cpu"))
    # the gradient operations are those of autograd's backward of the recurrence's baddbmm, bit for bit
    ops = probe.operations(4, 5)
    shapes = {name: shape for op in ops.values() for name, shape in op[0].items() if name in ("b", "h", "w", "g")}
    drawn = {name: torch.stack([t, t.flip(0)]) for name, t in probe._draw(shapes, 0, "cpu").items()}
    leaves = {name: drawn[name].clone().requires_grad_() for name in ("b", "h", "w")}
    torch.baddbmm(leaves["b"], leaves["h"], leaves["w"].transpose(1, 2)).backward(drawn["g"])
    assert torch.equal(leaves["h"].grad, ops["gradient to h (bmm)"][1](drawn))
    assert torch.equal(leaves["w"].grad.transpose(1, 2), ops["gradient to W_hh (bmm)"][1](drawn))
    assert torch.equal(leaves["b"].grad, ops["gradient to b_hh (sum over columns)"][1](drawn))


def test_a_run_whose_numbers_depend_on_its_group_is_diagnosed_operation_by_operation(tmp_path, monkeypatch):
    invariance = load("fused_invariance")
    toy = ["--set", "nemb=8", "--set", "nhid=8", "--set", "nhidlast=8", "--set", "bptt=4"]
    argv = ["--device", "cpu", "--groups", "2", "--updates", "1", "--valid-chunks", "1", "--diagnose", *toy]
    assert invariance.main([*argv, "--out", str(tmp_path / "equal")]) == 0  # run by run on a CPU: K-invariant
    assert json.loads((tmp_path / "equal" / "fused-invariance.json").read_text())[0]["equal"] is True
    assert not (tmp_path / "equal" / "fused-ops-invariance.md").exists()  # nothing to diagnose
    trained = invariance.trained

    def in_a_group_other_bits(hp, corpus, device, k, slot, updates, batched):  # a planted dependence on K
        weights = trained(hp, corpus, device, k, slot, updates, batched)
        return {name: value + (k > 1) * 1e-3 for name, value in weights.items()}

    monkeypatch.setattr(invariance, "trained", in_a_group_other_bits)
    assert invariance.main([*argv, "--out", str(tmp_path / "differ")]) == 0
    assert json.loads((tmp_path / "differ" / "fused-invariance.json").read_text())[0]["equal"] is False
    table = (tmp_path / "differ" / "fused-ops-invariance.md").read_text().splitlines()
    rows = json.loads((tmp_path / "differ" / "fused-ops-invariance.json").read_text())
    assert {row["operation"] for row in rows} >= {"h W_hhᵀ + b_hh (baddbmm)", "gradient to h (bmm)"}
    assert any(row["operation"].endswith("the control") for row in rows) and len(table) == len(rows) + 2
    assert {row["hidden"] for row in rows} == {8} and {1, 10} <= {row["columns"] for row in rows}  # --set reached it
