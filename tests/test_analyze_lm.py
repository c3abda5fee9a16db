"""``analyze-lm``: the rank of a local Hugging Face causal LM's log-P matrix (tiny random GPT-2, no download)."""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from softmax_bottleneck.analysis import language_model as lm  # noqa: E402
from softmax_bottleneck.analysis.rank import press_rank  # noqa: E402
from softmax_bottleneck.cli import main  # noqa: E402

N_EMBD = 8
CONTEXT = 32
WORDS = [f"w{i}" for i in range(120)]


def _text(n_lines: int = 60, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(" " + " ".join(rng.choice(WORDS) for _ in range(20)) + " \n" for _ in range(n_lines))


def _tokenizer(words):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def _save_gpt2(folder, vocab_size: int, words=WORDS):
    """A random 1-layer GPT-2 (d = 8, context 32; large weights, so that its logits vary) and a word tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=CONTEXT, n_embd=N_EMBD, n_layer=1, n_head=2, initializer_range=0.5,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(folder)
    _tokenizer(words).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    text = root / "text.txt"
    text.write_text(_text(), encoding="utf-8")
    return _save_gpt2(root / "gpt2", len(WORDS) + 1), text


def _run(capsys, *argv):
    code = main(["analyze-lm", *map(str, argv)])
    return code, capsys.readouterr().err


def test_windows_score_every_token_once_with_left_context():
    for n, ctx, stride in [(100, 32, 16), (100, 32, 31), (33, 32, 5), (32, 32, 1), (70, 10, 3), (70, 2, 1)]:
        targets = []
        for i, (begin, end, first) in enumerate(lm.windows(n, ctx, stride)):
            assert end - begin <= ctx and begin < first <= end
            if i:
                assert first - begin == ctx - stride
            targets += range(first, end)
        assert targets == list(range(1, n))
    with pytest.raises(ValueError, match="stride"):
        list(lm.windows(100, 8, 8))


def test_tiny_gpt2_end_to_end(tiny, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO, logger="softmax_bottleneck")
    model_dir, text = tiny
    out, spectrum, logp = tmp_path / "rank.json", tmp_path / "spectrum.csv", tmp_path / "logp.npy"
    code, err = _run(capsys, "--model", model_dir, "--text", text, "--rows", 200, "--stride", 16, "--device", "cpu",
                     "--out-json", out, "--out-spectrum", spectrum, "--save-logp", logp)  # fmt: skip
    assert code == 0, err
    assert "200/200 rows" in caplog.text and "rows/s" in caplog.text and "left" in caplog.text  # progress lines
    summary = json.loads(out.read_text())
    n_cols = len(WORDS) + 1
    assert summary["rows"] == 200 and summary["shape"] == [200, n_cols]
    assert summary["hidden_size"] == summary["head_input_size"] == N_EMBD
    assert summary["output_bias"] is False and summary["softmax_bound"] == N_EMBD + 1  # GPT-2's head has no bias
    assert summary["context"] == CONTEXT and summary["stride"] == 16
    assert set(summary["effective_rank"]) == {"1e-3", "1e-4", "1e-5"}
    # log P = H·Wᵀ − log Z: the bound holds, and is reached by a random model
    assert N_EMBD <= summary["press_rank"] <= N_EMBD + 2
    assert summary["exceeds_softmax_bound"] is False

    rows = np.load(logp)
    assert rows.shape == (200, n_cols) and rows.dtype == np.float32
    sv = np.linalg.svd(rows.astype(np.float64), compute_uv=False)
    assert press_rank(sv, rows.shape) == summary["press_rank"]
    assert np.allclose(np.sort(sv)[::-1][: len(sv)], np.loadtxt(spectrum, delimiter=",", skiprows=1)[:, 1])

    # the rows are the model's next-token log-probabilities, the targets the text's tokens
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    ids = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)(text.read_text())["input_ids"]
    with torch.no_grad():
        first = torch.log_softmax(model(torch.tensor([ids[:CONTEXT]])).logits[0].float(), -1).numpy()
    np.testing.assert_allclose(rows[: CONTEXT - 1], first[:-1], atol=1e-5)
    nll = -rows[np.arange(200), ids[1:201]].astype(np.float64).mean()
    assert summary["logp_test_loss"] == pytest.approx(nll, rel=1e-6)
    assert summary["perplexity"] == pytest.approx(math.exp(nll), rel=1e-6)
    assert summary["max_abs_log_normaliser"] < 1e-4


def test_more_rows_than_the_text_gives_are_said(tiny, tmp_path, capsys, caplog):
    model_dir, text = tiny
    short = tmp_path / "short.txt"
    short.write_text(" ".join(WORDS[:40]), encoding="utf-8")
    code, err = _run(capsys, "--model", model_dir, "--text", short, "--rows", 1000, "--device", "cpu", "--out-json",
                     tmp_path / "rank.json")  # fmt: skip
    assert code == 0, err
    assert json.loads((tmp_path / "rank.json").read_text())["rows"] == 39
    assert "--rows 1000: the text's 40 tokens give 39 rows; ranking those" in caplog.text


def test_bound_with_an_output_bias(tiny):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny[0], local_files_only=True)
    assert lm.head_info(model).softmax_bound == N_EMBD + 1
    model.lm_head = torch.nn.Linear(N_EMBD, len(WORDS) + 1, bias=True)
    info = lm.head_info(model)
    assert info.output_bias and info.softmax_bound == N_EMBD + 2


def _mixture_of_softmaxes(body, n_cols: int, components: int = 2):
    """A 2-component mixture of softmaxes on the tiny GPT-2's hidden states: log P is no longer rank ≤ d + 2."""
    gen = torch.Generator().manual_seed(1)
    prior = torch.randn(N_EMBD, components, generator=gen)
    latent = torch.randn(components, N_EMBD, N_EMBD, generator=gen)
    embedding = torch.randn(n_cols, N_EMBD, generator=gen) * 2

    def logp(window, k):
        h = body(input_ids=window[None]).last_hidden_state[0, -(k + 1) : -1]
        log_prior = torch.log_softmax(h @ prior, -1)  # [k, K]
        comps = torch.log_softmax(torch.tanh(torch.einsum("ld,kde->kle", h, latent)) @ embedding.T, -1)  # [K, k, V]
        return torch.logsumexp(log_prior.T[:, :, None] + comps, 0)

    return logp


def test_a_mixture_of_softmaxes_exceeds_the_bound(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny[0], local_files_only=True).eval()
    ids = lm.tokenize_text(AutoTokenizer.from_pretrained(tiny[0], local_files_only=True), tiny[1])
    n_cols = len(WORDS) + 1
    softmax_sv, softmax = lm.analyze_stream(lm.hf_logp_function(model), ids, n_cols, CONTEXT, 16, rows=200)
    mos_sv, mos = lm.analyze_stream(_mixture_of_softmaxes(model.transformer, n_cols), ids, n_cols, CONTEXT, 16, 200)
    assert softmax["press_rank"] <= N_EMBD + 1 < N_EMBD + 2 < mos["press_rank"]
    assert mos["shape"] == softmax["shape"] == [200, n_cols]


def test_a_failed_analysis_leaves_no_partial_matrix(tmp_path):
    calls = []

    def logp(window, k):  # finite in the first window, NaN in the second
        calls.append(k)
        out = torch.log_softmax(torch.randn(k, 7), -1)
        return out if len(calls) == 1 else out * math.nan

    with pytest.raises(lm.NonFiniteLogP, match=f"row {CONTEXT - 1} "):
        lm.analyze_stream(logp, torch.zeros(100, dtype=torch.long), 7, CONTEXT, 16, save_logp=tmp_path / "l.npy")
    assert list(tmp_path.iterdir()) == []


def _assert_refused(capsys, argv, *phrases, out=None):
    code, err = _run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.startswith("analyze-lm: error:")]
    assert code == 2 and len(lines) == 1, err
    for phrase in phrases:
        assert phrase in lines[0]
    assert out is None or not out.exists()


