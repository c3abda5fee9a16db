"""What a workflow run prints: the logger plug-in ``softmax-bottleneck`` (softmax_bottleneck.cluster.terminal), one
terminal line per job with errors in full, the trainings and jobs done with the time left of every job still to run
(softmax_bottleneck.cluster.time_left), and a heartbeat while a job runs."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest
import yaml
from snakemake.logging import LoggerManager
from snakemake.settings.types import OutputSettings
from snakemake_interface_common.plugin_registry.plugin import SettingsBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

from softmax_bottleneck.cluster import terminal, workflow_run
from softmax_bottleneck.cluster.time_left import Clock

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "softmax-bottleneck"
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


def _terminal(name: str, **settings) -> tuple[logging.Logger, LoggerManager]:
    """A logger set up as Snakemake sets up its own with ``--logger softmax-bottleneck`` (the plug-in found by
    Snakemake's registry, given Snakemake's filter and formatter), writing to this test's stderr."""
    logger = logging.getLogger(f"terminal-test-{name}")
    logger.propagate = False
    output = OutputSettings(show_failed_logs=True, enable_file_logging=False, nocolor=True,
                            log_handler_settings={PLUGIN: SettingsBase()}, **settings)  # fmt: skip
    return logger, LoggerManager(logger, output)


def _shown(manager: LoggerManager, capsys) -> list[str]:
    manager.stop()  # the plug-in's records pass Snakemake's queue: stopping it writes them all
    return capsys.readouterr().err.splitlines()


def _a_job(logger: logging.Logger, jobid: int = 12, done: int = 1) -> None:
    logger.info("Select jobs to execute...")
    logger.info(f"Execute 1 jobs...", extra=dict(event=LogEvent.JOB_STARTED, jobs=[jobid]))  # noqa: F541
    logger.info(f" Rule: train, Jobid: {jobid}", extra=dict(event=LogEvent.JOB_INFO, **{**JOB, "jobid": jobid}))
    logger.info("Write-protecting output file results/runs/ptb/mos/et/seed28/default-1/model.pt.")
    logger.info(f"Finished jobid: {jobid} (Rule: train)", extra=dict(event=LogEvent.JOB_FINISHED, job_id=jobid))
    logger.info(None, extra=dict(event=LogEvent.PROGRESS, done=done, total=186))


def test_snakemake_finds_the_plugin_that_the_default_profile_names():
    plugin = LoggerPluginRegistry().get_plugin(PLUGIN)
    assert plugin.log_handler is terminal.LogHandler
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert profile["logger"] == [PLUGIN]


def test_a_job_is_one_line_with_the_step_count_and_the_last_count_stays(capsys):
    logger, manager = _terminal("job")
    _a_job(logger, 12, 1)
    _a_job(logger, 13, 2)
    logger.warning("a warning stays")
    logger.info(None, extra=dict(event=LogEvent.PROGRESS, done=186, total=186))
    lines = _shown(manager, capsys)
    assert len(lines) == 4, lines  # a line per job, the warning, then the final count
    assert lines[0].endswith("] job 12: train dataset=ptb, variant=mos")  # nothing counted before the first job
    assert lines[1].endswith("] job 13: train dataset=ptb, variant=mos (1 of 186 steps done)")
    assert lines[2:] == ["a warning stays", "186 of 186 steps (100%) done"]


def test_errors_stay_in_full_and_verbose_and_dry_runs_keep_snakemakes_blocks(tmp_path, capsys):
    logger, manager = _terminal("error")
    log = tmp_path / "ptb.log"
    log.write_text("fetch: ptb/train.txt: every source failed (...); ... pass --config data_mirror=DIR\n")
    logger.error(None, extra=dict(event=LogEvent.JOB_ERROR, log=[str(log)], **ERROR))
    shown = "\n".join(_shown(manager, capsys))
    assert "Error in rule fetch_corpus:" in shown and "jobid: 12" in shown and "shell:" in shown
    assert "--config data_mirror=DIR" in shown  # the failed job's log, printed in full
    for setting in ("verbose", "dryrun"):
        logger, manager = _terminal(setting, **{setting: True})
        _a_job(logger)
        shown = "\n".join(_shown(manager, capsys))
        assert "reason: Missing output files" in shown and "input: resources/corpus/ptb.pt" in shown, setting


def _record(tmp_path: Path, jobs: list[tuple[int, str, str, float]], slots: int = 2) -> Path:
    path = tmp_path / "logs" / workflow_run.RECORD
    workflow_run.write(path, files=["config/small.yaml"], values={}, slots=slots,
                       jobs=[{"jobid": j, "rule": rule, "what": "", "kind": kind, "planned_s": s, "threads": 1}
                             for j, rule, kind, s in jobs])  # fmt: skip
    return path


