"""Numbers read back from a run are checked for what is possible (softmax_bottleneck.readback), through the commands
that read them: ``summarize`` (metrics.json, rank.json, per-model CSVs), ``table`` (the summaries) and ``lm-report``.
Each refusal is one line naming the file and the key (or column and row); nothing is written."""

from __future__ import annotations

import json
import math
import os

import pytest

from softmax_bottleneck import bounds, readback
from softmax_bottleneck.cli import main

METRICS = {
    "dataset": "ptb",
    "variant": "softmax",
    "schedule": "et",
    "seed": 141,
    "hyperparameters": {"epochs": 12, "gss_c": None, "gss_k": None, "n_experts": None, "dropoutl": None},
    "parameters": 24_221_600,
    "trainable_parameters": 24_221_600,
    "train_ppl": 33.5,
    "valid_ppl": 59.5,
    "valid_loss": math.log(59.5),
    "test_ppl": 57.0,
    "test_loss": math.log(57.0),
    "epochs_run": 12,
    "best_epoch": 11,
    "switch_epoch": 5,
    "seconds_per_epoch": 1.25,
}
RANK = {"press_rank": 402, "effective_rank": {"1e-3": 100, "1e-4": 300, "1e-5": 402}, "shape": [82429, 10000]}


def _summarize(tmp_path, capsys, metrics_text: str, rank: dict = RANK):
    """``summarize --kind runs`` of one run whose metrics.json is ``metrics_text``: (exit message, output path)."""
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "metrics.json").write_text(metrics_text)
    (run / "rank.json").write_text(json.dumps(rank))
    out = tmp_path / "main.csv"
    record = f"experiment=main,dataset=ptb,variant=softmax,schedule=et,seed=141,seed_kind=authors,metrics={run}/"
    record += f"metrics.json,rank={run}/rank.json"
    try:
        code = main(["summarize", "--kind", "runs", "--out", str(out), "--record", record])
    except SystemExit as exc:
        return str(exc), out
    return code, out


def test_possible_numbers_are_summarised(tmp_path, capsys):
    code, out = _summarize(tmp_path, capsys, json.dumps(METRICS))
    assert code == 0 and out.is_file()
    frame = readback.read_csv(out)
    assert frame.loc[0, "test_ppl"] == 57.0 and frame.loc[0, "press_rank"] == 402


IMPOSSIBLE_METRICS = {
    "negative perplexity": ({"test_ppl": -5}, "test_ppl = -5 is impossible (a perplexity is at least 1)"),
    "perplexity below 1": ({"valid_ppl": 0.5}, "valid_ppl = 0.5 is impossible"),
    "negative loss": ({"test_loss": -0.1}, "test_loss = -0.1 is impossible (a loss is at least 0)"),
    "epochs beyond the run's": ({"epochs_run": 13}, "epochs_run = 13 is impossible: the run has hyperparameters"),
    "best epoch after the last": ({"best_epoch": 14}, "best_epoch = 14 is impossible: the run stopped after"),
    "switch after the last epoch": ({"switch_epoch": 40}, "switch_epoch = 40 is impossible"),
    "epoch 0": ({"best_epoch": 0}, "best_epoch = 0 is impossible (epochs count from 1, at most 100,000)"),
    "fractional parameters": ({"parameters": 2.5}, "parameters = 2.5 is not a whole number"),
    "no test perplexity": ({"test_ppl": None}, "missing key(s) test_ppl"),  # before, summarised as a blank cell
    # before, an AttributeError's traceback (environment) or taken as no hyper-parameters
    "environment a list": ({"environment": [1]}, "environment is not an object"),
    "software a string": ({"environment": {"software": "torch"}}, "environment.software is not an object"),
    "hyperparameters a list": ({"hyperparameters": []}, "hyperparameters is not an object"),
    # before, a float skipped the comparison with the run's epochs: summarize wrote epochs_run = 100000
    "float epochs beyond the run's": ({"epochs_run": 100_000.0}, "epochs_run = 100000.0 is impossible: the run has"),
}


