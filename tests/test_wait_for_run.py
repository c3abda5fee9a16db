"""A training that runs when Snakemake starts (left by a Snakemake that died) is waited for, never started twice.

``wait-for-run`` against a run folder that another live process writes (a stand-in for a cluster job: it writes the
progress file as the trainer does, then finishes or dies), and the workflow's routing of such a run to its local rule
``await_training``. The whole scenario, a controller killed while its SLURM jobs run and started again, is
``tests/test_slurm.py::test_a_killed_controller_started_again_duplicates_and_redoes_nothing``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import data_dir, needs_data

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import TRAIN_LOG, Study
from softmax_bottleneck.study.wait_for_run import OUTPUTS

REPO = Path(__file__).resolve().parents[1]

#: a process that writes a run's progress file as the trainer does, then waits for ``<run>/go``: "finish" writes the
#: three outputs and exits, anything else exits without them (a job cancelled mid-run)
TRAINING = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from softmax_bottleneck.training.run_files import ProgressFile
    from softmax_bottleneck.training.state import Progress

    run, identity = Path(sys.argv[1]), json.loads(sys.argv[2])
    epochs = identity.pop("epochs")
    progress = ProgressFile(run / ".resume" / "progress.json", run=identity, epochs=epochs, checkpoint_seconds=600)
    progress.write(Progress(epoch=1))
    while not (run / "go").exists():
        time.sleep(0.05)
    end = (run / "go").read_text()
    if end.startswith("finish"):  # "finish" or "finish{...}": its metrics.json with those fields changed
        metrics = {"dataset": identity["dataset"], "variant": identity["variant"], "schedule": identity["schedule"],
                   "seed": identity["seed"], "epochs_run": epochs, "hyperparameters": {"epochs": epochs},
                   "run_fingerprint": sys.argv[3]}
        metrics.update(json.loads(end[len("finish"):] or "{}"))
        (run / "metrics.json").write_text(json.dumps(metrics))
        for name in ("model.pt", "curve.csv"):
            (run / name).write_text("{}")
    """
)


#: the stand-in run's identity and epochs
IDENTITY = {"dataset": "ptb", "variant": "softmax", "schedule": "et", "seed": 141, "epochs": 5}


#: the identity hash of a run folder named ``default-0123abcd``, as the trainer records it
FINGERPRINT = "0123abcd" + "5" * 56


