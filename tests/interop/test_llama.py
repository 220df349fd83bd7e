"""Llama folders: a random tiny LlamaForCausalLM (GQA, llama3 rope scaling, tied and untied) built by transformers
loads into our decoder with the same logits (1e-5, left-padded batch), and our save_pretrained writes a folder that
transformers loads with the same logits again."""

import json

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.errors import ConfigError
from scratchformer.interop.huggingface import from_pretrained, save_pretrained

transformers = pytest.importorskip("transformers")

LLAMA3 = {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 32}


def _hf_llama(tie: bool):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, rope_parameters=LLAMA3,
        tie_word_embeddings=tie, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so that a wrong norm mapping shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def _batch():
    ids = torch.randint(3, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :4] = 0  # row 1 left-padded by four
    ids[1, :4] = 0
    return ids, mask


def _theirs(model, ids, mask):
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # what generate() passes; a plain call would count padding
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits


@pytest.mark.parametrize("tie", [False, True])
def test_llama_folder_loads_with_the_same_logits_and_saves_back(tie, tmp_path):
    ref = _hf_llama(tie)
    ref.save_pretrained(tmp_path / "hf")
    ours = from_pretrained(tmp_path / "hf")
    c = ours.config
    assert (c.n_heads, c.kv_heads, c.head_dim_k, c.norm_kind, c.positions, c.ffn_kind, c.tie_embeddings) == (
        6, 2, 8, "rms", "rope", "gated", tie)
    assert c.rope_scaling["rope_type"] == "llama3" and c.rope_theta == 5000.0
    ids, mask = _batch()
    expected = _theirs(ref, ids, mask)
    with torch.no_grad():
        got = ours(ids, attention_mask=mask)
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1, 4:], expected[1, 4:], atol=1e-5, rtol=1e-5)  # every real position
    save_pretrained(ours, tmp_path / "ours")
    written = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert written["architectures"] == ["LlamaForCausalLM"] and written["num_key_value_heads"] == 2
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    torch.testing.assert_close(_theirs(back, ids, mask), expected, atol=1e-5, rtol=1e-5)


def test_a_llama_like_config_of_ours_exports_and_others_say_why_not(tmp_path):
    model = build_model(ModelConfig.preset("llama-tiny", tgt_vocab_size=64, d_model=32, d_ff=48,
                                           n_decoder_layers=1)).eval()
    save_pretrained(model, tmp_path / "a")
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a").eval()
    ids = torch.randint(3, 64, (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, model(ids), atol=1e-5, rtol=1e-5)
    bad = build_model(ModelConfig.preset("llama-tiny", tgt_vocab_size=64, d_model=32, d_ff=48,
                                         n_decoder_layers=1, norm_kind="layer"))
    with pytest.raises(ConfigError, match="LlamaForCausalLM: norm_kind='layer'"):
        save_pretrained(bad, tmp_path / "b", hf_arch="LlamaForCausalLM")
