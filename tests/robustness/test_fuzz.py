"""Property-based fuzzing (hypothesis): random corpus files, random config JSON and random CLI flag values. Whatever
comes in, the outcome is a result or one ScratchformerError (ConfigError, CorpusError, ...) - never another exception
escaping the library, and never a traceback escaping `main`. Sizes are kept small so the whole file runs in well
under a minute; `TRIED` counts the inputs each property saw (pytest -s shows nothing: the suite prints nothing)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import warnings
from collections import Counter

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from scratchformer.cli import main  # noqa: E402
from scratchformer.config import ModelConfig, TrainConfig  # noqa: E402
from scratchformer.data.corpus import load_pairs, load_text  # noqa: E402
from scratchformer.errors import ScratchformerError  # noqa: E402

TRIED: Counter[str] = Counter()
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])
CLI = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])

# -- corpus files -----------------------------------------------------------------------------------------------
PIECES = st.sampled_from(["\t", "", "\r", "\ufeff", "\x00", "\n", "hello", "世界", " ", "\t\t", "a" * 5000, "\udcff"])
LINES = st.lists(st.lists(PIECES, max_size=6).map("".join), max_size=8).map("\n".join)


def _corpus_outcome(load, *args) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped-line summaries
        try:
            out = load(*args)
        except ScratchformerError as e:
            assert "\n" not in str(e), str(e)
            return
    assert isinstance(out, list)


@FAST
@given(data=st.one_of(st.binary(max_size=300), LINES.map(lambda s: s.encode("utf-8", "surrogatepass"))),
       suffix=st.sampled_from([".tsv", ".tsv.gz", ".txt"]), gz=st.booleans(), cut=st.integers(0, 400),
       on_error=st.sampled_from(["stop", "skip"]))
def test_random_corpus_files_give_pairs_or_one_error(tmp_path, data, suffix, gz, cut, on_error):
    TRIED["corpus files"] += 1
    path = tmp_path / f"c{suffix}"
    if suffix.endswith(".gz"):
        data = gzip.compress(data)[:cut] if gz else data  # truncated gzip, or bytes that are not gzip at all
    path.write_bytes(data)
    _corpus_outcome(load_pairs, str(path), "train", on_error)
    _corpus_outcome(load_text, str(path))


@FAST
@given(src=st.binary(max_size=120), tgt=LINES.map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_random_two_file_corpora_give_pairs_or_one_error(tmp_path, src, tgt):
    TRIED["two-file corpora"] += 1
    (tmp_path / "s.txt").write_bytes(src)
    (tmp_path / "t.txt").write_bytes(tgt)
    _corpus_outcome(load_pairs, f"{tmp_path / 's.txt'},{tmp_path / 't.txt'}")


# -- config JSON ------------------------------------------------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=5)
MODEL_FIELDS = sorted(ModelConfig.preset("tiny").to_dict())
TRAIN_FIELDS = sorted(TrainConfig().to_dict())


def _config_outcome(make, data) -> None:
    try:
        make(data)
    except ScratchformerError as e:
        assert "\n" not in str(e), str(e)


@FAST
@given(changes=st.dictionaries(st.sampled_from(MODEL_FIELDS + ["bogus"]), JSON, max_size=4))
def test_random_model_config_json_gives_a_config_or_config_error(changes):
    TRIED["ModelConfig dicts"] += 1
    data = json.loads(json.dumps({**ModelConfig.preset("tiny").to_dict(), **changes}))  # what a file can hold
    _config_outcome(ModelConfig.from_dict, data)


@FAST
@given(changes=st.dictionaries(st.sampled_from(TRAIN_FIELDS + ["bogus"]), JSON, max_size=4))
def test_random_train_config_json_gives_a_config_or_config_error(changes):
    TRIED["TrainConfig dicts"] += 1
    _config_outcome(TrainConfig.from_dict, json.loads(json.dumps(changes)))


@FAST
@given(data=JSON)
def test_any_json_document_as_a_config_gives_a_config_or_config_error(data):
    TRIED["JSON documents"] += 1
    _config_outcome(ModelConfig.from_dict, data)
    _config_outcome(TrainConfig.from_dict, data)


# -- CLI flags --------------------------------------------------------------------------------------------------
NUMBERS = st.sampled_from(["0", "-1", "1", "2", "nan", "inf", "-inf", "1e9", "100000", "0.5", "abc", "", "1e400",
                           str(2**70), "3"])


def _main(argv: list[str]) -> int:
    """`main(argv)` in-process with its output swallowed; argparse's usage errors exit 2 (SystemExit)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(argv)
        except SystemExit as e:
            return e.code


def _flags(names: list[str]):
    return st.lists(st.tuples(st.sampled_from(names), NUMBERS), max_size=3).map(
        lambda pairs: [x for name, value in pairs for x in (name, value)])


@CLI
@given(flags=_flags(["--beam", "--alpha", "--batch-size", "--max-tokens", "--max-len", "--threads"]))
def test_random_translate_flags_exit_0_or_2(toy_run, flags):
    TRIED["translate flags"] += 1
    import torch

    threads = torch.get_num_threads()
    try:
        assert _main(["translate", str(toy_run), *flags, "hello"]) in (0, 2)
    finally:
        torch.set_num_threads(threads)


@CLI
@given(flags=_flags(["--beam", "--alpha", "--limit", "--show", "--split"]))
def test_random_evaluate_flags_exit_0_or_2(toy_run, flags):
    TRIED["evaluate flags"] += 1
    assert _main(["evaluate", str(toy_run), "--json", *flags]) in (0, 2)


@CLI
@given(command=st.sampled_from(["shapes", "params"]), preset=st.sampled_from(["tiny", "gpt-tiny", "bert-tiny"]),
       overrides=st.lists(st.tuples(st.sampled_from(["d_model", "n_heads", "d_ff", "max_len", "d_k", "dropout",
                                                     "n_encoder_layers", "tgt_vocab_size", "norm"]), NUMBERS),
                          max_size=3))
def test_random_model_overrides_exit_0_or_2(command, preset, overrides):
    TRIED[f"{command} overrides"] += 1
    extra = ["--batch", "1", "--lengths", "3,2"] if command == "shapes" else []
    assert _main([command, "--preset", preset, *extra, *(f"{k}={v}" for k, v in overrides)]) in (0, 2)
