"""GGUF metadata is not trusted: a head count of 0, a list where a number belongs, heads that do not divide the
rows, a tensor the model has no place for. Each is one ConfigError naming the file and what is wrong, never a
ZeroDivisionError, TypeError or RuntimeError, and never a tensor dropped without a word."""

from __future__ import annotations

import numpy as np
import pytest

from scratchformer.errors import ConfigError
from scratchformer.interop.gguf import read_gguf

gguf = pytest.importorskip("gguf")

D, HEADS, KV, FF, LAYERS, VOCAB = 16, 4, 2, 24, 1, 32


def write(path, meta: dict | None = None, skip: tuple[str, ...] = (), extra: dict | None = None,
          q_rows: int = D):
    """A tiny F32 Llama GGUF: the standard metadata with `meta` replacing keys (a list is written as an array),
    keys in `skip` left out, `extra` tensors added, attn_q holding `q_rows` rows."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    values = {"llama.block_count": LAYERS, "llama.context_length": 32, "llama.embedding_length": D,
              "llama.feed_forward_length": FF, "llama.attention.head_count": HEADS,
              "llama.attention.head_count_kv": KV, "llama.vocab_size": VOCAB}
    values.update(meta or {})
    for key, value in values.items():
        if key in skip:
            continue
        if isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, value)
    w.add_layer_norm_rms_eps(1e-5)
    kv_rows = KV * (D // HEADS)
    shapes = {"token_embd.weight": (VOCAB, D), "output_norm.weight": (D,)}
    shapes |= {f"blk.0.{k}.weight": s for k, s in {
        "attn_norm": (D,), "attn_q": (q_rows, D), "attn_k": (kv_rows, D), "attn_v": (kv_rows, D),
        "attn_output": (D, D), "ffn_norm": (D,), "ffn_gate": (FF, D), "ffn_up": (FF, D), "ffn_down": (D, FF)}.items()}
    shapes |= extra or {}
    for name, shape in shapes.items():
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_tiny_file_itself_loads(tmp_path):
    contents = read_gguf(write(tmp_path / "ok.gguf"))
    assert contents.hf_config["num_attention_heads"] == HEADS
    assert contents.state["model.layers.0.self_attn.q_proj.weight"].shape == (D, D)


@pytest.mark.parametrize(("meta", "needle"), [
    ({"llama.attention.head_count": 0}, "head_count=0"),
    ({"llama.attention.head_count_kv": 0}, "head_count_kv=0"),
    ({"llama.attention.head_count": [4, 4]}, "head_count=[4, 4]"),
    ({"llama.block_count": [1]}, "block_count=[1]"),
    ({"llama.attention.head_count": 3}, "not divisible"),  # 16 rows in 3 heads
    ({"llama.attention.head_count_kv": 3}, "must divide"),
])
def test_bad_metadata_is_one_config_error(tmp_path, meta, needle):
    path = write(tmp_path / "bad.gguf", meta)
    with pytest.raises(ConfigError, match="bad.gguf") as info:
        read_gguf(path)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_missing_size_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no llama.vocab_size"):
        read_gguf(write(tmp_path / "novocab.gguf", skip=("llama.vocab_size",)))


def test_heads_that_do_not_fit_the_rows_are_refused_before_unpermute(tmp_path):
    # 8 heads of size 2 (key_length) claim 16 rows; attn_q holds 12: unpermute would fail in reshape
    path = write(tmp_path / "rows.gguf", q_rows=12)
    with pytest.raises(ConfigError, match="attn_q.weight has 12 rows"):
        read_gguf(path)


@pytest.mark.parametrize("extra", [{"blk.0.attn_q.bias": (D,)}, {"blk.0.attn_q.bias": (3, 5)},
                                   {"blk.1.attn_q.weight": (D, D)}])
def test_a_tensor_the_model_does_not_use_is_named_not_dropped(tmp_path, extra):
    path = write(tmp_path / "extra.gguf", extra=extra)
    with pytest.raises(ConfigError, match="would be ignored") as info:
        read_gguf(path)
    assert next(iter(extra)) in str(info.value)


@pytest.mark.parametrize(("fields", "needle"), [
    ({}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": "abc"}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": ["a b c"]}, "merges"),
    ({"tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": ["a q"]}, "cannot be built"),
    ({"tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.token_type": [1, "x"]}, "token_type"),
])
def test_bad_tokenizer_metadata_is_one_config_error(fields, needle):
    from scratchformer.interop.gguf import gguf_tokenizer

    with pytest.raises(ConfigError, match=needle):
        gguf_tokenizer({"tokenizer.ggml.model": "gpt2", **fields})