def start_training(run: Path, identity: dict = IDENTITY) -> subprocess.Popen:
    (run / ".resume").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", TRAINING, str(run), json.dumps(identity), FINGERPRINT])
    deadline = time.monotonic() + 60
    while not (run / ".resume" / "progress.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the stand-in training did not start"
        time.sleep(0.05)
    return proc


def wait_for_run(run: Path, log: Path, *extra: str, python: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd = [sys.executable, *python, "-m", "softmax_bottleneck", "wait-for-run", str(run), "--log", str(log),
           "--dataset", "ptb", "--variant", "softmax", "--schedule", "et", "--seed", "141", "--epochs", "5",
           "--poll", "0.2", *extra]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@contextmanager
def reaped(*procs: subprocess.Popen):
    """``procs``, each killed and waited for at the end if it still runs (a test that fails leaves none behind)."""
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("end", ["finish", "die"])
def test_wait_for_run_waits_while_the_training_runs_and_says_how_it_ended(tmp_path, end):
    run = tmp_path / "results" / "runs" / "ptb-softmax"
    training = start_training(run)
    waiting = wait_for_run(run, tmp_path / "train.log")
    with reaped(training, waiting):
        time.sleep(1.5)
        assert waiting.poll() is None, waiting.communicate()[0]  # the training runs: it waits
        (run / "go").write_text(end)
        training.wait(30)
        out, _ = waiting.communicate(timeout=30)
    if end == "finish":
        assert waiting.returncode == 0 and "finished by the process that trained it" in out, out
    else:
        assert waiting.returncode == 1, out
        errors = [line for line in out.splitlines() if " ERROR " in line]
        assert len(errors) == 1 and "its process" in errors[0] and "is gone" in errors[0], out
        assert "run the same snakemake command again: it resumes" in errors[0]


@pytest.mark.parametrize(
    ("written", "named"),
    [
        ({"seed": 999}, "seed 999, not 141"),
        ({"epochs_run": 3}, "3 epochs run of 5"),
        ({"hyperparameters": {"epochs": 6}, "epochs_run": 6}, "6 planned epochs, not 5"),
        ({"variant": "mos"}, "variant 'mos', not 'softmax'"),
        ({"run_fingerprint": "ffffffff" + "0" * 56}, "not the folder's '0123abcd'"),
    ],
)
def test_a_finished_run_of_another_identity_or_length_is_not_taken_for_the_rules(tmp_path, written, named):
    """Under await_training, Snakemake takes what wait-for-run accepts as this run's model: another seed, fewer
    epochs or another identity hash in metrics.json is refused in one line naming what differs."""
    run = tmp_path / "results" / "runs" / "default-0123abcd"
    training = start_training(run)
    waiting = wait_for_run(run, tmp_path / "train.log")
    with reaped(training, waiting):
        (run / "go").write_text("finish" + json.dumps(written))
        training.wait(30)
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 1, out
    errors = [line for line in out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "not as this rule's run" in errors[0] and named in errors[0], out
    assert "Traceback" not in out


def test_a_finished_run_whose_record_cannot_be_read_is_said_so_not_resumed(tmp_path):
    """Its metrics.json holding a number no file of the package holds: one line naming it and what to do (before,
    "the training it waited for stopped; ... it resumes": nothing would resume)."""
    run = tmp_path / "results" / "runs" / "default-0123abcd"
    training = start_training(run)
    waiting = wait_for_run(run, tmp_path / "train.log")
    with reaped(training, waiting):
        (run / "go").write_text("finish" + json.dumps({"epochs_run": 10**25}))
        training.wait(30)
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 1, out
    errors = [line for line in out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{run / 'metrics.json'}: an integer of 26 digits" in errors[0], out
    assert errors[0].endswith("move that file away, then run the same snakemake command again") and "resumes" not in out


def test_a_finished_run_as_asked_is_accepted_by_a_wait_that_never_imports_torch(tmp_path):
    """The wait reads files only: it imports neither PyTorch nor the study's definition (``-X importtime`` lists
    every module it imports)."""
    run = tmp_path / "results" / "runs" / "default-0123abcd"
    training = start_training(run)
    waiting = wait_for_run(run, tmp_path / "train.log", python=("-X", "importtime"))
    with reaped(training, waiting):
        (run / "go").write_text("finish")
        training.wait(30)
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and "finished by the process that trained it" in out, out
    imported = {line.rsplit("|", 1)[1].strip() for line in out.splitlines() if line.startswith("import time:")}
    assert "softmax_bottleneck.study.run_folder" in imported, out[-2000:]  # what it reads runs with
    assert not {"torch", "softmax_bottleneck.presets", "softmax_bottleneck.study.runs"} & imported


def test_the_wait_gives_up_after_its_limit(tmp_path):
    """A run that another host trains and that stops writing is not waited for for ever: --max-wait ends it."""
    run = tmp_path / "results" / "runs" / "default-0123abcd"
    training = start_training(run)
    start = time.monotonic()
    waiting = wait_for_run(run, tmp_path / "train.log", "--max-wait", "2")
    with reaped(training, waiting):
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 1 and time.monotonic() - start < 30, out
    errors = [line for line in out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "the most this wait may take (--max-wait)" in errors[0], out


@needs_data
def test_the_workflow_waits_for_a_run_already_running_instead_of_training_it(tmp_path):
    config = [str(REPO / "config" / "small.yaml")]
    study = Study(study_config.check(study_config.load(config)))
    path, run = next((p, r) for p, r in study.jobs.items() if (r.dataset, r.variant, r.schedule) == ("ptb", "softmax",
                                                                                                    "et"))  # fmt: skip
    other = next(p for p, r in study.jobs.items() if (r.dataset, r.variant, r.schedule) == ("ptb", "ss", "et"))
    identity = {key: getattr(run, key) for key in ("dataset", "variant", "schedule", "seed")}
    training = start_training(tmp_path / path, {**identity, "epochs": run.hyperparameters["epochs"]})
    try:
        cmd = [sys.executable, "-m", "snakemake", f"{path}/model.pt", f"{other}/model.pt", "-n", "-p", "--snakefile",
               str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile", *config, "--config",
               f"data_mirror={data_dir()}"]  # fmt: skip
        dry = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        (tmp_path / path / "go").write_text("die")
        training.wait(30)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    jobs = dry.stdout.split("\n\n")
    awaited = [block for block in jobs if "rule await_training:" in block]
    trained = [block for block in jobs if "rule train:" in block]
    assert len(awaited) == 1 and f"{path}/model.pt" in awaited[0], dry.stdout[-3000:]
    assert f"wait-for-run {path} --log {TRAIN_LOG.format(**run.wildcards)}" in awaited[0]  # its own log
    assert "\n    threads: 0\n" in awaited[0]  # a wait holds none of --cores: the jobs beside it run as if it were not
    assert len(trained) == 1 and f"{other}/model.pt" in trained[0]  # a run nobody trains is trained as before


def test_a_wait_checks_the_files_the_trainer_publishes():
    from softmax_bottleneck.training.state import PUBLISH_ORDER

    assert sorted(OUTPUTS) == sorted(PUBLISH_ORDER)