def test_refusals(tiny, tmp_path, capsys):
    model_dir, text = tiny
    out = tmp_path / "rank.json"
    common = ["--out-json", out, "--device", "cpu"]
    _assert_refused(capsys, ["--model", tmp_path / "nowhere", "--text", text, *common], "no such folder", out=out)
    _assert_refused(capsys, ["--model", "gpt2", "--text", text, *common], "no such folder", out=out)  # not the Hub
    weights = model_dir / "model.safetensors"  # the weights file itself, not its folder
    _assert_refused(capsys, ["--model", weights, "--text", text, *common], "a file, not a model folder", out=out)
    empty = tmp_path / "empty"
    empty.mkdir()
    _assert_refused(capsys, ["--model", empty, "--text", text, *common], "no config.json", out=out)
    for broken in ("tokenizer.json", "tokenizer_config.json"):  # the refusal names the file to mend
        folder = _copy(model_dir, tmp_path / f"bad-{broken}")
        (folder / broken).write_text('{"version": "1.0", ')
        said = f"analyze-lm: error: {folder / broken}: cannot load the model's tokenizer"
        _assert_refused(capsys, ["--model", folder, "--text", text, *common], said, out=out)

    from transformers import BertConfig, T5Config, ViTConfig

    for config, phrase in [(ViTConfig(), "not a causal language model"), (T5Config(), "encoder-decoder")]:
        folder = tmp_path / config.model_type
        config.save_pretrained(folder)
        _assert_refused(capsys, ["--model", folder, "--text", text, *common], phrase, out=out)
    custom = tmp_path / "custom"  # a model class of its own: its code is never imported
    custom.mkdir()
    (custom / "config.json").write_text(json.dumps({"model_type": "custom-lm", "vocab_size": 10, "auto_map": {
        "AutoConfig": "code.Config", "AutoModelForCausalLM": "code.Model"}}))  # fmt: skip
    (custom / "code.py").write_text(f"open({str(custom / 'ran')!r}, 'w').close()\n")
    _assert_refused(capsys, ["--model", custom, "--text", text, *common], "custom code", "never runs", out=out)
    # before: transformers' "does not recognize this architecture ... pip install --upgrade", cut; and a classifier's
    # folder was "of different models"
    for name, edit, said in (
        ("unknown", {"model_type": "my-own-lm"}, "model_type 'my-own-lm' is not one this transformers"),
        ("classifier", {"architectures": ["GPT2ForSequenceClassification"]},
         "a GPT2ForSequenceClassification (config.json's architectures), not a language model's head"),
        # before: a traceback (huggingface_hub's validation error), and a bare "'evil'"
        ("typed", {"n_embd": "sixteen"}, "not a valid model config: Validation error for field 'n_embd'"),
        ("activation", {"activation_function": "evil"}, "names 'evil', which this transformers does not know"),
    ):  # fmt: skip
        folder = _copy(model_dir, tmp_path / name)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **edit}))
        blamed = folder / "config.json" if name in ("typed", "activation") else folder
        _assert_refused(capsys, ["--model", folder, "--text", text, *common], f"{blamed}: {said}", out=out)
    # an auto_map beside a model_type transformers knows is ignored by transformers, so is it here (Falcon, Phi-3)
    mapped = _copy(model_dir, tmp_path / "mapped")
    config = json.loads((mapped / "config.json").read_text())
    (mapped / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModelForCausalLM": "code.Model"}}))
    (mapped / "code.py").write_text(f"open({str(mapped / 'ran')!r}, 'w').close()\n")
    code, err = _run(capsys, "--model", mapped, "--text", text, "--rows", 50, "--out-json", tmp_path / "mapped.json",
                     "--device", "cpu")  # fmt: skip
    assert code == 0 and not (mapped / "ran").exists(), err
    assert not (custom / "ran").exists()
    bert = tmp_path / "bert"  # a config AutoModelForCausalLM knows, but no weights in the folder
    BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
               is_decoder=True).save_pretrained(bert)  # fmt: skip
    _assert_refused(capsys, ["--model", bert, "--text", text, *common], "cannot load", out=out)

    small = _save_gpt2(tmp_path / "small-vocab", vocab_size=50)  # 121 tokenizer ids, 50 outputs
    _assert_refused(capsys, ["--model", small, "--text", text, *common], "vocabulary mismatch", "121", "50", out=out)

    short = tmp_path / "short.txt"
    short.write_text(" ".join(WORDS[:10]))
    _assert_refused(capsys, ["--model", model_dir, "--text", short, *common], "10 tokens", "one window of 32", out=out)
    _assert_refused(capsys, ["--model", model_dir, "--text", tmp_path / "none.txt", *common], "no such file", out=out)
    os.mkfifo(tmp_path / "fifo.txt")  # read plainly, it would wait for a writer for ever
    _assert_refused(capsys, ["--model", model_dir, "--text", tmp_path / "fifo.txt", *common], "a FIFO", out=out)
    _assert_refused(capsys, ["--model", model_dir, "--text", text, "--context", 64, *common], "context length 32")
    _assert_refused(capsys, ["--model", model_dir, "--text", text, "--context", 8, "--stride", 8, *common], "stride")


def _copy(model_dir: Path, folder: Path) -> Path:
    import shutil

    return Path(shutil.copytree(model_dir, folder))


def test_weights_and_tokenizer_of_a_model_folder_are_checked_before_loading(tiny, tmp_path, capsys):
    """A pickle weight file (loadable, never loaded), a cut or mis-shaped safetensors file, a folder without its
    tokenizer and a tokenizer of more ids than the model outputs: one line each, naming the file."""
    from safetensors.torch import load_file

    model_dir, text = tiny
    out = tmp_path / "rank.json"
    common = ["--text", text, "--out-json", out, "--device", "cpu"]

    pickle = _copy(model_dir, tmp_path / "pickle")
    torch.save(load_file(pickle / "model.safetensors"), pickle / "pytorch_model.bin")  # torch.load could read it
    (pickle / "model.safetensors").unlink()
    _assert_refused(capsys, ["--model", pickle, *common], f"error: {pickle / 'pytorch_model.bin'}: ",
                    "loads only safetensors", "never a pickle", "save_pretrained", out=out)  # fmt: skip

    cut = _copy(model_dir, tmp_path / "cut")
    weights = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    _assert_refused(capsys, ["--model", cut, *common], f"error: {cut / 'model.safetensors'}: not a whole safetensors",
                    out=out)  # fmt: skip

    wider = _copy(model_dir, tmp_path / "wider")
    config = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps({**config, "n_embd": 2 * N_EMBD}))
    _assert_refused(capsys, ["--model", wider, *common], f"error: {wider / 'model.safetensors'}: tensor ",
                    f"is [{len(WORDS) + 1}, {N_EMBD}], but the model that config.json describes needs "
                    f"[{len(WORDS) + 1}, {2 * N_EMBD}]", out=out)  # fmt: skip

    # before: a hang building a 10⁹-layer skeleton, a RecursionError's traceback, 4.5 GB read for a 2 GB file
    huge = _copy(model_dir, tmp_path / "huge")
    config = json.loads((huge / "config.json").read_text())
    (huge / "config.json").write_text(json.dumps({**config, "n_layer": 10**9}))
    _assert_refused(capsys, ["--model", huge, *common], f"error: {huge / 'config.json'}: 1,000,000,000 layers", out=out)
    deep = _copy(model_dir, tmp_path / "deep")
    (deep / "tokenizer_config.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _assert_refused(capsys, ["--model", deep, *common], f"error: {deep / 'tokenizer_config.json'}: cannot load the "
                    "model's tokenizer", out=out)  # fmt: skip
    sparse = _copy(model_dir, tmp_path / "sparse")
    with open(sparse / "tokenizer.json", "r+b") as handle:
        handle.truncate(300 * 2**20)  # sparse: no disk taken
    _assert_refused(capsys, ["--model", sparse, *common], f"error: {sparse / 'tokenizer.json'}: larger than 256 MB",
                    out=out)  # fmt: skip

    bare = _copy(model_dir, tmp_path / "bare")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink()
    _assert_refused(capsys, ["--model", bare, *common], f"error: {bare}: no tokenizer", out=out)

    small = _save_gpt2(tmp_path / "small-vocab", vocab_size=50)  # 121 tokenizer ids, 50 outputs
    _assert_refused(capsys, ["--model", small, *common], f"error: {small / 'tokenizer.json'}: tokenizer/model "
                    "vocabulary mismatch", out=out)  # fmt: skip


