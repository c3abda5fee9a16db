"""``plan``'s budget beside its GPU-hours: the epoch caps said as chosen, the disk measured from real runs' files
(``data/measured/disk.csv``), and the wall-clock on N GPUs (longest run first), with and without packing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from softmax_bottleneck import measured, presets
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study import plan
from softmax_bottleneck.study.runs import Study

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return Study(study_config.check(study_config.load([str(REPO / "config" / "config.yaml")])))


def test_longest_job_first_onto_the_least_loaded_gpu():
    jobs = [3, 5, 3, 4, 3]
    assert plan.makespan_hours(jobs, 1) == 18  # one GPU: everything in a row
    assert plan.makespan_hours(jobs, 2) == 10  # 5+3 | 4+3+3 would be 10 too; 5+4 is never put together
    assert plan.makespan_hours(jobs, 5) == plan.makespan_hours(jobs, 50) == 5  # never under the longest job
    # two runs per GPU that together go no faster than one: each takes twice as long, nothing is gained
    assert plan.makespan_hours(jobs, 1, per_gpu=2, gain=1.0) == 20
    # ... and at twice one run's throughput, a GPU holding two runs is two GPUs
    assert plan.makespan_hours(jobs, 1, per_gpu=2, gain=2.0) == plan.makespan_hours(jobs, 2)
    with pytest.raises(ValueError, match="must be positive"):
        plan.makespan_hours(jobs, 0)


def test_the_paper_plan_takes_its_total_on_one_gpu_and_its_longest_run_on_many(paper):
    hours = [plan.gpu_hours(run) for run in paper.jobs.values()]
    assert plan.makespan_hours(hours, 1) == pytest.approx(sum(hours))
    assert plan.makespan_hours(hours, len(hours)) == pytest.approx(max(hours))
    longest = max(paper.jobs.values(), key=plan.gpu_hours)
    assert (longest.dataset, longest.variant) == ("wt2", "moc")  # 1000 epochs at MoS's 600 s
    assert max(hours) == pytest.approx(1000 * 600 / 3600)


def test_the_packing_gain_is_the_one_measured():
    rows = {(r["runs"], r["mps"], r["date"]): float(r["tokens_per_second"]) for r in measured.records("speeds")
            if (r["dataset"], r["variant"]) == ("ptb", "softmax") and r["tokens_per_second"]}  # fmt: skip
    gain = measured.packing_gain("NVIDIA H200", "ptb", "softmax", 4)
    assert gain == rows["4", "false", "2026-11-27"] / rows["1", "false", "2026-11-27"]
    assert plan.packing_gain(4) == (gain, f"{gain:.2f}×, as measured on an H200")
    assert measured.packing_gain("NVIDIA H200", "ptb", "softmax", 3) is None
    assert plan.packing_gain(3) == (1.0, "not measured: counted as no gain")


def test_the_measured_sizes_span_the_paper_plan_and_scale_with_the_parameters(paper):
    """Each dataset's smallest and largest model of the paper plan were measured; a size between takes the bytes per
    parameter of the measured one nearest to it, which holds because the files are the parameters (the measured
    extremes agree on bytes per parameter to 0.1 %, their resume states to 1 %). A resume state holds the weights,
    the ASGD averages and the best weights, and while a new one is written the old one is still there."""
    measured_runs = [r for r in measured.records("disk") if r["kind"] == "run"]
    for dataset in ("ptb", "wt2"):
        counts = {presets.parameter_count(r.hyperparameters, presets.VOCAB_SIZES[dataset])
                  for r in paper.jobs.values() if r.dataset == dataset}  # fmt: skip
        rows = [r for r in measured_runs if r["dataset"] == dataset]
        assert {min(counts), max(counts)} <= {int(r["parameters"]) for r in rows}, dataset
        for key, within in (("bytes", 1.001), ("state_bytes", 1.01)):
            per_parameter = [int(r[key]) / int(r["parameters"]) for r in rows]
            assert max(per_parameter) < within * min(per_parameter), (dataset, key, per_parameter)
    for run in paper.jobs.values():
        count = presets.parameter_count(run.hyperparameters, presets.VOCAB_SIZES[run.dataset])
        row = min((r for r in measured_runs if r["dataset"] == run.dataset),
                  key=lambda r: abs(int(r["parameters"]) - count))  # fmt: skip
        scale = count / int(row["parameters"])
        finished, training = plan.run_disk(run)
        text = int(row["text_bytes_per_epoch"]) * run.hyperparameters["epochs"]
        assert finished == pytest.approx(int(row["bytes"]) * scale + int(row["metrics_bytes"]) + text)
        assert training == pytest.approx((int(row["peak_bytes"]) - int(row["bytes"])) * scale)
    for row in measured_runs:
        weights = 4 * int(row["parameters"])
        assert weights < int(row["bytes"]) < 1.01 * weights  # model.pt: the float32 weights and a little metadata
        assert 3 * weights < int(row["state_bytes"]) < 3.1 * weights, row  # weights, ASGD averages, best weights
        assert int(row["peak_bytes"]) >= int(row["state_bytes"]) + int(row["bytes"])


def test_an_unmeasured_size_scales_the_nearest_measured_one(paper):
    """A model of a size nobody measured (a larger PTB Softmax) takes the bytes per parameter of the measured PTB model
    nearest to it, the largest."""
    bigger = Study(paper.config).run("ptb", "softmax", "et", 141, "authors", (("nhid", 2300),))
    count = presets.parameter_count(bigger.hyperparameters, presets.VOCAB_SIZES["ptb"])
    ptb = [r for r in measured.records("disk") if r["kind"] == "run" and r["dataset"] == "ptb"]
    near = max(ptb, key=lambda r: int(r["parameters"]))
    assert count > 1.5 * int(near["parameters"])
    finished, _ = plan.run_disk(bigger)
    expected = int(near["bytes"]) * count / int(near["parameters"]) + int(near["metrics_bytes"])
    assert finished == pytest.approx(expected + int(near["text_bytes_per_epoch"]) * 1000)


def test_the_e12_slice_is_the_measured_file(paper):
    row = next(r for r in measured.records("disk") if r["kind"] == "logp")
    assert int(row["rows"]) == paper.config["analysis"]["robustness"]["rows"]
    assert plan.slice_disk(paper) == int(row["bytes"])
    assert int(row["bytes"]) >= 4 * int(row["rows"]) * presets.VOCAB_SIZES[row["dataset"]]  # float32 rows × words


def test_the_caps_provenance_is_said_only_where_they_are_the_presets(paper):
    text = plan.epoch_caps_line(paper)
    provenance = "the presets' caps: the paper states none; 1000 is what the authors' code sets for PTB"
    assert "1000 (500 for wt2 mos)" in text and "no early stop" in text and provenance in text
    small = Study(study_config.check(study_config.load([str(REPO / "config" / "small.yaml")])))
    text = plan.epoch_caps_line(small)
    assert "no early stop" in text and "presets' caps" not in text


def test_plan_prints_the_disk_and_the_wall_clock_on_n_gpus(paper):
    out = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "plan", "--gpus", "4", "283", "--per-gpu", "4"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout  # fmt: skip
    hours = [plan.gpu_hours(run) for run in paper.jobs.values()]
    row = next(line for line in out.splitlines() if line.startswith("| days, one run per GPU"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert cells == [f"{plan.makespan_hours(hours, 4) / 24:,.0f}", f"{max(hours) / 24:.1f}"]
    packed = next(line for line in out.splitlines() if line.startswith("| days, 4 runs per GPU"))
    gain = measured.packing_gain("NVIDIA H200", "ptb", "softmax", 4)
    assert f"{4 * max(hours) / gain / 24:,.0f} |" in packed  # the longest run, 4 × as long beside 3 others
    assert f"never under {max(hours) / 24:.1f} days, its longest run, wt2 moc" in out
    finished = sum(plan.run_disk(r)[0] + plan.analysis_disk(paper, r) for r in paper.jobs.values())
    disk = re.search(r"Disk: ([\d,.]+) GB once every run is trained and analysed", out)
    assert disk and float(disk.group(1).replace(",", "")) == round(finished / 1e9, 1)
    assert "with 283 trainings at once" in out and "no early stop" in out


def test_the_measured_speeds_and_analyses_are_those_benchmarks_md_reports():
    """data/measured holds BENCHMARKS.md's numbers, not other ones (one fact in two forms: its table and the file)."""
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    for row in measured.records("speeds"):
        tokens = f"{int(row['tokens_per_second']):,}" if row["tokens_per_second"] else ""
        if row["projected_seconds_per_epoch"] and tokens:  # one run, 2026-11-26
            line = f"| {row['seconds_per_batch']} | {tokens} | {row['projected_seconds_per_epoch']}"
        elif row["projected_seconds_per_epoch"]:  # PTB Softmax's ASGD steps
            line = f"{row['seconds_per_batch']} s/batch, {row['projected_seconds_per_epoch']} s/epoch"
        else:  # runs sharing the card, 2026-11-27
            line = f"| {row['runs']} | {'yes' if row['mps'] == 'true' else 'no'} | {tokens} |"
        assert line in text, (row, line)
    for row in measured.records("analyses"):
        seconds = row["seconds"]
        assert f"{seconds} s" in text or f"{seconds} s =" in text, row


