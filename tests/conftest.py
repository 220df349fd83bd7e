"""Test-wide settings and shared helpers.

One torch thread for the whole suite: tiny models run faster without thread hand-offs (about 100x on a busy
2-core machine), and CI has 2 cores.
"""

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model

torch.set_num_threads(1)


def _tiny_seq2seq(seed: int, vocab: int, **overrides) -> nn.Module:
    """A random tiny EncoderDecoder in eval mode whose greedy outputs vary. A random untied output layer and
    doubled linear weights keep it from collapsing to one repeated token (as a fresh tied model tends to);
    logits stay of order 1, so 1e-5 is a tight tolerance."""
    torch.manual_seed(seed)
    config = ModelConfig.preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides)
    model = build_model(config).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.0)
        model.generator.proj.weight = nn.Parameter(torch.randn(vocab, config.d_model) / config.d_model**0.5)
    return model


def _source_ids(seed: int, vocab: int, lengths=(3, 7, 5, 9, 2, 11)) -> list[list[int]]:
    """Source id lists ending in EOS (as encode_pairs makes them), of different lengths."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab, (n,), generator=g).tolist() + [2] for n in lengths]


@pytest.fixture(scope="session")
def tiny_seq2seq():
    """Factory: tiny_seq2seq(seed, vocab, **config_overrides) -> a random tiny EncoderDecoder."""
    return _tiny_seq2seq


@pytest.fixture(scope="session")
def source_ids():
    """Factory: source_ids(seed, vocab, lengths=...) -> source id lists ending in EOS."""
    return _source_ids