def test_weights_of_more_or_fewer_layers_than_config_json_and_a_model_that_sees_ahead_are_refused(
    tiny, tmp_path, capsys
):
    """Before, a config.json of 2 layers over 1-layer weights analysed a model whose second layer was random, one of
    0 layers dropped the weights' layer, and a masked-LM BERT (which AutoModelForCausalLM loads as BertLMHeadModel)
    gave rows that saw the token they score: each wrote its numbers with exit status 0."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    model_dir, text = tiny
    out = tmp_path / "rank.json"
    common = ["--text", text, "--out-json", out, "--device", "cpu"]
    for layers, phrase in ((2, "tensor(s) of the model config.json describes (e.g. transformer.h.1."),
                           (0, "tensor(s) the model config.json describes has no place for (e.g. "
                               "transformer.h.0.")):  # fmt: skip
        other = _copy(model_dir, tmp_path / f"layers{layers}")
        config = json.loads((other / "config.json").read_text())
        (other / "config.json").write_text(json.dumps({**config, "n_layer": layers}))
        _assert_refused(capsys, ["--model", other, *common], f"error: {other / 'model.safetensors'}: the weights ",
                        phrase, "the weights and config.json are of different models", out=out)  # fmt: skip

    torch.manual_seed(0)
    masked = tmp_path / "roberta"
    RobertaForMaskedLM(RobertaConfig(vocab_size=len(WORDS) + 4, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16, max_position_embeddings=CONTEXT + 2,
                                     initializer_range=0.5)).save_pretrained(masked)  # fmt: skip
    _tokenizer(WORDS).save_pretrained(masked)
    _assert_refused(capsys, ["--model", masked, *common], f"error: {masked}: not a causal language model: its output "
                    "at earlier positions changes with a later token", out=out)  # fmt: skip


def test_a_method_over_the_memory_budget_is_one_line_and_leaves_nothing(tiny, tmp_path, capsys):
    """Before, analyze-lm let the budget's refusal out as a traceback (exit status 1)."""
    model_dir, text = tiny
    out = tmp_path / "out"
    _assert_refused(capsys, ["--model", model_dir, "--text", text, "--rows", 200, "--method", "gram", "--device",
                             "cpu", "--memory-budget-gb", 1e-5, "--out-json", out / "rank.json", "--save-logp",
                             out / "logp.npy"],
                    f"error: {model_dir}: the gram method on a 200 × {len(WORDS) + 1} matrix needs about 303.4 KiB, "
                    "over the memory budget of 10.5 KiB; raise --memory-budget-gb to 1")  # fmt: skip
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("stop", ["interrupt", "summary"])
def test_an_analysis_stopped_after_its_matrix_was_written_leaves_no_file(tiny, tmp_path, capsys, monkeypatch, stop):
    """The .npy is whole before the singular values; before, a SIGINT during them (or a summary that could not be
    written) left it, without a summary, under 'partial outputs removed'."""
    import signal

    from softmax_bottleneck.analysis import outputs, rank
    from softmax_bottleneck.cluster import signals

    model_dir, text = tiny
    out = tmp_path / "out"
    finish = rank.RankStream.finish

    def stopped(self):
        assert (out / "logp.npy").is_file()  # written whole, then the interruption
        raise signals.Interrupted(signal.SIGINT)

    def unwritable(text, path):
        if str(path).endswith(".json"):
            raise outputs.output_error(path, OSError(28, os.strerror(28)))
        return write_text(text, path)

    write_text = outputs.write_text
    if stop == "interrupt":
        monkeypatch.setattr(rank.RankStream, "finish", stopped)
    else:
        monkeypatch.setattr(lm, "write_text", unwritable)
    argv = ["--model", model_dir, "--text", text, "--rows", 200, "--device", "cpu", "--out-json", out / "rank.json",
            "--out-spectrum", out / "spectrum.csv", "--save-logp", out / "logp.npy"]  # fmt: skip
    if stop == "interrupt":
        with pytest.raises(SystemExit) as exit_:
            _run(capsys, *argv)
        assert exit_.value.code == 128 + signal.SIGINT
    else:
        _assert_refused(capsys, argv, "rank.json: cannot write (no space left on the device")
    assert list(out.iterdir()) == []
    assert rank.RankStream.finish is finish or stop == "interrupt"


