"""The progress page a person keeps open while the study runs (softmax_bottleneck.report.progress) and the time it
speaks of (softmax_bottleneck.study.status): it reloads itself, links the learning curves and the provisional tables
and figures, says when the trainings finished and what is still to come, speaks of CPU time where the runs trained on
a CPU, and shows the workflow's own time left; its learning curves tell two seeds of one model apart."""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import pytest

from softmax_bottleneck.cluster import workflow_run
from softmax_bottleneck.report import progress
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.status import status_text, study_status

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small() -> Study:
    return Study(study_config.check(study_config.read(REPO / "config" / "small.yaml")))


def _finish(root: Path, run, device: str = "cpu", curve: str = "epoch,valid_ppl\n1,900\n2,700\n") -> None:
    folder = root / run.dir
    folder.mkdir(parents=True)
    (folder / "model.pt").write_bytes(b"x")
    metrics = {
        "dataset": run.dataset,
        "variant": run.variant,
        "schedule": run.schedule,
        "seed": run.seed,
        "test_ppl": 300.0,
        "valid_ppl": 305.0,
        "seconds_per_epoch": 2.0,
        "epochs_run": 6,
        "device": device,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))  # fmt: skip
    (folder / "curve.csv").write_text(curve)


def test_the_page_reloads_itself_and_links_what_lies_beside_it(tmp_path, small):
    _finish(tmp_path, small.experiments["main"][0])
    page_file, curves = progress.progress_files(small)
    page = progress.study_page(small, study_status(small, directory=tmp_path), tmp_path)
    assert f'<meta http-equiv="refresh" content="{progress.REFRESH_SECONDS}">' in page
    links = re.findall(r'<a href="([^"]+)">', page)
    folder = (tmp_path / page_file).parent
    assert {str((folder / link).relative_to(tmp_path)) for link in links if link.startswith("learning_curves/")} == set(
        curves
    )
    assert "tables/table2.html" in links and "figures/sm_figure2.png" in links and "figures/figure1.png" in links
    assert ">Table 2</a>" in page and ">SM Figure 2</a>" in page
    # the provisional claims page, and why its "n of N runs in" is not the training jobs' count
    assert "claims.html" in links  # beside the page, where `snakemake preview` writes it (tests/test_smoke.py)
    assert f"Its N is thus not the {len(small.jobs)} training jobs above" in html.unescape(page)
    assert f"<p>{len(small.jobs)} training jobs; runs by state per experiment" in page
    assert "All 51 trainings have finished" not in page


def test_at_the_small_scale_the_page_and_status_speak_of_cpu_time(tmp_path, small):
    _finish(tmp_path, small.experiments["main"][0])
    text = status_text(study_status(small, directory=tmp_path, config="config/small.yaml"))
    assert "CPU time spent: 0.00 CPU-hours" in text and "V100 GPU-hours do not apply" in text
    assert "The plan projects" not in text and "GPU time" not in text
    page = progress.progress_page(study_status(small, directory=tmp_path))
    assert "CPU time spent" in page and "The plan projects" not in page


