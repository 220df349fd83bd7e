"""Tiny random models whose greedy outputs are not trivial (varied tokens, some early EOS)."""

import pytest

VOCAB = 30


@pytest.fixture(scope="module", params=[("pre", 0), ("pre", 2), ("post", 1)], ids=lambda p: f"{p[0]}-seed{p[1]}")
def seq2seq(request, tiny_seq2seq):
    norm, seed = request.param
    return tiny_seq2seq(seed, VOCAB, norm=norm)


@pytest.fixture(scope="session")
def make_seq2seq(tiny_seq2seq):
    """Factory: make_seq2seq(seed, norm="pre", **config_overrides) -> a tiny random EncoderDecoder."""
    return lambda seed, norm="pre", **overrides: tiny_seq2seq(seed, VOCAB, norm=norm, **overrides)


@pytest.fixture(scope="session")
def random_sources(source_ids):
    """Factory: random_sources(seed, lengths=...) -> source id lists ending in EOS."""
    return lambda seed, **kw: source_ids(seed, VOCAB, **kw)