def test_a_full_disk_under_save_logp_is_one_line_and_leaves_nothing(tiny, tmp_path, capsys, monkeypatch):
    """The .npy's disk space is reserved before any row: a full disk fails there (not as SIGBUS in the memory map)."""
    import os

    def full(fd, offset, length):
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "posix_fallocate", full)
    model_dir, text = tiny
    out = tmp_path / "out"
    out.mkdir()
    _assert_refused(capsys, ["--model", model_dir, "--text", text, "--rows", 100, "--device", "cpu",
                             "--out-json", out / "rank.json", "--save-logp", out / "logp.npy"],
                    f"error: {out / 'logp.npy'}: cannot write (no space left on the device (disk or quota full)); "
                    "nothing was written")  # fmt: skip
    assert list(out.iterdir()) == []


def test_lm_report_names_its_files_and_keeps_fonttools_quiet(tmp_path):
    """Before: about 60 fontTools INFO lines a figure, and 'wrote t, f'."""
    import subprocess
    import sys

    summary = {"press_rank": 9, "effective_rank": {"1e-3": 5, "1e-4": 7, "1e-5": 9}, "shape": [900, 121],
               "perplexity": 99.0, "head_input_size": 8, "hidden_size": 8, "softmax_bound": 9,
               "text": "t.txt"}  # fmt: skip
    (tmp_path / "tiny.json").write_text(json.dumps(summary))
    done = subprocess.run([sys.executable, "-m", "softmax_bottleneck", "lm-report", f"tiny={tmp_path / 'tiny.json'}",
                           "--out-table", str(tmp_path / "t"), "--out-figure", str(tmp_path / "f")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fontTools" not in done.stderr
    assert done.stderr.rstrip().endswith(f"wrote {tmp_path}/t.csv, {tmp_path}/t.md, {tmp_path}/f.pdf, {tmp_path}/f.png")


def test_lm_report_sets_the_lms_beside_the_papers_models(tmp_path, capsys):
    summary = {"press_rank": 769, "effective_rank": {"1e-3": 5, "1e-4": 50, "1e-5": 300}, "shape": [90000, 50257],
               "perplexity": 35.5, "head_input_size": 768, "hidden_size": 768, "softmax_bound": 769,
               "text": "resources/data/ptb/test.txt"}  # fmt: skip
    (tmp_path / "gpt2.json").write_text(json.dumps(summary))
    code = main(["lm-report", f"gpt2={tmp_path / 'gpt2.json'}", "--out-table", f"{tmp_path}/t", "--out-figure",
                 f"{tmp_path}/f"])  # fmt: skip
    assert code == 0
    import pandas as pd

    frame = pd.read_csv(tmp_path / "t.csv")
    assert len(frame) == 11 and list(frame["source"]).count("paper") == 10
    lm_row = frame.iloc[-1]
    assert (lm_row["model"], lm_row["text"], lm_row["d"], lm_row["press_rank"]) == ("gpt2", "ptb/test.txt", 768, 769)
    softmax = frame[frame["model"] == "PTB Softmax"].iloc[0]
    assert (softmax["d"], softmax["press_rank"], softmax["softmax_bound"]) == (400, 402, 402)
    shapes = {
        (m.split()[0], r, c) for m, r, c in frame.loc[frame["source"] == "paper", ["model", "rows", "columns"]].values
    }
    assert shapes == {("PTB", 82429, 10000), ("WT2", 33320, 33278)}  # the paper's matrices (Table 6)
    assert "not comparable cell for cell" in (tmp_path / "t.md").read_text()
    assert (tmp_path / "f.pdf").stat().st_size and (tmp_path / "f.png").stat().st_size
    # every axis has labels within its range (before: the perplexities, 35-70 on a log axis, had none)
    from softmax_bottleneck.report.language_models import figure, table

    fig = figure(table({"gpt2": tmp_path / "gpt2.json"}))
    fig.canvas.draw()
    for ax in fig.axes:
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            shown = [t.get_position() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            inside = [p for p in shown if low <= (p[0] if axis is ax.xaxis else p[1]) <= high]
            assert len(inside) >= 2, (ax.get_title(), axis.axis_name, [t.get_text() for t in axis.get_ticklabels()])
    with pytest.raises(SystemExit, match="not an analyze-lm summary"):
        (tmp_path / "bad.json").write_text("{}")
        main(["lm-report", f"bad={tmp_path / 'bad.json'}", "--out-table", f"{tmp_path}/u"])
    assert not (tmp_path / "u.csv").exists()
    (tmp_path / "other.json").write_text(json.dumps(summary))  # before: one name twice kept one row, silently
    with pytest.raises(SystemExit, match=r"lm-report: the name 'gpt2' is given to .*gpt2.json and .*other.json: one"):
        main(["lm-report", f"gpt2={tmp_path / 'gpt2.json'}", f"gpt2={tmp_path / 'other.json'}", "--out-table",
              f"{tmp_path}/u"])  # fmt: skip
    assert not (tmp_path / "u.csv").exists()


def test_lm_report_markdown_keeps_a_chosen_name_in_its_cell(tmp_path):
    """Before: a name (or a summary's text) with ``|`` split the row into more cells than the header has, and
    ``<b>`` reached the Markdown as a tag."""
    summary = {"press_rank": 9, "effective_rank": {"1e-3": 5, "1e-4": 7, "1e-5": 9}, "shape": [900, 121],
               "perplexity": 99.0, "head_input_size": 8, "softmax_bound": 9, "text": "a|b/<i>t.txt"}  # fmt: skip
    (tmp_path / "s.json").write_text(json.dumps(summary))
    assert main(["lm-report", f"<b>mine|ours</b>={tmp_path / 's.json'}", "--out-table", f"{tmp_path}/t"]) == 0
    rows = [line for line in (tmp_path / "t.md").read_text().splitlines() if line.startswith("|")]
    cells = [len(re.findall(r"(?<!\\)\|", line)) for line in rows]
    assert len(rows) == 13 and len(set(cells)) == 1  # header, rule, the paper's 10 models, the LM: one cell count
    assert r"\<b\>mine\|ours\</b\>" in rows[-1] and r"a\|b/\<i\>t.txt" in rows[-1]
    assert "<b>" not in "".join(rows)


@pytest.mark.slow
def test_workflow_plans_the_analysis_and_the_report(tiny, tmp_path):
    import subprocess
    import sys

    import yaml

    workflow = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((workflow / "config" / "small.yaml").read_text())
    config["language_models"] = {"models": {"tiny-gpt2": str(tiny[0])}, "corpus": "ptb", "rows": 200, "stride": 16,
                                 "memory_budget_gb": 24}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    work = tmp_path / "work"
    work.mkdir()
    cmd = [sys.executable, "-m", "snakemake", "language_models", "-n", "--printshellcmds", "-s",
           str(workflow / "Snakefile"), "--configfile", str(tmp_path / "config.yaml"),
           "--directory", str(work)]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=work)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    for needle in ("rule fetch_corpus", "rule analyze_lm", "rule language_models", f"--model {tiny[0]}",
                   "--text resources/data/ptb/test.txt", "--rows 200 --stride 16 --memory-budget-gb 24.0",
                   f"mem_mb={math.ceil(32 * 2**30 / 1e6)}",
                   "results/small/language_models/tiny-gpt2/rank.json", "lm-report tiny-gpt2=",
                   "reports/small/figures/language_models"):  # fmt: skip
        assert needle in output, output[-3000:]


@pytest.mark.slow
def test_new_weights_saved_over_the_folder_are_analysed_anew(tiny, tmp_path):
    """Before, the rule's only model input was config.json, which save_pretrained rewrites byte for byte: Snakemake
    saw no change and kept the old weights' rank."""
    import shutil
    import subprocess
    import sys

    import yaml
    from safetensors.torch import load_file, save_file

    workflow = Path(__file__).resolve().parents[1]
    model = shutil.copytree(tiny[0], tmp_path / "model")
    config = yaml.safe_load((workflow / "config" / "small.yaml").read_text())
    config["language_models"] = {"models": {"m": str(model)}, "corpus": str(tiny[1]), "rows": 200, "stride": 16,
                                 "memory_budget_gb": 1}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "work").mkdir()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def snakemake(*args):
        cmd = [sys.executable, "-m", "snakemake", "results/small/language_models/m/rank.json", "--cores", "1", *args,
               "-s", str(workflow / "Snakefile"), "--configfile", str(tmp_path / "config.yaml")]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path / "work", env=env)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done.stdout + done.stderr

    snakemake()
    rank = tmp_path / "work" / "results" / "small" / "language_models" / "m" / "rank.json"
    before = rank.read_bytes()
    assert "Nothing to be done" in snakemake("-n")
    weights = load_file(model / "model.safetensors")
    name = next(key for key in weights if key.endswith("wte.weight"))
    weights[name] = weights[name] * 2  # a model saved anew: same config.json, other weights
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    assert f"Updated input files: {model / 'model.safetensors'}" in snakemake("-n")
    snakemake()
    assert json.loads(rank.read_bytes())["sigma_max"] != json.loads(before)["sigma_max"]


