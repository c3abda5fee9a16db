"""``train-fused``: K runs trained by one process are their solo trainings, file for file; killed and rerun, the group
resumes every run from its own state; a finished run is never trained again, a held one never touched."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys

import pytest
import torch
from conftest import TINY, tiny_corpus
from test_training import _env, _run_until, train_options

from softmax_bottleneck import presets
from softmax_bottleneck.training import fused_trainer
from softmax_bottleneck.training.fused_evaluation import evaluate_group
from softmax_bottleneck.training.fused_step import fused_update
from softmax_bottleneck.training.fused_trainer import FusedGroup, RunSpec, train_group
from softmax_bottleneck.training.lock import RunFolderBusy
from softmax_bottleneck.training.trainer import Diverged, Trainer, train

pytestmark = pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")

PPL_KEYS = ("train_ppl", "valid_ppl", "valid_loss", "test_ppl", "test_loss", "best_epoch", "switch_epoch", "epochs_run")
#: four runs of one shape: three output layers, both schedules, a shared seed, ET switches after epochs 1 and 2
GROUP = [("softmax", "et", 3, {"switch_epoch": 1}), ("ss", "nt", 4, {}), ("gss", "et", 5, {"switch_epoch": 2}),
         ("lms_plif", "et", 3, {"switch_epoch": 1})]  # fmt: skip
SETTINGS = {**TINY, "epochs": 3}


def _outputs(folder):
    metrics = json.loads((folder / "metrics.json").read_text())
    model = torch.load(folder / "model.pt", weights_only=True)["state_dict"]
    curve = list(csv.DictReader(io.StringIO((folder / "curve.csv").read_text())))
    for row in curve:
        row.pop("seconds")
    return metrics, model, curve


def _assert_same_run(solo, fused, who):
    (m1, w1, c1), (m2, w2, c2) = _outputs(solo), _outputs(fused)
    assert [m1[k] for k in PPL_KEYS] == [m2[k] for k in PPL_KEYS], who
    assert m1["run_fingerprint"] == m2["run_fingerprint"] and m1["hyperparameters"] == m2["hyperparameters"], who
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1), who
    assert c1 == c2, who
    assert sorted(p.name for p in solo.rglob("*")) == sorted(p.name for p in fused.rglob("*")), who


def test_a_fused_group_writes_each_runs_solo_training(tmp_path, monkeypatch):
    """Four runs (three output layers, two schedules, a shared seed) trained together: every run's metrics, weights,
    curve and files are those of the run trained alone (same LSTM kernels: oneDNN's LSTM off). The two runs of one
    seed step in lock-step, so each of their validations and their test run as one evaluation."""
    corpus = tiny_corpus()
    specs = [
        RunSpec(v, s, seed, tmp_path / "fused" / f"{v}-{s}-{seed}", tuple(own.items())) for v, s, seed, own in GROUP
    ]
    evaluated = []  # the seeds of each evaluation of the group

    def recorded(runs, datas, batched=None):
        evaluated.append(sorted(run.hp["seed"] for run in runs))
        return evaluate_group(runs, datas, batched)

    monkeypatch.setattr(fused_trainer, "evaluate_group", recorded)
    slots = []  # each update's runs, by their place in the group

    def update(trainers, batches):
        slots.append([next(i for i, spec in enumerate(specs) if spec.out == t.out_dir) for t in trainers])
        return fused_update(trainers, batches)

    monkeypatch.setattr(fused_trainer, "fused_update", update)
    with torch.backends.mkldnn.flags(enabled=False):
        outcomes = train_group(dataset="ptb", runs=specs, overrides=SETTINGS, corpus=corpus, device="cpu")
        assert all(isinstance(o, dict) for o in outcomes), outcomes
        for spec in specs:
            train(dataset="ptb", variant=spec.variant, schedule=spec.schedule, seed=spec.seed,
                  overrides={**SETTINGS, **dict(spec.sets)},
                  corpus=corpus, device="cpu", out_dir=tmp_path / "solo" / spec.out.name)  # fmt: skip
    for spec, outcome in zip(specs, outcomes, strict=True):
        _assert_same_run(tmp_path / "solo" / spec.out.name, spec.out, spec.label)
        assert outcome["test_ppl"] == json.loads((spec.out / "metrics.json").read_text())["test_ppl"]
        env = json.loads((spec.out / "metrics.json").read_text())["environment"]  # how it was trained, for a reader
        assert (env["recurrence"], env["fused_runs"]) == ("fused", len(specs))
        solo = json.loads((tmp_path / "solo" / spec.out.name / "metrics.json").read_text())["environment"]
        assert (solo["recurrence"], solo["fused_runs"]) == ("native", None)  # oneDNN's LSTM was off
    switches = [json.loads((s.out / "metrics.json").read_text())["switch_epoch"] for s in specs]
    assert switches == [1, None, 2, 1]  # each run switched to ASGD at its own epoch, or not at all
    assert evaluated.count([3, 3]) == SETTINGS["epochs"] + 1  # 3 validations and the test of the seed-3 runs
    assert sum(map(len, evaluated)) == len(specs) * (SETTINGS["epochs"] + 1)  # every run's, each once
    assert all(order == sorted(order) for order in slots)  # a run keeps its slot, whichever epoch ended first
    assert len({tuple(order) for order in slots}) > 1  # some runs' epochs ended at other updates than the others'


def test_a_finished_run_is_restored_and_a_held_one_left_alone(tmp_path):
    corpus = tiny_corpus()
    settings = {**SETTINGS, "epochs": 2}
    done, held, free = (tmp_path / name for name in ("done", "held", "free"))
    train(dataset="ptb", variant="softmax", schedule="et", seed=1, overrides=settings, corpus=corpus, out_dir=done)
    model_before = (done / "model.pt").stat()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from softmax_bottleneck.training.lock import run_lock\n"
         f"with run_lock({str(held)!r}):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        specs = [RunSpec("softmax", "et", 1, done), RunSpec("softmax", "et", 2, held), RunSpec("ss", "et", 3, free)]
        outcomes = train_group(dataset="ptb", runs=specs, overrides=settings, corpus=corpus, device="cpu")
    finally:
        holder.kill()
        holder.wait()
    assert outcomes[0]["test_ppl"] == json.loads((done / "metrics.json").read_text())["test_ppl"]
    assert (done / "model.pt").stat().st_mtime_ns == model_before.st_mtime_ns  # not trained again, not rewritten
    assert isinstance(outcomes[1], RunFolderBusy) and not (held / "metrics.json").exists()
    assert isinstance(outcomes[2], dict) and (free / "metrics.json").is_file()


def test_a_diverging_run_leaves_the_group_and_the_others_finish(tmp_path, caplog):
    corpus = tiny_corpus()
    trainers, labels = [], []
    for k, lr in enumerate((5.0, 1e12, 5.0)):
        hp = presets.resolve("ptb", "softmax", "et", {**SETTINGS, "epochs": 2, "lr": lr, "seed": k})
        trainer = Trainer(dataset="ptb", variant="softmax", hp=hp, corpus=corpus, out_dir=tmp_path / f"run{k}")
        trainers.append(trainer)
        labels.append(f"run {k}")
    told = []  # (run, why, whether a run of the group had finished then)

    def on_end(k, err):
        told.append((k, type(err), any((tmp_path / f"run{j}" / "metrics.json").exists() for j in (0, 2))))

    with caplog.at_level("INFO"):
        outcomes = FusedGroup(trainers, labels, on_end).fit()
    assert isinstance(outcomes[1], Diverged)
    preflights = [r.getMessage() for r in caplog.records if "preflight: " in r.getMessage()]
    assert sorted(line.split(": preflight")[0] for line in preflights) == labels, preflights  # each names its run
    assert told == [(1, Diverged, False)]  # said when it left, not when the others ended (before: only at the end)
    progress = json.loads((tmp_path / "run1" / ".resume" / "progress.json").read_text())
    assert "diverged" in progress["error"]  # the run's own progress file says why it stopped
    assert isinstance(outcomes[0], dict) and isinstance(outcomes[2], dict)


def test_two_runs_of_one_folder_are_refused_naming_it(tmp_path):
    specs = [RunSpec("softmax", "et", 1, tmp_path / "a"), RunSpec("ss", "et", 2, tmp_path / "b" / ".." / "a")]
    with pytest.raises(ValueError, match=rf"^two runs of the group name the same run folder, {tmp_path / 'a'}$"):
        train_group(dataset="ptb", runs=specs, corpus=tiny_corpus(), device="cpu")
    assert not (tmp_path / "a").exists()


def test_runs_of_different_shapes_never_start(tmp_path):
    specs = [RunSpec("softmax", "et", 1, tmp_path / "a"), RunSpec("mos", "et", 1, tmp_path / "b")]
    with pytest.raises(ValueError, match="cannot train fused with .*: they differ in nemb, nhid, nhidlast"):
        train_group(dataset="ptb", runs=specs, corpus=tiny_corpus(), device="cpu")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


KILL_SETTINGS = [
    "nemb=8", "nhid=16", "batch_size=4", "small_batch_size=2", "bptt=10", "max_seq_len_delta=5", "epochs=2",
    "train_tokens=8000", "valid_tokens=2000", "test_tokens=1000", "log_interval=50",
]  # fmt: skip


def _cli(folder, cache, checkpoint_seconds=None):
    cmd = [sys.executable, "-m", "softmax_bottleneck", "train-fused", "--dataset", "ptb", "--corpus-cache", str(cache),
           "--device", "cpu"]  # fmt: skip
    for variant, schedule, seed, own in (("softmax", "et", 3, ["switch_epoch=1"]), ("ss", "nt", 4, []),
                                         ("softmax", "nt", 5, [])):  # fmt: skip
        cmd += ["--run", variant, schedule, str(seed), str(folder / f"{variant}-{schedule}-{seed}"), *own]
    return cmd + train_options(KILL_SETTINGS, checkpoint_seconds)


@pytest.mark.slow
def test_a_killed_group_resumes_every_run_as_if_never_stopped(tmp_path, ptb_cache):
    whole = tmp_path / "whole"
    subprocess.run(_cli(whole, ptb_cache), check=True, env=_env(), capture_output=True)
    cut = tmp_path / "cut"
    log_path = tmp_path / "first.log"
    marker = "ss/nt/seed 4: epoch   2 |    50 batches"
    assert _run_until(_cli(cut, ptb_cache, 0.5), log_path, marker, signal.SIGTERM, 240) == 143, log_path.read_text()
    folders = sorted(p for p in cut.iterdir())
    assert len(folders) == 3 and not any((f / "metrics.json").exists() for f in folders)
    assert all((f / ".resume" / "state.pt").is_file() for f in folders)  # every run saved its own state
    result = subprocess.run(_cli(cut, ptb_cache), env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("resumed from") == 3
    for folder in folders:
        _assert_same_run(whole / folder.name, folder, folder.name)
        assert [p.name for p in (folder / ".resume").iterdir()] == ["final"]


@pytest.mark.slow
def test_the_guides_example_trains_three_runs_each_as_alone(tmp_path, shared_data):
    """docs/fused-training.md's command as written, where the quick start fetched PTB into resources/data: three
    runs, each with its own schedule and switch, each equal to its solo training (oneDNN's LSTM off in both)."""
    from test_readme import FUSED_EXAMPLE, readme_commands

    assert FUSED_EXAMPLE in readme_commands()
    (tmp_path / "resources" / "data").mkdir(parents=True)
    (tmp_path / "resources" / "data" / "ptb").symlink_to(shared_data / "ptb")
    no_onednn = "import sys, torch; torch.backends.mkldnn.enabled = False; from softmax_bottleneck import cli; "
    argv = FUSED_EXAMPLE.split()[3:]  # after "python -m softmax_bottleneck"
    run = [sys.executable, "-c", no_onednn + "sys.exit(cli.main(sys.argv[1:]))", *argv]
    result = subprocess.run(run, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    sets = {"nemb": 32, "nhid": 64, "nhidlast": 32, "epochs": 2, "train_tokens": 20000, "valid_tokens": 5000,
            "test_tokens": 5000}  # fmt: skip
    with torch.backends.mkldnn.flags(enabled=False):
        for variant, schedule, seed, own in (("softmax", "et", 141, {}), ("softmax", "nt", 142, {}),
                                             ("ss", "et", 141, {"switch_epoch": 1})):  # fmt: skip
            name = f"{variant}-{schedule}-{seed}"
            train(dataset="ptb", variant=variant, schedule=schedule, seed=seed, overrides={**sets, **own},
                  data_dir=shared_data / "ptb", device="cpu", out_dir=tmp_path / "solo" / name)  # fmt: skip
            _assert_same_run(tmp_path / "solo" / name, tmp_path / "runs" / name, name)
    assert "ss/et/seed 141: end of epoch   1" in result.stderr


def test_each_run_of_a_group_gets_its_own_log_and_the_group_its_record(tmp_path, ptb_cache):
    """The workflow's train-fused: each run's lines (and only its) are appended to its own training log, the group's
    record names every run with its test perplexity, and a stamp that does not vouch for a run's layer stops the
    group before anything is trained."""
    folder = tmp_path / "runs"
    cmd = _cli(folder, ptb_cache)
    outs = [folder / name for name in ("softmax-et-3", "ss-nt-4", "softmax-nt-5")]
    refused = subprocess.run([*cmd, "--conformance-stamp", f"ss={tmp_path / 'no-stamp.json'}"], env=_env(),
                             capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 1 and "ss/nt/seed 4: " in refused.stderr and not folder.exists(), refused.stderr
    logs = [tmp_path / "logs" / f"{out.name}.log" for out in outs]
    logs[0].parent.mkdir()
    logs[0].write_text("an earlier attempt's line\n")
    record = tmp_path / "group.json"
    options = [part for out, log in zip(outs, logs, strict=True) for part in ("--run-log", str(out), str(log))]
    result = subprocess.run([*cmd, *options, "--record", str(record), "--read-only-outputs"], env=_env(),
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for out in outs:  # as protected() leaves a solo training's
        assert not any((out / name).stat().st_mode & 0o222 for name in ("model.pt", "metrics.json", "curve.csv"))
    labels = ["softmax/et/seed 3", "ss/nt/seed 4", "softmax/nt/seed 5"]
    for k, log in enumerate(logs):
        lines = log.read_text().splitlines()
        assert "end of epoch   2" in log.read_text() and "done: train ppl" in log.read_text()
        if k == 0:  # appended to, never emptied
            assert lines.pop(0) == "an earlier attempt's line"
        own = [line for line in lines if f"{labels[k]}: " in line]
        assert len(own) == len(lines) > 5, lines  # nothing of another run
        assert " INFO softmax_bottleneck.train: " in own[0]  # the process's line format
    runs = json.loads(record.read_text())["runs"]
    assert [r["run"] for r in runs] == [str(out) for out in outs]
    assert [r["test_ppl"] for r in runs] == [json.loads((out / "metrics.json").read_text())["test_ppl"] for out in outs]


def test_a_group_whose_models_together_exceed_the_devices_memory_is_refused_before_anything(tmp_path, monkeypatch):
    """Each model fits the device alone (the solo check passes), the group's together do not: refused in one error
    naming the group, no run folder made."""
    from softmax_bottleneck.training import environment

    corpus = tiny_corpus()
    hp = presets.resolve("ptb", "softmax", "et", {**SETTINGS, "seed": 1})
    one = 4 * presets.parameter_count(hp, corpus.vocab_size)
    monkeypatch.setattr(environment, "_memory_bytes", lambda device: int(1.5 * one))
    specs = [RunSpec("softmax", "et", seed, tmp_path / f"run{seed}") for seed in (1, 2)]
    with pytest.raises(environment.TooLarge, match=r"the 2 models of the group .* fewer runs together"):
        train_group(dataset="ptb", runs=specs, overrides=SETTINGS, corpus=corpus, device="cpu")
    assert not any(spec.out.exists() for spec in specs)
    assert isinstance(train_group(dataset="ptb", runs=specs[:1], overrides=SETTINGS, corpus=corpus, device="cpu")[0],
                      dict)  # fmt: skip


def test_a_run_held_elsewhere_fails_a_group_unless_it_is_left_busy(tmp_path):
    """The workflow's group job names every run of its group: with --leave-busy a run another process holds is left
    to it, not a failure; a run that failed is a failure either way."""
    from softmax_bottleneck.training.fused_trainer import exit_status
    from softmax_bottleneck.training.trainer import PREEMPTED_EXIT, Preempted

    busy = RunFolderBusy("run1: another training process (PID 7 on here) is writing this run folder")
    assert exit_status([busy, {"test_ppl": 90.0}, {"test_ppl": 91.0}]) == 1
    assert exit_status([busy, {"test_ppl": 90.0}, {"test_ppl": 91.0}], leave_busy=True) == 0
    assert exit_status([busy, Diverged("epoch 1, batch 3: loss nan"), {"test_ppl": 91.0}], leave_busy=True) == 1
    assert exit_status([Preempted("SIGTERM"), {"test_ppl": 91.0}]) == PREEMPTED_EXIT
    assert exit_status([Preempted("SIGTERM"), Diverged("epoch 1, batch 3: loss nan")]) == 1
