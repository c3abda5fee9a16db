"""Word-similarity benchmarks (spec §12) on the real files of the data folder (tests/conftest.py, ``data_dir``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import data_dir, needs_data
from scipy import stats as sps

from softmax_bottleneck.analysis import wordsim

SHARED_DATA = data_dir()
WORD_SIM = SHARED_DATA / "word-sim"

# unique (word1, word2) pairs per file (WS-353-ALL.txt has 353 lines, money–cash twice) and SM Table 13's
# "not in PTB" / "not in WT2" counts
EXPECTED = {
    "WS-353": (352, 116, 48),
    "WS-353-SIM": (203, 66, 28),
    "WS-353-REL": (252, 80, 28),
    "RG-65": (65, 55, 20),
    "MC-30": (30, 21, 4),
    "MTurk-287": (287, 146, 106),
    "MTurk-771": (771, 346, 99),
    "MEN": (3000, 1952, 863),
    "YP-130": (130, 65, 43),
    "VERB-143": (144, 9, 0),
    "RW-STANFORD": (2034, 1889, 1605),
    "SimVerb-3500": (3500, 1746, 1080),
    "SimLex-999": (999, 424, 106),
}


def _corpus_vocab(folder: Path) -> set[str]:
    words = {"<eos>"}
    for split in ("train", "valid", "test"):
        words.update((folder / f"{split}.txt").read_text(encoding="utf-8").split())
    return words


def test_benchmark_names_in_sm_table3_order():
    assert list(wordsim.BENCHMARKS) == list(EXPECTED)
    assert wordsim.BENCHMARKS["WS-353"] == "WS-353-ALL.txt"
    assert wordsim.BENCHMARKS["MEN"] == "MEN-TR-3k.txt"
    assert wordsim.BENCHMARKS["SimLex-999"] == "SimLex-999.txt"


def test_the_analysis_reads_exactly_the_benchmark_files_fetch_downloads_and_checks():
    from softmax_bottleneck.corpora.download import FILES

    fetched = {path for path in FILES if path.startswith("word-sim/")}
    assert {f"word-sim/{name}" for name in wordsim.BENCHMARKS.values()} == fetched and len(fetched) == 13


@needs_data
def test_every_file_parses_with_its_pair_count():
    for name, path in wordsim.benchmark_files(WORD_SIM).items():
        pairs = wordsim.read_benchmark(path)
        assert len(wordsim.unique_pairs(pairs)) == EXPECTED[name][0], name
        assert len(pairs) == EXPECTED[name][0] + (name == "WS-353"), name  # lines: WS-353 has one duplicate
        assert all(w1 == w1.lower() and w2 == w2.lower() for w1, w2, _ in pairs)
    ws = wordsim.read_benchmark(WORD_SIM / "WS-353-ALL.txt")  # CRLF, mixed case, duplicate pair
    assert ("jerusalem", "israel") in {(a, b) for a, b, _ in ws}
    assert [s for a, b, s in ws if (a, b) == ("money", "cash")] == [9.15, 9.08]
    # the reference's dict keeps the last score
    assert [s for a, b, s in wordsim.unique_pairs(ws) if (a, b) == ("money", "cash")] == [9.08]


def test_duplicate_pair_counts_once_with_its_last_score(tmp_path):
    """The reference keys pairs by the lower-cased (word1, word2) in a dict: a repeated pair counts once, last wins."""
    f = tmp_path / "dup.txt"
    f.write_text("a b 1.0\nMoney Cash 9.0\nc d 5.0\nb c 3.0\nmoney CASH 0.5\n")
    pairs = wordsim.read_benchmark(f)
    assert len(pairs) == 5
    assert wordsim.unique_pairs(pairs) == [("a", "b", 1.0), ("money", "cash", 0.5), ("c", "d", 5.0), ("b", "c", 3.0)]
    vocab = ["a", "b", "c", "d", "money", "cash"]
    emb = np.random.default_rng(2).standard_normal((len(vocab), 4))
    res = wordsim.evaluate_embedding(emb, vocab, pairs)
    assert (res["pairs"], res["found"], res["not_found"]) == (4, 4, 0)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    ix = {w: i for i, w in enumerate(vocab)}
    keys = [("a", "b"), ("money", "cash"), ("c", "d"), ("b", "c")]
    expected = sps.spearmanr([1.0, 0.5, 5.0, 3.0], [unit[ix[x]] @ unit[ix[y]] for x, y in keys]).statistic
    assert res["spearman"] == pytest.approx(expected, abs=1e-12)
    first_wins = sps.spearmanr([1.0, 9.0, 5.0, 3.0], [unit[ix[x]] @ unit[ix[y]] for x, y in keys]).statistic
    assert first_wins != pytest.approx(expected)  # the score kept matters for this embedding
    # a duplicate with a missing word is one not-found pair; (b, a) is another pair than (a, b)
    more = pairs + [("zebra", "a", 1.0), ("ZEBRA", "a", 2.0), ("b", "a", 4.0)]
    res = wordsim.evaluate_embedding(emb, vocab, more)
    assert (res["pairs"], res["found"], res["not_found"]) == (6, 5, 1)


@needs_data
@pytest.mark.parametrize("corpus,column", [("ptb", 1), ("wikitext-2", 2)])
def test_sm_table13_not_found_counts(corpus, column):
    folder = SHARED_DATA / corpus
    vocab = sorted(_corpus_vocab(folder))
    assert len(vocab) == {"ptb": 10000, "wikitext-2": 33278}[corpus]
    emb = np.random.default_rng(0).standard_normal((len(vocab), 4))
    table = wordsim.evaluate_all(emb, vocab, WORD_SIM).set_index("benchmark")
    assert table["not_found"].to_dict() == {name: counts[column] for name, counts in EXPECTED.items()}


def test_malformed_file_names_line(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text("a\tb\t1.0\n\nc\td\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3:.*2 field"):
        wordsim.read_benchmark(f)
    f.write_text("a b 1\r\nc d high\r\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2:.*'high'"):
        wordsim.read_benchmark(f)
    f.write_text("A\tB\t1.5\n\n  c d 2  ")  # blank line skipped, no final newline, lower-cased
    assert wordsim.read_benchmark(f) == [("a", "b", 1.5), ("c", "d", 2.0)]


def test_spearman_matches_scipy_and_skips_oov():
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(50)] + ["Paris"]
    emb = rng.standard_normal((51, 8)) * rng.uniform(0.1, 10, (51, 1))  # row norms must not matter
    pairs = [(f"w{rng.integers(50)}", f"w{rng.integers(50)}", float(rng.uniform(0, 10))) for _ in range(40)]
    pairs += [("w1", "zebra", 5.0), ("paris", "w2", 3.0)]  # OOV; vocab is case-sensitive
    res = wordsim.evaluate_embedding(emb, vocab, pairs)
    assert res["pairs"] == 42 and res["found"] == 40 and res["not_found"] == 2
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    cos = [unit[int(a[1:])] @ unit[int(b[1:])] for a, b, _ in pairs[:40]]
    expected = sps.spearmanr([s for _, _, s in pairs[:40]], cos).statistic
    assert res["spearman"] == pytest.approx(expected, abs=1e-12)
    empty = wordsim.evaluate_embedding(emb, vocab, [("x", "y", 1.0)])
    assert empty == {"pairs": 1, "found": 0, "not_found": 1, "spearman": 0.0}


def test_torch_embedding_accepted():
    torch = pytest.importorskip("torch")
    emb = torch.randn(3, 4, requires_grad=True)
    res = wordsim.evaluate_embedding(emb, ["a", "b", "c"], [("a", "b", 1.0), ("a", "c", 2.0), ("b", "c", 3.0)])
    assert res["found"] == 3 and -1.0 <= res["spearman"] <= 1.0


@needs_data
def test_evaluate_all_table(tmp_path):
    vocab = ["love", "sex", "tiger", "cat", "money", "cash", "bank"]
    emb = np.random.default_rng(1).standard_normal((len(vocab), 5))
    t = wordsim.evaluate_all(emb, vocab, WORD_SIM)
    assert list(t.columns) == ["benchmark", "pairs", "found", "not_found", "spearman"]
    assert t["benchmark"].tolist() == list(EXPECTED)
    assert t["pairs"].tolist() == [c[0] for c in EXPECTED.values()]
    assert (t["found"] + t["not_found"] == t["pairs"]).all()
    assert t.set_index("benchmark").loc["WS-353", "found"] > 0
    with pytest.raises(FileNotFoundError, match="missing benchmark"):
        wordsim.evaluate_all(emb, vocab, tmp_path)


@needs_data
def test_wordsim_cli_with_fake_checkpoint(tmp_path, monkeypatch):
    """``wordsim`` CLI end to end; ``checkpoint.load_model`` replaced so the test does not need a trained model."""
    import sys
    import types

    torch = pytest.importorskip("torch")
    from softmax_bottleneck.cli import main as cli_main

    vocab = ["<eos>", "love", "sex", "tiger", "cat", "money", "cash", "bank", "king", "queen"]
    model = torch.nn.Module()  # a stand-in with the tied embedding only
    model.encoder = torch.nn.Embedding(len(vocab), 6)
    seen = {}

    def load_model(path, device):
        seen["args"] = (str(path), device)
        return model, {"vocab": vocab, "dataset": "ptb", "variant": "softmax"}

    fake = types.ModuleType("softmax_bottleneck.training.checkpoint")
    fake.load_model = load_model
    monkeypatch.setitem(sys.modules, "softmax_bottleneck.training.checkpoint", fake)
    out = tmp_path / "res" / "wordsim.csv"
    ckpt = tmp_path / "model.pt"
    torch.save({"stand-in": torch.zeros(1)}, ckpt)  # an existing torch file; the fake load_model reads it
    assert cli_main(["wordsim", "--checkpoint", str(ckpt), "--benchmarks", str(WORD_SIM), "--out", str(out)]) == 0
    assert seen["args"] == (str(ckpt), "cpu")
    import pandas as pd

    t = pd.read_csv(out)
    assert list(t.columns) == ["dataset", "variant", "benchmark", "pairs", "found", "not_found", "spearman"]
    assert t["benchmark"].tolist() == list(EXPECTED) and (t["dataset"] == "ptb").all()
    assert t.set_index("benchmark").loc["WS-353", "pairs"] == 352
    expected = wordsim.evaluate_all(model.encoder.weight, vocab, WORD_SIM)
    np.testing.assert_allclose(t["spearman"], expected["spearman"], rtol=1e-8)
    # a malformed benchmark folder fails before the model is loaded, exit code 2
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in wordsim.BENCHMARKS.values():
        (bad / name).write_text("a b 1\n")
    (bad / "MC-30.txt").write_text("a b 1\nc d\n")
    seen.clear()
    assert cli_main(["wordsim", "--checkpoint", str(ckpt), "--benchmarks", str(bad), "--own-benchmarks", "--out",
                     str(out)]) == 2  # fmt: skip
    assert "args" not in seen


@pytest.mark.parametrize(
    "content,reason",
    [(b"", "no word pairs (empty file)"), (b"\n  \n", "no word pairs"), (b"caf\xe9 cup 3.0\n", "not UTF-8 text")],
    ids=["empty", "blank", "latin-1"],
)
def test_an_empty_or_non_utf8_benchmark_is_refused_naming_it(tmp_path, content, reason, capsys):
    """An empty file would score "0 pairs, Spearman 0"; a Latin-1 file a UnicodeDecodeError traceback."""
    from softmax_bottleneck.cli import main as cli_main

    for name in wordsim.BENCHMARKS.values():
        (tmp_path / name).write_text("a b 1\nc d 2\n")
    bad = tmp_path / "WS-353-ALL.txt"
    bad.write_bytes(content)
    with pytest.raises(ValueError) as err:
        wordsim.read_benchmark(bad)
    assert str(err.value).startswith(f"{bad}: {reason}")
    out = tmp_path / "out.csv"
    code = cli_main(["wordsim", "--checkpoint", str(tmp_path / "none.pt"), "--benchmarks", str(tmp_path),
                     "--own-benchmarks", "--out", str(out)])  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and str(bad) in lines[0] and reason in lines[0] and not out.exists()


@needs_data
def test_an_edited_benchmark_is_refused_before_the_model_is_read(tmp_path, capsys):
    """Before, one score edited in a copy of MC-30 moved its rho from 0.517 to 0.817, exit status 0: the files were
    checked only when downloaded. Now each is the published file or the command stops naming it (with
    --own-benchmarks, a folder of your own is read as it is)."""
    import shutil

    from softmax_bottleneck.cli import main as cli_main

    copy = tmp_path / "ws"
    shutil.copytree(WORD_SIM, copy)
    assert len(wordsim.benchmark_files(copy)) == 13  # the published files pass
    text = (copy / "MC-30.txt").read_text(encoding="utf-8").splitlines()
    first = text[0].split()
    (copy / "MC-30.txt").write_text("\n".join([" ".join([*first[:2], "0.01"]), *text[1:]]) + "\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    code = cli_main(["wordsim", "--checkpoint", str(tmp_path / "none.pt"), "--benchmarks", str(copy), "--out",
                     str(out)])  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and not out.exists(), lines
    assert f"{copy / 'MC-30.txt'}: SHA-256 " in lines[0] and "is not the published benchmark's" in lines[0]
    assert "fetch word-sim/MC-30.txt" in lines[0]
    assert len(wordsim.benchmark_files(copy, pinned=False)) == 13


@needs_data
def test_sm_table13_is_counted_from_the_corpora_alone(tmp_path):
    """The coverage summary (``summarize --kind coverage``: each corpus's cache and the benchmarks, no model) has SM
    Table 13's counts for both corpora, the counts the analysis of a model of that vocabulary makes; a cache given for
    the other dataset, or an edited benchmark, is refused naming it, and nothing is written."""
    from softmax_bottleneck.cli import main as cli_main
    from softmax_bottleneck.corpora.corpus import read_corpus, save_corpus

    records = {}
    for ds, folder in (("ptb", "ptb"), ("wt2", "wikitext-2")):
        corpus = read_corpus(SHARED_DATA / folder, ds)
        save_corpus(corpus, tmp_path / f"{ds}.pt")
        records[ds] = f"dataset={ds},corpus={tmp_path / f'{ds}.pt'},benchmarks={WORD_SIM}"
        vocab = corpus.dictionary.idx2word
        embedding = np.random.default_rng(0).standard_normal((len(vocab), 2))
        model = wordsim.evaluate_all(embedding, vocab, WORD_SIM)[["benchmark", "pairs", "found"]]
        counted = wordsim.vocabulary_coverage(vocab, {n: wordsim.read_benchmark(p) for n, p in
                                                      wordsim.benchmark_files(WORD_SIM).items()})  # fmt: skip
        assert counted[["benchmark", "pairs", "found"]].equals(model), ds
    out = tmp_path / "summary" / "wordsim_coverage.csv"
    argv = ["summarize", "--kind", "coverage", "--out", str(out)]
    assert cli_main([*argv, "--record", records["ptb"], "--record", records["wt2"]]) == 0
    import pandas as pd

    table = pd.read_csv(out)
    assert list(table.columns) == ["dataset", "benchmark", "pairs", "found", "not_found"]
    for column, ds in ((1, "ptb"), (2, "wt2")):
        rows = table[table["dataset"] == ds].set_index("benchmark")
        assert rows["not_found"].to_dict() == {name: counts[column] for name, counts in EXPECTED.items()}, ds
        assert rows["pairs"].to_dict() == {name: counts[0] for name, counts in EXPECTED.items()}, ds
    out.unlink()
    swapped = records["wt2"].replace("dataset=wt2", "dataset=ptb")
    with pytest.raises(SystemExit) as exc:
        cli_main(["summarize", "--kind", "coverage", "--out", str(out), "--record", swapped])
    assert "wt2.pt" in str(exc.value.code) and not out.exists()
    with pytest.raises(SystemExit) as exc:  # before, a KeyError's traceback
        cli_main(["summarize", "--kind", "coverage", "--out", str(out), "--record", swapped.replace("=ptb", "=penn")])
    assert str(exc.value.code).endswith("dataset must be one of ptb, wt2") and not out.exists()
    edited = tmp_path / "word-sim"
    shutil.copytree(WORD_SIM, edited)
    with (edited / "MC-30.txt").open("a", encoding="utf-8") as file:
        file.write("car\tautomobile\t4.0\n")
    with pytest.raises(SystemExit) as exc:
        cli_main(["summarize", "--kind", "coverage", "--out", str(out), "--record",
                  records["ptb"].replace(f"benchmarks={WORD_SIM}", f"benchmarks={edited}")])  # fmt: skip
    assert "MC-30.txt" in str(exc.value.code) and "published" in str(exc.value.code) and not out.exists()
