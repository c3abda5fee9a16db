"""Tables: every table builds from small synthetic summaries, renders to csv + md, and sets ours beside the paper."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from softmax_bottleneck.report import reported, tables
from softmax_bottleneck.report.summaries import RUN_COLUMNS, TOP5_COLUMNS

VARIANTS = ["softmax", "ss", "gss", "lms_plif", "mos"]
AUTHORS_SEED = {"ptb": 141, "wt2": 1881}


def _run(experiment, dataset, variant, schedule, seed, seed_kind, test_ppl, rank, **extra) -> dict:
    row = dict.fromkeys(RUN_COLUMNS, math.nan)
    row.update(
        experiment=experiment,
        dataset=dataset,
        variant=variant,
        schedule=schedule,
        seed=seed,
        seed_kind=seed_kind,
        parameters=24_221_600,
        train_ppl=test_ppl - 20,
        valid_ppl=test_ppl + 2,
        test_ppl=test_ppl,
        seconds_per_epoch=1.5,
        epochs_run=3,
        press_rank=rank,
        **{"erank_1e-3": rank // 10, "erank_1e-4": rank // 4, "erank_1e-5": rank // 2},
    )
    row.update(extra)
    return row


def make_summaries(root: Path) -> Path:
    """A handful of rows for every summary file (small-scale shapes: few seeds, few points, short spectra)."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)

    def write(name, rows, columns=RUN_COLUMNS):
        pd.DataFrame(rows, columns=columns).to_csv(root / name, index=False)

    main = []
    for ds in ("ptb", "wt2"):
        for j, var in enumerate(VARIANTS):
            seeds = [(AUTHORS_SEED[ds], "authors")] + [(s, "random") for s in (1, 2, 3)]
            for seed, kind in seeds:
                main.append(_run("main", ds, var, "et", seed, kind, round(100 + j + rng.normal(), 3), 400 + 37 * j))
    write("main.csv", main)
    frozen = [
        _run("frozen", ds, "lms_plif_frozen", "et", seed, kind, round(104 + rng.normal(), 3), 450)
        for ds in ("ptb", "wt2")
        for seed, kind in [(AUTHORS_SEED[ds], "authors"), (5, "random"), (6, "random")]
    ]
    write("frozen.csv", frozen)
    ntet = [
        _run("ntet", ds, var, sch, AUTHORS_SEED[ds], "authors", 100 + j + (sch == "nt"), 400 + 50 * j)
        for ds in ("ptb", "wt2")
        for sch in ("nt", "et")
        for j, var in enumerate([*VARIANTS, "moc"])
    ]
    write("ntet.csv", ntet)
    grid = [
        _run(
            "gss_grid",
            ds,
            "gss",
            "et",
            AUTHORS_SEED[ds],
            "authors",
            round(100 + rng.normal(), 3),
            int(300 + 100 * rng.random()),
            gss_c=c,
            gss_k=k,
        )
        for ds in ("ptb", "wt2")
        for c in (-1.5, 0.0)
        for k in (2.0, 2.5)
    ]
    write("gss_grid.csv", grid)
    mos_k = [
        _run(
            "mos_k",
            ds,
            "mos",
            "nt",
            AUTHORS_SEED[ds],
            "authors",
            110 - k,
            200 + 20 * k,
            n_experts=k,
            parameters=19_000_000 + 100_000 * k,
        )
        for ds in ("ptb", "wt2")
        for k in (1, 3)
    ]
    write("mos_k.csv", mos_k)
    write(
        "mos_dropoutl.csv",
        [
            _run(
                "mos_dropoutl",
                "wt2",
                "mos",
                "nt",
                1881,
                "authors",
                100 + 10 * d,
                300 - 100 * d,
                dropoutl=d,
                n_experts=15,
            )
            for d in (0.29, 0.0)
        ],
    )
    write(
        "fair.csv",
        [
            _run("fair", "ptb", var, "et", seed, "random", round(100 + rng.normal(), 3), 300)
            for var in ("mos_fair", "softmax_fair_large")
            for seed in (1, 2, 3)
        ],
    )
    spectra = []
    for ds in ("ptb", "wt2"):
        for j, var in enumerate(VARIANTS[:4]):  # mos missing on purpose
            sigma = np.exp(-np.arange(40) / (3 + j))
            for i, s in enumerate(sigma):
                spectra.append(
                    {"dataset": ds, "variant": var, "index": i, "sigma": s, "sigma_normalised": s / sigma[0]}
                )
    write("spectra.csv", spectra, ["dataset", "variant", "index", "sigma", "sigma_normalised"])
    ws = []
    for ds in ("ptb", "wt2"):
        for var in ["softmax", "ss", "gss", "mos"]:
            for b in list(reported.BENCHMARKS)[:5]:
                ws.append(
                    {
                        "dataset": ds,
                        "variant": var,
                        "benchmark": b,
                        "pairs": 30,
                        "found": 20,
                        "not_found": 10,
                        "spearman": round(float(rng.uniform(0, 0.5)), 4),
                    }
                )
    write("wordsim.csv", ws, ["dataset", "variant", "benchmark", "pairs", "found", "not_found", "spearman"])
    coverage = [{"dataset": ds, "benchmark": b, "pairs": 30, "found": 20 - i, "not_found": 10 + i}
                for ds in ("ptb", "wt2") for i, b in enumerate(list(reported.BENCHMARKS)[:5])]  # fmt: skip
    write("wordsim_coverage.csv", coverage, ["dataset", "benchmark", "pairs", "found", "not_found"])
    paper_top5 = reported.load("sm_table2")
    top5 = paper_top5[paper_top5["model"].isin(["Softmax", "MoS", "MoS*"])].copy()
    top5["hit"] = top5["hit"].astype(bool)
    top5.loc[top5.index[0], "hit"] = not top5.loc[top5.index[0], "hit"]
    for i in range(1, 6):  # a model's top-5 are PTB tokens, which the SM typesets otherwise
        top5[f"word_{i}"] = top5[f"word_{i}"].str.replace("\u2019", "'").replace({"mr .": "mr."})
    write("top5.csv", top5.reindex(columns=TOP5_COLUMNS).to_dict("records"), TOP5_COLUMNS)
    robust = [{"algorithm": 0, "iteration_or_c": 0.0, "press_rank": 8000, "erank_1e-3": 5, "erank_1e-4": 9}]
    robust += [{"algorithm": 1, "iteration_or_c": float(i), "press_rank": 10, "error": 1e-28 * i} for i in (1, 2, 3)]
    for c in (1e-20, 1e-22, 1e-30):
        robust.append(
            {
                "algorithm": 2,
                "iteration_or_c": c,
                "press_rank": 500,
                "error": 1.0,
                "erank_1e-3": 7,
                "erank_1e-4": 10,
                "erank_1e-5": 10,
            }
        )
    write(
        "robustness.csv",
        robust,
        ["algorithm", "iteration_or_c", "press_rank", "error", "erank_1e-3", "erank_1e-4", "erank_1e-5"],
    )
    return root


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory) -> Path:
    return make_summaries(tmp_path_factory.mktemp("summary"))