def test_status_and_the_page_show_the_workflows_own_time_left(tmp_path, small):
    """The record and the time left written as the workflow and its terminal write them, now (the real clock)."""
    logs = tmp_path / "logs" / "small"
    workflow_run.write(logs / workflow_run.RECORD, files=["config/small.yaml"], values={}, slots=2, jobs=[])
    line = "trainings: 3 of 51 done, jobs: 20 of 186; about 7m 40s left (every job still to run, at this run's pace)"
    workflow_run.write_time_left(logs / workflow_run.RECORD, line, 460.0)
    written = json.loads((logs / workflow_run.TIME_LEFT).read_text())["written"]
    assert abs(written - time.time()) < 60  # a Unix time, read back as one
    status = study_status(small, directory=tmp_path)
    assert status.workflow == {"written": written, "line": line, "seconds_left": 460.0}
    stamp = time.strftime("%H:%M", time.localtime(written))
    shown = f"The workflow running this study, at {stamp} ("
    assert shown in status_text(status) and f"{line}." in status_text(status)
    page = progress.progress_page(status)
    assert shown in page and html.escape(line) in page
    # a file that is not one is named with what is wrong, and shown as that line instead
    (logs / workflow_run.TIME_LEFT).write_text('{"written": "soon", "line": "x", "seconds_left": null}')
    error = study_status(small, directory=tmp_path).workflow["error"]
    assert "time_left.json" in error and "written = 'soon' is not a number" in error
    # a time left written before the workflow now running started is an older run's: not shown
    later = time.time() + 5
    workflow_run.write(logs / workflow_run.RECORD, files=["config/small.yaml"], values={}, slots=2, jobs=[],
                       started=later)  # fmt: skip
    workflow_run.write_time_left(logs / workflow_run.RECORD, line, 460.0)
    assert study_status(small, directory=tmp_path).workflow is None
    # its line is a file's text: a terminal's escape sequences in it are not obeyed (before, printed raw)
    workflow_run.write(logs / workflow_run.RECORD, files=["config/small.yaml"], values={}, slots=2, jobs=[],
                       started=time.time() - 5)  # fmt: skip
    workflow_run.write_time_left(logs / workflow_run.RECORD, "\x1b[2J\x1b]0;owned\x07jobs: 1 of 2", 60.0)
    text = status_text(study_status(small, directory=tmp_path))
    assert "jobs: 1 of 2." in text and "\x1b" not in text and "\x07" not in text and "owned" not in text


@pytest.mark.parametrize("ok", [True, False], ids=["finished", "failed"])
def test_a_workflow_run_that_has_ended_is_not_shown_as_running(tmp_path, small, monkeypatch, ok):
    """Before, the last line of a workflow run that had failed an hour ago read "The workflow running this study, at
    ...": onsuccess / onerror now mark its end (workflow_run.mark_ended), with the writers the workflow calls; the
    terminal may still print and keep its last line after that, and the run stays ended."""
    logs = tmp_path / "logs" / "small"
    record = logs / workflow_run.RECORD
    monkeypatch.delenv(workflow_run.RECORD_VARIABLE, raising=False)
    workflow_run.mark_ended(ok)  # a run that recorded nothing (only `plan`, say): nothing to mark
    assert not (logs / workflow_run.ENDED).exists()
    workflow_run.write(record, files=["config/small.yaml"], values={}, slots=2, jobs=[])
    monkeypatch.setenv(workflow_run.RECORD_VARIABLE, str(record))
    line = "trainings: 3 of 51 done, jobs: 20 of 186; about 7m 40s left (every job still to run, at this run's pace)"
    workflow_run.write_time_left(record, line, 460.0)
    assert "The workflow running this study, at " in status_text(study_status(small, directory=tmp_path))
    workflow_run.mark_ended(ok)
    last = "trainings: 51 of 51 done, jobs: 186 of 186."
    workflow_run.write_time_left(record, last, 0.0)  # the terminal's last line, after onsuccess (seen in the smoke)
    status = study_status(small, directory=tmp_path)
    assert status.workflow["ended"] == ("finished" if ok else "failed") and status.workflow["line"] == last
    how = "finished" if ok else "stopped on an error or an interruption"
    shown = f"The workflow's last run of this study {how} at {time.strftime('%H:%M')} ("
    assert shown in status_text(status) and f"its last line: {last}." in status_text(status)
    assert "The workflow running this study" not in status_text(status)
    assert html.escape(shown) in progress.progress_page(status)
    ended = json.loads((logs / workflow_run.ENDED).read_text())
    (logs / workflow_run.ENDED).write_text(json.dumps({**ended, "ended": "paused"}))
    assert "ended = 'paused' is none of finished, failed" in study_status(small, directory=tmp_path).workflow["error"]
    # the next run of the study: the end marked before it started is not its end
    (logs / workflow_run.ENDED).write_text(json.dumps(ended))
    workflow_run.write(record, files=["config/small.yaml"], values={}, slots=2, jobs=[], started=time.time() + 1)
    time.sleep(1.1)
    workflow_run.write_time_left(record, line, 460.0)
    assert "The workflow running this study, at " in status_text(study_status(small, directory=tmp_path))


