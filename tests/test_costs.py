"""``costs``: per-rule wall time and memory from Snakemake benchmark files, and the paper-scale projection."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from softmax_bottleneck import presets
from softmax_bottleneck.report import cards, costs
from softmax_bottleneck.report import projection as training_projection
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study import plan
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
EXTENDED = HEADER + "\tjobid\trule_name\twildcards\tparams\tthreads\tcpu_usage\tresources\tinput_size_mb"


def _tsv(path, rows, header=HEADER):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n")


@pytest.fixture
def bench(tmp_path):
    root = tmp_path / "benchmarks"
    # train: two jobs, one measured twice (repeat(..., 2))
    _tsv(root / "train/ptb/softmax/et/seed141.tsv", ["100.0\t0:01:40\t500.5\t900\t480\t490\t1\t2\t98\t95.0"])
    _tsv(
        root / "train/ptb/ss/et/seed141.tsv",
        [
            "200.0\t0:03:20\t700.0\t900\t480\t490\t1\t2\t98\t190.0",
            "300.0\t0:05:00\t650.0\t900\t480\t490\t1\t2\t98\t290.0",
        ],
    )
    # analyze: a job too short to be sampled (NA memory)
    _tsv(root / "analyze/ptb_softmax.tsv", ["0.4\t0:00:00\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA"])
    # extended format names its rule itself, wherever the file lies
    _tsv(
        root / "misc/figure7.tsv",
        ["3.0\t0:00:03\t120.0\t300\t100\t110\t0\t1\t50\t1.5\t7\tfigure\tname=figure7\t-\t1\t50\t{}\t0.1"],
        header=EXTENDED,
    )
    # JSON lines (snakemake >= 8.11 writes these for a .jsonl benchmark path)
    (root / "table").mkdir()
    (root / "table/table2.jsonl").write_text(json.dumps({"s": 2.0, "h:m:s": "0:00:02", "max_rss": 90.0}) + "\n")
    # not a benchmark file: skipped with a warning
    (root / "notes.txt").write_text("hello\n")
    return root


def test_per_rule_summary(bench):
    records = costs.read_benchmarks(bench)
    table = costs.summarize_rules(records).set_index("rule")
    assert list(costs.summarize_rules(records).columns) == costs.MEASURED_COLUMNS
    assert set(table.index) == {"train", "analyze", "figure", "table"}
    train = table.loc["train"]
    assert train["jobs"] == 2 and train["records"] == 3
    # repeats are averaged per job: 100 + mean(200, 300)
    assert train["total_wall_s"] == pytest.approx(350.0)
    assert train["mean_wall_s"] == pytest.approx(175.0)
    assert train["max_wall_s"] == pytest.approx(250.0)
    assert train["max_rss_mb"] == pytest.approx(700.0)
    assert train["total_cpu_s"] == pytest.approx(95.0 + 240.0)
    assert table.loc["analyze", "total_wall_s"] == pytest.approx(0.4)
    assert pd.isna(table.loc["analyze", "max_rss_mb"])
    assert table.loc["figure", "max_rss_mb"] == pytest.approx(120.0)
    assert table.loc["table", "total_wall_s"] == pytest.approx(2.0)
    # sorted by cost, most expensive first
    assert costs.summarize_rules(records)["rule"].iloc[0] == "train"


def test_empty_and_missing(tmp_path):
    assert costs.summarize_rules(costs.read_benchmarks(tmp_path)).empty
    with pytest.raises(FileNotFoundError):
        costs.read_benchmarks(tmp_path / "absent")


def test_paper_rates_and_epochs():
    assert plan.seconds_per_epoch("ptb", "softmax") == (55.0, "softmax")
    assert plan.seconds_per_epoch("wt2", "mos") == (600.0, "mos")
    assert plan.seconds_per_epoch("ptb", "lms_plif_frozen") == (59.0, "lms_plif")
    assert presets.resolve("wt2", "mos")["epochs"] == 500
    assert presets.resolve("ptb", "mos")["epochs"] == 1000


def test_projection_arithmetic():
    runs = [
        {"experiment": "x", "dataset": "ptb", "variant": "softmax", "schedule": "et", "runs": 11, "epochs": 1000},
        {"experiment": "x", "dataset": "wt2", "variant": "mos", "schedule": "et", "runs": 2, "epochs": 500},
    ]
    proj = training_projection.project_training(runs)
    assert list(proj.columns) == training_projection.PROJECTION_COLUMNS
    assert proj["gpu_hours"].iloc[0] == pytest.approx(11 * 1000 * 55 / 3600)
    assert proj["gpu_hours"].iloc[1] == pytest.approx(2 * 500 * 600 / 3600)
    assert proj["experiment"].iloc[-1] == "total"
    assert proj["gpu_hours"].iloc[-1] == pytest.approx(11 * 1000 * 55 / 3600 + 2 * 500 * 600 / 3600)


def test_the_paper_configuration_is_projected_as_the_workflow_plans_it():
    """config/config.yaml: 283 distinct training runs; E1 alone (Table 2: 110 runs) ~2,900 V100-hours."""
    runs, source, notes = training_projection.load_runs(REPO / "config" / "config.yaml")
    assert source.startswith("runs of ") and notes == []  # every run of the paper's size
    proj = training_projection.project_training(runs)
    body = proj.iloc[:-1]
    assert int(proj["runs"].iloc[-1]) == 283
    main = body[body["experiment"] == "main"]
    assert int(main["runs"].sum()) == 110
    assert float(main["gpu_hours"].sum()) == pytest.approx(2900, rel=0.05)
    assert body["s_per_epoch"].notna().all()
    study = Study(study_config.check(study_config.read(REPO / "config" / "config.yaml")))
    assert float(proj["gpu_hours"].iloc[-1]) == pytest.approx(sum(plan.gpu_hours(r) for r in study.jobs.values()))


def test_a_bad_config_fails_in_one_line_naming_it(tmp_path):
    config = (REPO / "config" / "small.yaml").read_text().replace("variants: [lms_plif_frozen]", "variants: [nope]")
    path = tmp_path / "config" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(config)
    out = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(tmp_path),
                          "--config", str(path)], capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 1
    assert "experiments/frozen/variants: unknown variant 'nope'" in out.stderr
    assert "Traceback" not in out.stderr


def test_runs_from_plan(tmp_path):
    plan = pd.DataFrame(
        {
            "run": ["a", "b", "c"],
            "experiments": ["main ntet analysis", "main", "fair"],
            "dataset": ["ptb", "ptb", "ptb"],
            "variant": ["softmax", "softmax", "mos_fair"],
            "schedule": ["et", "et", "et"],
            "epochs": [1000, 1000, 1000],
        }
    )
    runs = training_projection.runs_from_plan(plan)
    assert {(r["experiment"], r["variant"]): r["runs"] for r in runs} == {
        ("main", "softmax"): 2,
        ("fair", "mos_fair"): 1,
    }
    plan.to_csv(tmp_path / "plan.csv", index=False)
    loaded, source, notes = training_projection.load_runs(None, tmp_path / "plan.csv")
    assert loaded == runs and "plan.csv" in source and notes == []


def test_a_configuration_of_runs_not_of_the_papers_size_is_priced_with_the_plans_note(bench):
    """``costs --config config/small.yaml`` priced 51 tiny runs at paper-size epochs without saying so (``plan``
    said it); now the same note, under the projection."""
    cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(bench), "--config",
           str(REPO / "config" / "small.yaml")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    study = Study(study_config.check(study_config.read(REPO / "config" / "small.yaml")))
    (note,) = plan.size_note(study)
    assert note.startswith(f"Note: {len(study.jobs)} of {len(study.jobs)} runs are not of the paper's size")
    assert note in out and out.index(note) > out.index("Total: ")


def test_cli_markdown_and_csv(bench, tmp_path):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(bench)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "## Measured cost per rule" in out and "| train" in out
    assert "## Projected training cost at paper scale" in out and "V100 GPU-hours" in out

    md = tmp_path / "reports" / "costs.md"
    subprocess.run([*cmd, "--out", str(md)], check=True)
    assert md.read_text().startswith("## Measured cost per rule")

    csv = tmp_path / "reports" / "costs.csv"
    subprocess.run([*cmd, "--out", str(csv)], check=True)
    measured = pd.read_csv(csv)
    assert list(measured.columns) == costs.MEASURED_COLUMNS
    projection = pd.read_csv(tmp_path / "reports" / "costs.projection.csv")
    assert projection["experiment"].iloc[-1] == "total"

    config = tmp_path / "config.yaml"
    config.write_text((REPO / "config" / "small.yaml").read_text())
    out = subprocess.run([*cmd, "--config", str(config)], capture_output=True, text=True, check=True).stdout
    assert f"runs of {config}" in out
    assert "| total" in out
    # a configuration is complete or refused, as the workflow refuses it
    config.write_text("experiments:\n  main: {datasets: [ptb], variants: [softmax], schedules: [et], seeds: 3}\n")
    out = subprocess.run([*cmd, "--config", str(config)], capture_output=True, text=True)
    assert out.returncode == 1 and "missing key" in out.stderr and "Traceback" not in out.stderr

    missing = subprocess.run([*cmd[:-1], str(tmp_path / "absent")], capture_output=True, text=True)
    assert missing.returncode == 1


# --------------------------------------------------------------------------------------------- variants without a time
@pytest.fixture
def plugins(monkeypatch):
    """Three layers registered only inside the test: softmax family, mixture family, and one with a cost proxy."""
    from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    for name, family, proxy in (
        ("toy_soft", "softmax", None),
        ("toy_mix", "mixture", None),
        ("toy_gss", "softmax", "gss"),
    ):
        cls = type(name, (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
        register_output_layer(name, display=name, family=family, cost_proxy=proxy)(cls)


def test_paper_times_are_table2s():
    # paper Table 2, "time/epoch" (V100): PTB ~55, 57, 58, 59, 100 s; WT2 ~72, 83, 87, 93, 600 s
    expected = dict(zip(["softmax", "ss", "gss", "lms_plif", "mos"], [55, 57, 58, 59, 100], strict=True))
    assert {v: plan.paper_seconds_per_epoch()["ptb", v] for v in expected} == expected
    expected = dict(zip(["softmax", "ss", "gss", "lms_plif", "mos"], [72, 83, 87, 93, 600], strict=True))
    assert {v: plan.paper_seconds_per_epoch()["wt2", v] for v in expected} == expected


def test_a_variant_without_a_paper_time_uses_its_family_and_says_so(plugins):
    assert plan.seconds_per_epoch("ptb", "toy_soft") == (55.0, "softmax (family default)")
    assert plan.seconds_per_epoch("wt2", "toy_mix") == (600.0, "mos (family default)")
    assert plan.seconds_per_epoch("wt2", "toy_gss") == (87.0, "gss")  # its registered cost proxy
    assert plan.seconds_per_epoch("ptb", "moc") == (100.0, "mos")
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        plan.seconds_per_epoch("ptb", "nope")
    runs = [{"experiment": "mine", "dataset": "wt2", "variant": "toy_mix", "schedule": "et", "runs": 2, "epochs": 1000}]
    proj = training_projection.project_training(runs)
    assert proj["time_of"].iloc[0] == "mos (family default) *"  # a plug-in priced at another's time: marked
    assert proj["gpu_hours"].iloc[0] == pytest.approx(2 * 1000 * 600 / 3600)
    assert proj["gpu_hours"].notna().all()
    text = costs.render_markdown(costs.summarize_rules(pd.DataFrame()), proj, source="b", runs_source="r")
    assert "mos (family default) *" in text
    notes = [line for line in text.splitlines() if line.startswith("* ")]  # ... and the footnote says how to measure
    assert notes == [line for line in plan.proxy_notes({"toy_mix": ("mos (family default)", ["wt2"])})]
    assert "check-layer toy_mix" in notes[0] and "bench --dataset wt2 --variant toy_mix" in notes[0]
    built_in = training_projection.project_training([{**runs[0], "variant": "moc"}])  # the paper's own layer: no mark
    assert built_in["time_of"].iloc[0] == "mos"


def test_cli_names_a_bad_plan_in_one_line(bench, tmp_path):
    plan = tmp_path / "plan.csv"
    pd.DataFrame(
        [{"experiments": "main", "dataset": "ptb", "variant": "not_registered", "schedule": "et", "epochs": 3}]
    ).to_csv(plan, index=False)
    cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(bench)]
    result = subprocess.run([*cmd, "--plan", str(plan)], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "not_registered" in result.stderr and str(plan) in result.stderr
    result = subprocess.run([*cmd, "--config", str(tmp_path / "absent.yaml")], capture_output=True, text=True)
    assert result.returncode == 1 and "absent.yaml: not found" in result.stderr and "Traceback" not in result.stderr


PLAN_ROW = {"run": "r", "experiments": "main", "dataset": "ptb", "variant": "softmax", "schedule": "et", "epochs": "3"}
BAD_PLANS = {
    "no epochs column": ({"epochs": None}, "not a training plan of `snakemake plan` (no column epochs)"),
    "epochs not a number": ({"epochs": "many"}, "column epochs, row 2: 'many' is not a number"),
    "epochs a fraction": ({"epochs": "2.5"}, "column epochs, row 2: '2.5' is not a whole number"),
    "epochs zero": ({"epochs": "0"}, "column epochs, row 2: '0' is impossible (epochs count from 1, at most 100,000)"),
    "variant empty": ({"variant": ""}, "column variant, row 2 is empty"),
    "schedule unknown": ({"schedule": "NT"}, "column schedule, row 2: 'NT' is not one of et, nt"),
    "dataset unknown": ({"dataset": "penn"}, "column dataset, row 2: 'penn' is not one of ptb, wt2"),
    "run twice": ({}, "row 2 repeats the run of row 1 (r)"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_a_plan_is_read_strictly_and_refused_in_one_line_naming_file_column_and_row(tmp_path, case):
    """``costs --plan``: the plan through the bounded reader; the second row is the bad one (a column missing in
    both rows), and the command says so in its last line."""
    changes, message = BAD_PLANS[case]
    bad = {**PLAN_ROW, **changes}
    plan_path = tmp_path / "plan.csv"
    pd.DataFrame([PLAN_ROW, bad]).dropna(axis=1, how="any").to_csv(plan_path, index=False)
    with pytest.raises(ValueError) as err:  # readback.ReadbackError
        training_projection.load_runs(None, plan_path)
    assert str(err.value) == f"{plan_path}: {message}"
    if case == "epochs not a number":  # the command's line (one subprocess: each imports the package)
        cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(tmp_path), "--plan",
               str(plan_path)]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1].endswith(f"costs: {plan_path}: {message}")


def test_a_plan_of_only_its_header_is_refused_in_one_line(bench, tmp_path):
    """Before: a traceback (max() of no epochs), exit status 1."""
    plan_path = tmp_path / "plan.csv"
    plan_path.write_text(",".join(PLAN_ROW) + "\n")
    cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(bench), "--plan", str(plan_path)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(f"costs: {plan_path}: no training job (only the header): nothing to price")
    )


def test_a_benchmark_record_without_its_seconds_is_skipped_not_counted(bench, caplog):
    """Before, a record whose s was text counted as a job of no time (the rule's jobs and mean went wrong)."""
    before = costs.summarize_rules(costs.read_benchmarks(bench))
    (bench / "train" / "words.tsv").write_text(HEADER + "\n" + "\t".join(["abc"] + ["1"] * (HEADER.count("\t"))) + "\n")
    with caplog.at_level("WARNING"):
        after = costs.summarize_rules(costs.read_benchmarks(bench))
    pd.testing.assert_frame_equal(after, before)
    assert "words.tsv: row 1, column s: 'abc' is not a number of seconds" in caplog.text
    (bench / "train" / "words.tsv").write_text(HEADER + "\n" + "\t".join(["-5"] + ["1"] * (HEADER.count("\t"))) + "\n")
    with caplog.at_level("WARNING"):
        assert costs.summarize_rules(costs.read_benchmarks(bench)).equals(before)
    assert "words.tsv: row 1, column s: -5 is not a number of seconds" in caplog.text  # not np.int64(-5)


def test_a_plan_that_is_a_link_or_a_fifo_is_refused_unread(tmp_path):
    good = tmp_path / "good.csv"
    pd.DataFrame([PLAN_ROW]).to_csv(good, index=False)
    assert training_projection.load_runs(None, good)[0] == [
        {"experiment": "main", "dataset": "ptb", "variant": "softmax", "schedule": "et", "epochs": 3, "runs": 1}
    ]
    (tmp_path / "link.csv").symlink_to(good)
    os.mkfifo(tmp_path / "fifo.csv")  # a reader that opened it plainly would wait here for ever
    for name, kind in (("link.csv", "a symbolic link"), ("fifo.csv", "a FIFO")):
        with pytest.raises(ValueError, match=kind):
            training_projection.load_runs(None, tmp_path / name)


def test_a_benchmark_file_that_cannot_be_read_is_skipped_with_a_warning_naming_it(bench, caplog):
    """The benchmark files go through the bounded reader too: a binary file, a JSON line that is not an object, a
    link and a FIFO are each skipped (one warning naming it), and the other files' table is unchanged."""
    before = costs.summarize_rules(costs.read_benchmarks(bench))
    (bench / "train" / "binary.tsv").write_bytes(HEADER.encode() + b"\n1.0\0\n")
    (bench / "table" / "list.jsonl").write_text('{"s": 1.0}\n[1, 2]\n')
    (bench / "train" / "link.tsv").symlink_to(bench / "train/ptb/softmax/et/seed141.tsv")
    os.mkfifo(bench / "train" / "fifo.tsv")
    with caplog.at_level("WARNING"):
        after = costs.summarize_rules(costs.read_benchmarks(bench))
    pd.testing.assert_frame_equal(after, before)
    warned = {record.getMessage().split(": ")[0] for record in caplog.records}
    skipped = ("train/binary.tsv", "table/list.jsonl", "train/link.tsv", "train/fifo.tsv", "notes.txt")
    assert warned == {f"skipping {bench}/{name}" for name in skipped}
    reasons = " ".join(record.getMessage() for record in caplog.records)
    assert "a NUL byte on line 2" in reasons and "line 2 is not a JSON object" in reasons


# --------------------------------------------------------------------------------------------- --bench: your device
def _bench_json(path, dataset="ptb", variant="softmax", phase="sgd", seconds=100.0, **extra):
    """A file as ``bench`` prints it (the keys the projection reads; the test below checks a real one)."""
    result = {"dataset": dataset, "variant": variant, "phase": phase, "device": "cuda:0", "device_name": "GPU X",
              "projected_seconds_per_epoch": seconds, "runs": 1, "overrides": {}, **extra}  # fmt: skip
    path.write_text(json.dumps(result, indent=2))
    return path


def test_a_real_bench_output_projects_the_runs_on_its_device(tmp_path):
    """``bench`` at the paper's hyper-parameters, then ``costs --bench``: runs × epochs × its seconds per epoch."""
    out = tmp_path / "ptb-softmax.json"
    cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", "--dataset", "ptb", "--variant", "softmax",
           "--batches", "1", "--warmup", "1", "--valid-chunks", "1", "--threads", "1", "--device", "cpu"]  # fmt: skip
    with out.open("w") as fh:
        subprocess.run(cmd, stdout=fh, check=True)
    measured = json.loads(out.read_text())["projected_seconds_per_epoch"]
    plan = tmp_path / "plan.csv"
    rows = [dict(run=f"{v}-{i}", experiments="main", dataset="ptb", variant=v, schedule="et", epochs=1000)
            for v in ("softmax", "ss") for i in range(3)]  # fmt: skip
    pd.DataFrame(rows).to_csv(plan, index=False)
    csv = tmp_path / "costs.csv"
    costs_cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(tmp_path),
                 "--plan", str(plan), "--bench", str(out)]  # fmt: skip
    subprocess.run([*costs_cmd, "--out", str(csv)], check=True, capture_output=True)
    projection = pd.read_csv(tmp_path / "costs.projection.csv").set_index("variant")
    assert projection.loc["softmax", "s_per_epoch"] == pytest.approx(measured)
    assert projection.loc["softmax", "gpu_hours"] == pytest.approx(3 * 1000 * measured / 3600)
    # SS was not measured: the family default (Softmax), said so, with the phase measured
    assert projection.loc["ss", "time_of"] == "softmax (family default) (sgd steps only)"
    text = subprocess.run(costs_cmd, capture_output=True, text=True, check=True).stdout
    projected = text.split("## Projected")[1].split("## The study on the cards measured so far")[0]
    assert "device-hours on cpu" in projected and "V100" not in projected


