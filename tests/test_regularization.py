"""Regularisers of the base network (AWD-LSTM's embedding dropout, noise, locked dropout)."""

from __future__ import annotations

import pytest
import torch

from softmax_bottleneck.models.regularization import LockedDropout, embedded_dropout, embedding_noise, locked_dropout


def test_locked_dropout_mask_is_shared_over_time_and_scaled():
    torch.manual_seed(0)
    drop = LockedDropout(0.4).train()
    x = torch.ones(12, 16, 32)
    out = drop(x)
    assert torch.equal(out, out[:1].expand_as(out))  # same mask at every time step
    values = torch.unique(out)
    assert len(values) == 2 and values[0].item() == 0.0 and values[1].item() == pytest.approx(1 / 0.6)
    assert (out[0] == 0).float().mean().item() == pytest.approx(0.4, abs=0.06)
    # the mask differs across batch entries and features, and is redrawn on every call
    assert not torch.equal(out[0, 0], out[0, 1])
    assert not torch.equal(drop(x), out)
    # expectation preserved
    y = torch.randn(3, 400, 50)
    assert drop(y).mean().item() == pytest.approx(y.mean().item(), abs=0.02)


def test_locked_dropout_identity_in_eval_or_zero_p_and_override():
    x = torch.randn(5, 4, 6)
    assert torch.equal(LockedDropout(0.5).eval()(x), x)
    assert torch.equal(LockedDropout(0.0).train()(x), x)
    assert torch.equal(LockedDropout(0.5).train()(x, p=0.0), x)
    assert not torch.equal(LockedDropout(0.0).train()(x, p=0.5), x)
    assert torch.equal(locked_dropout(x, 0.7, training=False), x)
    assert torch.equal(LockedDropout(None).train()(x), x)  # unset preset value = no dropout
    with pytest.raises(ValueError):
        LockedDropout(1.0)


def test_locked_dropout_two_dimensional_input_and_gradient():
    x = torch.ones(7, 20, requires_grad=True)
    out = locked_dropout(x, 0.5, training=True)
    assert torch.equal(out, out[:1].expand_as(out))
    out.sum().backward()
    assert torch.equal(x.grad, out.detach())  # gradient is the (scaled) mask


def _embedding(v=1000, d=16):
    torch.manual_seed(1)
    return torch.nn.Embedding(v, d)


def test_embedded_dropout_drops_whole_rows_and_rescales():
    embed = _embedding()
    words = torch.randint(1000, (30, 8))
    words[1] = words[0]  # repeated occurrences of the same words
    torch.manual_seed(2)
    out = embedded_dropout(embed, words, p=0.3, training=True)
    ref = embed(words)
    dropped = (out == 0).all(-1)
    kept = ~dropped
    torch.testing.assert_close(out[kept], ref[kept] / 0.7)
    assert torch.equal(dropped[0], dropped[1])  # same word -> same decision everywhere
    assert dropped.float().mean().item() == pytest.approx(0.3, abs=0.08)
    # one decision per vocabulary row: every occurrence of a word shares it
    for w in words.unique()[:50]:
        decisions = dropped[words == w]
        assert decisions.all() or not decisions.any()


@pytest.mark.parametrize("last_word_grad", [False, True])
def test_embedded_dropout_gradient_and_eval_identity(last_word_grad):
    embed = _embedding()  # no padding_idx
    words = torch.arange(1000).view(100, 10)
    assert torch.equal(embedded_dropout(embed, words, p=0.5, training=False), embed(words))
    assert torch.equal(embedded_dropout(embed, words, p=0.0, training=True), embed(words))
    torch.manual_seed(3)
    out = embedded_dropout(embed, words, p=0.5, training=True, last_word_grad=last_word_grad)
    out.sum().backward()
    row_grad = embed.weight.grad[:, 0]
    dropped = (out.reshape(1000, -1) == 0).all(-1)
    # d(sum)/d(row) = the mask value 1/(1-p) = 2 for a kept word, 0 for a dropped one
    expected = torch.where(dropped, 0.0, 2.0)
    if not last_word_grad:  # the authors' padding_idx=-1: the last word (1000 - 1) gets no gradient
        expected[-1] = 0.0
    assert torch.equal(row_grad, expected)
    if not dropped[-1]:
        assert out[-1, -1].abs().sum() > 0  # the lookup itself is unchanged: only its gradient is cut


def test_embedded_dropout_honours_an_explicit_padding_idx():
    embed = torch.nn.Embedding(20, 4, padding_idx=3)
    words = torch.arange(20).view(4, 5)
    embedded_dropout(embed, words, p=0.0, training=True, last_word_grad=False).sum().backward()
    assert embed.weight.grad[3].abs().sum() == 0 and embed.weight.grad[19].abs().sum() > 0


def test_embedding_noise_replays_the_authors_extra_mask_draw():
    """With embedding dropout, the authors' noise path draws one more V×1 Bernoulli mask before the noise."""
    x = torch.zeros(7, 3, 5)
    torch.manual_seed(11)
    noisy = embedding_noise(x, 0.15, training=True, dropoute=0.1, vocab_size=40)
    torch.manual_seed(11)
    torch.empty(40, 1).bernoulli_(0.9)
    assert torch.equal(noisy, x + torch.randn(7, 3, 5) * 0.15)
    for dropoute, vocab in ((0.0, 40), (None, 40), (0.1, 0)):  # no embedding dropout: no extra draw
        torch.manual_seed(11)
        noisy = embedding_noise(x, 0.15, True, dropoute, vocab)
        torch.manual_seed(11)
        assert torch.equal(noisy, x + torch.randn(7, 3, 5) * 0.15)


def test_embedding_noise():
    x = torch.zeros(50, 40, 30)
    assert torch.equal(embedding_noise(x, 0.5, training=False), x)
    assert torch.equal(embedding_noise(x, 0.0, training=True), x)
    assert torch.equal(embedding_noise(x, None, training=True), x)
    torch.manual_seed(4)
    noisy = embedding_noise(x, 0.5, training=True)
    assert noisy.std().item() == pytest.approx(0.5, abs=0.01)
    assert noisy.mean().item() == pytest.approx(0.0, abs=0.01)
    with pytest.raises(ValueError):
        embedding_noise(x, -1.0)


@pytest.mark.parametrize("last_word_grad", [False, True])
def test_the_preset_key_decides_the_last_words_input_side_gradient(last_word_grad):
    """``embed_last_word_grad`` (default false, as the authors' code) reaches the model's embedding lookup."""
    from softmax_bottleneck import presets
    from softmax_bottleneck.models.awd_lstm import AWDLSTM

    overrides = {"nemb": 4, "nhid": 6, "dropoute": 0.0, "embed_last_word_grad": last_word_grad}
    hp = presets.resolve("ptb", "softmax", overrides=overrides)
    assert presets.resolve("ptb", "softmax")["embed_last_word_grad"] is False
    vocab = 9
    model = AWDLSTM(vocab, hp).train()
    tokens = torch.arange(vocab).repeat(2).view(6, 3)  # every word, the last one included, is an input
    raw_last = model(tokens, model.init_hidden(3))[2]  # the LSTM output: depends on E only through the lookup
    (grad,) = torch.autograd.grad(raw_last.sum(), model.encoder.weight)
    assert grad[: vocab - 1].abs().sum(1).min() > 0
    assert (grad[vocab - 1].abs().sum() > 0) == last_word_grad
