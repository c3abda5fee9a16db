"""Tables and figures derive their variants from the registry: a plug-in layer shows up after the paper's layers."""

from __future__ import annotations

import io
import math
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest
from test_tables import make_summaries

from softmax_bottleneck import presets
from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
from softmax_bottleneck.models.output_layers import registry as registry_module
from softmax_bottleneck.report import figures, reported, tables, variants
from softmax_bottleneck.report.summaries import RUN_COLUMNS

PLUGIN = "toy_softmax"


@pytest.fixture
def plugin(monkeypatch):
    """A tiny output layer registered only inside the test (registry and presets caches restored afterwards)."""
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer(PLUGIN, display="Toy", family="softmax")
    class Toy(OutputLayer):
        def forward(self, context, weight):
            return (0.5 * self.logits(context, weight)).log_softmax(-1)

    assert PLUGIN in presets.variants()
    return PLUGIN


def _add_runs(summary_dir, name: str, variant: str, **values) -> None:
    frame = pd.read_csv(summary_dir / name)
    template = frame[frame["variant"] == "ss"]
    extra = template.assign(variant=variant, **values)
    pd.concat([frame, extra], ignore_index=True)[RUN_COLUMNS].to_csv(summary_dir / name, index=False)


@pytest.fixture
def summary_with_plugin(plugin, tmp_path):
    root = make_summaries(tmp_path / "summary")
    _add_runs(root, "main.csv", plugin, test_ppl=lambda f: f["test_ppl"] + 20, press_rank=777)
    _add_runs(root, "ntet.csv", plugin, press_rank=778)
    spectra = pd.read_csv(root / "spectra.csv")
    toy = spectra[spectra["variant"] == "ss"].assign(variant=plugin)
    pd.concat([spectra, toy], ignore_index=True).to_csv(root / "spectra.csv", index=False)
    return root


def _variants_by_dataset(table: pd.DataFrame, column: str = "variant") -> dict[str, list[str]]:
    return {ds: table.loc[table["dataset"] == ds, column].tolist() for ds in ("ptb", "wt2")}


def test_plugin_rows_follow_the_papers_rows(summary_with_plugin, tmp_path):
    paper = list(reported.paper_order("main"))
    for name, shown in (("table2", paper), ("table6", paper), ("sm_table1", paper)):
        table = tables.render(name, summary_with_plugin, tmp_path / name)
        for ds, rows in _variants_by_dataset(table).items():
            assert rows == [*shown, PLUGIN], (name, ds)
        row = table[(table["dataset"] == "ptb") & (table["variant"] == PLUGIN)].iloc[0]
        paper_cols = [c for c in table.columns if c.endswith("_paper")]
        assert all(math.isnan(row[c]) for c in paper_cols), name  # the paper has no value
        text = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        assert "Toy" in text and text.index("Toy") > text.index("MoS"), name
        assert "(—)" in text.split("Toy", 1)[1].splitlines()[0], name  # "—" where the paper has no value
    t2 = tables.build("table2", summary_with_plugin)
    ours = t2[(t2["dataset"] == "ptb") & (t2["variant"] == PLUGIN)]["test_ppl_mean_ours"].item()
    main = pd.read_csv(summary_with_plugin / "main.csv")
    assert ours == pytest.approx(main[(main["dataset"] == "ptb") & (main["variant"] == "ss")]["test_ppl"].mean() + 20)
    t6 = tables.build("table6", summary_with_plugin)
    assert t6[(t6["dataset"] == "wt2") & (t6["variant"] == PLUGIN)]["press_rank_ours"].item() == 778
    sm10 = tables.build("sm_table10", summary_with_plugin)
    for schedule in ("nt", "et"):
        rows = sm10.loc[sm10["schedule"] == schedule, "variant"].tolist()
        assert rows[-1] == PLUGIN and rows[:-1] == list(reported.paper_order("ntet")), schedule


def test_plugin_curve_follows_the_papers_in_figure7(summary_with_plugin):
    fig = figures.build("figure7", summary_with_plugin)
    for ax in fig.axes[:2]:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        curves = [lbl for lbl in labels if lbl in {*map(variants.display, variants.registry_order())}]
        assert curves[-1] == "Toy" and curves.index("Toy") > curves.index("LMS-PLIF")
        toy = [line for line in ax.get_lines() if line.get_label() == "Toy"]
        assert len(toy) == 1 and toy[0].get_color() == variants.color(PLUGIN)


def test_a_missing_colour_is_a_free_palette_colour(plugin):
    table = variants.colors()
    declared = {presets.variant_info(v).color for v in presets.variants() if presets.variant_info(v).color}
    assert table[plugin] not in declared
    assert variants.colors() == table  # stable across figures
    for v in presets.variants():  # declared colours are kept
        if presets.variant_info(v).color:
            assert table[v] == presets.variant_info(v).color
    assert variants.color("never_registered") == variants.color("never_registered")