def test_a_controller_killed_outright_is_not_shown_as_running(tmp_path, small):
    """Before, 14 s after a SIGKILL of the controller `status` said "The workflow running this study, ...: about 7s
    left": a run killed outright marks no end. Its record names its process: on its machine, a process that is gone
    is said as such; one that still runs is still running. The record and the line are written by a real process."""
    import signal
    import subprocess
    import sys

    logs = tmp_path / "logs" / "small"
    record = logs / workflow_run.RECORD
    line = "trainings: 3 of 51 done, jobs: 20 of 186; about 7s left (every job still to run, at this run's pace)"
    writer = (
        "import sys, time\n"
        "from softmax_bottleneck.cluster import workflow_run\n"
        f"workflow_run.write({str(record)!r}, files=['config/small.yaml'], values={{}}, slots=2, jobs=[])\n"
        f"workflow_run.write_time_left({str(record)!r}, {line!r}, 7.0)\n"
        "print('written', flush=True)\n"
        "time.sleep(600)\n"
    )
    controller = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    try:
        assert controller.stdout.readline() == "written\n"
        assert json.loads(record.read_text())["pid"] == controller.pid
        running = status_text(study_status(small, directory=tmp_path))
        assert f"The workflow running this study, at {time.strftime('%H:%M')} (" in running
    finally:
        controller.send_signal(signal.SIGKILL)
        controller.wait()
    status = study_status(small, directory=tmp_path)
    text = status_text(status)
    gone = (f"The workflow's last run of this study stopped without an end: its Snakemake (process {controller.pid} "
            f"on this machine) is gone; its last line, at {time.strftime('%H:%M')} (")  # fmt: skip
    assert gone in text and f"{line}." in text and "The workflow running this study" not in text
    assert html.escape(gone) in progress.progress_page(status)
    # on another machine the process cannot be looked at: still said as running (never called dead by guess)
    moved = json.loads(record.read_text()) | {"host": "another-machine"}
    record.write_text(json.dumps(moved))
    assert "The workflow running this study, at " in status_text(study_status(small, directory=tmp_path))


def test_after_the_last_training_the_page_says_when_and_what_is_still_to_come(tmp_path, small):
    runs = list(small.jobs.values())
    for run in runs:
        _finish(tmp_path, run)
    page = progress.study_page(small, study_status(small, directory=tmp_path), tmp_path)
    assert f"All {len(runs)} trainings have finished, the last at " in page
    analyses, planned, made, items = progress.still_to_come(small, tmp_path)
    assert analyses == 0 and planned > len(runs) and made == 0 and items >= 33
    assert f"Still to come: the analyses (0 of their {planned} result files are written)" in page
    assert f"the tables and figures (0 of {items} made)" in page


def test_the_learning_curves_tell_two_seeds_of_one_model_apart(tmp_path, small):
    main = [r for r in small.experiments["main"] if r.dataset == "ptb" and r.variant == "softmax"]
    assert len({r.seed for r in main}) == 2
    for i, run in enumerate(main):
        _finish(tmp_path, run, curve=f"epoch,valid_ppl\n1,{900 + i}\n2,{700 + i}\n")
    status = study_status(small, directory=tmp_path)
    fig = progress.learning_curves(status, "main", tmp_path)
    lines = [line for line in fig.axes[0].lines if len(line.get_xdata())]
    assert len(lines) == 2 and lines[0].get_color() == lines[1].get_color()
    assert lines[0].get_marker() != lines[1].get_marker()
    legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert legend[0] == "Softmax" and sorted(legend[1:]) == sorted(f"seed {r.seed}" for r in main)
