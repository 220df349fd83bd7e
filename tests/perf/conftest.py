"""Small random models for the fast-path tests (no timing here: benchmarks/ measures speed)."""

import pytest

VOCAB = 40


@pytest.fixture(scope="session")
def tiny_model(tiny_seq2seq):
    """Factory: tiny_model(seed=0, **config_overrides) -> a random tiny EncoderDecoder in eval mode."""
    return lambda seed=0, **overrides: tiny_seq2seq(seed, VOCAB, **overrides)


@pytest.fixture(scope="session")
def tiny_sources(source_ids):
    """Factory: tiny_sources(seed=0, lengths=...) -> source id lists ending in EOS."""
    return lambda seed=0, **kw: source_ids(seed, VOCAB, **kw)
