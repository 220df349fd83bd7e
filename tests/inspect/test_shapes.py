"""`shapes` names every dimension by its role, at any sizes: colliding ones (B = L = h = d_k) included."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer import ModelConfig, build_model
from scratchformer.errors import InputError
from scratchformer.inspect.shapes import check_sizes, role_sizes, shape_report, trace


def _line(report: str, name: str) -> str:
    """The trace line of module `name` (exact, after the indentation)."""
    hits = [ln.strip() for ln in report.splitlines() if ln.strip().startswith(name + " [")]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def _report(preset: str, batch: int, src_len: int, tgt_len: int, **overrides) -> str:
    config = ModelConfig.preset(preset, dropout=0.0, **overrides)
    return shape_report(build_model(config), batch, src_len, tgt_len)


def test_paper_base_with_batch_and_lengths_all_eight():
    # before: "(B=8, B=8, B=8, d_k=64)" - every 8 was named B
    r = _report("paper-base", 8, 8, 8, n_encoder_layers=1, n_decoder_layers=1)
    assert ("in: (B=8, h=8, L_src=8, d_k=64), (B=8, h=8, L_src=8, d_k=64), (B=8, h=8, L_src=8, d_v=64), "
            "(B=8, 1, 1, L_src=8) bool  -> (B=8, h=8, L_src=8, d_v=64)  scores: (B=8, h=8, L_src=8, L_src=8)"
            in _line(r, "encoder.layers.0.self_attn.attention"))
    assert "scores: (B=8, h=8, L_tgt=8, L_tgt=8)" in _line(r, "decoder.layers.0.self_attn.attention")
    assert ("in: (B=8, h=8, L_tgt=8, d_k=64), (B=8, h=8, L_src=8, d_k=64), (B=8, h=8, L_src=8, d_v=64)"
            in _line(r, "decoder.layers.0.cross_attn.attention"))
    assert "scores: (B=8, h=8, L_tgt=8, L_src=8)" in _line(r, "decoder.layers.0.cross_attn.attention")
    assert _line(r, "tgt_embed").endswith("in: (B=8, L_tgt=8) int64  -> (B=8, L_tgt=8, D=512)")
    # h*d_k = D = 512 here: the query projection's output is h*d_k by role, the input of w_o is h*d_v
    assert _line(r, "decoder.layers.0.cross_attn.w_q").endswith("-> (B=8, L_tgt=8, h*d_k=512)")
    assert "in: (B=8, L_tgt=8, h*d_v=512)" in _line(r, "decoder.layers.0.cross_attn.w_o")
    assert r.splitlines()[0].startswith("dimensions: B=8, L_src=8, L_tgt=8, D=512, h=8, d_k=64, d_v=64, d_ff=2048")


def test_seed_000_sizes_target_length_is_not_called_source_length():
    # seed 000: batch 2, sentences of 4 tokens, d_model 512, 8 heads, d_ff 2048, vocabulary 1000
    r = _report("paper-base", 2, 4, 4, src_vocab_size=1000, tgt_vocab_size=1000, n_encoder_layers=1,
                n_decoder_layers=1)
    assert _line(r, "tgt_embed").endswith("in: (B=2, L_tgt=4) int64  -> (B=2, L_tgt=4, D=512)")
    assert "in: (B=2, L_tgt=4, D=512), (B=2, L_src=4, D=512), (B=2, 1, L_tgt=4, L_tgt=4) bool" in _line(r, "decoder")
    assert "scores: (B=2, h=8, L_tgt=4, L_src=4)" in _line(r, "decoder.layers.0.cross_attn.attention")
    assert _line(r, "generator.proj").endswith("in: (B=2, L_tgt=4, D=512)  -> (B=2, L_tgt=4, V=1000)")


@pytest.mark.parametrize("n_heads,d_ff,length", [(4, 64, 4), (8, 512, 10)])
def test_seed_001_sizes_heads_and_head_width_are_named(n_heads, d_ff, length):
    # seed 001 debugs with d_model=16 (its defaults: 8 heads, dff 512, sequences padded to 10): d_k = 2 = B;
    # with 4 heads and length 4, before: "(B=2, L_src=4, L_src=4, L_src=4)"
    r = _report("tiny", 2, length, length, d_model=16, n_heads=n_heads, d_ff=d_ff)
    d_k, n = 16 // n_heads, length
    assert (f"in: (B=2, h={n_heads}, L_src={n}, d_k={d_k}), (B=2, h={n_heads}, L_src={n}, d_k={d_k}), "
            f"(B=2, h={n_heads}, L_src={n}, d_v={d_k}), (B=2, 1, 1, L_src={n}) bool  -> "
            f"(B=2, h={n_heads}, L_src={n}, d_v={d_k})  scores: (B=2, h={n_heads}, L_src={n}, L_src={n})"
            in _line(r, "encoder.layers.0.self_attn.attention"))
    assert _line(r, "encoder.layers.0.feed_forward.w_1").endswith(f"-> (B=2, L_src={n}, d_ff={d_ff})")


def test_tiny_cross_attention_w_kv_is_not_d_ff():
    # tiny: h*(d_k+d_v) = 128 = d_ff; before: "w_kv ... -> (B=2, L_src=10, d_ff=128)"
    r = _report("tiny", 2, 10, 9)
    assert _line(r, "decoder.layers.0.cross_attn.w_kv").endswith(
        "in: (B=2, L_src=10, D=64)  -> (B=2, L_src=10, h*(d_k+d_v)=128)")
    assert _line(r, "decoder.layers.0.feed_forward.w_1").endswith("-> (B=2, L_tgt=9, d_ff=128)")


def test_single_stack_models_use_one_length():
    r = _report("gpt-tiny", 3, 3, 1, n_heads=3, d_k=3, d_ff=3)  # B = L = h = d_k = d_ff = 3
    assert "in: (B=3, h=3, L=3, d_k=3), (B=3, h=3, L=3, d_k=3), (B=3, h=3, L=3, d_v=3)" in _line(
        r, "decoder.layers.0.self_attn.attention")
    assert "scores: (B=3, h=3, L=3, L=3)" in _line(r, "decoder.layers.0.self_attn.attention")
    assert _line(r, "decoder.layers.0.feed_forward.w_1").endswith("-> (B=3, L=3, d_ff=3)")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(batch=0), "batch 0"), (dict(batch=-2), "batch -2"), (dict(src_len=0), "src_len 0"),
    (dict(tgt_len=-1), "tgt_len -1"), (dict(src_len=257), "max_positions=256"),
    (dict(tgt_len=1000), "max_positions=256"),
])
def test_bad_sizes_are_one_line_errors(kwargs, needle):
    sizes = {"batch": 2, "src_len": 4, "tgt_len": 4, **kwargs}
    with pytest.raises(InputError, match=needle):
        check_sizes(ModelConfig.preset("tiny"), **sizes)


_ATTENTION_ROLES = {  # module suffix -> (L_q, L_k) roles in an encoder-decoder
    "encoder.layers.0.self_attn.attention": ("L_src", "L_src"),
    "decoder.layers.0.self_attn.attention": ("L_tgt", "L_tgt"),
    "decoder.layers.0.cross_attn.attention": ("L_tgt", "L_src"),
}


@settings(max_examples=30, deadline=None)
@given(arch=st.sampled_from(["encoder-decoder", "encoder", "decoder"]), batch=st.integers(1, 5),
       src_len=st.integers(1, 6), tgt_len=st.integers(1, 6), n_heads=st.integers(1, 4),
       half_d=st.integers(1, 6), d_k=st.none() | st.integers(1, 5), d_v=st.none() | st.integers(1, 5),
       d_ff=st.integers(1, 8), vocab=st.integers(5, 9), shared=st.booleans())
def test_every_named_dimension_has_its_roles_size(arch, batch, src_len, tgt_len, n_heads, half_d, d_k, d_v, d_ff,
                                                  vocab, shared):
    d_model = 2 * half_d
    if d_k is None and d_model % n_heads:
        d_k = 2
    config = ModelConfig(arch=arch, src_vocab_size=vocab if shared else vocab + 1, tgt_vocab_size=vocab,
                         d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, d_ff=d_ff, n_encoder_layers=2,
                         n_decoder_layers=2, dropout=0.0, max_positions=6)
    t = trace(build_model(config), batch, src_len, tgt_len)
    roles = role_sizes(config, batch, src_len, tgt_len)
    for call, labels in zip(t.calls, t.labels):
        infos = {"ins": call.ins, "outs": call.outs, "scores": [call.scores] if call.scores else []}
        for part, per_tensor in labels.items():
            for (shape, _), names in zip(infos[part], per_tensor):
                for size, name in zip(shape, names):
                    if name is None:
                        assert size == 1, (call.name, part, shape, names)  # only broadcast dims go unnamed
                    else:
                        assert size == roles[name], (call.name, part, shape, names)
        if call.kind == "ScaledDotProductAttention":
            q, k = labels["ins"][0], labels["ins"][1]
            l_q, l_k = _ATTENTION_ROLES[call.name] if arch == "encoder-decoder" else ("L", "L")
            assert q == ["B", "h", l_q, "d_k"] and k == ["B", "h", l_k, "d_k"], (call.name, labels)
            assert labels["ins"][2] == ["B", "h", l_k, "d_v"] and labels["outs"][0] == ["B", "h", l_q, "d_v"]
            assert labels["scores"][0] == ["B", "h", l_q, l_k]
    assert set(t.roles) >= {"B", "D", "h", "d_k", "d_v", "d_ff"}
    assert all(t.roles[r] == roles[r] for r in t.roles)


@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 1}, {"n_kv_heads": 4, "ffn_kind": "mlp"}])
def test_llama_configs_name_the_grouped_heads_the_gated_ffn_and_rope(overrides):
    from scratchformer.inspect.shapes import shape_report

    config = ModelConfig.preset("llama-tiny", d_model=64, n_heads=4, d_ff=96, n_decoder_layers=2, **overrides)
    lines = shape_report(build_model(config), batch=2, src_len=6).splitlines()
    rope = next(line for line in lines if "self_attn.rope [RotaryEmbedding]" in line)
    kv = config.kv_heads
    if kv == config.n_heads:
        assert "(B=2, h=4, L=6, d_k=16), (B=2, h=4, L=6, d_k=16)" in rope
    else:
        assert f"(B=2, h=4, L=6, d_k=16), (B=2, h_kv={kv}, L=6, d_k=16)" in rope
        qkv = next(line for line in lines if "self_attn.w_qkv [Linear]" in line)
        assert f"(h+2h_kv)*d_k={(4 + 2 * kv) * 16})" in qkv
    w_1 = next(line for line in lines if "feed_forward.w_1 [Linear]" in line)
    assert ("2d_ff=192" if config.ffn_kind == "gated" else "d_ff=96") in w_1
    assert "decoder.layers.0.self_attn.rope" in rope  # each layer's own; layers 1..N-1 are collapsed
    assert sum("RotaryEmbedding" in line for line in lines) == 1
