"""A configuration is read once, by the package (softmax_bottleneck.study.config.read/load), as a hostile file may be:
a YAML bomb, a recursive alias, a key given twice, bytes that are not UTF-8, a 100,000-deep nesting each end in one line
naming the file and the line, quickly and in little memory; several files merge as Snakemake merges them; and
``--config`` values reach the schema typed as it says."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "config" / "small.yaml"


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width ** levels strings expanded."""
    lines = [f"l0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def bomb_config(where: str, levels: int = 9) -> str:
    """config/small.yaml with a YAML bomb placed at ``where`` (a grid of sweeps, a dataset block, the banner)."""
    text = SMALL.read_text(encoding="utf-8")
    anchors = "x_anchors:\n" + "".join(f"  {line}\n" for line in billion_laughs(levels).splitlines())
    last = f"*a{levels}"
    if where == "report_banner":
        text = text.replace('report_banner: "small scale — pipeline check, not the paper"', f"report_banner: {last}")
    elif where == "model_overrides":
        text = text.replace("    wt2: {epochs: 3,", f"    wt2: {{bomb: {last}, epochs: 3,")
    else:
        text += "sweeps:\n  laughs:\n    variant: mos\n    datasets: [ptb]\n    schedule: et\n    seeds: authors\n"
        text += f"    grid: {{n_experts: {last}}}\n"
    return anchors + text


def _refused(path: Path, *phrases: str) -> study_config.ConfigError:
    with pytest.raises(study_config.ConfigError) as err:
        study_config.read(path)
    assert str(path) in err.value.source and "\n" not in str(err.value)
    for phrase in phrases:
        assert phrase in f"{err.value.source}: {err.value}"
    return err.value


@pytest.mark.parametrize("where", ["sweeps", "model_overrides", "report_banner"])
def test_a_yaml_bomb_is_refused_within_5_s_and_200_mb_naming_the_file_and_line(tmp_path, where):
    path = tmp_path / "laughs.yaml"
    path.write_text(bomb_config(where), encoding="utf-8")
    tracemalloc.start()
    started = time.monotonic()
    try:
        _refused(path, f"{path}, line 11: YAML aliases expand the configuration by", "billion laughs")
        seconds = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 5 and peak < 200 * 2**20, (seconds, peak)


def test_aliases_within_the_bound_are_read_as_yaml_reads_them(tmp_path):
    path = tmp_path / "anchors.yaml"
    text = SMALL.read_text(encoding="utf-8").replace(
        "    softmax: {nemb: 16, nhid: 32, nhidlast: 16}", "    softmax: &tiny {nemb: 16, nhid: 32, nhidlast: 16}"
    )
    path.write_text(text + "x_two: [*tiny, *tiny]\n", encoding="utf-8")
    assert study_config.read(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("a: &x [1, *x]\n", ["line 1: a recursive alias"]),
        ("seeds: {random: [1]}\noutput_subdir: a\nseeds: {random: [2]}\n", ["line 3: key 'seeds' is given twice"]),
        ("report_banner: ok\nmodel_overrides: {all: {lr: 1.0, lr: 2.0}}\n", ["line 2: key 'lr' is given twice"]),
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", ["line 1", "nest"]),
        ("a:\n" + "".join("  " * i + f"b{i}:\n" for i in range(1, 80)) + "  " * 80 + "c: 1\n", ["over 64 levels"]),
        ("a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 100)), ["over 64 levels deep"]),
    ],
    ids=["recursive alias", "key twice", "nested key twice", "100000 deep", "80 levels", "deep through aliases"],
)
def test_a_hostile_structure_is_one_line_naming_the_file_and_line(tmp_path, text, phrases):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    _refused(path, *phrases)


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes('output_subdir: x\nreport_banner: "caf\xe9"\n'.encode("latin-1"))
    _refused(path, f"{path}, line 2: not UTF-8 text (byte 0xe9)")


def test_a_file_over_a_megabyte_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("a: " + "x" * (2**20) + "\n")
    _refused(path, "over the 1,048,576 a configuration may have")


def test_a_folder_is_refused_and_a_link_to_a_file_is_read(tmp_path):
    _refused(tmp_path, "cannot be read: not a regular file (a folder)")
    link = tmp_path / "link.yaml"
    link.symlink_to(SMALL)  # a configuration kept elsewhere, linked: read as the file it names
    assert study_config.read(link) == study_config.read(SMALL)


def _within_3_gb() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


@pytest.mark.parametrize(("kind", "why"), [("fifo", "a FIFO"), ("/dev/zero", "a character device")])
def test_plan_on_a_fifo_or_a_device_ends_in_one_line_at_once(tmp_path, kind, why):
    """Before, ``plan --config`` on a FIFO waited forever for a writer and on /dev/zero read until MemoryError (here in
    a process of at most 3 GB, given 60 s)."""
    path = tmp_path / "config.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path(kind)
    command = [sys.executable, "-m", "softmax_bottleneck", "plan", "--config", str(path)]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            preexec_fn=_within_3_gb)  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[0].endswith(f"plan: {path}: cannot be read: not a regular file ({why})"), lines
    assert time.monotonic() - started < 30


