"""The three architectures: shapes, tying, config files, KV cache, bad input."""

import pytest
import torch

from scratchformer import ConfigError, InputError, ModelConfig, build_model
from scratchformer.config import PRESETS
from scratchformer.model import DecoderOnly, EncoderDecoder, EncoderOnly


def test_api_shapes_for_all_three_architectures():
    ed = build_model(ModelConfig.preset("tiny", src_vocab_size=30, tgt_vocab_size=40))
    assert isinstance(ed, EncoderDecoder)
    src, tgt = torch.randint(1, 30, (2, 6)), torch.randint(1, 40, (2, 5))
    assert ed(src, tgt).shape == (2, 5, 40)
    memory = ed.encode(src)
    assert memory.shape == (2, 6, 64)
    assert ed.decode(memory, None, tgt).shape == (2, 5, 64)
    enc = build_model(ModelConfig.preset("bert-tiny", tgt_vocab_size=40))
    assert isinstance(enc, EncoderOnly)
    assert enc(torch.randint(1, 40, (2, 7))).shape == (2, 7, 128)
    dec = build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=40))
    assert isinstance(dec, DecoderOnly)
    assert dec(torch.randint(1, 40, (2, 7))).shape == (2, 7, 40)


def test_tied_embeddings_share_one_matrix():
    model = build_model(ModelConfig.preset("tiny", tie_embeddings=True))
    assert model.src_embed.token.weight is model.tgt_embed.token.weight is model.generator.proj.weight
    untied = build_model(ModelConfig.preset("tiny", tie_embeddings=False))
    v, d = 1000, 64
    assert model.num_parameters() == untied.num_parameters() - 2 * v * d
    different = build_model(ModelConfig.preset("tiny", src_vocab_size=500, tie_embeddings=True))
    assert different.generator.proj.weight is different.tgt_embed.token.weight
    assert different.src_embed.token.weight is not different.tgt_embed.token.weight


def test_config_json_round_trip(tmp_path):
    for name in PRESETS:
        config = ModelConfig.preset(name)
        config.save(tmp_path / "c.json")
        assert ModelConfig.load(tmp_path / "c.json") == config


def test_bad_configs_are_one_line_errors():
    with pytest.raises(ConfigError, match="not divisible by n_heads"):
        ModelConfig(d_model=100, n_heads=3)
    assert ModelConfig(d_model=100, n_heads=3, d_k=32).head_dim_v == 32  # explicit d_k is fine
    with pytest.raises(ConfigError, match="valid presets: .*paper-base"):
        ModelConfig.preset("paper-huge")
    with pytest.raises(ConfigError, match="norm_placement="):
        ModelConfig(norm_placement="sandwich")


def test_bad_inputs_are_one_line_errors():
    model = build_model(ModelConfig.preset("tiny", max_len=8))
    ok = torch.randint(1, 1000, (2, 5))
    with pytest.raises(InputError, match="longer than max_positions=8"):
        model(torch.randint(1, 1000, (2, 9)), ok)
    with pytest.raises(InputError, match="token id 1000, outside the vocabulary"):
        model(ok, torch.full((2, 5), 1000))
    with pytest.raises(InputError, match="token id -1"):
        model(torch.full((2, 5), -1), ok)
    with pytest.raises(InputError, match="src_mask has shape"):
        model(ok, ok, src_mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(InputError, match="integer tensor"):
        model(ok.float(), ok)
    for err in (InputError, ConfigError):
        assert issubclass(err, ValueError)


def test_explicit_masks_equal_derived_ones():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny")).eval()
    src, tgt = torch.randint(1, 1000, (2, 6)), torch.randint(1, 1000, (2, 5))
    src[1, 3:] = 0
    with torch.no_grad():
        derived = model(src, tgt)
        explicit = model(src, tgt, src_mask=src != 0)  # (B, L_src) key padding mask form
    torch.testing.assert_close(derived, explicit)


@pytest.mark.parametrize("norm", ["post", "pre", "seed000", "seed003", "rms", "seed000-norm"])
def test_encoder_decoder_cached_decoding_equals_full_forward(norm):
    torch.manual_seed(0)
    kinds = {"rms": dict(norm_kind="rms", norm_placement="pre"), "seed000-norm": dict(norm_kind="seed000")}
    fields = kinds.get(norm, dict(norm_placement=norm))
    model = build_model(ModelConfig.preset("tiny", **fields)).eval()
    src, tgt = torch.randint(1, 1000, (3, 6)), torch.randint(1, 1000, (3, 7))
    src[2, 4:] = 0
    with torch.no_grad():
        full = model(src, tgt)
        memory = model.encode(src)
        mask = model.src_mask(src)
        cache = model.new_cache()
        steps = [model.generator.logits(model.decode(memory, mask, tgt[:, t : t + 1], cache=cache))
                 for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    assert cache.length == 7


def test_cache_reorder_selects_rows():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("gpt-tiny", dropout=0.0)).eval()
    ids = torch.randint(1, 1000, (3, 5))
    with torch.no_grad():
        cache = model.new_cache()
        model(ids[:, :4], cache=cache)
        cache.reorder(torch.tensor([2, 0]))
        step = model(ids[[2, 0], 4:], cache=cache)
        full = model(ids[[2, 0]])
    torch.testing.assert_close(step[:, -1], full[:, -1], atol=1e-5, rtol=0)


def test_decoder_only_cache_and_left_padding():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("gpt-tiny", dropout=0.0)).eval()
    prompt = torch.randint(1, 1000, (1, 4))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), prompt], 1)  # left padding
    attn = (padded != 0).long()
    with torch.no_grad():
        alone = model(prompt)
        in_batch = model(padded, attention_mask=attn)
        torch.testing.assert_close(in_batch[:, 3:], alone, atol=1e-5, rtol=0)
        cache = model.new_cache()
        model(padded[:, :5], attention_mask=attn[:, :5], cache=cache)
        step = model(padded[:, 5:], attention_mask=attn, cache=cache)
    torch.testing.assert_close(step, alone[:, 2:], atol=1e-5, rtol=0)


def test_cache_grows_without_reallocating_every_step():
    model = build_model(ModelConfig.preset("gpt-tiny", dropout=0.0)).eval()
    cache = model.new_cache()
    buffers = set()
    with torch.no_grad():
        model(torch.randint(1, 1000, (1, 3)), cache=cache)
        for _ in range(40):
            model(torch.randint(1, 1000, (1, 1)), cache=cache)
            buffers.add(cache.self_attn[0].k.data_ptr())
    assert cache.length == 43
    assert len(buffers) <= 3  # capacities 16 -> 34 -> 70: geometric growth


def test_reference_and_fused_models_agree():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny")).eval()
    src, tgt = torch.randint(1, 1000, (2, 6)), torch.randint(1, 1000, (2, 5))
    src[0, 4:] = 0
    with torch.no_grad():
        fused = model(src, tgt)
        reference = model.set_fused(False)(src, tgt)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=0)
