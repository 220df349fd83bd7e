"""Test-wide settings and shared helpers.

Threads: SCRATCHFORMER_TEST_THREADS (default 1). One thread by default: tiny models run faster without thread
hand-offs (about 100x on a busy 2-core machine), and CI has 2 cores; `make test-kernels` also runs with 2, so no
test may depend on the thread count (other counts split GEMMs differently: compare with tolerances).

Fast paths: SCRATCHFORMER_AUTOTUNE=0 unless set (autotune.py measures nothing and takes the safe
defaults, also in the CLI subprocesses); the fast-path tests switch it on with a fake clock (tests/perf).

The `kernels` marker: the numerics that other CPU kernels could break (model parity with the references,
decoding equivalences, fast-path equality, heads, the light learning checks), a few minutes at most; `make
test-kernels` runs them under other ATen/MKL instruction sets (see KERNELS below).
"""

import os

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model
from scratchformer.config import TrainConfig
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.runs import save_weights, write_json

THREADS_VAR = "SCRATCHFORMER_TEST_THREADS"
os.environ.setdefault("SCRATCHFORMER_AUTOTUNE", "0")  # no timing in tests (caches: _session_cache)

# Test ids (prefixes, relative to the repository root) that get the `kernels` marker.
KERNELS = (
    "tests/model/",
    "tests/decoding/",
    "tests/interop/",
    "tests/perf/",
    "tests/tasks/test_heads.py",
    "tests/training/test_learning.py::test_overfit",  # the light one; the copy task's margin is in its docstring
)


def _test_threads() -> int:
    raw = os.environ.get(THREADS_VAR, "1")
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise pytest.UsageError(f"{THREADS_VAR}={raw!r}: give a positive whole number of torch threads (default 1)")
    return threads


def pytest_configure(config: pytest.Config) -> None:
    torch.set_num_threads(_test_threads())


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """XDG_CACHE_HOME in the session's temporary folder (pytest keeps the last three sessions'), one for all the
    pytest-xdist workers of the session (a step compiled by one is found by the other): every cache of ours, the
    compiled steps and torch's build cache under them included, and those of the CLI processes the tests start,
    is written there, never in the home folder, where each run used to add its compiles and unpacked packages for
    good. A cold build cache costs the session's compiles about 20 s."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "xdg-cache"
    folder.mkdir(mode=0o700, exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(folder))
    yield
    patch.undo()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(KERNELS):
            item.add_marker(pytest.mark.kernels)


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


def write_tiny_run(run_dir, tiny_seq2seq, corpus: str = "toy", steps: int = 40):
    """config.json, train_config.json (corpus `corpus`), one char tokenizer for both sides and the weights of a
    tiny model fitted for `steps` Adam steps to the corpus' training pairs (a second or two: its outputs end,
    as a trained model's do): what load_run reads."""
    from scratchformer.decoding.common import pad_ids

    pairs = load_pairs(corpus, "train")
    tok = train_tokenizer("char", [s for s, _ in pairs] + [t for _, t in pairs])  # one vocabulary for both sides
    model = tiny_seq2seq(0, tok.vocab_size, tie_embeddings=False, max_len=64).train()
    src = pad_ids([tok.encode(s) + [2] for s, _ in pairs], 0, "cpu")  # (N, L_src), 2 = EOS
    tgt = pad_ids([[1, *tok.encode(t), 2] for _, t in pairs], 0, "cpu")  # (N, 1 + L_tgt), 1 = BOS
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        logits = model(src, tgt[:, :-1])  # (N, L_tgt, V)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    run_dir.mkdir(parents=True)
    model.config.save(run_dir / "config.json")
    write_json(run_dir / "train_config.json", TrainConfig(corpus=corpus).to_dict())
    tok.save(run_dir / "tokenizer_src.json")
    tok.save(run_dir / "tokenizer_tgt.json")
    save_weights(model.eval(), run_dir / "model.safetensors")
    return run_dir


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_seq2seq):
    """A tiny random translation run on the toy corpus, on disk (no training: a second)."""
    return write_tiny_run(tmp_path_factory.mktemp("report") / "run", tiny_seq2seq)


@pytest.fixture(scope="session")
def untrained_run(tmp_path_factory, tiny_seq2seq):
    """tiny_run's files with its random weights never fitted: its outputs are long and its greedy and beam paths
    part on most sentences on any CPU's kernels (the fitted run's may agree, as they did under baseline SSE code)."""
    return write_tiny_run(tmp_path_factory.mktemp("untrained") / "run", tiny_seq2seq, steps=0)