def test_both_phases_weight_an_et_run_by_its_switch_epoch_and_nt_takes_asgd(tmp_path):
    from softmax_bottleneck import presets
    from softmax_bottleneck.report.bench_speeds import load_speeds

    files = [_bench_json(tmp_path / "a.json", phase="sgd", seconds=10.0),
             _bench_json(tmp_path / "b.json", phase="asgd", seconds=30.0)]  # fmt: skip
    speeds = load_speeds(files)
    switch = presets.resolve("ptb", "softmax", "et")["switch_epoch"]
    et, _ = speeds.seconds_per_epoch("ptb", "softmax", "et", 1000)
    assert et == pytest.approx((switch * 10.0 + (1000 - switch) * 30.0) / 1000)
    assert speeds.seconds_per_epoch("ptb", "softmax", "nt", 1000) == (30.0, "(NT: ASGD time)")
    assert speeds.seconds_per_epoch("ptb", "softmax", "et", 100)[0] == pytest.approx(10.0)  # ends before the switch


def test_runs_sharing_a_device_cost_their_share(tmp_path):
    from softmax_bottleneck.report.bench_speeds import load_speeds

    runs = [{"experiment": "x", "dataset": "ptb", "variant": "softmax", "schedule": "et", "runs": 8, "epochs": 10}]
    alone = training_projection.project_training(runs, load_speeds([_bench_json(tmp_path / "one.json", seconds=90.0)]))
    packed = training_projection.project_training(
        runs, load_speeds([_bench_json(tmp_path / "four.json", seconds=120.0, runs=4)])
    )
    assert alone["gpu_hours"].iloc[0] == pytest.approx(8 * 10 * 90.0 / 3600)
    assert packed["gpu_hours"].iloc[0] == pytest.approx(8 * 10 * 120.0 / 3600 / 4)