@pytest.mark.parametrize("case", sorted(IMPOSSIBLE_METRICS))
def test_an_impossible_metric_is_one_line_naming_the_file_and_key(tmp_path, capsys, case):
    change, named = IMPOSSIBLE_METRICS[case]
    message, out = _summarize(tmp_path, capsys, json.dumps({**METRICS, **change}))
    path = tmp_path / "run" / "metrics.json"
    assert message.startswith(f"summarize: {path}: {named}"), message
    assert "\n" not in message and not out.exists()


def test_a_key_given_twice_is_refused_not_read_as_the_last(tmp_path, capsys):
    text = json.dumps(METRICS)[:-1] + ', "test_ppl": 12.0}'  # JSON keeps the last value without a word
    message, out = _summarize(tmp_path, capsys, text)
    assert message.startswith(f"summarize: {tmp_path / 'run' / 'metrics.json'}: key 'test_ppl' is given twice")
    assert not out.exists()


def test_a_number_beyond_a_float_is_refused_as_infinity_is(tmp_path, capsys):
    """Before, ``1e999`` parsed to inf and passed wherever its key has no bound (``hyperparameters.lr``)."""
    text = json.dumps({**METRICS, "hyperparameters": {**METRICS["hyperparameters"], "lr": 30}}).replace("30", "1e999")
    message, out = _summarize(tmp_path, capsys, text)
    path = tmp_path / "run" / "metrics.json"
    assert message.startswith(f"summarize: {path}: not valid JSON (1e999 is not a JSON number"), message
    assert not out.exists()


def test_an_integer_beyond_int64_is_one_line_naming_the_file(tmp_path, capsys):
    """Before, a 400-digit epochs_run (valid JSON) stopped summarize, status, table and train with a 30-line
    OverflowError traceback (int too large to convert to float)."""
    for digits in (400, 20):
        text = json.dumps(METRICS).replace('"epochs_run": 12', '"epochs_run": 1' + "0" * (digits - 1))
        message, out = _summarize(tmp_path, capsys, text)
        path = tmp_path / "run" / "metrics.json"
        assert message.startswith(f"summarize: {path}: an integer of {digits} digits (at most 19): not a number it")
        assert "\n" not in message and not out.exists()
    assert bounds.BOUNDS["epochs_run"].violation(10**400) == "is too large to be a number of this package"
    assert _summarize(tmp_path, capsys, json.dumps({**METRICS, "parameters": 2**62}))[0] == 0  # 19 digits pass


def test_a_100000_deep_json_is_one_line_naming_the_file(tmp_path, capsys):
    depth = 100_000
    message, out = _summarize(tmp_path, capsys, '{"a": ' + "[" * depth + "]" * depth + "}")
    path = tmp_path / "run" / "metrics.json"
    assert message.startswith(f"summarize: {path}: JSON nested {depth + 1} deep (at most {readback.MAX_JSON_DEPTH})")
    assert "\n" not in message and not out.exists()


IMPOSSIBLE_RANKS = {
    "above the columns": ({"press_rank": 10_001}, "press_rank = 10001 is impossible: above min(rows, columns) = 10000"),
    "above the rows": ({"shape": [300, 10000]}, "press_rank = 402 is impossible: above min(rows, columns) = 300"),
    "zero": ({"press_rank": 0}, "press_rank = 0 is impossible (a rank is at least 1"),
    "an ε-rank above the bound": (
        {"effective_rank": {"1e-3": 100, "1e-4": 300, "1e-5": 20_000}},
        "effective_rank.1e-5 = 20000 is impossible",
    ),
    # before, a rank file of another model was summarised in this run's row
    "another dataset's model": ({"dataset": "wt2"}, "dataset = 'wt2' but the record says 'ptb'"),
    "another layer's model": ({"variant": "mos"}, "variant = 'mos' but the record says 'softmax'"),
    # before, only the ranks were checked, though the bounds table names these keys too
    "a negative σ_max": ({"sigma_max": -1.0}, "sigma_max = -1.0 is impossible (a singular value is at least 0)"),
    "a negative loss": ({"logp_test_loss": -1.0}, "logp_test_loss = -1.0 is impossible (a loss is at least 0)"),
    "ε-ranks shrinking with ε": (
        {"effective_rank": {"1e-3": 300, "1e-4": 100, "1e-5": 402}},
        "effective_rank: 100 at ε = 0.0001 is below 300 at ε = 0.001",
    ),
    "an ε that is not one": (
        {"effective_rank": {"abc": 3, "1e-4": 300}},
        "effective_rank has a key 'abc', not an ε (a number between 0 and 1)",
    ),
}