# --------------------------------------------------------------------------------------------- several files, --config
def _patch(tmp_path, text: str) -> Path:
    path = tmp_path / "patch.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_several_files_merge_as_snakemake_merges_them(tmp_path):
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config

    patch = _patch(tmp_path, "output_subdir: mine\nseeds: {random: [5, 6]}\nmodel_overrides: {all: {epochs: 2}}\n")
    ours = study_config.load([SMALL, patch])
    theirs: dict = {}
    for path in (SMALL, patch):
        update_config(theirs, load_configfile(path))
    assert ours == theirs
    assert ours["seeds"]["random"] == [5, 6] and ours["model_overrides"]["all"]["nlayers"] == 1


def test_plan_merges_several_config_files(tmp_path, capsys):
    from softmax_bottleneck.cli import main

    patch = _patch(tmp_path, "seeds: {random: [1627000489, 77]}\n")
    assert main(["plan", "--config", str(SMALL), "--config", str(patch)]) == 0
    out = capsys.readouterr().out
    merged = Study(study_config.check(study_config.load([SMALL, patch])))
    small = Study(study_config.check(study_config.read(SMALL)))
    assert len(merged.jobs) > len(small.jobs)
    assert f"Training plan of {SMALL} + {patch}: {len(merged.jobs)} training jobs" in out


