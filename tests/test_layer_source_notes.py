"""A result made by an older source of its output layer is marked wherever it is shown: its summary row carries the
layer's source, tables and figures note it, the workflow says so at parse time; nothing is retrained."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_figures import _outside_canvas
from test_tables import make_summaries

from softmax_bottleneck.models.output_layers.provenance import layer_source_tag
from softmax_bottleneck.models.output_layers.registry import layer_source
from softmax_bottleneck.report import figures, tables
from softmax_bottleneck.report.layer_sources import stale_notes
from softmax_bottleneck.report.summaries import collect_runs, collect_spectra

NOTE = "note: some results here were trained with an older source of ss than the one installed"


def _metrics(path, variant="ss", sha=None) -> dict:
    source = {**layer_source(variant), "module_file": None}
    if sha is not None:
        source["source_sha256"] = sha
    metrics = {"dataset": "ptb", "variant": variant, "schedule": "et", "seed": 141, "train_ppl": 90.0,
               "valid_ppl": 80.0, "test_ppl": 78.0, "hyperparameters": {"output_layer": variant},
               "environment": {"software": {"output_layer": source}}}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics))
    return {"experiment": "main", "dataset": "ptb", "variant": variant, "schedule": "et", "seed": "141",
            "seed_kind": "authors", "metrics": str(path)}  # fmt: skip


def test_summaries_carry_the_layers_source(tmp_path):
    now = layer_source("ss")["source_sha256"]
    frame = collect_runs([_metrics(tmp_path / "a" / "metrics.json")])
    assert frame.loc[0, "layer_source"] == f"ss@{now[:16]}" and stale_notes(frame) == []
    old = collect_runs([_metrics(tmp_path / "b" / "metrics.json", sha="0" * 64)])
    assert old.loc[0, "layer_source"] == "ss@" + "0" * 16
    assert [note.split(" (")[0] for note in stale_notes(old)] == [NOTE]
    spectrum = tmp_path / "spectrum.csv"
    spectrum.write_text("index,sigma\n0,2.0\n1,1.0\n")  # as rank.spectrum_table writes it: 0-based
    record = {"dataset": "ptb", "variant": "ss", "csv": str(spectrum), "metrics": str(tmp_path / "b" / "metrics.json")}
    assert set(collect_spectra([record])["layer_source"]) == {"ss@" + "0" * 16}
    assert collect_spectra([{k: v for k, v in record.items() if k != "metrics"}])["layer_source"].isna().all()
    assert layer_source_tag({}) is None


@pytest.fixture
def summary_dir(tmp_path):
    return make_summaries(tmp_path / "summary")


def _age(summary_dir, name: str, variant: str, sha: str | None) -> None:
    """Give ``variant``'s rows of summary ``name`` the source ``sha`` (the installed one when None)."""
    frame = pd.read_csv(summary_dir / name)
    digest = (sha or layer_source(variant)["source_sha256"])[:16]
    frame["layer_source"] = frame["layer_source"].astype(object) if "layer_source" in frame else None
    frame.loc[frame["variant"] == variant, "layer_source"] = f"{variant}@{digest}"
    frame.to_csv(summary_dir / name, index=False)


def test_a_table_and_a_figure_note_results_of_an_older_source(summary_dir, tmp_path):
    """Before, tables and figures kept the old numbers with no mark once the layer's code changed."""
    _age(summary_dir, "main.csv", "ss", None)
    tables.render("table2", summary_dir, tmp_path / "fresh" / "table2", banner="small scale")
    assert "older source" not in (tmp_path / "fresh" / "table2.md").read_text(encoding="utf-8")
    _age(summary_dir, "main.csv", "ss", "f" * 64)
    tables.render("table2", summary_dir, tmp_path / "old" / "table2", banner="small scale")
    for ext in ("md", "html", "tex", "ours.tex"):
        text = (tmp_path / "old" / f"table2.{ext}").read_text(encoding="utf-8")
        assert NOTE in text and "small scale" in text, ext
    _age(summary_dir, "spectra.csv", "ss", "f" * 64)
    fig = figures.build("figure7", summary_dir)
    texts = [" ".join(t.get_text().split()) for t in fig.texts]  # notes are wrapped to the figure's width
    assert any(NOTE in text for text in texts), texts
    assert not _outside_canvas(fig)


def test_a_table_notes_an_older_source_only_of_a_layer_it_shows(summary_dir, tmp_path):
    """Table 1 reads ntet.csv but shows no Softmax row: an older Softmax there is SM Table 10's note, not its own."""
    _age(summary_dir, "ntet.csv", "softmax", "f" * 64)
    table1 = tables.render("table1", summary_dir, tmp_path / "table1")
    assert "softmax" not in set(table1["variant"]) and "ss" in set(table1["variant"])
    assert "older source" not in (tmp_path / "table1.md").read_text(encoding="utf-8")
    tables.render("sm_table10", summary_dir, tmp_path / "sm_table10")
    assert NOTE.replace("of ss", "of softmax") in (tmp_path / "sm_table10.md").read_text(encoding="utf-8")


def test_a_table_without_a_variant_column_notes_only_the_layers_it_declares(summary_dir, tmp_path):
    """Table 4 (LMS-PLIF vs LMS-PLIF†) reads main.csv, SM Table 13 the vocabularies' counts: an older Softmax in
    main.csv or an older SS in wordsim.csv is Table 2's and SM Table 3's note, not theirs; an older LMS-PLIF is Table
    4's."""
    _age(summary_dir, "main.csv", "softmax", "f" * 64)
    _age(summary_dir, "wordsim.csv", "ss", "f" * 64)
    for name in ("table4", "sm_table13", "table2", "sm_table3"):
        table = tables.render(name, summary_dir, tmp_path / name)
        assert ("variant" in table.columns) == (name in ("table2", "sm_table3"))
    softmax_note, ss_note = NOTE.replace("of ss", "of softmax"), NOTE
    assert "older source" not in (tmp_path / "table4.md").read_text(encoding="utf-8")
    assert "older source" not in (tmp_path / "sm_table13.md").read_text(encoding="utf-8")
    assert softmax_note in (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert ss_note in (tmp_path / "sm_table3.md").read_text(encoding="utf-8")
    _age(summary_dir, "main.csv", "lms_plif", "f" * 64)
    tables.render("table4", summary_dir, tmp_path / "again" / "table4")
    text = (tmp_path / "again" / "table4.md").read_text(encoding="utf-8")
    assert NOTE.replace("of ss", "of lms_plif") in text and softmax_note not in text