def test_each_model_takes_its_cheapest_packing_and_says_which(tmp_path):
    """Files of 1, 4 (alone and under MPS) runs sharing the device: a run costs its seconds / K device-seconds; the
    projection takes the cheapest per model, names it in ``time_of``, and mixes packings across models."""
    from softmax_bottleneck.report.bench_speeds import BenchFileError, load_speeds

    files = [_bench_json(tmp_path / "one.json", seconds=90.0),
             _bench_json(tmp_path / "four.json", seconds=300.0, runs=4),  # 75 device-seconds
             _bench_json(tmp_path / "four-mps.json", seconds=150.0, runs=4, mps=True),  # 37.5: the cheapest
             _bench_json(tmp_path / "mos.json", variant="mos", seconds=200.0)]  # fmt: skip
    speeds = load_speeds(files)
    runs = [{"experiment": "x", "dataset": "ptb", "variant": v, "schedule": "et", "runs": 8, "epochs": 10}
            for v in ("softmax", "mos")]  # fmt: skip
    proj = training_projection.project_training(runs, speeds).set_index("variant")
    assert proj.loc["softmax", "s_per_epoch"] == 150.0
    assert proj.loc["softmax", "time_of"] == "(sgd steps only) 4 per device under MPS"
    assert proj.loc["softmax", "gpu_hours"] == pytest.approx(8 * 10 * 150.0 / 4 / 3600)
    assert proj.loc["mos", "gpu_hours"] == pytest.approx(8 * 10 * 200.0 / 3600)
    assert proj.loc["mos", "time_of"] == "(sgd steps only)"
    assert "runs packed or fused 4 per device" in costs._total_line(1.0, speeds)
    with pytest.raises(BenchFileError, match="a second measurement of ptb/softmax \\(sgd, 4 runs per device\\)"):
        load_speeds([files[1], _bench_json(tmp_path / "again.json", seconds=310.0, runs=4)])


