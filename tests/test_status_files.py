"""``status``, ``preview`` and the progress page read a study's run folders as a careless or hostile user may leave
them: every file through the strict bounded reader (a progress file with impossible numbers, keys given twice,
8 GB sparse, 100,000 levels deep, a link to /dev/zero, a FIFO as the progress file, the lock or the log, a folder
that cannot be entered, a copied run), each such run one line naming its file, the good runs as before, in bounded
time and memory (a subprocess under a memory limit and a timeout: a hang or a runaway read fails, not the suite)."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import TRAIN_LOG, Study, analysis_names
from softmax_bottleneck.training.run_files import PROGRESS_NAME

SMALL = REPO / "config" / "small.yaml"
#: what one subprocess may take: a hang (a FIFO waited on) or a runaway read fails within these
SECONDS, MEMORY = 120, 3 * 2**30
#: runs into which the good files go, and how each must read
GOOD = {"finished": 0, "running": 1, "failed": 2}
#: each bad progress file: its text (``{}``: the good one, as JSON, changed by the dict) and what the reason says
BAD_PROGRESS = {
    "epoch 1e9": ({"epoch": 10**9}, "epoch = 1000000000 is impossible"),
    "epoch -3": ({"epoch": -3}, "epoch = -3 is impossible"),
    "epoch x": ({"epoch": "x"}, "epoch = 'x' is not a number"),
    "epoch list": ({"epoch": [1]}, "epoch = [1] is not a number"),
    "ppl NaN": ('"best_valid_ppl": NaN', "NaN is not a JSON number"),
    "ppl -5": ({"best_valid_ppl": -5}, "best_valid_ppl = -5 is impossible"),
    "ppl 0.5": ({"best_valid_ppl": 0.5}, "best_valid_ppl = 0.5 is impossible"),
    "wall negative": ({"wall": -3600.0}, "wall_seconds = -3600.0 is impossible"),
    "wall 1e300": ({"wall": 1e300}, "wall_seconds = 1e+300 is impossible"),
    "row without epoch": ({"no epoch": True}, "curve[1] has no epoch"),
    "key twice": ('"epoch": 1, "epoch": 2', "key 'epoch' is given twice"),
    "another run's": ({"seed": 7}, "seed = 7, but this run's is"),
    "deep": ("deep", "JSON nested 100001 deep"),
    "8 GB sparse": ("sparse", "8,589,934,592 bytes, larger than any JSON file"),
    "link to /dev/zero": ("link", "a symbolic link"),
    "FIFO": ("fifo", "not a regular file (a FIFO)"),
}


def _progress(run, **fields) -> dict:
    now = time.time()
    content = {
        "format": 1, "dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
        "epochs": int(run.hyperparameters["epochs"]), "epoch": 2, "phase": "sgd", "best_valid_ppl": 412.5,
        "best_epoch": 2, "checkpoint_seconds": 600.0, "started": now - 300, "attempt_started": now,
        "attempts": 1, "host": platform.node(), "pid": os.getpid(), "updated": now, "stopped": None, "error": None,
        "curve": [{"epoch": e, "valid_ppl": 500.0 - e, "seconds": 50.0, "wall_seconds": 60.0} for e in (1, 2)],
    }  # fmt: skip
    content.update(fields)
    return content


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _bad_progress(folder: Path, run, case) -> None:
    change, _ = case
    path = folder / ".resume" / PROGRESS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    good = _progress(run)
    if change == "deep":
        path.write_text(json.dumps(good)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif change == "sparse":
        with open(path, "wb") as handle:
            handle.truncate(8 * 2**30)
    elif change == "link":
        path.symlink_to("/dev/zero")
    elif change == "fifo":
        os.mkfifo(path)
    elif isinstance(change, str):  # raw JSON text put first into the good object
        path.write_text("{" + change + ", " + json.dumps(good)[1:])
    else:
        change = dict(change)
        if "wall" in change:
            good["curve"][0]["wall_seconds"] = change.pop("wall")
        if change.pop("no epoch", False):
            del good["curve"][1]["epoch"]
        good.update(change)
        path.write_text(json.dumps(good))


def _metrics(run, **fields) -> str:
    metrics = {"dataset": run.dataset, "variant": run.variant, "schedule": run.schedule, "seed": run.seed,
               "hyperparameters": {**run.hyperparameters, "seed": run.seed}, "parameters": 1000, "train_ppl": 300.0,
               "valid_ppl": 326.5, "test_ppl": 321.5, "seconds_per_epoch": 6.0, "epochs_run": 6,
               "switch_epoch": 5}  # fmt: skip
    return json.dumps({**metrics, **fields})


def hostile_study(root: Path, study: Study) -> dict[str, tuple]:
    """A study folder mixing good runs with every bad file of the module docstring; case → (run, the file named,
    what the line says)."""
    runs = list(study.jobs.values())
    log = {r.dir: root / TRAIN_LOG.format(**r.wildcards) for r in runs}
    cases: dict[str, tuple] = {}
    # the good runs: finished (analysed), running here, failed (the log's last line)
    run = runs[GOOD["finished"]]
    _write(root / run.dir, "model.pt", "not loaded")
    _write(root / run.dir, "metrics.json", _metrics(run))
    _write(root / run.dir, "curve.csv", "epoch,valid_ppl\n1,900\n2,700\n")
    _write(root / run.dir, analysis_names(study.config)[0], json.dumps({"press_rank": 18}))
    _write(root / runs[GOOD["running"]].dir, f".resume/{PROGRESS_NAME}", json.dumps(_progress(runs[GOOD["running"]])))
    run = runs[GOOD["failed"]]
    (root / run.dir).mkdir(parents=True)
    _write(log[run.dir].parent, log[run.dir].name, "2026-11-26 10:00:00 INFO x: epoch 1\ntrain: training diverged\n")
    free = iter(runs[len(GOOD) :])
    for name, case in BAD_PROGRESS.items():
        run = next(free)
        _bad_progress(root / run.dir, run, case)
        cases[name] = (run, f"{run.dir}/.resume/{PROGRESS_NAME}", case[1])
    run = next(free)  # a FIFO as the lock (nothing else written)
    (root / run.dir).mkdir(parents=True)
    os.mkfifo(root / run.dir / ".lock")
    cases["FIFO lock"] = (run, f"{run.dir}/.lock", "not a regular file (a FIFO)")
    run = next(free)  # a FIFO as the log (nothing else written)
    log[run.dir].parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(log[run.dir])
    cases["FIFO log"] = (run, str(log[run.dir].relative_to(root)), "not a regular file (a FIFO)")
    run = next(free)  # a folder that cannot be entered
    _write(root / run.dir, f".resume/{PROGRESS_NAME}", json.dumps(_progress(run)))
    (root / run.dir).chmod(0)
    cases["closed folder"] = (run, run.dir, "Permission denied")
    # runs whose files are readable but say something worth a note, not numbers: a 1 MB error, control characters
    run = next(free)
    _write(root / run.dir, f".resume/{PROGRESS_NAME}", json.dumps(_progress(run, error="E" * 2**20)))
    cases["1 MB error"] = (run, None, "… [cut: 1,048,576 characters in all]")
    run = next(free)
    (root / run.dir).mkdir(parents=True)
    _write(log[run.dir].parent, log[run.dir].name, "epoch 1\n\x1b[31mtrain: training diverged\x1b[0m\r\x1b[2K\r\n")
    cases["escapes in the log"] = (run, None, "train: training diverged")
    run = next(free)
    _write(root / run.dir, f".resume/{PROGRESS_NAME}", json.dumps(_progress(run, error="boom\x1b]0;owned\x07\x1b[2J")))
    cases["escapes in the error"] = (run, None, "boom")
    run = next(free)  # a run folder copied from another seed's
    _write(root / run.dir, "model.pt", "not loaded")
    _write(root / run.dir, "metrics.json", _metrics(run, seed=run.seed + 1))
    cases["copied run"] = (run, None, f"metrics.json names seed {run.seed + 1}, not {run.seed}")
    return cases


#: a process that cannot enter a folder is denied every file below it; root enters every folder, so the subprocess
#: denies it as the file system denies another user (``os.open``, ``os.stat``: what reading a run goes through)
RUNNER = r"""
import errno, os, sys
closed = sys.argv[1]
def guard(real):
    def call(path, *args, **kwargs):
        full = os.path.abspath(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if full.startswith(closed + os.sep):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))
        return real(path, *args, **kwargs)
    return call
