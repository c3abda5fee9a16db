"""The study's run set (softmax_bottleneck.study): expanded from a configuration without Snakemake.

The run folders of config/config.yaml and config/small.yaml are pinned (tests/data/plans/*.csv, the training
plans written before the run set moved into the package): a folder name that changes would orphan a user's
trained model, and a new one would train it again.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pandas as pd
import pytest

from softmax_bottleneck import presets
from softmax_bottleneck.study import config as study_config
from softmax_bottleneck.study.plan import plan_frame
from softmax_bottleneck.study.runs import RUN_EXPERIMENTS, Study, StudyError

REPO = Path(__file__).resolve().parents[1]


def study_of(name: str, **changes) -> Study:
    config = study_config.read(REPO / "config" / name)
    config.update(changes)
    return Study(study_config.check(config))


@pytest.mark.parametrize("name", ["config", "small"])
def test_plan_is_the_pinned_one(name):
    pinned = pd.read_csv(REPO / "tests" / "data" / "plans" / f"{name}.csv", keep_default_na=False)
    ours = plan_frame(study_of(f"{name}.yaml"))
    assert list(ours["run"]) == list(pinned["run"])
    pd.testing.assert_frame_equal(ours.astype(str), pinned.astype(str), check_dtype=False)


def test_paper_config_plans_283_distinct_training_jobs():
    study = study_of("config.yaml")
    assert len(study.jobs) == 283
    assert len({run.dir for run in study.jobs.values()}) == 283


def test_a_run_that_several_experiments_use_is_one_job():
    study = study_of("config.yaml")
    members = study.members()
    authors_softmax = study.reference_run("ptb", "softmax", "et")
    assert authors_softmax.dir in study.jobs
    assert {"main", "ntet", "analysis"} <= set(members[authors_softmax.dir])
    # the GSS grid point equal to the preset (c, k) is E1's run: named "default", not by its values
    grid = study.experiments["gss_grid"]
    assert sum(run.tag == "default" for run in grid if run.dataset == "ptb") == 1
    assert authors_softmax.tag == "default"


def test_the_run_hash_covers_every_resolved_hyperparameter():
    base = study_of("small.yaml")
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["all"]["epochs"] = 4
    changed = Study(study_config.check(config))
    before = base.reference_run("ptb", "softmax", "et")
    after = changed.reference_run("ptb", "softmax", "et")
    assert before.tag == after.tag == "default"
    assert before.runid != after.runid
    assert after.hyperparameters["epochs"] == 4


def test_model_overrides_apply_all_then_dataset_then_family_then_variant():
    """A dataset's block changes that dataset's runs only (and their hash); a family's or variant's block wins over
    it on a shared key."""
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["all"].update(bptt=20, lr=10.0)
    config["model_overrides"]["datasets"] = {"wt2": {"bptt": 15, "lr": 12.0}}
    config["model_overrides"]["families"]["mixture"]["lr"] = 14.0
    config["model_overrides"]["variants"] = {"gss": {"lr": 16.0}}
    study = Study(study_config.check(copy.deepcopy(config)))
    assert [study.model_overrides(dataset, "softmax")["bptt"] for dataset in ("ptb", "wt2")] == [20, 15]
    expected = {"softmax": (10.0, 12.0), "mos": (14.0, 14.0), "gss": (16.0, 16.0)}
    for variant, lrs in expected.items():
        got = tuple(study.reference_run(dataset, variant, "et").hyperparameters["lr"] for dataset in ("ptb", "wt2"))
        assert got == lrs, variant
    # the PTB runs are the same models as without the WikiText-2 block; the WikiText-2 runs are new ones
    del config["model_overrides"]["datasets"]
    without = Study(study_config.check(config))
    for dataset, same in (("ptb", True), ("wt2", False)):
        runids = [s.reference_run(dataset, "softmax", "et").runid for s in (study, without)]
        assert (runids[0] == runids[1]) is same, dataset


def test_a_dataset_block_is_checked_like_any_override():
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["datasets"] = {"wt2": {"epochs": 0}}
    with pytest.raises(study_config.ConfigError, match=r"^model_overrides/datasets/wt2/epochs"):
        study_config.check(config)
    config["model_overrides"]["datasets"] = {"enwik8": {"epochs": 2}}
    with pytest.raises(study_config.ConfigError, match=r"model_overrides/datasets.*enwik8"):
        study_config.check(config)


def test_swept_values_name_the_run_and_reach_its_set_arguments():
    study = study_of("small.yaml")
    grid = [run for run in study.experiments["gss_grid"] if run.tag != "default"]
    assert grid
    for run in grid:
        for key, value in run.overrides:
            assert (key, value) in run.sets
            assert run.hyperparameters[key] == value
    assert all(run.tag.startswith(("c", "k")) for run in grid)


def test_every_experiment_is_expanded():
    study = study_of("small.yaml")
    assert tuple(study.experiments) == RUN_EXPERIMENTS
    assert all(study.experiments[name] for name in RUN_EXPERIMENTS)


def test_a_bad_combination_names_its_experiment():
    config = study_config.read(REPO / "config" / "small.yaml")
    config["model_overrides"]["all"]["small_batch_size"] = 3  # batch_size 10 is no multiple of 3
    study = Study(config)
    with pytest.raises(StudyError, match=r"^experiments/main: .*multiple of small_batch_size"):
        _ = study.jobs


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ({"all": {"small_batch_size": 3}}, r"^model_overrides \(all \+ families/softmax\): softmax on ptb \(et\): "
         r"batch_size 10 is not a multiple of small_batch_size 3$"),
        ({"datasets": {"wt2": {"small_batch_size": 3}}},
         r"^model_overrides \(all \+ datasets/wt2 \+ families/softmax\): softmax on wt2 \(et\): batch_size 10 is"),
        ({"variants": {"mos": {"nhidlast": 8, "small_batch_size": 4}}},
         r"^model_overrides \(all \+ families/mixture \+ variants/mos\): mos on ptb \(et\)"),
        ({"variants": {"softmax": {"n_experts": 3}}},
         r"^model_overrides/variants/softmax/n_experts: variant 'softmax' does not own n_experts .* change no model"),
        ({"families": {"softmax": {"n_experts": 3}}},
         r"^model_overrides/families/softmax/n_experts: no variant of family 'softmax' owns n_experts"),
        ({"families": {"softmax": {"gss_c": -1.0}}, "variants": {"mos": {"n_experts": 3}}}, None),  # GSS owns gss_c
    ],
)  # fmt: skip
def test_model_overrides_are_named_by_their_block_not_by_the_experiment_that_meets_them(blocks, message):
    """Before, a clash of two overrides was named by the first experiment whose sweep met it
    (``experiments/gss_grid/sweep/ptb: ...``), and an override of a key the variant's layer lacks changed nothing,
    silently."""
    config = study_config.read(REPO / "config" / "small.yaml")
    study_config.merge(config["model_overrides"], blocks)
    if message is None:
        study_config.check(config)
        sets = Study(config).model_overrides("ptb", "mos")
        assert (
            sets["n_experts"] == 3
            and presets.resolve("ptb", "gss", "et", Study(config).model_overrides("ptb", "gss"))["gss_c"] == -1.0
        )
        return
    with pytest.raises(study_config.ConfigError, match=message):
        study_config.check(config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["experiments"]["main"]["variants"].append("nope"), "experiments/main/variants: unknown variant"),
        (lambda c: c["model_overrides"]["all"].update(lr=-1), "model_overrides/all/lr"),
        (lambda c: c["model_overrides"]["all"].update(seed=1), "seed cannot be set here"),
        (lambda c: c["experiments"]["main"].update(colour="red"), r"unknown key\(s\) \['colour'\]; allowed: "),
        (lambda c: c.pop("analysis"), "missing key analysis"),
    ],
)
def test_config_errors_name_the_key(change, message):
    config = study_config.read(REPO / "config" / "small.yaml")
    change(config)
    with pytest.raises(study_config.ConfigError, match=message):
        study_config.check(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "the file is empty"), ("- a\n- b\n", "expected keys at the top level"), ("a: [1,\n", "YAML syntax")],
)
def test_unreadable_config_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(study_config.ConfigError, match=message) as err:
        study_config.read(path)
    assert str(path) in err.value.source


def test_hyperparameters_decide_the_run_folder_not_their_spelling():
    """lr: 30 (int) and lr: 30.0 are the same run; lr: 20 is another one."""
    folders = {}
    for label, lr in (("int", 30), ("float", 30.0), ("other", 20.0)):
        config = study_config.read(REPO / "config" / "small.yaml")
        config["model_overrides"]["all"]["lr"] = lr
        folders[label] = set(Study(study_config.check(config)).jobs)
    assert folders["int"] == folders["float"]
    assert not folders["int"] & folders["other"]
    # so are swept values: a float's whole number written 3 names the folder that 3.0 names (before: "k3-<hash>" beside
    # "k3.0-<hash>", the same model trained twice)
    swept = {}
    for label, ks in (("int", [2.5, 3]), ("float", [2.5, 3.0])):
        config = study_config.read(REPO / "config" / "small.yaml")
        config["experiments"]["gss_grid"]["sweep"]["ptb"]["gss_k"] = ks
        swept[label] = set(Study(study_config.check(config)).jobs)
    assert swept["int"] == swept["float"] and any("k3.0-" in folder for folder in swept["int"])


@pytest.mark.parametrize(
    "edit",
    [lambda c: c["model_overrides"]["all"].update(dropout=0),  # 0.0 written as an int
     lambda c: c["model_overrides"]["all"].update(epochs=6.0),
     lambda c: c["model_overrides"]["all"].update(clip=presets.defaults()["clip"]),  # the preset's own value
     lambda c: c["model_overrides"]["all"].update(switch_epoch=4),  # changes the ET runs; NT runs ignore it
     lambda c: c["model_overrides"]["all"].update(c["model_overrides"]["families"]["mixture"])],  # K in `all`
    ids=["int-zero", "float-epochs", "preset-clip", "switch-epoch", "moved-key"],
)  # fmt: skip
def test_one_model_is_one_training_command_however_the_configuration_writes_it(edit):
    """A run's `train --set` arguments are a Snakemake parameter: one written another way planned the run again
    (a no-op job that waited for the finished training, and every table re-rendered), though its folder was the
    same. Each edit keeps each model's command, or makes it another model."""
    config = study_config.read(REPO / "config" / "small.yaml")
    before = {run.dir: run.set_arguments for run in Study(study_config.check(copy.deepcopy(config))).jobs.values()}
    edit(config)
    after = {run.dir: run.set_arguments for run in Study(study_config.check(config)).jobs.values()}
    same = set(before) & set(after)
    assert same and all(before[folder] == after[folder] for folder in same)
    for run in Study(study_config.check(config)).jobs.values():  # the arguments resolve to the run's own model
        sets = presets.parse_overrides(run.set_arguments)
        assert presets.resolve(run.dataset, run.variant, run.schedule, sets) == run.hyperparameters


