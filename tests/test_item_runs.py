"""A table or figure that reads only some runs of its summaries says which (``runs=`` of its registration), and the
workflow builds it from summaries of those runs alone (``results/summary/for/<name>/``): built from them it is the
same as built from the whole summaries, and ``snakemake <it>`` plans no training of the runs it leaves out."""

from __future__ import annotations

import io
import re
import shutil

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import REPO
from test_tables import make_summaries
from test_workflow import planned_jobs, snakemake

from softmax_bottleneck.report import figures, tables
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.runs import Study
from softmax_bottleneck.study.summary_records import check_selection, item_summary_records, selected, summary_records

ITEMS = {**tables.TABLES, **figures.FIGURES}
SELECTING = sorted(name for name, item in ITEMS.items() if item.runs is not None)


def _built(name: str, summary_dir) -> bytes | str:
    if name in tables.TABLES:
        return tables.TABLES[name].build(summary_dir).to_csv(index=False)
    figure = figures.build(name, summary_dir)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def _select(source, target, name: str, selection) -> int:
    """Copy ``name``'s summaries to ``target`` keeping the rows ``selection`` selects; the number of rows left out."""
    shutil.copytree(source, target)
    dropped = 0
    for file in ITEMS[name].requires:
        frame = pd.read_csv(source / file)
        keep = frame.apply(lambda row: selected(row, selection), axis=1).astype(bool)
        frame[keep].to_csv(target / file, index=False)
        dropped += int((~keep).sum())
    return dropped


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory):
    return make_summaries(tmp_path_factory.mktemp("summary"))


def test_the_items_that_select_runs():
    assert SELECTING == sorted(["table1", "table4", "table6", "sm_table1", "sm_table4", "sm_table5", "sm_table10",
                                "sm_table11", "sm_table17", "sm_table18", "figure5", "sm_figure2", "sm_figure3",
                                "sm_figure4", "sm_figure5"])  # fmt: skip


@pytest.mark.parametrize("name", SELECTING)
def test_built_from_its_runs_alone_an_item_is_what_the_whole_summaries_give(name, summary_dir, tmp_path):
    dropped = _select(summary_dir, tmp_path / "own", name, ITEMS[name].runs)
    assert dropped > 0, f"{name}: its selection leaves no row of the test's summaries out"
    assert _built(name, tmp_path / "own") == _built(name, summary_dir)


@pytest.mark.parametrize(
    ("name", "too_narrow"),
    [
        ("table4", [{"variant": ["lms_plif"], "seed_kind": ["random"]}]),  # no LMS-PLIF† runs
        ("table1", [{"dataset": ["ptb"], "schedule": ["et"]}]),  # no MoS NT-ASGD run: the paper's MoS rank
        ("sm_table10", [{"dataset": ["wt2"]}]),
        ("sm_figure2", [{"dataset": ["wt2"]}]),
    ],
)
def test_a_selection_that_leaves_out_runs_an_item_reads_changes_it(name, too_narrow, summary_dir, tmp_path):
    """The comparison above can fail: a selection narrower than what the item reads builds another table or figure."""
    _select(summary_dir, tmp_path / "own", name, check_selection(too_narrow))
    assert _built(name, tmp_path / "own") != _built(name, summary_dir)


def test_a_bad_selection_is_refused_at_registration():
    for bad, phrase in (([{"colour": ["red"]}], "not ['colour']"), ([{}], "each alternative maps"),
                        ([{"variant": "mos"}], "a list of values")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(phrase)):
            check_selection(bad)


def test_an_items_summaries_hold_the_runs_it_selects_and_no_other():
    study = Study(study_config.check(study_config.read(REPO / "config" / "config.yaml")))
    records = summary_records(study)
    own = item_summary_records(records, ITEMS.values())
    table4 = {(run.dataset, run.variant, run.seed_kind) for file in ("main.csv", "frozen.csv")
              for run, _ in own[f"for/table4/{file}"][1]}  # fmt: skip
    assert table4 == {(ds, v, "random") for ds in ("ptb", "wt2") for v in ("lms_plif", "lms_plif_frozen")}
    whole = {run for file in ("main.csv", "frozen.csv") for run, _ in records[file][1]}
    kept = {run for file in ("main.csv", "frozen.csv") for run, _ in own[f"for/table4/{file}"][1]}
    assert len(kept) == 40 and len(whole) == 132  # the paper: E1's 20 LMS-PLIF random-seed runs and E7's 20


def test_snakemake_plans_an_item_without_the_runs_it_leaves_out(tmp_path):
    result = snakemake(tmp_path, "table4", "-n", configfile=REPO / "config" / "small.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    outputs = [line for line in result.stdout.splitlines() if line.strip().startswith("output: ")]
    trained = {line.split("results/runs/")[1].split("/seed")[0] for line in outputs if "/model.pt" in line}
    assert trained == {f"{ds}/{v}/et" for ds in ("ptb", "wt2") for v in ("lms_plif", "lms_plif_frozen")}, trained
    assert any("results/small/summary/for/table4/main.csv" in line for line in outputs)
    assert not any(line.strip().endswith("results/small/summary/main.csv") for line in outputs)


def test_sm_table13_plans_no_training_and_no_analysis(tmp_path):
    """SM Table 13 counts the benchmark pairs each vocabulary misses: `snakemake sm_table13` reads the corpora and the
    benchmarks, not the word-similarity models (it trained all twelve of them, 1,000 epochs each at paper scale)."""
    counts = planned_jobs(snakemake(tmp_path, "sm_table13", "-n", "--quiet", "rules"))
    assert counts == {"fetch_corpus": 2, "fetch_wordsim": 13, "corpus_cache": 2, "summarize_wordsim_coverage": 1,
                      "sm_table13": 1}, counts  # fmt: skip


def test_the_cluster_guide_states_the_pilots_job_counts(tmp_path):
    """docs/cluster.md, step 6: the pilot's jobs and those of them sent through sbatch (not local), as a dry run plans
    them (it said 176 after rules were added: 204)."""
    from softmax_bottleneck.cluster.snakemake_run import parsed_local_rules

    guide = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    said = re.search(r"every other rule, (\d+) jobs, (\d+) of them through `sbatch`", guide)
    config = REPO / "config" / "gpu-smoke.yaml"
    counts = planned_jobs(snakemake(tmp_path, "-n", "--quiet", "rules", configfile=config))
    local = parsed_local_rules(REPO / "Snakefile", tmp_path, [config])
    total, submitted = sum(counts.values()), sum(n for rule, n in counts.items() if rule not in local)
    assert said and (int(said[1]), int(said[2])) == (total, submitted), (counts, local)
    assert f"a whole pilot ends with `{total} of {total} steps (100%) done`" in guide