@pytest.mark.parametrize("command", ["analyze-lm", "lm-report"])
def test_every_option_has_a_one_line_help(command):
    import argparse

    from softmax_bottleneck import cli

    module, summary = cli.COMMANDS[command]
    assert summary and "\n" not in summary
    parser = argparse.ArgumentParser(prog=command)
    cli._load(module, command).add_cli(parser)
    assert parser.description and len(parser.description) > 40
    for action in parser._actions:
        if not isinstance(action, argparse._HelpAction):
            assert action.help and "\n" not in action.help, f"{command} {action.dest} has no help"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_half_precision_model_keeps_the_softmax_bound(tiny, tmp_path, capsys, dtype):
    """Before, the head's logits were rounded to bfloat16 / float16, far above Press' float32 tolerance: a plain
    softmax head "exceeded" its bound (a GPT-2: 999 against 33). The head now runs in float32 on the model's hidden
    state, so the bound holds as in float32 and the perplexity stays the float32 model's, up to the body's rounding."""
    model_dir, text = tiny
    summaries = {}
    for precision in ("float32", dtype):
        out = tmp_path / f"{precision}.json"
        code, err = _run(capsys, "--model", model_dir, "--text", text, "--rows", 200, "--device", "cpu",
                         "--dtype", precision, "--out-json", out)  # fmt: skip
        assert code == 0, err
        summaries[precision] = json.loads(out.read_text())
    low = summaries[dtype]
    assert low["press_rank"] <= low["softmax_bound"] == N_EMBD + 1 and low["exceeds_softmax_bound"] is False, low
    assert low["perplexity"] == pytest.approx(summaries["float32"]["perplexity"], rel=0.05)


