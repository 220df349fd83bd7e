"""Tiny random models whose greedy outputs are not trivial (varied tokens, some early EOS)."""

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model

VOCAB = 30


def _make_seq2seq(seed: int, norm: str = "pre", **overrides) -> nn.Module:
    """A random tiny EncoderDecoder. A random untied output layer and larger sublayer weights keep the
    outputs from collapsing to one repeated token (which a fresh tied model tends to do)."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, norm=norm,
                                           **overrides)).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.0)
        d = model.config.d_model  # logits of order 1, so 1e-5 is a tight tolerance
        model.generator.proj.weight = nn.Parameter(torch.randn(VOCAB, d) / d**0.5)
    return model


def _random_sources(seed: int, lengths=(3, 7, 5, 9, 2, 11)) -> list[list[int]]:
    """Source id lists ending in EOS (as encode_pairs makes them), of different lengths."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n,), generator=g).tolist() + [2] for n in lengths]


@pytest.fixture(scope="module", params=[("pre", 0), ("pre", 2), ("post", 1)], ids=lambda p: f"{p[0]}-seed{p[1]}")
def seq2seq(request):
    norm, seed = request.param
    return _make_seq2seq(seed, norm)


@pytest.fixture(scope="session")
def make_seq2seq():
    """Factory: make_seq2seq(seed, norm="pre", **config_overrides) -> a tiny random EncoderDecoder."""
    return _make_seq2seq


@pytest.fixture(scope="session")
def random_sources():
    """Factory: random_sources(seed, lengths=...) -> source id lists ending in EOS."""
    return _random_sources


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: one intra-op thread is ~100x faster than two on a busy machine (no spin-wait contention)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