@pytest.fixture(scope="module")
def rendered(summary_dir, tmp_path_factory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("tables")
    return {name: tables.render(name, summary_dir, out / name) for name in tables.TABLES} | {"_dir": out}


def test_every_table_renders(rendered):
    out = rendered["_dir"]
    for name in tables.TABLES:
        csv, md, page = out / f"{name}.csv", out / f"{name}.md", out / f"{name}.html"
        assert csv.stat().st_size > 0 and md.stat().st_size > 0, name
        text = md.read_text(encoding="utf-8")
        assert text.startswith(f"**{name}**") and "|" in text, name
        assert "Δ" not in text and "nan" not in text.lower(), name  # differences stay in the CSV
        html = page.read_text(encoding="utf-8")
        assert html.startswith("<!DOCTYPE html>") and "<caption>" in html and "<script" not in html.lower(), name
        back = pd.read_csv(csv, keep_default_na=False, na_values=[""])
        assert list(back.columns) == list(rendered[name].columns), name
        assert len(back) == len(rendered[name]) > 0, name
    assert not list(out.glob(".*.tmp"))


def test_sm_table14_starts_with_the_matrix_itself(rendered):
    """SM §5 gives the E12 matrix's own Press' rank (8,933) in its text: SM Table 14's iteration 0, ours beside it;
    the noise tables (15, 16) keep to Algorithm 2."""
    t14 = rendered["sm_table14"].set_index("iteration")
    assert t14.loc[0, "press_rank_ours"] == 8000 and t14.loc[0, "press_rank_paper"] == 8933
    assert t14.loc[0, "press_rank_diff"] == -933 and list(t14.index[:4]) == [0, 1, 2, 3]
    first = tables.to_markdown("sm_table14", rendered["sm_table14"]).split("\n")[4]  # title, blank, header, rule
    assert first.startswith("| 0: the matrix itself (SM §5) ") and "| 8,000 (8,933) |" in first
    assert 0 not in set(rendered["sm_table15"]["c"]) and 0 not in set(rendered["sm_table16"]["c"])


def test_requires_names_summary_files():
    assert set(tables.REQUIRES) == set(tables.TABLES)
    for name in ("table2", "table3", "table5", "table6", "sm_table3", "sm_table14"):
        assert tables.REQUIRES[name]
    assert tables.REQUIRES["table4"] == ["main.csv", "frozen.csv"]


def test_diff_is_ours_minus_paper_everywhere(rendered):
    for name in tables.TABLES:
        table = rendered[name]
        ours_cols = [c for c in table.columns if c.endswith("_ours") and not c.startswith("top5")]
        assert ours_cols, name
        for col in ours_cols:
            base = col[: -len("_ours")]
            diff = table[f"{base}_diff"]
            expect = table[col] - table[f"{base}_paper"]
            assert np.allclose(diff, expect, equal_nan=True), (name, base)


@pytest.mark.parametrize(
    ("table", "source", "keys"),
    [
        ("table2", "main", ["dataset", "variant"]),
        ("sm_table1", "sm_table1", ["dataset", "variant"]),
        ("table3", "table3", ["dataset", "variant"]),
        ("table4", "table4", ["dataset"]),
        ("table5", "table5", ["dataset", "variant"]),
        ("table6", "table6", ["dataset", "variant"]),
        ("sm_table3", "wordsim", ["dataset", "benchmark", "variant"]),
        ("sm_table13", "wordsim_coverage", ["dataset", "benchmark"]),
        ("figure4_wins", "figure4", ["dataset", "row_variant", "col_variant"]),
        ("table1", "table1", ["variant"]),
    ],
)
def test_paper_columns_equal_reported_data(rendered, table, source, keys):
    built = rendered[table]
    paper = reported.load(source)
    values = [c[: -len("_paper")] for c in built.columns if c.endswith("_paper")]
    merged = paper.merge(built, on=keys, how="left", validate="one_to_one")
    assert len(merged) == len(paper)
    for v in values:
        assert np.allclose(merged[v], merged[f"{v}_paper"], equal_nan=True), (table, v)


def test_ntet_and_mos_tables_carry_the_paper_rows(rendered):
    paper = reported.load("ntet")
    for name, ds in (("sm_table10", "ptb"), ("sm_table11", "wt2")):
        built = rendered[name]
        ref = paper[paper["dataset"] == ds]
        assert built["test_ppl_paper"].iloc[: len(ref)].tolist() == ref["test_ppl"].tolist()
        assert built["press_rank_paper"].iloc[: len(ref)].tolist() == ref["press_rank"].tolist()
    k = rendered["sm_table4"]
    assert k["n_experts"].tolist()[:6] == [1, 3, 5, 10, 15, 20]
    assert k.loc[k["n_experts"] == 3, "test_ppl_ours"].item() == 107
    assert k.loc[k["n_experts"] == 3, "test_ppl_paper"].item() == 59.25
    drop = rendered["sm_table12"]
    row = drop[(drop["dataset"] == "wt2") & (drop["dropoutl"] == 0.0)]
    assert row["test_ppl_paper"].item() == 68.49 and row["test_ppl_ours"].item() == 100
    assert rendered["sm_table17"]["dataset"].eq("ptb").all() and rendered["sm_table18"]["dataset"].eq("wt2").all()


def test_table2_statistics_match_scipy(summary_dir, rendered):
    runs = pd.read_csv(summary_dir / "main.csv")
    t2 = rendered["table2"].set_index(["dataset", "variant"])
    for ds in ("ptb", "wt2"):
        base = runs[(runs.dataset == ds) & (runs.variant == "softmax") & (runs.seed_kind == "random")]["test_ppl"]
        for var in VARIANTS:
            sel = runs[(runs.dataset == ds) & (runs.variant == var)]
            row = t2.loc[(ds, var)]
            assert row["test_ppl_mean_ours"] == pytest.approx(sel["test_ppl"].mean())
            assert row["test_ppl_sd_ours"] == pytest.approx(sel["test_ppl"].std(ddof=1))
            assert row["n_runs"] == 4
            assert row["parameters_m_ours"] == pytest.approx(24.2216)
            rnd = sel[sel.seed_kind == "random"]["test_ppl"]
            if var == "softmax":
                assert math.isnan(row["p_value_ours"])
            else:
                expect = sps.ttest_ind(rnd, base, equal_var=True).pvalue
                assert row["p_value_ours"] == pytest.approx(expect, rel=1e-9)
    s1 = rendered["sm_table1"].set_index(["dataset", "variant"])
    sel = runs[(runs.dataset == "ptb") & (runs.variant == "ss") & (runs.seed_kind == "random")]["test_ppl"]
    assert s1.loc[("ptb", "ss"), "test_ppl_mean_ours"] == pytest.approx(sel.mean())
    assert s1.loc[("ptb", "ss"), "p_value_ours"] == pytest.approx(t2.loc[("ptb", "ss"), "p_value_ours"])


def test_table4_and_table1_semantics(summary_dir, rendered):
    main = pd.read_csv(summary_dir / "main.csv")
    frozen = pd.read_csv(summary_dir / "frozen.csv")
    t4 = rendered["table4"].set_index("dataset")
    a = main[(main.dataset == "wt2") & (main.variant == "lms_plif") & (main.seed_kind == "random")]["test_ppl"]
    b = frozen[(frozen.dataset == "wt2") & (frozen.seed_kind == "random")]["test_ppl"]
    assert t4.loc["wt2", "p_value_ours"] == pytest.approx(sps.ttest_ind(a, b).pvalue)
    assert t4.loc["wt2", "lms_plif_frozen_test_ppl_mean_ours"] == pytest.approx(b.mean())
    t1 = rendered["table1"].set_index("variant")
    # ntet: test ppl = 100 + j (+1 for NT), rank = 400 + 50 j, j = position in VARIANTS
    assert t1.loc["ss", "ppl_diff_ours"] == pytest.approx(-1.0)
    assert t1.loc["ss", "press_rank_ours"] == 450
    assert t1.loc["mos", "press_rank_ours"] == 600  # NT run, like the paper
    assert t1.loc["mos", "ppl_diff_paper"] == 1.28


def test_small_samples_give_nan_not_errors(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    one = [_run("main", "ptb", v, "et", 141, "authors", 100.0 + j, 400) for j, v in enumerate(VARIANTS)]
    pd.DataFrame(one, columns=RUN_COLUMNS).to_csv(root / "main.csv", index=False)
    pd.DataFrame(columns=RUN_COLUMNS).to_csv(root / "frozen.csv", index=False)
    t2 = tables.build("table2", root)
    assert t2["test_ppl_sd_ours"].isna().all() and t2["p_value_ours"].isna().all()
    assert t2.loc[0, "test_ppl_mean_ours"] == 100.0
    assert t2[t2.dataset == "wt2"]["test_ppl_mean_ours"].isna().all()
    t4 = tables.build("table4", root)
    assert t4["p_value_ours"].isna().all()
    tables.render("table3", root, tmp_path / "t3")  # empty frozen.csv: paper rows only
    assert "— (56.83 ± 0.10)" in (tmp_path / "t3.md").read_text(encoding="utf-8")


def test_markdown_formats_mean_sd(rendered):
    md = tables.to_markdown("table2", rendered["table2"])
    assert "(57.08 ± 0.09)" in md and "| test ppl " in md and "LMS-PLIF" in md
    assert "(3.92×10⁻¹)" in md


def test_sm_table2_compares_top5(rendered):
    t = rendered["sm_table2"].set_index(["model", "group", "number"])
    assert t.loc[("Softmax", "Yang", 1), "top5_overlap"] == 5
    # the SM prints PTB's 's, n't and mr. as ’s, n’t and mr .: the same words
    assert "’s" in t.loc[("Softmax", "Ours", 4), "top5_paper"] and "'s" in t.loc[("Softmax", "Ours", 4), "top5_ours"]
    assert t.loc[("Softmax", "Ours", 4), "top5_overlap"] == 5
    assert t.loc[("Softmax", "Random", 1), "top5_overlap"] == 5 and t.loc[("MoS", "Random", 1), "top5_overlap"] == 5
    assert t.loc[("Softmax", "Yang", 1), "hit_diff"] == -1  # flipped in the synthetic data
    assert t.loc[("MoS", "Yang", 4), "hit_diff"] == 0
    assert math.isnan(t.loc[("GSS", "Yang", 1), "hit_ours"])
    assert not any(m.endswith("**") for m in t.index.get_level_values(0))


def test_figure2_pearson_uses_digitised_points(rendered):
    t = rendered["figure2_pearson"].set_index(["dataset", "subset"])
    assert t.loc[("ptb", "all"), "r_digitised"] == pytest.approx(-0.483, abs=5e-4)
    assert t.loc[("wt2", "all"), "r_digitised"] == pytest.approx(-0.538, abs=5e-4)
    assert t.loc[("ptb", "all"), "abs_r_paper"] == 0.48


def test_figure2_pearson_shows_r_with_its_sign_beside_the_papers(rendered):
    """The r column pairs our signed r with the paper's signed r (its |r| with the sign of its digitised points), so
    a correlation of the opposite sign shows as such instead of hiding behind |r|."""
    from softmax_bottleneck.report.tables.render import display_frame

    table = rendered["figure2_pearson"]
    shown = display_frame("figure2_pearson", table).set_index(["dataset", "test ppl range"])["r"]
    rows = table.set_index(["dataset", "subset"])
    for (ds, subset), signed in (("ptb", "all"), -0.48), (("wt2", "all"), -0.53), (("wt2", "restricted"), 0.21):
        assert rows.loc[(ds, subset), "signed_r"] == signed
    ours = rows.loc[("ptb", "all"), "r"]
    cell = shown[next(i for i in shown.index if i[0] == "PTB" and i[1] == "all")]
    assert cell == f"{ours:.2f} (-0.48)", cell
    flipped = display_frame("figure2_pearson", table.assign(r=-table["r"]))["r"]  # the other sign: another cell
    assert flipped.tolist() != display_frame("figure2_pearson", table)["r"].tolist()


def test_missing_summary_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="main.csv"):
        tables.build("table2", tmp_path)
    with pytest.raises(KeyError, match="valid names"):
        tables.build("table99", tmp_path)


def test_cli(summary_dir, tmp_path, capsys):
    from softmax_bottleneck.cli import main

    assert main(["table", "table6", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "t6")]) == 0
    assert (tmp_path / "t6.csv").is_file() and (tmp_path / "t6.md").is_file()
    with pytest.raises(SystemExit) as exc:
        main(["table", "table99", "--summary-dir", str(summary_dir), "--out", str(tmp_path / "x")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "table99" in err and "sm_table10" in err
    with pytest.raises(SystemExit) as exc:  # before: "table table2: table table2 needs summary file ..."
        main(["table", "table2", "--summary-dir", str(tmp_path / "none"), "--out", str(tmp_path / "x")])
    assert str(exc.value) == f"table table2: {tmp_path / 'none' / 'main.csv'}: no such summary file"


def test_table2_says_why_our_p_values_are_missing_at_one_random_seed(summary_dir, tmp_path):
    """A t-test needs 2 random seeds of each model: with 3 the caption says nothing more; with 1 (the small scale)
    every p-value of ours is — and Table 2's and SM Table 1's captions say why."""
    note = "Our p-values are —: a t-test needs at least 2 random seeds of each model, and this configuration ran "
    note += "fewer (n counts the authors' seed too)."
    for name in ("table2", "sm_table1"):
        assert note not in tables.TABLES[name].caption_for(tables.build(name, summary_dir))
    one_seed = tmp_path / "one-seed"
    shutil.copytree(summary_dir, one_seed)
    main = pd.read_csv(one_seed / "main.csv")
    main[(main["seed_kind"] != "random") | (main["seed"] == 1)].to_csv(one_seed / "main.csv", index=False)
    for name in ("table2", "sm_table1"):
        table = tables.build(name, one_seed)
        assert table.loc[table["n_runs"].notna(), "p_value_ours"].isna().all()
        assert note in tables.TABLES[name].caption_for(table), name


def test_table2s_time_per_epoch_is_of_the_runs_trained_alone(summary_dir, rendered, tmp_path):
    """A run trained in a fused group of K records the group's epoch (K runs' work): Table 2 times the runs trained
    alone, says so, and shows — where every run of a row trained in a group (before: the group's time, up to K times
    a run's)."""
    fused = tmp_path / "fused"
    shutil.copytree(summary_dir, fused)
    main = pd.read_csv(summary_dir / "main.csv")
    ptb = main["dataset"] == "ptb"
    softmax, ss = ptb & (main["variant"] == "softmax"), ptb & (main["variant"] == "ss")
    main.loc[softmax, ["fused_runs", "seconds_per_epoch"]] = [2, 9.0]  # every PTB Softmax run in a group of 2
    part = main.index[ss][:2]
    main.loc[part, ["fused_runs", "seconds_per_epoch"]] = [4, 20.0]  # two of PTB SS's four
    main.loc[main.index[ss][2:], "seconds_per_epoch"] = [1.0, 2.0]
    main.to_csv(fused / "main.csv", index=False)
    table = tables.build("table2", fused).set_index(["dataset", "variant"])
    assert math.isnan(table.loc[("ptb", "softmax"), "seconds_per_epoch_ours"])
    assert table.loc[("ptb", "ss"), "seconds_per_epoch_ours"] == 1.5
    before = rendered["table2"].set_index(["dataset", "variant"])
    assert table.loc[("wt2", "ss"), "seconds_per_epoch_ours"] == before.loc[("wt2", "ss"), "seconds_per_epoch_ours"]
    note = "Our time per epoch is that of the runs trained alone"
    assert note in tables.TABLES["table2"].caption_for(table.reset_index())
    assert note not in tables.TABLES["table2"].caption_for(rendered["table2"])


def test_older_summaries_without_some_columns_give_the_same_tables(summary_dir, rendered, tmp_path):
    """A summary written before a column existed (top5.csv without its models' dataset, variant and schedule;
    wordsim.csv without the pair counts) reads with that column empty: the tables that do not show it are unchanged,
    and the figures still draw."""
    from softmax_bottleneck.report import figures
    from softmax_bottleneck.report.common import read_top5, read_wordsim

    older = tmp_path / "older"
    shutil.copytree(summary_dir, older)
    top5 = pd.read_csv(summary_dir / "top5.csv")
    top5.drop(columns=["dataset", "variant", "schedule", "layer_source"]).to_csv(older / "top5.csv", index=False)
    ws = pd.read_csv(summary_dir / "wordsim.csv")
    ws.drop(columns=["pairs", "found", "not_found"]).to_csv(older / "wordsim.csv", index=False)

    read = read_top5(older)
    assert list(read.columns[-4:]) == ["dataset", "variant", "schedule", "layer_source"]
    assert read["variant"].isna().all() and read["variant"].dtype == object
    assert read_wordsim(older)["found"].dtype == float and read_wordsim(older)["found"].isna().all()
    for name in ("sm_table2", "sm_table3"):
        pd.testing.assert_frame_equal(tables.build(name, older), rendered[name], check_dtype=False)
    pd.testing.assert_frame_equal(tables.build("sm_table13", older), rendered["sm_table13"])  # counts: the corpora's
    for name in ("figure3", "figure4"):
        figures.render(name, older, tmp_path / name)
        assert (tmp_path / f"{name}.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("item", "file", "cut"),
    [("table2", "main.csv", "test_ppl"), ("table2", "main.csv", "variant"), ("sm_table3", "wordsim.csv", "spearman"),
     ("figure2", "gss_grid.csv", "press_rank"), ("figure7", "spectra.csv", "sigma"), ("table2", "main.csv", None)],
)  # fmt: skip
def test_a_summary_without_a_column_it_must_have_is_refused_not_shown_as_runs_not_made(summary_dir, tmp_path, item,
                                                                                         file, cut):  # fmt: skip
    """Before, main.csv without test_ppl gave Table 2 with every test perplexity "—" (a run not made yet) and exit
    status 0; without variant, n = 0 everywhere and a caption blaming too few seeds; figures drew empty panels."""
    from softmax_bottleneck.cli import main

    broken = tmp_path / "summary"
    shutil.copytree(summary_dir, broken)
    if cut is None:
        (broken / file).write_bytes(b"")
        needle = f"{broken / file}: empty (no header): not a summary of the workflow"
    else:
        pd.read_csv(summary_dir / file).drop(columns=cut).to_csv(broken / file, index=False)
        needle = f"{broken / file}: no column {cut}: not a summary of the workflow"
    kind = "figure" if item.startswith("figure") and item != "figure2_pearson" else "table"
    with pytest.raises(SystemExit) as exc:
        main([kind, item, "--summary-dir", str(broken), "--out", str(tmp_path / "out" / item)])
    assert str(exc.value.code).startswith(f"{kind} {item}: ") and needle in str(exc.value.code)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(("item", "file"), [("table2", "main.csv"), ("sm_table3", "wordsim.csv")])
def test_a_summary_row_given_twice_is_refused_not_counted_as_another_seed(summary_dir, tmp_path, item, file):
    """Before, main.csv with its first row appended again gave Table 2 that row's layer with one seed more (its sd
    shrunk, its n grown) and exit status 0, while the claims page refused the same file."""
    from softmax_bottleneck.cli import main

    broken = tmp_path / "summary"
    shutil.copytree(summary_dir, broken)
    frame = pd.read_csv(summary_dir / file)
    pd.concat([frame, frame.iloc[[0]]]).to_csv(broken / file, index=False)
    with pytest.raises(SystemExit) as exc:
        main(["table", item, "--summary-dir", str(broken), "--out", str(tmp_path / "out" / item)])
    assert f"{broken / file}: row {len(frame) + 1} repeats row 1 (dataset " in str(exc.value.code), exc.value.code
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