def test_an_output_that_is_an_input_or_another_output_is_refused_before_any_work(tiny, tmp_path, capsys):
    """Before, --out-json of the text or of the model's config.json replaced it (the next run failed on the model),
    and --out-json and --save-logp of one path left only the JSON; each exited 0."""
    model_dir, text = tiny
    model = _copy(model_dir, tmp_path / "model")
    own_text = tmp_path / "text.txt"
    own_text.write_bytes(text.read_bytes())
    linked = tmp_path / "linked.txt"
    os.link(own_text, linked)  # a hard link is the same file under another name
    kept = {path: path.read_bytes() for path in [own_text, *model.iterdir()]}
    base = ["--model", model, "--text", own_text, "--device", "cpu", "--rows", 50]
    for path, input_ in ((own_text, own_text), (linked, own_text), (model / "config.json", model / "config.json"),
                         (model / "model.safetensors", model / "model.safetensors")):  # fmt: skip
        _assert_refused(capsys, [*base, "--out-json", path], f"{path}: cannot write (it is an input of this command",
                        str(input_))  # fmt: skip
    both = tmp_path / "both.npy"
    _assert_refused(capsys, [*base, "--out-json", both, "--save-logp", both],
                    f"{both}: cannot write (given for two outputs: choose one path for each)", out=both)  # fmt: skip
    assert {path: path.read_bytes() for path in kept} == kept
    code, err = _run(capsys, *base, "--out-json", model / "rank.json")  # a new file beside the model is fine
    assert code == 0, err