BAD_BENCH = {
    "overrides": ({"overrides": {"lr": 1.0}}, "measured with --set lr=1.0, not at the paper's hyper-parameters"),
    "variant": ({"variant": "sofmax"}, "unknown variant 'sofmax'"),
    "seconds": ({"seconds": float("nan")}, "NaN is not a JSON number"),  # the strict reader refuses it
    "negative": ({"seconds": -3.0}, "is not a positive number"),
    "runs": ({"runs": 0}, "runs 0 is not a positive integer"),
    "phase": ({"phase": "warm"}, "phase 'warm' unknown"),
}


@pytest.mark.parametrize("case", sorted(BAD_BENCH))
def test_an_unusable_bench_file_is_refused_in_one_line_naming_it(tmp_path, case):
    changes, message = BAD_BENCH[case]
    path = _bench_json(tmp_path / "bad.json", **changes)
    cmd = [sys.executable, "-m", "softmax_bottleneck", "costs", "--benchmarks", str(tmp_path), "--bench", str(path)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"{path}: " in last and message in last


def test_files_of_two_devices_or_twice_the_same_measurement_are_refused(tmp_path):
    from softmax_bottleneck.report.bench_speeds import BenchFileError, load_speeds

    a = _bench_json(tmp_path / "a.json")
    b = _bench_json(tmp_path / "b.json", variant="mos", device_name="GPU Y")
    with pytest.raises(BenchFileError, match=f"^{b}: measured on GPU Y with 1 run.*{a} on GPU X"):
        load_speeds([a, b])
    c = _bench_json(tmp_path / "c.json", seconds=50.0)
    with pytest.raises(BenchFileError, match=f"^{c}: a second measurement of ptb/softmax \\(sgd\\), after {a}"):
        load_speeds([a, c])
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(BenchFileError, match="d.json: not the JSON that bench prints"):
        load_speeds([tmp_path / "d.json"])


def test_a_run_with_no_measurement_names_the_bench_command(tmp_path):
    from softmax_bottleneck.report.bench_speeds import BenchFileError, load_speeds

    speeds = load_speeds([_bench_json(tmp_path / "a.json")])
    with pytest.raises(BenchFileError, match="no bench measurement for wt2/mos .* --dataset wt2 --variant mos"):
        run = {"experiment": "x", "dataset": "wt2", "variant": "mos", "schedule": "nt", "runs": 1, "epochs": 500}
        training_projection.project_training([run], speeds)


# --------------------------------------------------------------------------------------------- the cards measured
def test_the_cost_page_sets_the_study_on_the_cards_measured_and_names_those_not_measured():
    """The paper's V100, the H200 from its measured speeds, the H100 and A100 named and not priced; the epochs said
    as the caps they are; the analyses counted where measured."""
    from softmax_bottleneck import measured

    runs = training_projection.load_runs([str(REPO / "config" / "config.yaml")])[0]
    projection = training_projection.project_training(runs)
    section = "\n".join(cards.cards_section(projection))
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in section.splitlines() if line.startswith("| NVIDIA")}  # fmt: skip
    assert set(rows) == {"NVIDIA V100 (the paper's)", "NVIDIA H200", "NVIDIA H100", "NVIDIA A100"}
    assert rows["NVIDIA V100 (the paper's)"][1] == f"{projection['gpu_hours'].iloc[-1]:,.0f}"
    assert rows["NVIDIA H100"][0] == rows["NVIDIA A100"][0] == "no bench measured yet"
    assert set(rows["NVIDIA H100"][1:]) == {"—"}
    # the H200: each run at the seconds per epoch measured for it (or its proxy's), e.g. WT2 MoS's 11 main runs
    speeds, _ = cards.card_speeds()["NVIDIA H200"]
    on_h200 = training_projection.project_training(runs, speeds)
    wt2_mos = on_h200[(on_h200.experiment == "main") & (on_h200.dataset == "wt2") & (on_h200.variant == "mos")]
    h200 = {(r["dataset"], r["variant"]): float(r["projected_seconds_per_epoch"]) for r in measured.records("speeds")
            if r["projected_seconds_per_epoch"] and r["phase"] == "sgd"}  # fmt: skip
    assert float(wt2_mos.gpu_hours.iloc[0]) == pytest.approx(11 * 500 * h200["wt2", "mos"] / 3600)
    assert rows["NVIDIA H200"][1] == f"{on_h200['gpu_hours'].iloc[-1]:,.0f}"
    assert 0 < float(on_h200["gpu_hours"].iloc[-1]) < float(projection["gpu_hours"].iloc[-1]) / 3
    # the analyses: 171 PTB runs at the measured time, 112 WT2 ones at the card's but for the eigenvalues, on the host
    timed = {(r["device"], r["dataset"], r["memory_budget_gb"], r["what"][:8]): float(r["seconds"])
             for r in measured.records("analyses")}  # fmt: skip
    ptb = timed["NVIDIA H200", "ptb", "17", "the whol"]
    wt2 = timed["NVIDIA H200", "wt2", "50", "the whol"] - timed["NVIDIA H200", "wt2", "50", "of which"]
    wt2 += next(v for (device, dataset, *_), v in timed.items() if device != "NVIDIA H200" and dataset == "wt2")
    assert rows["NVIDIA H200"][4] == f"≤ {(171 * ptb + 112 * wt2) / 3600:,.1f}"
    assert rows["NVIDIA V100 (the paper's)"][4] == "not measured"
    # priced by proxy: the hours of the layers the card did not measure (SS and GSS at Softmax's time, MoC at MoS's)
    body = on_h200.iloc[:-1]
    proxied = body[body.variant.isin(["ss", "gss", "moc", "lms_plif_frozen", "softmax_fair", "softmax_fair_large",
                                      "mos_fair"])]  # fmt: skip
    share = float(proxied.gpu_hours.sum()) / float(body.gpu_hours.sum())
    assert cards.proxy_share(on_h200) == pytest.approx(share) and 0.3 < share < 1
    assert rows["NVIDIA H200"][2] == f"{share:.0%} of the hours"
    # what to bench on the next card (benchmarks/proxy_bench.py): those models, the most hours first
    to_bench = cards.proxied_models("NVIDIA H200", [str(REPO / "config" / "config.yaml")])
    hours = proxied.groupby(["dataset", "variant"]).gpu_hours.sum()
    assert {(d, v): h for d, v, h in to_bench} == pytest.approx(hours.to_dict())
    assert [h for _, _, h in to_bench] == sorted(hours, reverse=True)
    assert (
        "the presets' caps: the paper states none; 1000 is what the authors' code sets for PTB" in section
        and "no early stop" in section
    )