@pytest.mark.parametrize("case", sorted(IMPOSSIBLE_RANKS))
def test_an_impossible_rank_is_one_line_naming_the_file_and_key(tmp_path, capsys, case):
    change, named = IMPOSSIBLE_RANKS[case]
    message, out = _summarize(tmp_path, capsys, json.dumps(METRICS), {**RANK, **change})
    assert message.startswith(f"summarize: {tmp_path / 'run' / 'rank.json'}: {named}"), message
    assert not out.exists()


ANALYSIS_CSVS = {
    "spectra": ("dataset=ptb,variant=softmax", "index,sigma,sigma_normalised\n0,2.0,1.0\n1,-0.5,-0.25\n",
                "column sigma, row 2: -0.5 is impossible (a singular value is at least 0)"),
    "wordsim": ("dataset=ptb,variant=softmax", "benchmark,pairs,found,not_found,spearman\nMEN,3000,2900,100,1.7\n",
                "column spearman, row 1: 1.7 is impossible (a correlation is within [-1, 1])"),
    "top5": ("model=MoS*", "group,number,token_index,true_token,word_1,word_2,word_3,word_4,word_5,prob_1,prob_2,"
             "prob_3,prob_4,prob_5,hit\na,1,5,the,the,a,of,to,in,1.5,0.1,0.1,0.1,0.1,True\n",
             "column prob_1, row 1: 1.5 is impossible (within [0, 1])"),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(ANALYSIS_CSVS))
def test_an_impossible_analysis_number_names_its_column_and_row(tmp_path, kind):
    identity, text, named = ANALYSIS_CSVS[kind]
    path = tmp_path / f"{kind}.csv"
    path.write_text(text)
    out = tmp_path / "summary.csv"
    with pytest.raises(SystemExit) as exc:
        main(["summarize", "--kind", kind, "--out", str(out), "--record", f"{identity},csv={path}"])
    assert str(exc.value).startswith(f"summarize: {path}: {named}") and not out.exists()


@pytest.mark.parametrize(
    ("text", "named"),
    [("index,sigma\n", "holds no singular value"),
     ("index,sigma\n0,2.0\n1,\n", "row 2: no singular value"),
     ("index,sigma\n0,2.0\n2,1.0\n", "its index is not 0, 1, 2, ..."),
     ("index,sigma\n0,2.0\n1,1.0\n2,1.5\n", "row 3: a singular value above the one before (impossible)")],
    ids=["header only", "empty cell", "index skips", "rising"],
)  # fmt: skip
def test_a_spectrum_that_is_not_one_is_refused(tmp_path, text, named):
    """Before, each of these was summarised (a header-only spectrum as 0 rows, an empty cell as a gap)."""
    path = tmp_path / "spectrum.csv"
    path.write_text(text)
    out = tmp_path / "summary.csv"
    with pytest.raises(SystemExit) as exc:
        main(["summarize", "--kind", "spectra", "--out", str(out), "--record", f"dataset=ptb,variant=ss,csv={path}"])
    assert str(exc.value).startswith(f"summarize: {path}: not a spectrum: {named}") and not out.exists()


def test_word_pairs_that_do_not_add_up_are_refused(tmp_path):
    path = tmp_path / "wordsim.csv"
    path.write_text("benchmark,pairs,found,not_found,spearman\nMEN,3000,2900,99,0.5\n")
    with pytest.raises(readback.ReadbackError, match=r"row 1: found \+ not_found is not pairs"):
        readback.check_columns(readback.read_csv(path), path)


def _table2(tmp_path, content: bytes):
    summary = tmp_path / "summary"
    summary.mkdir(exist_ok=True)
    (summary / "main.csv").write_bytes(content)
    with pytest.raises(SystemExit) as exc:
        main(["table", "table2", "--summary-dir", str(summary), "--out", str(tmp_path / "t2")])
    assert not list(tmp_path.glob("t2*"))
    return str(exc.value), summary / "main.csv"