if os.geteuid() == 0:
    os.open, os.stat, os.lstat, os.scandir = map(guard, (os.open, os.stat, os.lstat, os.scandir))
exec(sys.argv[2])
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_bounded(root: Path, closed: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter in ``root`` under :data:`MEMORY` bytes of address space, killed after
    :data:`SECONDS`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        return subprocess.run([sys.executable, "-c", RUNNER, str(root / closed), code], cwd=root, env=env,
                              capture_output=True, text=True, timeout=SECONDS, preexec_fn=_limits)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {SECONDS} s: a hang")


@pytest.fixture(scope="module")
def small() -> Study:
    return Study(study_config.check(study_config.read(SMALL)))


@pytest.fixture
def hostile(tmp_path, small):
    cases = hostile_study(tmp_path, small)
    yield tmp_path, small, cases
    (tmp_path / cases["closed folder"][0].dir).chmod(0o755)


def test_status_lists_every_unreadable_run_in_one_line_naming_its_file_and_the_good_runs_as_before(hostile):
    root, study, cases = hostile
    code = (
        "import json, time\n"
        "from softmax_bottleneck.cluster.processes import peak_resident_bytes\n"
        "from softmax_bottleneck.study import config\n"
        "from softmax_bottleneck.study.runs import Study\n"
        "from softmax_bottleneck.study.status import status_text, study_status\n"
        f"study = Study(config.check(config.read({str(SMALL)!r})))\n"
        "started = time.monotonic()\n"
        "status = study_status(study)\n"
        "seconds = time.monotonic() - started\n"
        "print(json.dumps({'text': status_text(status, every_run=True), 'status': status.as_dict(),\n"
        "                  'seconds': seconds, 'peak_bytes': peak_resident_bytes()}))\n"
    )
    result = run_bounded(root, Path(cases["closed folder"][0].dir), code)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    out = json.loads(result.stdout)
    text, runs = out["text"], {r["run"]: r for r in out["status"]["runs"]}
    assert "\x1b" not in text and "\r" not in text and len(text) < 40_000
    # the good runs, as before
    jobs = list(study.jobs.values())
    finished, running, failed = (runs[jobs[i].dir] for i in GOOD.values())
    assert (finished["state"], finished["test_ppl"], finished["press_rank"], finished["note"]) == (
        "finished", 321.5, 18, "",
    )  # fmt: skip
    assert (running["state"], running["epoch"], running["best_valid_ppl"], running["seconds_left"]) == (
        "running", 2, 412.5, 240.0,
    )  # fmt: skip
    assert (failed["state"], failed["note"]) == ("failed", "train: training diverged")
    # each bad one: one line, naming its file and why, and none of its numbers
    unreadable = [name for name, (_, file, _) in cases.items() if file]
    assert out["status"]["counts"]["unreadable"] == len(unreadable)
    for name in unreadable:
        run, file, why = cases[name]
        lines = [line for line in text.splitlines() if run.dir in line]
        assert len(lines) == 1 and file in lines[0] and why in lines[0], (name, lines)
        record = runs[run.dir]
        assert record["state"] == "unreadable" and record["epoch"] is None and record["best_valid_ppl"] is None, name
        assert record["device_seconds"] == 0 and record["seconds_left"] is None, name
    for name in ("1 MB error", "escapes in the log", "escapes in the error", "copied run"):
        run, _, says = cases[name]
        record = runs[run.dir]
        assert says in record["note"] and len(record["note"]) < 400, (name, record["note"][:500])
    assert runs[cases["copied run"][0].dir]["state"] == "finished"
    assert runs[cases["1 MB error"][0].dir]["state"] == runs[cases["escapes in the log"][0].dir]["state"] == "failed"
    # bounded: the 8 GB file was never read, nor /dev/zero, nor a FIFO waited on
    assert out["seconds"] < 20 and out["peak_bytes"] < 2**30, out


@pytest.mark.slow
def test_preview_and_the_progress_page_read_the_same_folder_without_a_traceback(hostile):
    root, _, cases = hostile
    code = (
        "from softmax_bottleneck import cli\n"
        f"raise SystemExit(cli.main(['preview', 'table2', '--config', {str(SMALL)!r}]))\n"
    )
    result = run_bounded(root, Path(cases["closed folder"][0].dir), code)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    copied = cases["copied run"][0]
    lines = result.stderr.splitlines()
    copied = [line for line in lines if f"{cases['copied run'][0].dir}/metrics.json left out of " in line]
    assert len(copied) == 1 and f"seed = {cases['copied run'][0].seed + 1} but" in copied[0], lines  # noted
    curves = [line for line in lines if "left out of the learning curves" in line]
    assert len(curves) == len({line.split(": left out")[0] for line in curves})  # each file named once
    assert any(cases["row without epoch"][0].dir in line and "curve[1] has no epoch" in line for line in curves)
    reports = root / "reports" / "small" / "preview"
    page = (reports / "progress.html").read_text()
    assert len(page) < 200_000 and "\x1b" not in page  # the 1 MB error, cut
    assert "unreadable (" in page and cases["FIFO"][0].dir in page
    table = (reports / "tables" / "table2.md").read_text()
    assert ": 1 of 20 runs in" in table  # the finished run; the copied one counts as not in


#: the cases read in-process, one test each (the 8 GB file and /dev/zero only in the bounded subprocess above)
IN_PROCESS = [name for name in BAD_PROGRESS if name not in ("8 GB sparse", "link to /dev/zero")]


def _deny(monkeypatch, folder: Path) -> None:
    """Every file below ``folder`` denied, as the file system denies a folder that cannot be entered (root enters
    every folder: the denial is made by hand there)."""
    if os.geteuid() != 0:
        return
    closed = str(folder.resolve())

    def guard(real):
        def call(path, *args, **kwargs):
            full = os.path.abspath(os.fsdecode(path)) if isinstance(path, str | bytes | os.PathLike) else ""
            if full.startswith(closed + os.sep):
                raise PermissionError(13, "Permission denied", os.fsdecode(path))
            return real(path, *args, **kwargs)

        return call

    for name in ("open", "stat", "lstat", "scandir"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))