def test_no_registered_variant_is_dropped(plugin, tmp_path):
    """Every registered variant in a summary appears in the tables that compare output layers, in registry order."""
    registry = list(presets.variants())
    assert variants.ordered(reported.paper_order("main"), registry)[: len(registry)] != []
    assert set(variants.ordered((), registry)) == set(registry)
    assert variants.ordered((), reversed(registry)) == registry
    root = make_summaries(tmp_path / "summary")
    for variant in registry:
        if variant not in reported.paper_order("main"):
            _add_runs(root, "main.csv", variant)
    t2 = tables.build("table2", root)
    for ds, rows in _variants_by_dataset(t2).items():
        assert rows == variants.ordered(reported.paper_order("main"), registry), ds
    wins = tables.build("figure4_wins", root)
    assert set(wins["row_variant"]) >= set(reported.paper_order("figure4", "row_variant"))


def test_display_names_come_from_the_registry(plugin):
    assert variants.display("lms_plif_frozen") == "LMS-PLIF†"
    assert variants.display("softmax_fair_large") == "Softmax‡"
    assert variants.display(plugin) == "Toy"
    assert variants.display("not_registered") == "not_registered"
    models = variants.ordered_models(reported.paper_order("figure3_hits", "model"), ["Toy*", "Zed", "Toy", "MoS"])
    assert models[-3:] == ["Toy", "Toy*", "Zed"]


def test_plugin_follows_the_papers_models_in_figures_3_and_4_and_sm_table3(summary_with_plugin):
    root = summary_with_plugin
    ws = pd.read_csv(root / "wordsim.csv")
    pd.concat([ws, ws[ws["variant"] == "ss"].assign(variant=PLUGIN)]).to_csv(root / "wordsim.csv", index=False)
    top5 = pd.read_csv(root / "top5.csv", keep_default_na=False, na_values=[""])
    pd.concat([top5, top5[top5["model"] == "MoS"].assign(model="Toy")]).to_csv(root / "top5.csv", index=False)
    fig4 = figures.build("figure4", root)
    fig3 = figures.build("figure3", root)
    with matplotlib.rc_context(figures.STYLE):
        for fig in (fig3, fig4):
            fig.savefig(io.BytesIO(), format="png", dpi=20)
    assert [t.get_text() for t in fig4.axes[0].get_yticklabels()] == ["GSS", "MoS", "SS", "Softmax", "Toy"]
    rows = [t.get_text() for t in fig3.axes[0].get_yticklabels()]
    assert rows == [*reported.paper_order("figure3_hits", "model"), "Toy"]
    sm3 = tables.build("sm_table3", root)
    ptb = sm3[(sm3["dataset"] == "ptb") & (sm3["benchmark"] == "WS-353")]["variant"].tolist()
    assert ptb == ["softmax", "ss", "gss", "lms_plif", "mos", "moc", PLUGIN]