def test_runs_smaller_than_the_papers_are_said_to_be_priced_at_paper_size(paper):
    """Before, `plan --config config/small.yaml` gave its tiny runs 8 V100 GPU-hours and said nothing."""
    assert plan.size_note(paper) == []
    small = Study(study_config.check(study_config.load([str(REPO / "config" / "small.yaml")])))
    note = plan.size_note(small)
    assert len(note) == 1 and note[0].startswith(f"Note: {len(small.jobs)} of {len(small.jobs)} runs are not of the "
                                                 "paper's size (nemb, nhid, nhidlast, nlayers, batch_size, bptt, "
                                                 "train_tokens set by the configuration)")  # fmt: skip
    config = study_config.load([str(REPO / "config" / "config.yaml")])
    config["model_overrides"] = {"variants": {"mos": {"nhid": 500}}}
    one = Study(study_config.check(config))
    mos = [run for run in one.jobs.values() if run.variant == "mos"]
    assert mos and plan.size_note(one)[0].startswith(f"Note: {len(mos)} of {len(one.jobs)} runs are not of the "
                                                     "paper's size (nhid set by")  # fmt: skip


def test_a_plan_of_hours_says_hours_and_never_prints_zero_days():
    """Before, the small scale's plan said "never under 0.0 days" and its table cells read 0."""
    small = Study(study_config.check(study_config.load([str(REPO / "config" / "small.yaml")])))
    text = plan.wall_clock_text(small, gpus=(1, 64))
    hours = max(plan.gpu_hours(run) for run in small.jobs.values())
    assert hours < 24 and f"never under {hours:.1f} hours, its longest run" in text
    cells = [c.strip() for line in text.splitlines() if line.startswith("| days") for c in line.strip("|").split("|")]
    assert "< 0.1" in cells and not {"0", "0.0"} & set(cells), cells