def _read_within(seconds: float, read, fifos: list[Path]):
    """``read()`` in a thread; fails if it has not answered within ``seconds`` (a reader blocked on a FIFO is then
    released by opening the FIFO for writing)."""
    import threading

    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(value=read()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"no answer within {seconds} s: a hang")
    assert "value" in result, "the reader raised (see the thread's traceback above)"
    return result["value"]


@pytest.mark.parametrize("name", [*IN_PROCESS, "FIFO lock", "FIFO log", "closed folder"])
def test_a_run_with_one_bad_file_is_unreadable_naming_the_file_and_why(tmp_path, monkeypatch, small, name):
    from softmax_bottleneck.study.status import RunStatus, read_run_status

    cases = hostile_study(tmp_path, small)
    run, file, why = cases[name]
    if name == "closed folder":
        _deny(monkeypatch, tmp_path / run.dir)
    base = RunStatus(run=run.dir, dataset=run.dataset, variant=run.variant, schedule=run.schedule, seed=run.seed,
                     tag=run.tag, experiments=[], state="not started", epochs=int(run.hyperparameters["epochs"]),
                     projected_hours=1.0)  # fmt: skip
    log = tmp_path / TRAIN_LOG.format(**run.wildcards)
    fifos = [p for p in (tmp_path / file, log) if p.is_fifo()] if name != "closed folder" else []
    try:
        status = _read_within(20, lambda: read_run_status(tmp_path / run.dir, log, "rank.json", base, time.time()),
                              fifos)  # fmt: skip
    finally:
        (tmp_path / cases["closed folder"][0].dir).chmod(0o755)
    assert status.state == "unreadable" and status.note.startswith(str(tmp_path / file)) and why in status.note
    assert status.epoch is None and status.best_valid_ppl is None and status.seconds_left is None


