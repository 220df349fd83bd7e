"""RoPE inside whole models: relative positions only, left-padded batches get each row's own positions, the KV
cache's offset turns new keys correctly, and the other position kinds still enter at the input."""

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.model.rope import RotaryEmbedding

SMALL = dict(tgt_vocab_size=60, d_model=32, n_heads=4, n_kv_heads=2, d_ff=40, n_decoder_layers=2)


def _llama(**kw):
    torch.manual_seed(0)
    return build_model(ModelConfig.preset("llama-tiny", **{**SMALL, **kw})).eval()


def _ids(b=2, n=8, seed=0):
    return torch.randint(3, 60, (b, n), generator=torch.Generator().manual_seed(seed))


def test_rope_model_has_no_input_positions_and_depends_on_relative_positions_only():
    model, ids = _llama(), _ids()
    assert model.embed.position is None
    ropes = [m for m in model.modules() if isinstance(m, RotaryEmbedding)]
    assert len(ropes) == 2 and all(r is layer.self_attn.rope for r, layer in zip(ropes, model.decoder.layers))
    with torch.no_grad():
        base = model(ids)
        shifted = model(ids, position_ids=torch.arange(8)[None] + 17)  # every position + 17: same differences
    torch.testing.assert_close(shifted, base, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_other_position_kinds_still_enter_at_the_input(positions):
    model = _llama(positions=positions)
    assert model.embed.position is not None
    assert not any(isinstance(m, RotaryEmbedding) for m in model.modules())
    ids = _ids()
    with torch.no_grad():
        base, shifted = model(ids), model(ids, position_ids=torch.arange(8)[None] + 17)
    assert not torch.allclose(base, shifted, atol=1e-3)  # absolute positions: a shift changes the output


@pytest.mark.parametrize("fused", [True, False])
def test_left_padded_batch_equals_each_row_alone_and_cached_equals_uncached(fused):
    model = _llama(fused=fused)
    long, short = _ids(1, 7, seed=1)[0], _ids(1, 4, seed=2)[0]
    ids = torch.stack([long, torch.cat([torch.zeros(3, dtype=torch.long), short])])  # row 1 left-padded by 3
    mask = torch.tensor([[1] * 7, [0, 0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        batch = model(ids, attention_mask=mask)
        alone = [model(long[None])[0], model(short[None])[0]]
        torch.testing.assert_close(batch[0], alone[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(batch[1, 3:], alone[1], atol=1e-5, rtol=1e-5)
        cache = model.new_cache()  # prompt of 5, then one token at a time, the mask growing with the cache
        steps = [model(ids[:, :5], attention_mask=mask[:, :5], cache=cache)]
        for i in range(5, 7):
            steps.append(model(ids[:, i : i + 1], attention_mask=mask[:, : i + 1], cache=cache))
    cached = torch.cat(steps, 1)
    torch.testing.assert_close(cached[0], batch[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cached[1, 3:], batch[1, 3:], atol=1e-5, rtol=1e-5)


def test_rope_config_is_checked():
    with pytest.raises(Exception, match="rope_type='yarn' is not supported"):
        ModelConfig.preset("llama-tiny", rope_scaling={"rope_type": "yarn", "factor": 2.0})
    with pytest.raises(Exception, match="needs numbers for low_freq_factor"):
        ModelConfig.preset("llama-tiny", rope_scaling={"rope_type": "llama3", "factor": 8.0})
    with pytest.raises(Exception, match="rope needs d_k = d_v, even"):
        ModelConfig.preset("llama-tiny", d_k=7, d_v=7)


def test_llama_tiny_trains_every_parameter():
    """One backward pass reaches every weight (RMSNorm, gated FFN, GQA projections, tied embedding)."""
    model = _llama().train()
    ids = _ids()
    logits = model(ids[:, :-1])
    torch.nn.functional.cross_entropy(logits.reshape(-1, 60), ids[:, 1:].reshape(-1)).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing
