"""A tiny random Llama written as a GGUF file the way llama.cpp's converter writes it (q/k rows permuted for its
rope, tensors quantised Q4_0 / Q4_1 / Q8_0 / F16 / BF16, a byte-level BPE vocabulary with two control tokens and a
chat template): the `tiny_gguf` fixture, for the GGUF and the generate / chat tests."""

import numpy as np
import pytest
import torch

# a byte-level vocabulary: the 256 byte symbols, a few merges, and two control tokens
_MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s"]


def _vocab():
    from scratchformer.interop.gguf import _byte_alphabet

    tokens = [_byte_alphabet()[b] for b in range(256)]
    for m in _MERGES:
        tokens.append(m.replace(" ", ""))
    tokens += ["<|im_start|>", "<|im_end|>"]
    return tokens, [1] * (len(tokens) - 2) + [3, 3]  # 1 NORMAL, 3 CONTROL


def permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows: (h, 2, d/2) -> (h, d/2, 2)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(path, hf_model, qtypes):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    c, sd = hf_model.config, {k: v.float().numpy() for k, v in hf_model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    tokens, types = _vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(_MERGES)
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    block = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(c.num_hidden_layers):
        for hf, g in block.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{g}.weight"
    for k, (hf_name, g_name) in enumerate(names.items()):
        array = sd[hf_name]
        if ".attn_q." in g_name or ".attn_k." in g_name:
            array = permute(array, c.num_attention_heads if ".attn_q." in g_name else c.num_key_value_heads)
        qtype = Q.F32 if array.ndim == 1 else qtypes[k % len(qtypes)]
        if qtype == Q.F32:
            w.add_tensor(g_name, array.astype(np.float32))
        else:
            w.add_tensor(g_name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    Q = pytest.importorskip("gguf").GGMLQuantizationType
    torch.manual_seed(0)
    tokens, _ = _vocab()
    config = transformers.LlamaConfig(
        vocab_size=len(tokens), hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    _write_gguf(path, model, [Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.F16, Q.BF16])
    return path