def test_a_progress_file_written_by_the_trainer_passes_its_bounds_and_is_read_as_written(tmp_path, small):
    """The bounds refuse nothing the trainer writes: its own progress file, read back, equals what it wrote."""
    from softmax_bottleneck import readback

    run = next(iter(small.jobs.values()))
    path = _write(tmp_path, PROGRESS_NAME, json.dumps(_progress(run, epoch=0, best_epoch=0, best_valid_ppl=None,
                                                                curve=[])))  # fmt: skip
    assert readback.check_progress(readback.load_json(path), path, 6, {"seed": run.seed})["epoch"] == 0


@pytest.mark.parametrize("name", ["row without epoch", "deep", "key twice", "epoch x", "FIFO"])
def test_the_learning_curves_leave_out_a_bad_progress_file_naming_it(tmp_path, small, caplog, name):
    from softmax_bottleneck.study.status import learning_curve

    run = list(small.jobs.values())[3]
    _bad_progress(tmp_path, run, BAD_PROGRESS[name])
    path = tmp_path / ".resume" / PROGRESS_NAME
    fifos = [path] if name == "FIFO" else []
    assert _read_within(20, lambda: learning_curve(tmp_path), fifos) == []
    assert f"{path}: left out of the learning curves: " in caplog.text and BAD_PROGRESS[name][1] in caplog.text
    _bad_progress(tmp_path / "good", run, ({}, ""))
    assert learning_curve(tmp_path / "good") == [(1, 499.0), (2, 498.0)]


def test_the_preview_leaves_out_a_copied_run_naming_it_and_counts_it_as_not_in(tmp_path, small, caplog):
    """A run folder copied from another seed's: its metrics.json names that seed. Before, the preview stopped with a
    traceback; now the run is left out, named in one line, and its table counts it as not in."""
    from softmax_bottleneck.report import preview

    main = [r for r in small.experiments["main"] if (r.dataset, r.variant) == ("ptb", "softmax")]
    for run, seed in ((main[0], main[0].seed), (main[1], main[0].seed)):  # the second, a copy of the first
        _write(tmp_path / run.dir, "model.pt", "x")
        _write(tmp_path / run.dir, "metrics.json", _metrics(run, seed=seed))
    outcome = preview.render_preview(small, directory=tmp_path, stamp="2026-11-27 12:00", names={"table2"})
    assert outcome["table2"] == "rendered"
    named = [r.getMessage() for r in caplog.records if "left out of main.csv" in r.getMessage()]
    assert len(named) == 1 and f"{main[1].dir}/metrics.json" in named[0] and f"seed = {main[0].seed} but" in named[0]
    table = (tmp_path / "reports" / "small" / "preview" / "tables" / "table2.md").read_text()
    assert ": 1 of 20 runs in" in table
