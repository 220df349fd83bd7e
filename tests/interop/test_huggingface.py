"""Parity with Hugging Face `transformers` (a test-only dependency): BERT, GPT-2 and Marian, both directions.

Every model is small and randomly initialised (no downloads), with every weight moved off its init so a
mix-up shows; outputs agree within 1e-5 in float32 at the real (non-padding) positions of a padded batch.
GPT-2 batches are LEFT-padded, as for batched generation: Hugging Face gets the position ids its `generate`
derives from the mask (cumsum - 1), ours derives the same from `attention_mask` by itself.
"""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from scratchformer import ConfigError, ModelConfig, build_model  # noqa: E402
from scratchformer.interop.huggingface import from_pretrained, save_pretrained  # noqa: E402
from scratchformer.model.embedding import sinusoid_table  # noqa: E402

V, D, PAD = 99, 64, 1
SMALL = dict(d_model=D, n_heads=4, d_ff=128)
transformers.logging.set_verbosity_error()


def _perturb(module: torch.nn.Module, seed: int = 0) -> None:
    """Move every parameter (LayerNorm ones/zeros, zero biases) off its init, so a swapped tensor shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def _ids(b: int, l: int, seed: int, low: int = 2) -> torch.Tensor:
    return torch.randint(low, V, (b, l), generator=torch.Generator().manual_seed(seed))


def _close(ours: torch.Tensor, theirs: torch.Tensor, keep: torch.Tensor) -> None:
    assert (ours - theirs)[keep].abs().max() < 1e-5


# -- BERT ---------------------------------------------------------------------------------------------------
def _hf_bert(tmp_path, cls=transformers.BertModel):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=32, pad_token_id=0)
    ref = cls(config).eval()
    _perturb(ref)
    ref.save_pretrained(tmp_path)
    return ref


def _bert_batch():
    ids, types = _ids(3, 10, seed=1), _ids(3, 10, seed=2, low=0) % 2
    mask = torch.ones_like(ids)
    mask[0, 7:], mask[2, 3:] = 0, 0
    return ids.masked_fill(mask == 0, 0), types, mask


@pytest.mark.parametrize("fused", [True, False])
def test_bert_import_gives_same_hidden_states(tmp_path, fused):
    ref = _hf_bert(tmp_path, transformers.BertForMaskedLM)  # keys carry the "bert." prefix and an MLM head
    model = from_pretrained(tmp_path, fused=fused)
    assert model.config.arch == "encoder" and model.config.layer_norm_eps == 1e-12 and not model.training
    ids, types, mask = _bert_batch()
    with torch.no_grad():
        theirs = ref.bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        ours = model(ids, attention_mask=mask, token_type_ids=types)
    _close(ours, theirs, mask.bool())


@pytest.mark.parametrize("layout", ["pytorch_model.bin", "sharded"])
def test_bert_import_reads_bin_and_sharded_files(tmp_path, layout):
    ref = _hf_bert(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    if layout == "sharded":
        ref.save_pretrained(tmp_path, max_shard_size="100KB")
        assert (tmp_path / "model.safetensors.index.json").is_file()
    else:
        torch.save(ref.state_dict(), tmp_path / "pytorch_model.bin")
    model = from_pretrained(tmp_path)
    ids, types, mask = _bert_batch()
    with torch.no_grad():
        theirs = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        _close(model(ids, mask, types), theirs, mask.bool())


@pytest.mark.parametrize("type_vocab_size", [2, 0])
def test_bert_export_loads_in_transformers(tmp_path, type_vocab_size):
    torch.manual_seed(0)
    config = ModelConfig.preset("bert-tiny", tgt_vocab_size=V, n_encoder_layers=2, max_len=32,
                                type_vocab_size=type_vocab_size, **SMALL)
    model = build_model(config).eval()
    _perturb(model)
    save_pretrained(model, tmp_path)
    ref, info = transformers.AutoModel.from_pretrained(tmp_path, output_loading_info=True)
    assert type(ref).__name__ == "BertModel" and info["unexpected_keys"] == set()
    assert {k.split(".")[0] for k in info["missing_keys"]} <= {"pooler"}  # we have no pooler box
    ids, types, mask = _bert_batch()
    types = types if type_vocab_size else None
    with torch.no_grad():
        theirs = ref.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        _close(model(ids, mask, types), theirs, mask.bool())
        _close(from_pretrained(tmp_path)(ids, mask, types), theirs, mask.bool())


# -- GPT-2 --------------------------------------------------------------------------------------------------
def _gpt2_batch():
    ids = _ids(3, 9, seed=3)
    mask = torch.ones_like(ids)
    mask[1, :4], mask[2, :2] = 0, 0  # left padding
    return ids.masked_fill(mask == 0, 0), mask


def _hf_positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)  # as GenerationMixin derives them


def _greedy_decoder_only(model, ids, mask, steps):
    """Greedy continuation on our KV cache (left-padded prompts)."""
    cache = model.new_cache()
    logits = model(ids, attention_mask=mask, cache=cache)
    out = ids
    for _ in range(steps):
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out, mask = torch.cat([out, nxt], 1), torch.cat([mask, torch.ones_like(nxt)], 1)
        logits = model(nxt, attention_mask=mask, cache=cache)
    return out


@pytest.mark.parametrize("fused", [True, False])
def test_gpt2_import_gives_same_logits_and_continuation(tmp_path, fused):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=V, n_embd=D, n_layer=2, n_head=4, n_positions=32, bos_token_id=0,
                                     eos_token_id=0)
    ref = transformers.GPT2LMHeadModel(config).eval()
    _perturb(ref)
    ref.save_pretrained(tmp_path)
    model = from_pretrained(tmp_path, fused=fused)
    c = model.config
    c_fields = (c.arch, c.norm_placement, c.activation, c.tie_embeddings, c.generator_bias)
    assert c_fields == ("decoder", "pre", "gelu-tanh", True, False)
    ids, mask = _gpt2_batch()
    with torch.no_grad():
        theirs = ref(input_ids=ids, attention_mask=mask, position_ids=_hf_positions(mask)).logits
        _close(model(ids, attention_mask=mask), theirs, mask.bool())
        hf_out = ref.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, num_beams=1,
                              eos_token_id=None, pad_token_id=0)
        assert torch.equal(_greedy_decoder_only(model, ids, mask, 8), hf_out)


@pytest.mark.parametrize("tie", [True, False])
def test_gpt2_export_loads_in_transformers(tmp_path, tie):
    torch.manual_seed(0)
    config = ModelConfig.preset("gpt-tiny", tgt_vocab_size=V, n_decoder_layers=2, max_len=32,
                                activation="gelu-tanh", tie_embeddings=tie, **SMALL)
    model = build_model(config).eval()
    _perturb(model)
    save_pretrained(model, tmp_path)
    ref, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, mask = _gpt2_batch()
    with torch.no_grad():
        theirs = ref.eval()(input_ids=ids, attention_mask=mask, position_ids=_hf_positions(mask)).logits
        _close(model(ids, attention_mask=mask), theirs, mask.bool())
        _close(from_pretrained(tmp_path)(ids, attention_mask=mask), theirs, mask.bool())


# -- Marian -------------------------------------------------------------------------------------------------
def _marian_batch():
    src, tgt = _ids(3, 8, seed=4), _ids(3, 6, seed=5)
    src[0, 5:], src[2, 3:] = PAD, PAD
    tgt[:, 0] = PAD  # Marian's decoder starts from pad_token_id
    tgt[1, 4:] = PAD
    tgt_mask = (tgt != PAD).long()
    tgt_mask[:, 0] = 1
    return src, tgt, tgt_mask


def _greedy_encoder_decoder(model, src, steps, eos):
    """Greedy translation on our KV cache, starting from config.decoder_start_id; finished rows get pad."""
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    cache = model.new_cache()
    out = torch.full((src.size(0), 1), model.config.decoder_start_id)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(steps):
        logits = model.generator.logits(model.decode(memory, src_mask, out[:, -1:], cache=cache))[:, -1]
        nxt = logits.argmax(-1).masked_fill(done, model.config.pad_id)
        out, done = torch.cat([out, nxt[:, None]], 1), done | (nxt == eos)
        if done.all():
            break
    return out


def _hf_marian(tmp_path, activation="swish", share=True):
    torch.manual_seed(0)
    config = transformers.MarianConfig(
        vocab_size=V, decoder_vocab_size=V, d_model=D, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=32,
        pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=0, forced_eos_token_id=None,
        scale_embedding=True, activation_function=activation, share_encoder_decoder_embeddings=share,
        tie_word_embeddings=share)
    ref = transformers.MarianMTModel(config).eval()
    _perturb(ref)
    with torch.no_grad():  # positions are a fixed table: put it back after _perturb; the bias is a buffer
        for stack in (ref.model.encoder, ref.model.decoder):
            stack.embed_positions.weight.copy_(stack.embed_positions.create_weight())
        ref.final_logits_bias.normal_(generator=torch.Generator().manual_seed(1))
    ref.save_pretrained(tmp_path)
    return ref


def test_marian_sinusoids_equal_ours():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    for d in (64, 63, 512):
        theirs = MarianSinusoidalPositionalEmbedding(50, d).create_weight()
        assert torch.equal(theirs, sinusoid_table(50, d, "concat"))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("activation,share", [("swish", True), ("gelu", False)])
def test_marian_import_gives_same_logits_and_translation(tmp_path, fused, activation, share):
    ref = _hf_marian(tmp_path, activation, share)
    model = from_pretrained(tmp_path, fused=fused)
    c = model.config
    assert c.decoder_start_id == c.extra["decoder_start_token_id"] == PAD and c.positions == "sinusoidal-concat"
    src, tgt, tgt_mask = _marian_batch()
    with torch.no_grad():
        theirs = ref(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt,
                     decoder_attention_mask=tgt_mask).logits
        _close(model(src, tgt), theirs, tgt_mask.bool())
        hf_out = ref.generate(src, attention_mask=(src != PAD).long(), max_new_tokens=10, do_sample=False,
                              num_beams=1)
        assert torch.equal(_greedy_encoder_decoder(model, src, 10, eos=0), hf_out)


@pytest.mark.parametrize("tie", [True, False])
def test_marian_export_loads_in_transformers(tmp_path, tie):
    torch.manual_seed(0)
    config = ModelConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V, max_len=32, pad_id=PAD,
                                decoder_start_id=PAD, positions="sinusoidal-concat", activation="silu",
                                tie_embeddings=tie, **SMALL)
    model = build_model(config).eval()
    _perturb(model)
    save_pretrained(model, tmp_path)
    ref, info = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path, output_loading_info=True)
    assert type(ref).__name__ == "MarianMTModel"
    assert {k.split(".")[-2] for k in info["missing_keys"]} <= {"embed_positions"}  # a computed table
    assert not info["unexpected_keys"]
    src, tgt, tgt_mask = _marian_batch()
    with torch.no_grad():
        theirs = ref.eval()(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt,
                            decoder_attention_mask=tgt_mask).logits
        _close(model(src, tgt), theirs, tgt_mask.bool())
        _close(from_pretrained(tmp_path)(src, tgt), theirs, tgt_mask.bool())


# -- errors: one clear line ---------------------------------------------------------------------------------
def _one_line_error(path, *match):
    with pytest.raises(ConfigError) as e:
        from_pretrained(path)
    assert "\n" not in str(e.value)
    for m in match:
        assert m in str(e.value)


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 64}))
    _one_line_error(tmp_path, "config.json", "'t5'", "bert, gpt2, marian")


def test_missing_folder_config_or_weights(tmp_path):
    _one_line_error(tmp_path / "nope", "nope", "is not a folder")
    _one_line_error(tmp_path, "config.json", "does not exist")
    _hf_bert(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    _one_line_error(tmp_path, "no weights file", "model.safetensors")
    (tmp_path / "config.json").write_text("{not json")
    _one_line_error(tmp_path, "config.json", "not valid JSON")


def test_weights_missing_tensors(tmp_path):
    from safetensors.torch import load_file, save_file

    _hf_bert(tmp_path)
    file = tmp_path / "model.safetensors"
    state = load_file(str(file))
    del state["encoder.layer.1.attention.self.key.weight"]
    save_file(state, str(file))
    _one_line_error(tmp_path, "model.safetensors", "missing 1 tensor", "encoder.layer.1.attention.self.key.weight")


def test_export_of_an_inexpressible_config_names_the_field(tmp_path):
    model = build_model(ModelConfig.preset("bert-tiny", tgt_vocab_size=V, norm="pre", **SMALL))
    with pytest.raises(ConfigError, match="norm_placement='pre'") as e:
        save_pretrained(model, tmp_path)
    assert "\n" not in str(e.value)
    paper = build_model(ModelConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V))
    with pytest.raises(ConfigError, match="positions='sinusoidal'.*decoder_start_id"):
        save_pretrained(paper, tmp_path)
    with pytest.raises(ConfigError, match="hf_arch='BertModel'"):
        save_pretrained(paper, tmp_path, hf_arch="BertModel")
