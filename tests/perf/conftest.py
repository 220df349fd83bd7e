"""Small random models for the fast-path tests (no timing here: benchmarks/ measures speed)."""

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model

VOCAB = 40


def make_model(seed: int = 0, **overrides) -> nn.Module:
    """A tiny EncoderDecoder whose greedy outputs vary (random untied output layer, larger weights)."""
    torch.manual_seed(seed)
    config = ModelConfig.preset("tiny", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, **overrides)
    model = build_model(config).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.0)
        model.generator.proj.weight = nn.Parameter(torch.randn(VOCAB, config.d_model) / config.d_model**0.5)
    return model


def sources(seed: int = 0, lengths=(3, 7, 5, 9, 2, 11)) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n,), generator=g).tolist() + [2] for n in lengths]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def tiny_model():
    """Factory: tiny_model(seed=0, **config_overrides) -> a random tiny EncoderDecoder in eval mode."""
    return make_model


@pytest.fixture(scope="session")
def tiny_sources():
    """Factory: tiny_sources(seed=0, lengths=...) -> source id lists ending in EOS."""
    return sources
