"""What a workflow run prints: one terminal line per job with errors in full (softmax_bottleneck.cluster.terminal, on
Snakemake's own terminal handler), and the trainings' progress line (softmax_bottleneck.study.trainings_left)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest
from snakemake.logging import LoggerManager
from snakemake.settings.types import OutputSettings
from snakemake_interface_logger_plugins.common import LogEvent

from softmax_bottleneck.cluster import terminal
from softmax_bottleneck.study import trainings_left

JOB = dict(
    jobid=12, rule_msg=None, rule_name="train", local=False, input=["resources/corpus/ptb.pt"] * 3,
    output=["results/runs/ptb/mos/et/seed28/default-1/model.pt"], log=["logs/train/x.log"], benchmark=None,
    wildcards={"dataset": "ptb", "variant": "mos"}, reason="Missing output files: model.pt", resources={},
    priority=0, threads=1, indent=False, is_checkpoint=False, printshellcmd=False, is_handover=False, shellcmd="",
)  # fmt: skip
ERROR = dict(
    jobid=12, rule_name="fetch_corpus", rule_msg=None, input=[], output=["resources/data/ptb/train.txt"],
    conda_env=None, aux={}, shellcmd="python -m softmax_bottleneck.corpora.download ...", indent=False,
)  # fmt: skip


def _snakemake_terminal(name: str) -> tuple[logging.Logger, io.StringIO]:
    """A logger set up as Snakemake sets up its own (its terminal handler, filter and formatter), writing to a
    buffer instead of stderr."""
    logger = logging.getLogger(f"terminal-test-{name}")
    logger.propagate = False
    LoggerManager(logger, OutputSettings(show_failed_logs=True, enable_file_logging=False, nocolor=True))
    buffer = io.StringIO()
    handler = next(h for h in logger.handlers if h.name == "DefaultStreamHandler")
    handler.setStream(buffer)
    return logger, buffer


def _a_job(logger: logging.Logger) -> None:
    logger.info("Select jobs to execute...")
    logger.info("Execute 1 jobs...", extra=dict(event=LogEvent.JOB_STARTED, jobs=[12]))
    logger.info(" Rule: train, Jobid: 12", extra=dict(event=LogEvent.JOB_INFO, **JOB))
    logger.info("Write-protecting output file results/runs/ptb/mos/et/seed28/default-1/model.pt.")
    logger.info("Finished jobid: 12 (Rule: train)", extra=dict(event=LogEvent.JOB_FINISHED, job_id=12))
    logger.info(None, extra=dict(event=LogEvent.PROGRESS, done=1, total=186))


def test_a_job_is_one_line_with_the_step_count_and_the_last_count_stays():
    logger, buffer = _snakemake_terminal("job")
    _a_job(logger)
    full = buffer.getvalue()
    assert "input: resources/corpus/ptb.pt" in full and "reason:" in full  # Snakemake's own block: 10+ lines
    assert "1 of 186 steps (1%) done" in full
    buffer.seek(0)
    buffer.truncate()
    assert terminal.install(logger) and terminal.install(logger)  # a second install adds nothing
    _a_job(logger)
    _a_job(logger)
    logger.info(None, extra=dict(event=LogEvent.PROGRESS, done=186, total=186))
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 3, lines  # a line per job, then the final count
    assert lines[0].endswith("] job 12: train dataset=ptb, variant=mos")  # nothing counted before the first job
    assert lines[1].endswith("] job 12: train dataset=ptb, variant=mos (1 of 186 steps done)")
    assert lines[2] == "186 of 186 steps (100%) done"


def test_errors_stay_in_full_and_verbose_keeps_snakemakes_blocks(tmp_path):
    logger, buffer = _snakemake_terminal("error")
    terminal.install(logger)
    log = tmp_path / "ptb.log"
    log.write_text("fetch: ptb/train.txt: every source failed (...); ... pass --config data_mirror=DIR\n")
    logger.error(None, extra=dict(event=LogEvent.JOB_ERROR, log=[str(log)], **ERROR))
    shown = buffer.getvalue()
    assert "Error in rule fetch_corpus:" in shown and "jobid: 12" in shown and "shell:" in shown
    assert "--config data_mirror=DIR" in shown  # the failed job's log, printed in full
    logger.warning("a warning stays")
    assert "a warning stays" in buffer.getvalue()
    verbose, out = _snakemake_terminal("verbose")
    assert not terminal.install(verbose, verbose=True)
    _a_job(verbose)
    assert "reason: Missing output files" in out.getvalue()
    assert not terminal.install(logging.getLogger("terminal-test-no-handler"))  # a logger plug-in's terminal


def _finished(run, seconds_per_epoch: float, epochs: int) -> None:
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"seconds_per_epoch": seconds_per_epoch, "epochs_run": epochs}))


def test_the_time_left_is_projected_from_the_finished_runs_own_times(tmp_path):
    runs = {str(tmp_path / name): projected for name, projected in (("a", 100), ("b", 200), ("c", 300), ("d", 600))}
    plan = trainings_left.write_trainings(tmp_path / "logs" / "trainings.json", runs, slots=2)
    assert json.loads((tmp_path / "logs" / "trainings.json").read_text()) == plan
    first = "trainings: 0 of 4 done; the time left is projected once one has finished"
    assert trainings_left.progress_line(plan) == first
    _finished(tmp_path / "a", 2.5, 4)  # 10 s for a projected 100 s
    _finished(tmp_path / "b", 4.0, 5)  # 20 s for 200 s: 0.1 of the projection
    # c and d: 0.1 × (300 + 600) s at 2 at once
    assert trainings_left.progress_line(plan) == (
        "trainings: 2 of 4 done; about 45s of training left at 2 at once (from the finished runs' times)"
    )
    _finished(tmp_path / "c", 1.0, 30)
    assert "about 1m 00s of training left at 1 at once" in trainings_left.progress_line(plan)  # 60 s, one run to go
    _finished(tmp_path / "d", 1.0, 60)
    assert trainings_left.progress_line(plan) == "trainings: 4 of 4 done"


def test_the_trainings_left_command_prints_the_line_and_names_a_bad_file(tmp_path):
    plan = trainings_left.write_trainings(tmp_path / "trainings.json", {str(tmp_path / "a"): 10.0}, slots=1)
    command = [sys.executable, "-m", "softmax_bottleneck", "trainings-left"]
    done = subprocess.run([*command, str(tmp_path / "trainings.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == trainings_left.progress_line(plan)
    bad = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "trainings-left", str(tmp_path / "none.json")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.strip().startswith(f"trainings-left: {tmp_path / 'none.json'}")
    assert "Traceback" not in bad.stderr


def test_the_trainings_left_command_imports_neither_torch_nor_pandas():
    """It runs after every training: it must start in a fraction of a second."""
    code = "import sys, softmax_bottleneck.study.trainings_left; print(sorted({'torch', 'pandas'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("seconds", [float("nan"), "x"])
def test_a_run_without_usable_times_counts_as_done_without_a_time(tmp_path, seconds):
    run = tmp_path / "a"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"seconds_per_epoch": seconds, "epochs_run": 3}))
    runs = [{"run": str(run), "projected_s": 10.0}, {"run": str(tmp_path / "b"), "projected_s": 5.0}]
    line = trainings_left.progress_line({"slots": 1, "runs": runs})
    assert line.startswith("trainings: 1 of 2 done") and "nan" not in line
