"""Mask properties, checked with hypothesis over random shapes and padding."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer import ModelConfig, build_model

torch.manual_seed(0)
ED = build_model(ModelConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20, d_model=32, d_ff=64)).eval()
GPT = build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=20, d_model=32, d_ff=64, dropout=0.0)).eval()
BERT = build_model(ModelConfig.preset("bert-tiny", tgt_vocab_size=20, d_model=32, d_ff=64, dropout=0.0,
                                      attention_dropout=0.0)).eval()
SETTINGS = settings(max_examples=25, deadline=None)


def ids(draw, b, l):
    return torch.tensor(draw(st.lists(st.lists(st.integers(1, 19), min_size=l, max_size=l), min_size=b,
                                      max_size=b)))


@SETTINGS
@given(st.data(), st.integers(1, 3), st.integers(2, 9), st.integers(2, 9), st.booleans())
def test_no_position_sees_the_future(data, b, l_src, l_tgt, fused):
    ED.set_fused(fused)
    GPT.set_fused(fused)
    src, tgt = ids(data.draw, b, l_src), ids(data.draw, b, l_tgt)
    t = data.draw(st.integers(0, l_tgt - 2))
    changed = tgt.clone()
    changed[:, t + 1 :] = ids(data.draw, b, l_tgt - t - 1)
    with torch.no_grad():
        torch.testing.assert_close(ED(src, tgt)[:, : t + 1], ED(src, changed)[:, : t + 1], atol=1e-5, rtol=0)
        torch.testing.assert_close(GPT(tgt)[:, : t + 1], GPT(changed)[:, : t + 1], atol=1e-5, rtol=0)


@SETTINGS
@given(st.data(), st.integers(1, 3), st.integers(1, 8), st.integers(1, 8), st.integers(1, 5), st.booleans())
def test_appending_padding_changes_nothing(data, b, l_src, l_tgt, extra, fused):
    ED.set_fused(fused)
    BERT.set_fused(fused)
    src, tgt = ids(data.draw, b, l_src), ids(data.draw, b, l_tgt)
    pad = torch.zeros(b, extra, dtype=torch.long)
    with torch.no_grad():
        base = ED(src, tgt)
        more_src_pad = ED(torch.cat([src, pad], 1), tgt)
        more_tgt_pad = ED(src, torch.cat([tgt, pad], 1))[:, :l_tgt]
        torch.testing.assert_close(base, more_src_pad, atol=1e-5, rtol=0)
        torch.testing.assert_close(base, more_tgt_pad, atol=1e-5, rtol=0)
        torch.testing.assert_close(BERT(src), BERT(torch.cat([src, pad], 1))[:, :l_src], atol=1e-5, rtol=0)


@SETTINGS
@given(st.data(), st.integers(2, 3), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_all_padding_row_is_finite_with_finite_gradients(data, b, l_src, l_tgt, fused):
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20, d_model=32, d_ff=64,
                                           fused=fused))
    src, tgt = ids(data.draw, b, l_src), ids(data.draw, b, l_tgt)
    src[0] = 0  # a source that is all padding
    tgt[0] = 0
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.logsumexp(-1).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    out = BERT.set_fused(fused)(src)
    assert torch.isfinite(out).all()
