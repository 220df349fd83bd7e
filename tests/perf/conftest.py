"""Small random models for the fast-path tests, and a fake clock for the measured choices (no timing here:
benchmarks/ measures speed)."""

import pytest

from scratchformer import autotune

VOCAB = 40


@pytest.fixture(scope="session")
def tiny_model(tiny_seq2seq):
    """Factory: tiny_model(seed=0, **config_overrides) -> a random tiny EncoderDecoder in eval mode."""
    return lambda seed=0, **overrides: tiny_seq2seq(seed, VOCAB, **overrides)


@pytest.fixture(scope="session")
def tiny_sources(source_ids):
    """Factory: tiny_sources(seed=0, lengths=...) -> source id lists ending in EOS."""
    return lambda seed=0, **kw: source_ids(seed, VOCAB, **kw)


class FakeClock:
    """autotune's Measure: runs the candidate's work (so its code runs) and reports the seconds it is told."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds, self.calls = seconds, []

    def __call__(self, name, work):
        self.calls.append(name)
        work()
        return self.seconds[name]


@pytest.fixture
def fake_tuner(monkeypatch, tmp_path):
    """Factory: fake_tuner(**seconds_per_candidate) -> FakeClock; autotune on, with that clock and a tmp cache."""

    def install(**seconds: float) -> FakeClock:
        clock = FakeClock(seconds)
        monkeypatch.setenv(autotune.ENV, "1")
        tuner = autotune.Tuner(tmp_path / "autotune.json", measure=clock, busy=lambda: False)
        monkeypatch.setattr(autotune, "TUNER", tuner)
        return clock

    return install