def test_every_registered_variant_is_drawn_in_figure7(plugin, tmp_path):
    registry = list(presets.variants())
    rows = [
        {"dataset": "ptb", "variant": v, "index": i, "sigma": s, "sigma_normalised": s}
        for v in registry
        for i, s in enumerate(np.exp(-np.arange(30) / 4))
    ]
    (tmp_path / "s").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "s" / "spectra.csv", index=False)
    fig = figures.build("sm_figure3", tmp_path / "s")
    drawn = [line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")]
    assert drawn == [variants.display(v) for v in variants.ordered(reported.paper_order("table6"), registry)]
    assert len({line.get_color() for line in fig.axes[0].get_lines() if line.get_label() in drawn}) == len(drawn)


def test_a_plugin_gets_a_saturated_colour_of_its_own_hue(monkeypatch):
    """A plug-in without a declared colour is drawn in a saturated colour whose hue no built-in variant uses."""
    import matplotlib.colors as mcolors

    from softmax_bottleneck import presets
    from softmax_bottleneck.models.output_layers import OutputLayer, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    cls = type("Mine", (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
    register_output_layer("my_layer", display="Mine", family="softmax")(cls)
    mine = mcolors.rgb_to_hsv(mcolors.to_rgb(variants.color("my_layer")))
    assert mine[1] >= 0.35
    for name in presets.variants():
        if name == "my_layer":
            continue
        other = mcolors.rgb_to_hsv(mcolors.to_rgb(variants.color(name)))
        if other[1] >= 0.2:
            assert min(abs(mine[0] - other[0]), 1 - abs(mine[0] - other[0])) >= 0.04, name


def test_table1_shows_every_e2_model_the_papers_with_their_values_then_gss_moc_and_a_plugin(
    summary_with_plugin, tmp_path
):
    """Before, Table 1 showed SS, LMS-PLIF and MoS only, never GSS nor a plug-in, though E2 trains them."""
    table = tables.render("table1", summary_with_plugin, tmp_path / "table1")
    assert table["variant"].tolist() == ["ss", "lms_plif", "mos", "gss", "moc", PLUGIN]
    t1 = table.set_index("variant")
    ntet = pd.read_csv(summary_with_plugin / "ntet.csv")
    ptb_et = ntet[(ntet["dataset"] == "ptb") & (ntet["schedule"] == "et")].set_index("variant")
    for variant in ("gss", "moc", PLUGIN):  # ours: rank of the ET run, gain over the ET Softmax; no paper value
        assert t1.loc[variant, "press_rank_ours"] == ptb_et.loc[variant, "press_rank"]
        assert t1.loc[variant, "ppl_diff_ours"] == pytest.approx(
            ptb_et.loc["softmax", "test_ppl"] - ptb_et.loc[variant, "test_ppl"]
        )
        assert math.isnan(t1.loc[variant, "press_rank_paper"]) and math.isnan(t1.loc[variant, "ppl_diff_paper"])
    assert t1.loc[PLUGIN, "press_rank_ours"] == 778
    paper = reported.load("table1").set_index("variant")
    for variant in ("ss", "lms_plif", "mos"):  # the paper's rows keep the paper's values beside ours
        assert t1.loc[variant, "press_rank_paper"] == paper.loc[variant, "press_rank"]
    md = (tmp_path / "table1.md").read_text(encoding="utf-8")
    header = next(line for line in md.splitlines() if line.startswith("| metric"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == [
        "metric", "SS", "LMS-PLIF", "MoS", "GSS", "MoC", "Toy",
    ]  # fmt: skip
    reported_ranks = next(line for line in md.splitlines() if line.startswith("| rank, reported in the original"))
    assert [cell.strip() for cell in reported_ranks.strip("|").split("|")][1:] == [
        "4,640", "N/A", "9,980", "—", "—", "—",
    ]  # fmt: skip


def test_plugins_without_a_colour_get_colours_as_far_apart_as_declared_ones_must_be(monkeypatch):
    """Each plug-in that declares no colour is drawn in one at least MIN_DELTA_E (CIEDE2000) from every other
    variant's, as a declared colour must be: never a second purple beside MoS's."""
    from softmax_bottleneck.models.output_layers.colours import MIN_DELTA_E, delta_e

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    mine = [f"mine{i}" for i in range(4)]
    for name in mine:
        cls = type(name, (OutputLayer,), {"forward": lambda self, c, w: self.logits(c, w).log_softmax(-1)})
        register_output_layer(name, display=name.capitalize(), family="softmax")(cls)
    table = variants.colors()
    assert set(mine) <= set(table) and variants.colors() == table
    for name in mine:
        for other, colour in table.items():
            assert other == name or delta_e(table[name], colour) >= MIN_DELTA_E, (name, table[name], other, colour)


def test_a_variant_name_and_the_banner_stay_text_in_the_markdown(tmp_path):
    """Before: ``table``'s Markdown wrote a summary's variant ``<b>x|y</b>`` raw (a tag, and a cell more than the
    header), and the banner too; the claims page and lm-report escaped theirs."""
    root = make_summaries(tmp_path / "summary")
    _add_runs(root, "main.csv", "<b>x|y</b>", press_rank=777)
    table = tables.render("table2", root, tmp_path / "t2", banner="<i>pilot|run</i>")
    text = (tmp_path / "t2.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len({len(re.findall(r"(?<!\\)\|", line)) for line in rows}) == 1  # one cell count for every row
    assert r"\<b\>x\|y\</b\>" in text and r"\<i\>pilot\|run\</i\>" in text
    assert "<b>" not in text and "<i>" not in text and "<b>x|y</b>" in set(table["variant"])


def test_a_header_a_link_and_a_line_break_stay_text_in_the_markdown_and_the_latex():
    """Before, a header was written raw (a sweep's column ``<script>c</script>``), ``[click](javascript:...)`` made a
    link, and a top-5 word holding a line break split its Markdown row (and, twice, ended the LaTeX tabular's
    paragraph)."""
    from softmax_bottleneck.report.tables.render import latex_table, markdown_page

    frame = pd.DataFrame({"<script>c</script>": ["[click](javascript:alert(1))", "two\n\nlines"]})
    text = markdown_page("t", frame, "caption")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 4 and rows[0].startswith(r"| \<script\>c\</script\>")
    assert r"\[click\](javascript:alert(1))" in rows[2] and "two lines" in rows[3]
    assert "<script>" not in text and "](" not in text.replace(r"\](", "")
    latex = latex_table(frame, "caption", "tab:t")
    assert "\n\n" not in latex and "two  lines" in latex