@pytest.mark.parametrize(
    ("content", "named"),
    [(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a readable CSV (a binary file: a NUL byte on line 3)"),
     (b"dataset,variant\nptb,caf\xe9\n", "not a readable CSV (not UTF-8 text: byte 0xe9 on line 2)")],
    ids=["png", "latin-1"],
)  # fmt: skip
def test_a_binary_summary_given_to_table_is_one_line_naming_it(tmp_path, content, named):
    message, path = _table2(tmp_path, content)
    assert message == f"table table2: {path}: {named}"


def test_a_summary_that_is_a_fifo_or_a_link_is_named_as_such_not_as_missing(tmp_path):
    """Before, ``table`` said "summary file ... not found" for a FIFO, or a link to /dev/zero, where one was."""
    summary = tmp_path / "summary"
    summary.mkdir()
    os.mkfifo(summary / "main.csv")
    with pytest.raises(SystemExit) as exc:
        main(["table", "table2", "--summary-dir", str(summary), "--out", str(tmp_path / "t2")])
    assert str(exc.value) == f"table table2: {summary / 'main.csv'}: not a regular file (a FIFO)"
    (summary / "main.csv").unlink()
    (summary / "main.csv").symlink_to("/dev/zero")
    with pytest.raises(SystemExit) as exc:
        main(["table", "table2", "--summary-dir", str(summary), "--out", str(tmp_path / "t2")])
    assert str(exc.value).startswith(f"table table2: {summary / 'main.csv'}: ") and "link" in str(exc.value)
    assert not list(tmp_path.glob("t2*"))


def test_an_impossible_number_in_a_summary_stops_the_table(tmp_path):
    header = "experiment,dataset,variant,schedule,seed,seed_kind,parameters,train_ppl,valid_ppl,test_ppl,press_rank\n"
    row = "main,ptb,softmax,et,141,authors,24221600,33.5,59.5,-5,402\n"
    message, path = _table2(tmp_path, (header + row).encode())
    assert message == f"table table2: {path}: column test_ppl, row 1: -5 is impossible (a perplexity is at least 1)"
    message, path = _table2(tmp_path, (header + row.replace(",141,", ",abc,").replace("-5", "57.0")).encode())
    assert message == f"table table2: {path}: column seed, row 1: 'abc' is not a number"  # before, shown as a seed
    ranks = header.replace("\n", ",erank_1e-3\n")
    message, path = _table2(tmp_path, (ranks + row.replace("-5,402", "57.0,402,10001")).encode())
    why = "10001 is impossible (a rank of a ptb log-P matrix is at most its 10,000 words)"
    assert message == f"table table2: {path}: column erank_1e-3, row 1: {why}"
    path.write_text(ranks + row.replace("-5,402", "57.0,402,10001").replace("ptb", "wt2"))  # possible for WT2
    assert main(["table", "table2", "--summary-dir", str(path.parent), "--out", str(tmp_path / "t2")]) in (0, None)


def test_a_summary_cut_short_or_holding_a_huge_integer_stops_the_table(tmp_path):
    """Before, main.csv cut in the middle of a row gave Table 2 the row's first cells and blanks for the rest, in
    silence (n = 2 with one test perplexity), and a 400-digit #Param a traceback."""
    header = "experiment,dataset,variant,schedule,seed,seed_kind,parameters,train_ppl,valid_ppl,test_ppl,press_rank\n"
    row = "main,ptb,softmax,et,141,authors,24221600,33.5,59.5,57.0,402\n"
    message, path = _table2(tmp_path, (header + row + row.replace("141", "7")[:30]).encode())
    assert message == f"table table2: {path}: row 2 has 7 of the header's 11 fields (a file cut short?)"
    message, path = _table2(tmp_path, (header + row.replace("24221600", "1" * 400)).encode())
    assert message == f"table table2: {path}: column parameters, row 1: an integer of more than 19 digits"
    path.write_text(header + row + row.replace("141", "7").replace(",402", ","))  # a blank cell is not a cut row
    assert main(["table", "table2", "--summary-dir", str(path.parent), "--out", str(tmp_path / "t2")]) in (0, None)


def test_a_column_given_twice_is_refused_not_read_as_the_first(tmp_path):
    """pandas names the second ``test_ppl`` ``test_ppl.1`` and Table 2 showed the first in silence; a ``sep`` other
    than a comma (the benchmark TSVs) is honoured, and a file read without a header is not a table with columns."""
    header = "experiment,dataset,variant,schedule,seed,seed_kind,parameters,train_ppl,valid_ppl,test_ppl,test_ppl\n"
    row = "main,ptb,softmax,et,141,authors,24221600,33.5,59.5,57.0,99.0\n"
    message, path = _table2(tmp_path, (header + row).encode())
    assert message == f"table table2: {path}: column 'test_ppl' given twice: not a table this package wrote"
    tsv = tmp_path / "bench.tsv"
    tsv.write_text("s\th:m:s\ts\n1.0\t0:00:01\t2.0\n")
    with pytest.raises(readback.ReadbackError, match="column 's' given twice"):
        readback.read_csv(tsv, sep="\t")
    assert readback.read_csv(tsv, sep="\t", header=None).shape == (2, 3)
    tsv.write_text("s,s\th:m:s\n1.0\t0:00:01\n")  # one column named "s,s" in a TSV
    assert list(readback.read_csv(tsv, sep="\t").columns) == ["s,s", "h:m:s"]


def test_lm_report_refuses_a_rank_above_its_matrix(tmp_path):
    summary = {**RANK, "shape": [200, 121], "press_rank": 150, "perplexity": 80.0, "rows": 200}
    path = tmp_path / "lm.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(SystemExit) as exc:
        main(["lm-report", f"tiny={path}", "--out-table", str(tmp_path / "lm")])
    assert str(exc.value).startswith(f"lm-report: {path}: press_rank = 150 is impossible: above min(rows, columns)")


def test_a_curve_beyond_the_runs_epochs_is_refused(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text("epoch,phase,train_ppl,valid_loss,valid_ppl,seconds,is_best\n1,sgd,900.0,6.5,665.1,2.0,True\n"
                    "2,sgd,700.0,6.3,544.6,2.0,True\n")  # fmt: skip
    readback.check_curve(readback.read_csv(path), path, epochs_run=2)
    with pytest.raises(readback.ReadbackError, match=r"curve.csv: column epoch: 2 is beyond the run's epochs_run = 1"):
        readback.check_curve(readback.read_csv(path), path, epochs_run=1)
    path.write_text(path.read_text().replace("6.3,", "-6.3,"))
    with pytest.raises(readback.ReadbackError, match=r"column valid_loss, row 2: -6.3 is impossible"):
        readback.check_curve(readback.read_csv(path), path, epochs_run=2)


def test_floating_point_rounding_at_a_bound_is_not_impossible():
    """exp(log_softmax) of a sure prediction is 1 + 1e-7 in float32; a difference of 1e-3 is not rounding."""
    assert bounds.violation("prob_1", 1.0000001) is None and bounds.violation("test_ppl", 0.99999999) is None
    assert bounds.violation("prob_1", 1.001) and bounds.violation("test_ppl", 0.999)
    assert bounds.violation("press_rank", 0) and bounds.violation("press_rank", 2.5)


# --------------------------------------------------------------------------------------------- one reader
#: every read of a file outside readback.py (module, call) -> why it need not go through the bounded reader
READS_OUTSIDE_READBACK = {
    **dict.fromkeys(
        [
            ("measured.py", "resource.read_text"),
            ("paper_numbers.py", "resource.read_text"),
            ("paper_numbers.py", "pd.read_csv"),
            ("models/output_layers/registry.py",
             "resources.files('softmax_bottleneck').joinpath('data/presets.yaml').read_text"),
            ("models/output_layers/registry.py", "yaml.safe_load"),
            ("study/config_file.py", "resources.files('softmax_bottleneck').joinpath(SCHEMA).read_text"),
        ],
        "the package's own data files",
    ),
    ("study/config_file.py", "yaml.safe_load"): "the package's schema (configurations: readback)",
    ("study/config_file.py", "yaml.load"): "a --config value, read as YAML reads it in a file",
    **dict.fromkeys(
        [
            ("cluster/processes.py", "PROC / str(pid) / 'stat'.read_text"),
            ("cluster/processes.py", "PROC / 'stat'.read_text"),
            ("cluster/processes.py", "entry / 'cmdline'.read_bytes"),
            ("cluster/processes.py", "PROC / str(pid) / 'status'.read_text"),
        ],
        "the kernel's process table",
    ),
    ("corpora/corpus.py", "data_dir / f'{split}.txt'.read_bytes"): "the corpus, checked by its published SHA-256",
    ("corpora/corpus.py", "file.read_bytes"): "the corpus, checked by its published SHA-256",
    ("corpora/integrity.py", "torch.load"): "torch.load(weights_only=True), for model.pt, resume states and corpus "
    "caches: no pickle of code runs (tests/test_checkpoint.py)",
    ("cluster/site_check.py", "json.loads"): "a line of the site check's own subprocess",
    ("analysis/hf_model.py", "json.loads"): "of bytes read by readback.read_bytes, as leniently as transformers "
    "(to name the tokenizer file it could not read, after it failed)",
    ("cluster/site_check.py", "yaml.safe_load"): "of bytes read by readback.read_bytes",
    ("report/sources.py", "path.read_text"): "the package's own modules, parsed for their imports",
}  # fmt: skip
READERS = {"read_csv", "read_table", "read_json", "read_text", "read_bytes", "safe_load", "load", "loads"}


def _reads(source: str):
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READERS:
            base = ast.unparse(node.func.value)
            if base != "readback" and (node.func.attr not in ("load", "loads") or base in ("json", "yaml", "torch")):
                yield node.lineno, f"{base}.{node.func.attr}"


def test_every_file_the_package_reads_goes_through_the_bounded_reader():
    """No module reads a file (pandas, json, yaml, torch, pathlib) but through readback.py, except the reads listed
    above with their reason; a new one fails here, naming its line."""
    from pathlib import Path

    root = Path(readback.__file__).parent
    found = {}
    for module in sorted(root.rglob("*.py")):
        if module.name != "readback.py":
            for line, call in _reads(module.read_text(encoding="utf-8")):
                found.setdefault((module.relative_to(root).as_posix(), call), line)
    unlisted = [f"{module}:{line}: {call}" for (module, call), line in found.items()
                if (module, call) not in READS_OUTSIDE_READBACK]  # fmt: skip
    assert unlisted == [], "read these through softmax_bottleneck.readback (or list them with the reason)"
    assert set(READS_OUTSIDE_READBACK) == set(found), "an exception that no longer exists"


def test_the_one_reader_check_finds_a_plain_read():
    planted = "import pandas as pd\nimport json\n\ndef f(p):\n    return pd.read_csv(p), json.loads(p.read_text())\n"
    assert list(_reads(planted)) == [(5, "pd.read_csv"), (5, "json.loads"), (5, "p.read_text")]
    assert list(_reads("from softmax_bottleneck import readback\nreadback.read_csv('x')\n")) == []


def test_epochs_have_one_maximum_in_the_configuration_and_the_files_read_back(tmp_path):
    """Before, a plan of 1e308 epochs was read back and priced at inf GPU-hours; the configuration had no bound."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.report.projection import read_plan

    assert presets.base_hyperparameters()["epochs"].maximum == bounds.MAX_EPOCHS == bounds.EPOCH.high
    plan = tmp_path / "plan.csv"
    for epochs, fine in ((bounds.MAX_EPOCHS, True), (bounds.MAX_EPOCHS + 1, False), ("1e308", False)):
        plan.write_text(f"run,experiments,dataset,variant,schedule,epochs\nr1,E1,ptb,softmax,et,{epochs}\n")
        if fine:
            read_plan(plan)
            continue
        with pytest.raises(readback.ReadbackError, match=r"epochs.*(impossible \(epochs count from 1, at most|not)"):
            read_plan(plan)