def test_the_readme_shows_the_plan_that_plan_prints():
    """The README's plan block is the beginning of the output of `python -m softmax_bottleneck plan` for
    config/config.yaml: its table, to the total (the epoch caps, disk and days on N GPUs follow in docs/cluster.md)."""
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ python -m softmax_bottleneck plan\n", 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "plan"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert block.rstrip().endswith("|") and "| total " in block.splitlines()[-1]
    assert out.startswith(block) and out[len(block) :].startswith("\nEpochs: ")


def test_plan_table_counts_a_shared_run_once():
    from softmax_bottleneck.study.plan import plan_table

    study = study_of("config.yaml")
    table = plan_table(study).set_index("experiment")
    assert table.loc["E2 NT vs ET", "jobs"] == 24 and table.loc["E2 NT vs ET", "new jobs"] == 14
    assert table.loc["total", "new jobs"] == len(study.jobs) == 283
    some = set(list(study.jobs)[:3])
    assert plan_table(study, some).set_index("experiment").loc["total", "trained"] == 3


def test_the_folder_hash_is_the_trainers_fingerprint_of_the_same_run(shared_data):
    """One run identity: the trainer's fingerprint (its resolved hyper-parameters with --set and --seed, and the
    corpus it reads) starts with the hash in the run's folder name, for every run of the small configuration."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.corpora.corpus import load_corpus
    from softmax_bottleneck.training.state import run_fingerprint

    corpora = {name: load_corpus(shared_data / folder, None) for name, folder in (("ptb", "ptb"),
                                                                                   ("wt2", "wikitext-2"))}  # fmt: skip
    study = study_of("small.yaml")
    for run in study.jobs.values():
        sets = presets.parse_overrides(run.set_arguments)
        hp = presets.resolve(run.dataset, run.variant, run.schedule, {**sets, "seed": run.seed})
        assert run_fingerprint(hp, corpora[run.dataset]).startswith(run.runid.rsplit("-", 1)[1]), run.dir


# ------------------------------------------------------------------ one model, one job, one honest name
@pytest.fixture
def plugin_layer(monkeypatch):
    """A plug-in softmax-family layer ``plug`` with one key of its own, ``plug_scale`` (dropped afterwards)."""
    from softmax_bottleneck.models.output_layers import Hyperparameter, SoftmaxOfScores, register_output_layer
    from softmax_bottleneck.models.output_layers import registry as registry_module

    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))

    @register_output_layer("plug", display="Plug", family="softmax",
                           hyperparameters={"plug_scale": Hyperparameter(1.0, float, exclusive_minimum=0)})  # fmt: skip
    class Plug(SoftmaxOfScores):
        def __init__(self, vocab_size, nemb, nhidlast, plug_scale=1.0):
            super().__init__(vocab_size, nemb, nhidlast)
            self.plug_scale = plug_scale

        def scores(self, context, weight):
            return self.logits(context, weight) * self.plug_scale

    return "plug"


def _small(change) -> dict:
    config = study_config.read(REPO / "config" / "small.yaml")
    change(config)
    return config


def _gss_grid_with(variant):
    def change(config):
        grid = config["experiments"]["gss_grid"]
        grid["variants"] = ["gss", variant]
        grid["sweep"] = {"ptb": {"gss_c": [-1.0, 0.0], "gss_k": [2.0, 3.0]}}
        grid["datasets"] = ["ptb"]

    return change


def _mos_k_with_plugin_key(config):
    config["experiments"]["mos_k"]["sweep"]["ptb"]["plug_scale"] = [1.0, 2.0]


def _ntet_sweeping_switch_epoch(config):
    config["experiments"]["ntet"]["sweep"] = {"ptb": {"switch_epoch": [3, 5]}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_gss_grid_with("plug"), r"^experiments/gss_grid/sweep/ptb/gss_c: variant 'plug' does not own gss_c"),
        (_gss_grid_with("softmax"), r"^experiments/gss_grid/sweep/ptb/gss_c: variant 'softmax' does not own gss_c"),
        (_mos_k_with_plugin_key, r"^experiments/mos_k/sweep/ptb/plug_scale: variant 'mos' does not own plug_scale"),
        (_ntet_sweeping_switch_epoch,
         r"^experiments/ntet/sweep/ptb/switch_epoch: variant '\w+' does not own switch_epoch under schedule nt: "
         r"switch_epoch=3 resolves to -1"),
    ],
    ids=["gss-grid-plugin", "gss-grid-softmax", "mos-k-plugin-key", "nt-switch-epoch"],
)  # fmt: skip
def test_a_swept_key_the_variant_does_not_own_is_refused_at_load(plugin_layer, change, message):
    """Before, each of these planned the same model several times under names that lie (c-1.0_k2.0 for a layer
    without c), or trained each MoS model twice."""
    config = _small(change)
    with pytest.raises(study_config.ConfigError, match=message) as info:
        study_config.check(config)
    assert "\n" not in str(info.value)


def _distinct(study: Study) -> None:
    """One job per distinct resolved run, and no two run folders with the same identity hash."""
    from softmax_bottleneck.study.runs import identity_hash

    hashes = [identity_hash(run.identity) for run in study.jobs.values()]
    assert len(hashes) == len(set(hashes))
    runs = [*itertools.chain(*study.experiments.values(), *study.sweeps.values()), *study.analysis_models()]
    assert len({identity_hash(run.identity) for run in runs}) == len(study.jobs)


@pytest.mark.parametrize("name", ["config", "small"])
def test_the_shipped_plans_train_each_model_once(name):
    _distinct(study_of(f"{name}.yaml"))


@pytest.mark.parametrize("change", [_gss_grid_with("plug"), _mos_k_with_plugin_key], ids=["gss-grid", "mos-k"])
def test_an_unchecked_config_still_plans_each_model_once(plugin_layer, change):
    """Even past the config check (a Study of an unchecked config), a key the variant does not own names no run."""
    study = Study(_small(change))
    _distinct(study)
    for run in itertools.chain(*study.experiments.values()):
        assert all(key in run.hyperparameters for key, _ in run.overrides), run.overrides  # no name that lies
    plug = [run for run in study.experiments["gss_grid"] if run.variant == "plug"]
    assert {run.tag for run in plug} <= {"default"}


def test_two_folders_of_one_model_are_refused():
    """softmax_fair made equal to Softmax‡ by overrides: one model under two names is refused, not trained twice."""
    config = _small(lambda c: None)
    study = Study(config)
    large = presets.resolve("ptb", "softmax_fair_large", "et", study.model_overrides("ptb", "softmax_fair_large"))
    fair = presets.resolve("ptb", "softmax_fair", "et", study.model_overrides("ptb", "softmax_fair"))
    same = {key: value for key, value in large.items() if fair[key] != value}
    config["model_overrides"].setdefault("variants", {})["softmax_fair"] = same
    config["experiments"]["fair"]["variants"] = ["softmax_fair", "softmax_fair_large"]
    config["experiments"]["fair"]["datasets"] = ["ptb"]
    with pytest.raises(
        StudyError, match=r"^results/runs/ptb/\w+/et/seed\d+/default-\w+ is the same model as results/runs/ptb/"
    ):
        _ = Study(study_config.check(config)).jobs


def test_a_config_edit_that_renames_a_trained_model_keeps_its_folder(tmp_path):
    """MoS K = 2 is the small scale's default: its mos_k run is ``default-<hash>``. With K = 3 the default, the same
    model is named ``K2-<hash>`` (and the K = 3 point, trained as ``K3-<hash>``, ``default-<hash>``): a study that reads
    the run folders uses the folders they were trained in, so nothing is trained again; without a trained folder (or
    without reading them) the run has the configuration's name."""
    config = study_config.read(REPO / "config" / "small.yaml")
    before = Study(study_config.check(copy.deepcopy(config)))
    config["model_overrides"]["families"]["mixture"]["n_experts"] = 3
    after = Study(study_config.check(copy.deepcopy(config)), root=tmp_path)

    def mos_k(study, k):
        return next(r for r in study.experiments["mos_k"] if r.dataset == "ptb" and r.hyperparameters["n_experts"] == k)

    k2, k3 = mos_k(before, 2), mos_k(before, 3)
    assert k2.runid.startswith("default-") and k3.runid.startswith("K3-")
    renamed = Study(study_config.check(copy.deepcopy(config)))
    assert mos_k(renamed, 2).runid == f"K2-{k2.runid[-8:]}" and mos_k(renamed, 3).runid == f"default-{k3.runid[-8:]}"
    assert mos_k(after, 2).runid == mos_k(renamed, 2).runid  # nothing trained yet: the configuration's name
    (tmp_path / k2.dir / ".resume").mkdir(parents=True)  # K = 2: part trained as default-<hash>
    (tmp_path / k3.dir).mkdir(parents=True)
    (tmp_path / k3.dir / "model.pt").write_bytes(b"")  # K = 3: trained as K3-<hash>
    stray = tmp_path / mos_k(renamed, 3).dir  # a folder of the new name that holds only a job's lock
    stray.mkdir(parents=True)
    (stray / ".lock").write_text("1 host\n")
    after = Study(study_config.check(copy.deepcopy(config)), root=tmp_path)
    assert mos_k(after, 2).dir == k2.dir and mos_k(after, 3).dir == k3.dir
    assert k2.dir in {r.dir for r in after.jobs.values()} and mos_k(after, 2).identity == k2.identity
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "model.pt").parent.mkdir()
    (elsewhere / "model.pt").write_bytes(b"")
    link = (tmp_path / mos_k(renamed, 2).dir).with_name(f"linked-{k2.runid[-8:]}")
    link.symlink_to(elsewhere)  # a link that holds a model under the hash: never taken for the run's folder
    assert mos_k(Study(study_config.check(copy.deepcopy(config)), root=tmp_path), 2).dir == k2.dir
    (tmp_path / mos_k(renamed, 2).dir / ".resume").mkdir(parents=True)  # both hold as much: the configuration's name
    again = Study(study_config.check(copy.deepcopy(config)), root=tmp_path)
    assert mos_k(again, 2).runid == mos_k(renamed, 2).runid