def test_every_document_quotes_the_price_costs_computes():
    """One price of the paper's study on the H200 everywhere: each 'N H200-hours' of the README, docs/ and
    BENCHMARKS.md is the figure `costs` computes now from the measured speeds (data/measured/speeds.csv)."""
    import re

    config = [str(REPO / "config" / "config.yaml")]
    price = f"{cards.study_price('NVIDIA H200', config):,.0f}"
    found = cards.study_price_range("NVIDIA H200", config)
    priced = f"{found.low:,.0f}–{found.high:,.0f}"
    quoted, ranges = {}, {}
    for path in [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for number in re.findall(r"(?<![\d,–])([\d,]{3,}) H200-hours", text):
            quoted.setdefault(number, []).append(path.name)
        # the range if the proxies are off (costs' "range if proxies are off"), "LOW–HIGH H200-hours"
        for low, high in re.findall(r"([\d,]{3,})–([\d,]{3,}) H200-hours", text):
            ranges.setdefault(f"{low}–{high}", []).append(path.name)
    assert price in quoted, f"no document quotes {price} H200-hours: {quoted}"
    assert set(quoted) == {price}, quoted
    assert set(ranges) <= {priced}, ranges
    # the cost page quotes the range, in its prose and in its table's H200 row as `costs` prints it
    assert "costs.md" in ranges.get(priced, []), ranges
    row = next(line for line in (REPO / "docs" / "costs.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| NVIDIA H200 |"))  # fmt: skip
    assert f"| {cards._range_cell(found)} |" in row


def test_days_on_your_number_of_cards_for_every_measured_card():
    """``costs --gpus N``: the days of the study on N of each measured card (the longest job first onto the first
    free card), not only on the paper's V100."""
    from softmax_bottleneck.study.plan import makespan_hours

    runs = training_projection.load_runs([str(REPO / "config" / "config.yaml")])[0]
    section = "\n".join(cards.cards_section(training_projection.project_training(runs), gpus=[8, 300]))
    header = next(line for line in section.splitlines() if line.startswith("| card"))
    assert [c.strip() for c in header.split("|")[-3:-1]] == ["days on 8", "days on 300"]
    h200 = next(line for line in section.splitlines() if line.startswith("| NVIDIA H200"))
    speeds, _ = cards.card_speeds()["NVIDIA H200"]
    hours = cards.job_hours(training_projection.project_training(runs, speeds))
    assert [c.strip() for c in h200.split("|")[-3:-1]] == [cards._days(makespan_hours(hours, n) / 24) for n in (8, 300)]


# --------------------------------------------------------------------------------------------- proxies off: the range
def _speeds(device, **seconds):
    """A card's speeds as ``card_speeds`` reads them: ``ptb_softmax=10.0`` is PTB Softmax's SGD seconds per epoch."""
    from softmax_bottleneck.report.bench_speeds import MeasuredSpeeds

    speeds = MeasuredSpeeds(device)
    for name, sec in seconds.items():
        pair = tuple(name.split("_", 1))
        speeds.seconds[pair], speeds.runs[pair], speeds.mps[pair] = {"sgd": sec}, {"sgd": 1}, {"sgd": False}
    return speeds


GSS_RUNS = [{"experiment": "x", "dataset": "ptb", "variant": v, "schedule": "et", "runs": n, "epochs": 100}
            for v, n in (("softmax", 3), ("gss", 5))]  # fmt: skip


def _times(*cards):
    return {speeds.device: {pair: dict(phases) for pair, phases in speeds.seconds.items()} for speeds in cards}


def test_the_range_prices_the_proxied_runs_at_the_ratios_other_cards_measured():
    """A card that timed Softmax only prices GSS at Softmax's time (the one price); the range takes GSS at the lowest
    and the highest GSS/Softmax ratio of the cards that timed both: exactly what the card would cost had it timed GSS
    so, and with the one price inside it."""
    card = _speeds("C", ptb_softmax=10.0)
    one = training_projection.project_training(GSS_RUNS, card)
    price, gss_hours = float(one["gpu_hours"].iloc[-1]), 5 * 100 * 10.0 / 3600
    slow, fast = _speeds("A", ptb_softmax=20.0, ptb_gss=30.0), _speeds("B", ptb_softmax=50.0, ptb_gss=40.0)  # 1.5, 0.8
    found = cards.proxy_range(one, _times(card, slow, fast))
    price_at = training_projection.project_training
    as_if = {r: float(price_at(GSS_RUNS, _speeds("C", ptb_softmax=10.0, ptb_gss=10.0 * r))["gpu_hours"].iloc[-1])
             for r in (0.8, 1.5)}  # fmt: skip
    assert found.low == pytest.approx(as_if[0.8]) == pytest.approx(price - 0.2 * gss_hours)
    assert found.high == pytest.approx(as_if[1.5]) == pytest.approx(price + 0.5 * gss_hours)
    assert found.low < price < found.high and found.unknown == 0 and found.untimed == []
    assert found.proxied == pytest.approx(gss_hours / price)
    assert cards._range_cell(found) == f"{found.low:,.0f}–{found.high:,.0f}"
    # two cards that measured the same ratio: one end is the one price (the proxy's time), the other that ratio
    same = cards.proxy_range(one, _times(card, slow, _speeds("B", ptb_softmax=4.0, ptb_gss=6.0)))
    assert (same.low, same.high) == (pytest.approx(price), pytest.approx(as_if[1.5]))
    # cards where the layer costs what its proxy costs: the range collapses to the one price
    equal = cards.proxy_range(one, _times(card, _speeds("A", ptb_softmax=20.0, ptb_gss=20.0),
                                          _speeds("B", ptb_softmax=7.0, ptb_gss=7.0)))  # fmt: skip
    assert equal.low == pytest.approx(price) == pytest.approx(equal.high)
    # nothing priced by proxy: no range to give
    own = training_projection.project_training(GSS_RUNS, _speeds("C", ptb_softmax=10.0, ptb_gss=12.0))
    alone = cards.proxy_range(own, _times(slow))
    assert alone.low == alone.high == pytest.approx(float(own["gpu_hours"].iloc[-1])) and alone.proxied == 0
    assert cards._range_cell(alone) == "none priced by proxy"


def test_a_layer_no_card_timed_beside_its_proxy_has_an_unknown_range_not_an_invented_one():
    card = _speeds("C", ptb_softmax=10.0)
    one = training_projection.project_training(GSS_RUNS, card)
    price = float(one["gpu_hours"].iloc[-1])
    # another card timed GSS but not Softmax, and one Softmax but not GSS: no ratio anywhere
    found = cards.proxy_range(one, _times(card, _speeds("A", ptb_gss=30.0), _speeds("B", ptb_softmax=5.0)))
    assert found.low == pytest.approx(price) == pytest.approx(found.high)
    assert found.untimed == ["gss"] and found.proxied > 0 and found.unknown == pytest.approx(found.proxied)
    assert cards._range_cell(found).startswith("unknown")
    # a ratio of another dataset is not this dataset's: WT2's GSS/Softmax leaves PTB's unknown
    wt2 = cards.proxy_range(one, _times(card, _speeds("A", wt2_softmax=20.0, wt2_gss=30.0)))
    assert wt2.untimed == ["gss"]


def test_the_h200_range_takes_ss_and_gss_at_the_v100_ratios_and_brackets_the_price():
    """On the measured H200, SS and GSS (timed there on no run) at their V100 ratios to Softmax give the high end; no
    card timed LMS-PLIF†, MoC, MoS† or Softmax‡ beside their proxy: unknown, not counted in the range."""
    from softmax_bottleneck.study.plan import paper_seconds_per_epoch

    config = [str(REPO / "config" / "config.yaml")]
    runs = training_projection.load_runs(config)[0]
    speeds, _ = cards.card_speeds()["NVIDIA H200"]
    found = cards.study_price_range("NVIDIA H200", config)
    price = cards.study_price("NVIDIA H200", config)
    assert found.low <= price <= found.high and found.high > price
    paper = paper_seconds_per_epoch()
    scaled = copy.deepcopy(speeds)
    for dataset in ("ptb", "wt2"):
        for layer in ("ss", "gss"):
            ratio = paper[dataset, layer] / paper[dataset, "softmax"]
            scaled.seconds[dataset, layer] = {p: s * ratio for p, s in speeds.seconds[dataset, "softmax"].items()}
            scaled.runs[dataset, layer] = dict(speeds.runs[dataset, "softmax"])
            scaled.mps[dataset, layer] = dict(speeds.mps[dataset, "softmax"])
    assert found.high == pytest.approx(sum(cards.job_hours(training_projection.project_training(runs, scaled))))
    assert found.low == pytest.approx(price)  # every measured ratio is above 1
    assert sorted(found.untimed) == ["lms_plif_frozen", "moc", "mos_fair", "softmax_fair_large"]
    section = "\n".join(cards.cards_section(training_projection.project_training(runs)))
    h200 = next(line for line in section.splitlines() if line.startswith("| NVIDIA H200"))
    assert f"{found.low:,.0f}–{found.high:,.0f} ({found.unknown:.0%} of the hours unknown)" in h200
    v100 = next(line for line in section.splitlines() if line.startswith("| NVIDIA V100"))
    assert "unknown (no card timed those layers beside their proxy)" in v100
    assert "range if proxies are off" in section.splitlines()[4]


# --------------------------------------------------------------------------------------------- plan --card
def _plan(*args):
    return subprocess.run([sys.executable, "-m", "softmax_bottleneck", "plan", *args], cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip


def _days_row(out: str) -> list[str]:
    row = next(line for line in out.splitlines() if line.startswith("| days, one run per GPU"))
    return [c.strip() for c in row.strip("|").split("|")][1:]


def test_plan_card_gives_the_days_of_that_cards_price():
    """``plan --card H200``: the days on N GPUs from each run's hours on the H200 as `costs` prices them; on one GPU
    the card's price over 24, on N the longest-first schedule of the same hours."""
    from softmax_bottleneck.study.plan import makespan_hours

    config = [str(REPO / "config" / "config.yaml")]
    price = cards.study_price("NVIDIA H200", config)
    study = Study(study_config.check(study_config.load(config)))
    hours, projection = cards.card_job_hours(study.jobs, "NVIDIA H200")
    assert sum(hours.values()) == pytest.approx(price)
    done = _plan("--gpus", "1", "8", "--card", "h200")
    assert done.returncode == 0, done.stderr
    assert _days_row(done.stdout) == [f"{price / 24:,.0f}", cards._days(makespan_hours(hours.values(), 8) / 24)]
    share = cards.proxy_share(projection)
    assert f"Wall-clock on N NVIDIA H200 GPUs (the runs' hours on that card as `costs` prices them, {price:,.0f} in " \
           f"all, {share:.0%} of them priced by proxy;" in done.stdout  # fmt: skip
    longest = max(hours.values())
    assert f"never under {longest / 24:.1f} days" in done.stdout
    # the paper's V100, by name, is the default
    v100, default = _plan("--gpus", "1", "8", "--card", "V100"), _plan("--gpus", "1", "8")
    assert v100.returncode == 0 and v100.stdout == default.stdout
    assert _days_row(default.stdout)[0] == f"{sum(plan.gpu_hours(r) for r in study.jobs.values()) / 24:,.0f}"


def test_plan_refuses_a_card_not_measured_in_one_line_naming_it():
    done = _plan("--card", "A100")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"argument --card: 'A100' is not a measured card (measured: {', '.join(cards.card_names())})" in last
    assert set(cards.card_names()) == {"V100", *(d.removeprefix("NVIDIA ") for d in cards.card_speeds())}


def test_a_fused_bench_prices_each_run_at_its_groups_time_over_k(tmp_path, shared_data):
    """``bench --fused 2`` at the paper's hyper-parameters (CPU, 1 timed update), then ``costs --bench`` on it and on
    the solo ``bench``: each run costs a K-th of its group's epoch (K epochs of training at the group's tokens/s, then
    the group's validation pass of the K runs together), the projection takes the cheaper of fused and alone, and says
    which."""
    from softmax_bottleneck.corpora.corpus import load_corpus
    from softmax_bottleneck.report.bench_speeds import load_speeds

    common = ["--dataset", "ptb", "--variant", "softmax", "--batches", "1", "--warmup", "1", "--valid-chunks", "1",
              "--threads", "1", "--device", "cpu", "--data", str(shared_data / "ptb")]  # fmt: skip
    fused, alone = tmp_path / "fused.json", tmp_path / "alone.json"
    for path, extra in ((fused, ["--fused", "2"]), (alone, [])):
        with path.open("w") as fh:
            cmd = [sys.executable, "-m", "softmax_bottleneck", "bench", *common, *extra]
            subprocess.run(cmd, stdout=fh, check=True)
    row = json.loads(fused.read_text())
    assert row["runs"] == 2 and row["fused"] is True and row["fused_runs"] == 2
    width = presets.resolve("ptb", "softmax", "et")["batch_size"]
    assert row["tokens_per_epoch"] == load_corpus(shared_data / "ptb").train.numel() // width * width
    per_run = row["tokens_per_epoch"] / row["fused_tokens_per_second"] + row["fused_valid_seconds_per_epoch"] / 2
    assert row["projected_seconds_per_epoch"] == pytest.approx(2 * per_run, rel=1e-3)
    runs = [{"experiment": "x", "dataset": "ptb", "variant": "softmax", "schedule": "nt", "runs": 8, "epochs": 10}]
    proj = training_projection.project_training(runs, load_speeds([fused])).iloc[0]
    assert proj["gpu_hours"] == pytest.approx(8 * 10 * per_run / 3600, rel=1e-3)
    assert proj["time_of"] == "(sgd steps only) 2 fused"
    both = training_projection.project_training(runs, load_speeds([fused, alone])).iloc[0]
    solo = json.loads(alone.read_text())["projected_seconds_per_epoch"]
    assert both["gpu_hours"] == pytest.approx(8 * 10 * min(per_run, solo) / 3600, rel=1e-3)