def test_the_progress_line_comes_at_the_first_job_and_after_each_training(tmp_path, capsys, monkeypatch):
    record = _record(tmp_path, [(12, "train", "training", 10.0), (13, "train", "training", 30.0),
                                (14, "table2", "job", 5.0)])  # fmt: skip
    monkeypatch.setenv(workflow_run.RECORD_VARIABLE, str(record))
    logger, manager = _terminal("progress")
    _a_job(logger, 12, 1)
    lines = _shown(manager, capsys)
    estimating = "time left: estimating until the first training has finished"
    assert re.fullmatch(rf"\[\d\d:\d\d:\d\d\] trainings: 0 of 2 done, jobs: 0 of 3; {estimating}", lines[0])
    assert lines[1].endswith("] job 12: train dataset=ptb, variant=mos")
    # the job lasted the milliseconds between its records: the 35 s planned for the others take no longer
    assert re.match(r"\[\d\d:\d\d:\d\d\] trainings: 1 of 2 done, jobs: 1 of 3; about ", lines[2])  # stamped
    assert lines[2].endswith(" left (every job still to run, at this run's pace)") and len(lines) == 3


def test_a_heartbeat_names_the_running_jobs_after_a_silence(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(terminal, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(terminal, "POLL_SECONDS", 0.05)
    logger, manager = _terminal("heartbeat")
    logger.info(" Rule: robustness", extra=dict(event=LogEvent.JOB_INFO, **{**JOB, "rule_name": "robustness"}))
    import time

    time.sleep(0.6)
    lines = _shown(manager, capsys)
    beats = [line for line in lines if "] running: robustness dataset=ptb, variant=mos for " in line]
    assert beats and len(beats) <= 3, lines  # one per silence, not one per poll


def _clock(slots: int = 2) -> Clock:
    jobs = [(1, "fetch_corpus", "download", 0.0), (2, "train", "training", 10.0), (3, "train", "training", 10.0),
            (4, "train", "training", 20.0), (5, "analyze", "job", 5.0), (6, "table2", "job", 5.0)]  # fmt: skip
    return Clock({"slots": slots, "jobs": [{"jobid": j, "rule": r, "kind": k, "planned_s": s} for j, r, k, s in jobs]})


def test_the_time_left_is_every_job_still_to_run_at_this_runs_pace():
    clock = _clock()
    clock.start(1, 0.0)
    clock.finish(1, 50.0)  # a download: its time is the network's, no pace from it
    assert clock.seconds_left(50.0) is None and "estimating" in clock.line(50.0)
    clock.start(2, 50.0)
    clock.start(3, 50.0)
    clock.finish(2, 70.0)  # 20 s for 10 planned: pace 2
    # job 3 ran 20 of its 2 × 10 s; jobs 4, 5, 6: 2 × (20 + 5 + 5) = 60 s on 2 slots; the longest, job 4, 40 s
    assert clock.pace() == pytest.approx(2.0)
    assert clock.seconds_left(70.0) == pytest.approx(40.0)
    assert _clock(slots=1).seconds_left(0.0) is None
    one = _clock(slots=1)
    one.start(2, 0.0)
    one.finish(2, 5.0)  # pace 0.5: (10 + 20 + 5 + 5) × 0.5 on one slot
    assert one.seconds_left(5.0) == pytest.approx(20.0)
    assert one.line(5.0) == (
        "trainings: 1 of 3 done, jobs: 1 of 6; about 20s left (every job still to run, at this run's pace)"
    )
    for jobid in (1, 3, 4, 5, 6):
        one.finish(jobid, 9.0)
    assert one.line(9.0) == "trainings: 3 of 3 done, jobs: 6 of 6"


def test_a_run_without_trainings_takes_its_pace_from_any_job():
    clock = Clock({"slots": 1, "jobs": [{"jobid": 1, "rule": "table2", "planned_s": 4.0},
                                        {"jobid": 2, "rule": "table3", "planned_s": 4.0}]})  # fmt: skip
    assert clock.line(0.0) == "jobs: 0 of 2; time left: estimating until the first job has finished"
    clock.start(1, 0.0)
    clock.finish(1, 2.0)
    assert clock.seconds_left(2.0) == pytest.approx(2.0)


def test_a_command_silent_for_a_while_says_in_its_log_that_it_still_works():
    """softmax_bottleneck.cluster.heartbeat: a line after every silence of its length, none while the command logs."""
    import io
    import time

    from softmax_bottleneck.cluster import heartbeat

    logger = logging.getLogger("heartbeat-test")
    logger.propagate, logger.level = False, logging.INFO
    stream = io.StringIO()
    logger.addHandler(logging.StreamHandler(stream))
    heartbeat.start("robustness", seconds=0.3, logger=logger)
    for _ in range(6):  # talking: no heartbeat
        logger.info("step")
        time.sleep(0.1)
    assert "still working" not in stream.getvalue()
    time.sleep(1.0)  # silent
    beats = [line for line in stream.getvalue().splitlines() if line.startswith("robustness: still working, ")]
    assert 1 <= len(beats) <= 4, stream.getvalue()


def test_the_pace_follows_the_last_jobs_more_than_the_first():
    """Each finished job weighs DECAY of the next one: a machine that became 3 times slower shows in the pace."""
    from softmax_bottleneck.cluster import time_left

    clock = Clock({"slots": 1, "jobs": [{"jobid": i, "rule": "table2", "planned_s": 10.0} for i in range(3)]})
    clock.start(0, 0.0)
    clock.finish(0, 10.0)  # as planned
    clock.start(1, 10.0)
    clock.finish(1, 40.0)  # 3 times slower
    expected = (time_left.DECAY * 10.0 + 30.0) / (time_left.DECAY * 10.0 + 10.0)
    assert clock.pace() == pytest.approx(expected) and clock.pace() > 2.0
    assert clock.seconds_left(40.0) == pytest.approx(10.0 * expected)


def test_control_characters_of_a_wildcard_are_shown_escaped_never_obeyed(capsys):
    """A wildcard holding a clear-screen or a terminal-title sequence is printed as text."""
    logger, manager = _terminal("escape")
    job = {**JOB, "wildcards": {"dataset": "ptb\x1b[2J", "variant": "mos\x1b]0;title\x07"}}
    logger.info(" Rule: train, Jobid: 12", extra=dict(event=LogEvent.JOB_INFO, **job))
    lines = _shown(manager, capsys)
    assert lines[0].endswith(r"] job 12: train dataset=ptb\x1b[2J, variant=mos\x1b]0;title\x07"), lines
    assert not any(ch in "".join(lines) for ch in "\x1b\x07")


@pytest.mark.parametrize("jump", [-3600.0, 10 * 365 * 24 * 3600.0])
def test_a_clock_that_jumps_gives_time_left_unknown_until_measured_again(jump):
    """A clock stepped back an hour or forward ten years: never 'about 0 s' or 'about 4197 d' left."""
    clock = _clock(slots=1)
    clock.start(2, 0.0)
    clock.finish(2, 5.0)  # pace 0.5
    assert "about 20s left" in clock.line(5.0)
    clock.start(3, 5.0)
    if jump < 0:
        clock.finish(3, 5.0 + jump)  # it ended before it began: the clock stepped back
    else:
        clock.clock_jumped()  # the terminal saw the wall clock move against the monotonic one
        clock.finish(3, 5.0 + jump)
    line = clock.line(6.0 + jump)
    assert "time left unknown: the clock jumped" in line and "about" not in line, line
    clock.start(4, 10.0 + jump)
    clock.finish(4, 11.0 + jump)  # a job from start to end on the new clock: measured again
    assert "about" in clock.line(11.0 + jump) and "unknown" not in clock.line(11.0 + jump)


def test_the_terminal_tells_the_clock_when_the_wall_clock_jumps(tmp_path, capsys, monkeypatch):
    """The wall clock moved ten years against the monotonic one while a training ran: the time left is unknown (not
    'about 0s left' with a training still to finish), until a job has run from start to end on the new clock. The
    records go to the handler as they happen (Snakemake's queue would hand them over only at its end here)."""
    record = _record(tmp_path, [(12, "train", "training", 10.0), (13, "train", "training", 30.0),
                                (14, "table2", "job", 5.0)])  # fmt: skip
    monkeypatch.setenv(workflow_run.RECORD_VARIABLE, str(record))
    _, manager = _terminal("jump")
    (handler,) = [h for h in manager.plugin_handlers if isinstance(h, terminal.LogHandler)]

    def emit(msg, **extra):
        handler.emit(logging.makeLogRecord({"msg": msg, "levelno": logging.INFO, "levelname": "INFO", **extra}))

    for jobid in (12, 13):
        emit(f" Rule: train, Jobid: {jobid}", event=LogEvent.JOB_INFO, **{**JOB, "jobid": jobid})
    emit("Finished jobid: 12 (Rule: train)", event=LogEvent.JOB_FINISHED, job_id=12)  # a time left from here
    assert "about" in handler.clock.line()
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 10 * 365 * 24 * 3600.0)
    emit(None, event=LogEvent.PROGRESS, done=1, total=3)  # any record: the terminal looks at the clock
    line = handler.clock.line()
    assert "time left unknown: the clock jumped" in line and "about" not in line, line
    emit(" Rule: table2, Jobid: 14", event=LogEvent.JOB_INFO, **{**JOB, "jobid": 14, "rule_name": "table2"})
    emit("Finished jobid: 14 (Rule: table2)", event=LogEvent.JOB_FINISHED, job_id=14)  # measured on the new clock
    line = handler.clock.line()
    monkeypatch.setattr(time, "time", real)
    assert "about" in line and "unknown" not in line, line
    _shown(manager, capsys)