def test_the_workflow_plans_a_renamed_model_in_the_folder_it_was_trained_in(tmp_path):
    """The dry run of the edit above (MoS K = 3 the small scale's default): the K = 2 model, part-trained as
    ``default-<hash>``, is resumed there; no job names ``K2-<hash>``."""
    import yaml
    from test_workflow import snakemake

    config = study_config.read(REPO / "config" / "small.yaml")
    k2 = next(r for r in Study(study_config.check(copy.deepcopy(config))).experiments["mos_k"]
              if r.dataset == "ptb" and r.hyperparameters["n_experts"] == 2)  # fmt: skip
    (tmp_path / k2.dir / ".resume").mkdir(parents=True)
    config["model_overrides"]["families"]["mixture"]["n_experts"] = 3
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "results/small/summary/mos_k.csv", "-n", configfile=tmp_path / "mine.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{k2.dir}/model.pt" in result.stdout and f"K2-{k2.runid[-8:]}" not in result.stdout


def test_plan_counts_a_renamed_model_as_trained(tmp_path, monkeypatch):
    """`plan` reads the run folders where the workflow does: the K = 2 model trained as ``default-<hash>`` is trained
    when K = 3 is the default (before: counted untrained, under the name ``K2-<hash>``)."""
    import yaml

    from softmax_bottleneck.cli import main

    config = study_config.read(REPO / "config" / "small.yaml")
    k2 = next(r for r in Study(study_config.check(copy.deepcopy(config))).experiments["mos_k"]
              if r.dataset == "ptb" and r.hyperparameters["n_experts"] == 2)  # fmt: skip
    (tmp_path / k2.dir).mkdir(parents=True)
    (tmp_path / k2.dir / "model.pt").write_bytes(b"")
    config["model_overrides"]["families"]["mixture"]["n_experts"] = 3
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--config", "mine.yaml", "--csv", "plan.csv"]) in (0, None)
    runs = pd.read_csv(tmp_path / "plan.csv")["run"].tolist()
    assert k2.dir in runs and f"K2-{k2.runid[-8:]}" not in " ".join(runs)