@pytest.mark.parametrize("command", ["plan", "status", "preview"])
@pytest.mark.parametrize(
    ("patch", "file", "why"),
    [("model_overrides: {all: {lr: fast}}\n", "{source}: ", "model_overrides/all/lr: 'fast' is not of type 'number'"),
     ("seeds: [1, 2\n", "{patch}, line 2, column 1: ", "YAML syntax error"),
     ("sweeps: {s: {variant: gss, datasets: [ptb], schedule: et, seeds: all, grid: {gss_c: [1.0]}, x: 1}}\n",
      "{source}: ", "sweeps/s")],
    ids=["a wrong type", "a syntax error", "an unknown sweep key"],
)  # fmt: skip
def test_each_command_that_reads_a_study_refuses_a_bad_one_in_one_line_naming_the_file(
    tmp_path, caplog, command, patch, file, why
):
    from softmax_bottleneck.cli import main

    path = _patch(tmp_path, patch)
    directory = [] if command == "plan" else ["--directory", str(tmp_path)]
    assert main([command, "--config", str(SMALL), "--config", str(path), *directory]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    where = file.format(source=f"{SMALL} + {path}", patch=path)
    assert len(errors) == 1 and errors[0].startswith(f"{command}: {where}") and why in errors[0], errors
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written


def _snakemake_config(*entries: str) -> dict:
    """What Snakemake makes of ``--config ENTRY ...`` (its own parser)."""
    from snakemake.cli import parse_config

    return parse_config(list(entries))


@pytest.mark.parametrize(
    ("entry", "where", "typed"),
    [
        ("model_overrides={all: {lr: 2.0}}", ("model_overrides", "all", "lr"), 2.0),
        ("model_overrides={all: {wdecay: 1e-6, tf32: true}}", ("model_overrides", "all", "wdecay"), 1e-6),
        ("model_overrides={variants: {gss: {gss_c: -1}}}", ("model_overrides", "variants", "gss", "gss_c"), -1),
        ("allow_cpu_training=false", ("allow_cpu_training",), False),
        ("data_mirror=null", ("data_mirror",), None),
        ("report_banner=2021", ("report_banner",), "2021"),
        ("output_subdir=small", ("output_subdir",), "small"),
        ("analysis={rank_rows: 300}", ("analysis", "rank_rows"), 300),
    ],
)
def test_config_values_reach_the_schema_typed_as_it_says(entry, where, typed):
    config = study_config.load([SMALL], _snakemake_config(entry))
    value = config
    for key in where:
        value = value[key]
    assert value == typed and type(value) is type(typed)
    study_config.check(config)


def test_a_number_with_an_exponent_in_a_file_is_a_number(tmp_path):
    """``wdecay: 1e-6`` in a configuration file is 1e-06, as on the command line and in YAML 1.2 (before: the text
    '1e-6', refused as "not of type 'number'"; PyYAML's YAML 1.1 needs 1.0e-6). Quoted, it stays text."""
    mine = tmp_path / "mine.yaml"  # laid over the small scale, as a user's second --configfile
    mine.write_text("model_overrides:\n  all:\n    wdecay: 1e-6\n    lr: 2E+1\nreport_banner: '1e3'\n")
    config = study_config.load([SMALL, mine], {})
    assert config["model_overrides"]["all"]["wdecay"] == 1e-6 and config["model_overrides"]["all"]["lr"] == 20.0
    assert config["report_banner"] == "1e3"
    study_config.check(config)


def test_a_swept_list_on_the_command_line_is_typed_per_hyperparameter():
    entry = "sweeps={k: {variant: mos, datasets: [ptb], schedule: et, seeds: authors, grid: {n_experts: [2, 3]}}}"
    config = study_config.load([SMALL], _snakemake_config(entry))
    assert config["sweeps"]["k"]["grid"]["n_experts"] == [2, 3]
    assert len(Study(study_config.check(config)).sweeps["k"]) == 2


def test_a_value_the_schema_refuses_is_still_named(tmp_path):
    config = study_config.load([SMALL], _snakemake_config("model_overrides={all: {lr: fast}}"))
    with pytest.raises(study_config.ConfigError, match=r"^model_overrides/all/lr: 'fast' is not of type 'number'"):
        study_config.check(config)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("fusion={runs_per_job: 0}", "fusion/runs_per_job: 0 is less than the minimum of 1"),
        ("model_overrides={all: {epochs: -3}}", "model_overrides/all/epochs: -3 is less than the minimum of 1"),
        ("model_overrides={all: {sed: 3}}", "model_overrides/all: unknown hyper-parameter 'sed'"),
        ("allow_cpu_training=maybe", "allow_cpu_training: 'maybe' is not of type 'boolean'"),
    ],
)
def test_a_command_line_value_out_of_range_is_named_as_the_command_lines(entry, why):
    """Before, `--config 'fusion={runs_per_job: 0}'` said "config/small.yaml: fusion/runs_per_job: '0' is not of type
    'integer'": the file blamed, and the range said as a type (the text kept where no reading fitted)."""
    overrides = _snakemake_config(entry)
    with pytest.raises(study_config.ConfigError) as err:
        study_config.check(study_config.load([SMALL], overrides))
    assert str(err.value).startswith(why), str(err.value)
    assert study_config.blamed_source(err.value, str(SMALL), overrides) == "--config"
    assert study_config.blamed_source(err.value, str(SMALL), {"output_subdir": "x"}) == str(SMALL)  # a file's value


