"""Summary tables: collect_runs and friends from fake per-run files, and the ``summarize`` command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from softmax_bottleneck.report import summaries
from softmax_bottleneck.report.summaries import RUN_COLUMNS, RecordError, collect_runs, parse_record


def _fake_run(root, name, *, dataset="ptb", variant="gss", schedule="et", seed=141, test_ppl=57.0, rank=True, **hp):
    run = root / name
    run.mkdir(parents=True)
    metrics = {
        "dataset": dataset,
        "variant": variant,
        "schedule": schedule,
        "seed": seed,
        "hyperparameters": {"gss_c": -1.5, "gss_k": 2.5, "n_experts": None, "dropoutl": None, **hp},
        "parameters": 24_221_600,
        "trainable_parameters": 24_221_600,
        "train_ppl": 33.5,
        "valid_ppl": 59.5,
        "test_ppl": test_ppl,
        "test_loss": math.log(test_ppl),
        "epochs_run": 12,
        "best_epoch": 11,
        "switch_epoch": None,
        "seconds_per_epoch": 1.25,
        "device": "cpu",
        "versions": {"python": "3.11"},
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    record = {
        "experiment": "main",
        "dataset": dataset,
        "variant": variant,
        "schedule": schedule,
        "seed": str(seed),
        "seed_kind": "authors" if seed == 141 else "random",
        "metrics": str(run / "metrics.json"),
    }
    if rank:
        rank_json = {
            "press_rank": 8989,
            "effective_rank": {"1e-3": 100, "1e-4": 559, "1e-5": 3456},
            "shape": [82429, 10000],
            "sigma_max": 1.0,
            "method": "svd",
            "tolerance": 1e-5,
        }
        (run / "rank.json").write_text(json.dumps(rank_json))
        record["rank"] = str(run / "rank.json")
    return record


def test_collect_runs_columns_values_and_order(tmp_path):
    records = [
        _fake_run(tmp_path, "b", seed=7, test_ppl=57.2),
        _fake_run(tmp_path, "a", seed=141),
        _fake_run(
            tmp_path, "c", variant="mos", seed=3, rank=False, gss_c=None, gss_k=None, n_experts=15, dropoutl=0.29
        ),
    ]
    frame = collect_runs(records)
    assert list(frame.columns) == RUN_COLUMNS
    assert frame["variant"].tolist() == ["gss", "gss", "mos"]
    assert frame["seed_kind"].tolist() == ["authors", "random", "random"]  # authors first within a model
    first = frame.iloc[0]
    assert first["seed"] == 141 and first["test_ppl"] == 57.0 and first["press_rank"] == 8989
    assert first["erank_1e-3"] == 100 and first["erank_1e-5"] == 3456
    assert first["gss_c"] == -1.5 and first["gss_k"] == 2.5 and math.isnan(first["n_experts"])
    assert first["parameters"] == 24_221_600 and first["epochs_run"] == 12 and math.isnan(first["switch_epoch"])
    mos = frame.iloc[2]
    assert mos["n_experts"] == 15 and mos["dropoutl"] == 0.29 and math.isnan(mos["press_rank"])
    # order does not depend on the order of the records
    again = collect_runs(list(reversed(records)))
    pd.testing.assert_frame_equal(frame, again)


def test_a_run_trained_in_a_fused_group_says_so_and_an_impossible_group_is_refused(tmp_path):
    """``environment.fused_runs`` of metrics.json (K: its epoch time is the group's) becomes ``fused_runs``; a run
    trained alone has it empty; 0 runs in a group is refused in one line naming the file."""
    alone, fused = _fake_run(tmp_path, "a", seed=141), _fake_run(tmp_path, "b", seed=7)
    metrics = json.loads(Path(fused["metrics"]).read_text())
    Path(fused["metrics"]).write_text(json.dumps({**metrics, "environment": {"fused_runs": 2}}))
    frame = collect_runs([alone, fused]).set_index("seed")
    assert frame.loc[7, "fused_runs"] == 2 and math.isnan(frame.loc[141, "fused_runs"])
    Path(fused["metrics"]).write_text(json.dumps({**metrics, "environment": {"fused_runs": 0}}))
    with pytest.raises(RecordError, match=r"b/metrics.json: environment.fused_runs = 0 is impossible"):
        collect_runs([alone, fused])


def test_bad_records_are_named(tmp_path):
    good = _fake_run(tmp_path, "a")
    with pytest.raises(FileNotFoundError, match="nope.json"):
        collect_runs([{**good, "metrics": str(tmp_path / "nope.json")}])
    with pytest.raises(RecordError, match="variant"):
        collect_runs([{**good, "variant": "ss"}])  # metrics.json says gss
    with pytest.raises(RecordError, match="seed_kind"):
        collect_runs([{**good, "seed_kind": "lucky"}])
    with pytest.raises(RecordError, match="lacks schedule"):
        collect_runs([{k: v for k, v in good.items() if k != "schedule"}])
    with pytest.raises(RecordError, match="duplicate"):
        collect_runs([good, good])
    with pytest.raises(RecordError, match="not key=value"):
        parse_record("dataset=ptb,oops")


def test_parse_record_keeps_equals_in_values():
    assert parse_record("a=1,path=x=y.json") == {"a": "1", "path": "x=y.json"}


def test_collect_analyses(tmp_path):
    pd.DataFrame({"index": [0, 1], "sigma": [2.0, 1.0], "sigma_normalised": [1.0, 0.5]}).to_csv(
        tmp_path / "s.csv", index=False
    )
    spectra = summaries.collect_spectra([{"dataset": "ptb", "variant": "ss", "csv": str(tmp_path / "s.csv")}])
    assert list(spectra.columns) == summaries.SPECTRA_COLUMNS and spectra["variant"].eq("ss").all()
    pd.DataFrame({"benchmark": ["MC-30"], "pairs": [30], "found": [9], "not_found": [21], "spearman": [0.38]}).to_csv(
        tmp_path / "w.csv", index=False
    )
    ws = summaries.collect_wordsim([{"dataset": "wt2", "variant": "moc", "csv": str(tmp_path / "w.csv")}])
    assert ws[summaries.SOURCE_COLUMNS].isna().all().all()  # no metrics record: which code trained it is unknown
    assert ws.drop(columns=summaries.SOURCE_COLUMNS).iloc[0].to_dict() == {
        "dataset": "wt2",
        "variant": "moc",
        "benchmark": "MC-30",
        "pairs": 30,
        "found": 9,
        "not_found": 21,
        "spearman": 0.38,
    }
    top = {c: ["x"] for c in summaries.TOP5_COLUMNS if c != "model"}
    top.update(
        group=["Yang"],
        number=[1],
        token_index=[2700],
        true_token=["N"],
        hit=[True],
        **{f"prob_{i}": [0.1] for i in range(1, 6)},
    )
    pd.DataFrame(top).to_csv(tmp_path / "t.csv", index=False)
    t5 = summaries.collect_top5([{"model": "MoS*", "csv": str(tmp_path / "t.csv")}])
    assert t5.loc[0, "model"] == "MoS*" and t5.loc[0, "true_token"] == "N"
    with pytest.raises(RecordError, match="missing column"):
        summaries.collect_wordsim([{"dataset": "ptb", "variant": "ss", "csv": str(tmp_path / "s.csv")}])
    # before, a file of its header alone, or holding one benchmark or context twice, was collected in silence
    frame = pd.read_csv(tmp_path / "t.csv")
    for name, collect, edited, said in (
        ("w.csv", summaries.collect_wordsim, pd.read_csv(tmp_path / "w.csv").iloc[:0], "holds no row"),
        ("w.csv", summaries.collect_wordsim, pd.concat([ws.iloc[:, 2:7]] * 2), "row 2 repeats benchmark MC-30"),
        ("t.csv", summaries.collect_top5, frame.iloc[:0], "holds no row"),
        ("t.csv", summaries.collect_top5, pd.concat([frame] * 2), "row 2 repeats group Yang, number 1"),
    ):
        edited.to_csv(tmp_path / name, index=False)
        with pytest.raises(RecordError, match=rf"^{tmp_path / name}: {said} \(record"):
            collect([{"dataset": "ptb", "variant": "ss", "model": "MoS*", "csv": str(tmp_path / name)}])


def test_cli_writes_csv(tmp_path):
    from softmax_bottleneck.cli import main

    rec = _fake_run(tmp_path, "a")
    arg = ",".join(f"{k}={v}" for k, v in rec.items())
    out = tmp_path / "summary" / "main.csv"
    assert main(["summarize", "--kind", "runs", "--out", str(out), "--record", arg]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == RUN_COLUMNS and len(frame) == 1 and frame.loc[0, "press_rank"] == 8989
    assert not list(out.parent.glob(".*.tmp"))


def test_cli_names_a_bad_record_in_one_line(tmp_path, capsys):
    from softmax_bottleneck.cli import main

    rec = _fake_run(tmp_path, "a")
    out = tmp_path / "main.csv"
    missing = ",".join(f"{k}={v}" for k, v in {**rec, "metrics": str(tmp_path / "nope.json")}.items())
    with pytest.raises(SystemExit) as exc:
        main(["summarize", "--kind", "runs", "--out", str(out), "--record", missing])
    assert str(exc.value).startswith("summarize: ") and "nope.json" in str(exc.value)
    with pytest.raises(SystemExit) as exc:
        main(["summarize", "--kind", "runs", "--out", str(out), "--record", "dataset=ptb,oops"])
    assert "not key=value" in str(exc.value) and not out.exists()
    with pytest.raises(SystemExit):
        main(["summarize", "--help"])
    text = capsys.readouterr().out
    assert "one row per trained model" in text and "--record" in text


@pytest.mark.parametrize(
    "file,edit,named",
    [
        ("rank.json", lambda d: {**d, "press_rank": "abc"}, "press_rank = 'abc' is not a number"),
        ("rank.json", lambda d: {**d, "effective_rank": {"1e-3": [1]}}, "effective_rank.1e-3 = [1] is not a number"),
        ("metrics.json", lambda d: {**d, "test_ppl": "57"}, "test_ppl = '57' is not a number"),
        ("metrics.json", lambda d: {**d, "epochs_run": "x"}, "epochs_run = 'x' is not a number"),
        ("metrics.json", lambda d: {**d, "hyperparameters": {"gss_c": "-1.5"}}, "hyperparameters.gss_c = '-1.5'"),
    ],
    ids=["press_rank", "erank", "test_ppl", "epochs_run", "gss_c"],
)
def test_a_value_that_is_not_a_number_is_refused_not_an_empty_cell(tmp_path, file, edit, named, capsys):
    from softmax_bottleneck.cli import main

    rec = _fake_run(tmp_path, "a")
    path = tmp_path / "a" / file
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    out = tmp_path / "main.csv"
    with pytest.raises(SystemExit) as exc:
        main(
            ["summarize", "--kind", "runs", "--out", str(out), "--record", ",".join(f"{k}={v}" for k, v in rec.items())]
        )
    message = str(exc.value)
    assert message.startswith(f"summarize: {path}: {named}") and "\n" not in message and not out.exists()


@pytest.mark.parametrize("content", [b"\x80\x04\x95binary", b'{"press_rank": NaN}', b"PK\x03\x04\xff\xfe"])
def test_a_binary_or_non_standard_json_file_is_named(tmp_path, content):
    rec = _fake_run(tmp_path, "a")
    (tmp_path / "a" / "rank.json").write_bytes(content)
    with pytest.raises(RecordError, match=rf"^{tmp_path / 'a' / 'rank.json'}: not valid JSON"):
        collect_runs([rec])


def test_a_read_only_output_folder_is_one_line(tmp_path):
    import os

    from softmax_bottleneck.cli import main

    if os.getuid() == 0:
        pytest.skip("root writes into read-only folders")
    rec = _fake_run(tmp_path, "a")
    folder = tmp_path / "summary"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["summarize", "--kind", "runs", "--out", str(folder / "main.csv"), "--record",
                  ",".join(f"{k}={v}" for k, v in rec.items())])  # fmt: skip
    finally:
        folder.chmod(0o755)
    assert str(exc.value).startswith(f"summarize: {folder / 'main.csv'}: cannot write") and not list(folder.iterdir())


def test_a_plugin_layers_swept_hyperparameter_becomes_a_summary_column(tmp_path, monkeypatch):
    """Columns come from the registry: a plug-in's own hyper-parameter reaches the summary (after dropoutl), and
    two runs that differ only in it are two rows, not duplicates."""
    from softmax_bottleneck.models.output_layers import Hyperparameter, OutputLayer, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    cls = type("Temp", (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
    hp = {"temp_tau": Hyperparameter(1.0, float, "temperature", exclusive_minimum=0)}
    register_output_layer("temp_softmax", display="Temp", family="softmax", hyperparameters=hp)(cls)
    records = [
        _fake_run(tmp_path, f"r{tau}", variant="temp_softmax", gss_c=None, gss_k=None, temp_tau=tau)
        for tau in (2.0, 0.5)
    ]
    frame = collect_runs(records)
    columns = list(frame.columns)
    assert columns[columns.index("dropoutl") + 1] == "temp_tau"
    assert list(frame["temp_tau"]) == [0.5, 2.0]
    # without plug-in values the columns stay the paper's
    assert list(collect_runs([_fake_run(tmp_path, "gss")]).columns) == RUN_COLUMNS