def test_no_configuration_writes_into_a_folder_of_the_papers_outputs():
    """Every folder the workflow and the package write below results/ and reports/ for the paper's configuration
    (``output_subdir: null``) is refused as another configuration's ``output_subdir``. Before, `output_subdir:
    preview` was accepted, and `preview` of the paper's study then emptied that configuration's summaries."""
    import re

    from softmax_bottleneck.report.progress import PREVIEW

    pattern = re.compile(r"(?:\{(?:RESULTS|REPORTS|results|reports)\}|\"(?:results|reports))/([A-Za-z_]+)")
    written = {PREVIEW}
    for path in [*(ROOT / "workflow").rglob("*.smk"), ROOT / "Snakefile", *(ROOT / "src").rglob("*.py")]:
        written |= set(pattern.findall(path.read_text(encoding="utf-8")))
    assert {"summary", "tables", "runs", "fused", "preview"} <= written  # the scan finds them
    reserved = set(study_config.read_schema()["properties"]["output_subdir"]["oneOf"][1]["not"]["enum"])
    assert written <= reserved, sorted(written - reserved)
    config = study_config.read(SMALL)
    for name in sorted(written):
        with pytest.raises(study_config.ConfigError, match="output_subdir"):
            study_config.check({**config, "output_subdir": name})


# --------------------------------------------------------------------------------------------- through snakemake
def _snakemake(workdir: Path, *args: str):
    cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), *args, "--directory", str(workdir)]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=workdir)


def test_snakemake_refuses_a_yaml_bomb_in_one_line_before_expanding_it(tmp_path):
    """Snakemake parses a --configfile itself (aliases stay shared references, cheap); the package's reading of the same
    file then refuses it before anything walks the expansion (that once took over 300 s and growing memory)."""
    path = tmp_path / "laughs.yaml"
    path.write_text(bomb_config("report_banner"), encoding="utf-8")
    started = time.monotonic()
    result = _snakemake(tmp_path, "--configfile", str(path))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and time.monotonic() - started < 120, output[-2000:]
    assert "laughs.yaml, line 11: YAML aliases expand the configuration by" in output, output[-2000:]
    assert "Traceback" not in output


def test_snakemake_trains_with_the_typed_config_values(tmp_path):
    result = _snakemake(tmp_path, "--printshellcmds", "--configfile", str(SMALL), "--config",
                        "model_overrides={all: {lr: 2.0}}", "allow_cpu_training=false")  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-2000:]
    assert "--set lr=2.0" in output
    refused = _snakemake(tmp_path, "--configfile", str(SMALL), "--config", "fusion={runs_per_job: 0}")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Traceback" not in output, output[-2000:]
    assert "--config: fusion/runs_per_job: 0 is less than the minimum of 1" in output, output[-2000:]


def test_more_rank_rows_than_any_test_set_has_are_refused():
    """Before, `rank_rows: 100000000` passed and analysed every model's whole test set again, under rank-100000000.json
    (9 minutes for one smoke model); the largest test split's rows still pass."""
    config = study_config.read(SMALL)
    for rows, fine in ((245_568, True), (245_569, False), (100_000_000, False)):
        config["analysis"]["rank_rows"] = rows
        if fine:
            study_config.check(config)
            continue
        with pytest.raises(study_config.ConfigError, match=r"^analysis/rank_rows: .* is more rows than any test set"):
            study_config.check(config)


def test_a_yte_template_is_refused_saying_its_python_has_already_run(tmp_path):
    """Snakemake renders a config with ``__use_yte__: true`` as a YTE template, evaluating its ``?`` expressions while
    it loads the file, before the workflow can refuse it: the refusal says so (before: "unknown key(s)" alone)."""
    path = tmp_path / "yte.yaml"
    path.write_text("__use_yte__: true\n" + SMALL.read_text(encoding="utf-8"), encoding="utf-8")
    config = study_config.load([path], {})
    with pytest.raises(study_config.ConfigError) as err:
        study_config.check(config)
    assert str(err.value).startswith("(top level): unknown key(s) ['__use_yte__']")
    assert "Snakemake has already run its Python expressions" in str(err.value)


def test_the_schemas_datasets_and_schedules_are_the_presets():
    """The configuration schema (workflow/schemas/, read by the workflow catalogue too) names the datasets and
    schedules the presets define, no other."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.study.config_file import read_schema

    defs = read_schema()["$defs"]
    assert defs["dataset"]["enum"] == list(presets.DATASETS)
    assert defs["schedule"]["enum"] == list(presets.SCHEDULES)
