"""Hostile files read by the library: byte-order marks, FIFOs, truncated gzip, corrupt tokenizers, config.json of the
wrong types (ours and Hugging Face's), and a vocabulary that learned nothing. Each is one ScratchformerError line
naming the file (or a warning), never another exception and never a read that blocks for ever."""

from __future__ import annotations

import gzip
import json
import os
import threading
import warnings

import pytest

from scratchformer.config import ModelConfig
from scratchformer.data.corpus import CorpusError, load_pairs, load_text, read_parallel, read_tsv
from scratchformer.data.tokenizers import load_tokenizer, train_tokenizer
from scratchformer.errors import ConfigError, ScratchformerError

BOM = "\ufeff"


def _unblock_later(fifo, seconds: float = 5.0) -> threading.Timer:
    """If the code under test opens `fifo` for reading, open its write end after a while so the test fails (the
    read sees an empty file) instead of hanging for ever."""

    def open_writer() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:  # no reader: the code did not open it, as it should not
            pass

    timer = threading.Timer(seconds, open_writer)
    timer.start()
    return timer


# -- byte-order marks -------------------------------------------------------------------------------------------
def test_a_bom_starts_no_corpus_line_of_any_format(tmp_path):
    tsv = tmp_path / "c.tsv"
    tsv.write_bytes(b"\xef\xbb\xbfhello\tworld\n")
    gz = tmp_path / "c.tsv.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbfhello\tworld\n"))
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_bytes(b"\xef\xbb\xbfhello\n")
    tgt.write_bytes(b"\xef\xbb\xbfworld\n")
    text = tmp_path / "lm.txt"
    text.write_bytes(b"\xef\xbb\xbfhello\n")
    assert read_tsv(tsv) == [("hello", "world")]
    assert read_tsv(gz) == [("hello", "world")]
    assert read_parallel(src, tgt) == [("hello", "world")]
    assert load_text(text) == ["hello"]


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_a_bom_never_becomes_a_vocabulary_token(kind, tmp_path):
    corpus = tmp_path / "bom.tsv"
    corpus.write_bytes(b"\xef\xbb\xbfhello there\tworld\n" + b"hello again\tworld again\n" * 5)
    srcs = [s for s, _ in load_pairs(corpus)]
    tok = train_tokenizer(kind, srcs, vocab_size=300 if kind == "bpe" else None)
    pieces = [tok.decode([i]) if kind == "bpe" else tok.id_to_token(i) for i in range(4, tok.vocab_size)]
    assert not any(BOM in p for p in pieces)


def test_a_config_json_with_a_bom_loads(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(ModelConfig.preset("tiny").to_dict()).encode())
    assert ModelConfig.load(path) == ModelConfig.preset("tiny")


# -- FIFOs and other non-regular files --------------------------------------------------------------------------
def test_a_fifo_corpus_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "pipe.tsv"
    os.mkfifo(fifo)
    timer = _unblock_later(fifo)
    try:
        with pytest.raises(CorpusError, match="is not a regular file"):
            read_tsv(fifo)
        with pytest.raises(CorpusError, match="is not a regular file"):
            load_pairs(str(fifo))
    finally:
        timer.cancel()


def test_a_fifo_tokenizer_or_config_is_refused(tmp_path):
    for name, load in (("tok.json", load_tokenizer), ("config.json", ModelConfig.load)):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        timer = _unblock_later(fifo)
        try:
            with pytest.raises(ScratchformerError, match="is not a regular file"):
                load(fifo)
        finally:
            timer.cancel()


def test_a_directory_as_a_corpus_file_is_one_line(tmp_path):
    (tmp_path / "d.tsv").mkdir()
    with pytest.raises(CorpusError, match="is not a regular file"):
        read_tsv(tmp_path / "d.tsv")


# -- truncated / foreign gzip -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cut", ["half", "header", "foreign"])
def test_a_broken_tsv_gz_is_one_corpus_error_naming_it(cut, tmp_path):
    whole = gzip.compress(b"".join(b"hello %d\tworld %d\n" % (i, i) for i in range(2000)))
    data = {"half": whole[: len(whole) // 2], "header": whole[:5], "foreign": b"PK\x03\x04 not gzip"}[cut]
    path = tmp_path / "c.tsv.gz"
    path.write_bytes(data)
    with pytest.raises(CorpusError, match=r"c\.tsv\.gz is truncated or not gzip: rebuild it"):
        read_tsv(path)


# -- tokenizer files --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [
    b'{"format": "scratchformer-tokenizer", "kind": "ch',
    b"not json",
    b"[1, 2]",
    b'"a string"',
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": "char", "tokens": 5}',
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": "char", "tokens": [1, 2, 3, 4]}',
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": "word"}',
    b'{"format": "scratchformer-tokenizer", "version": "1", "kind": "char", "tokens": []}',
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": "bpe", "tokenizers_json": {"model": 3}}',
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": ["char"]}',
    b"\xff\xfe\x00{",
])
def test_a_corrupt_tokenizer_file_is_one_error_naming_it(content, tmp_path):
    path = tmp_path / "tok.json"
    path.write_bytes(content)
    with pytest.raises(ScratchformerError) as info:
        load_tokenizer(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# -- config.json types ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value, expected", [
    ("d_model", "256", "int"), ("d_model", None, "int"), ("d_model", [256], "int"), ("d_model", 256.5, "int"),
    ("d_model", True, "int"), ("dropout", "0.1", "float"), ("norm_placement", 3, "str"), ("d_k", "8", "int or None"),
    ("tie_embeddings", "yes", "bool"), ("extra", [], "dict"), ("layer_norm_eps", None, "float"),
])
def test_model_config_types_are_checked_from_the_type_hints(field, value, expected, tmp_path):
    data = {**ModelConfig.preset("tiny").to_dict(), field: value}
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict(data)
    message = str(info.value)
    assert field in message and repr(value) in message and expected in message, message
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=str(path)):
        ModelConfig.load(path)


def test_ints_are_accepted_for_floats_but_not_bools_for_ints():
    config = ModelConfig.from_dict({**ModelConfig.preset("tiny").to_dict(), "dropout": 0, "layer_norm_eps": 1})
    assert config.dropout == 0
    with pytest.raises(ConfigError, match="n_heads"):
        ModelConfig.from_dict({**ModelConfig.preset("tiny").to_dict(), "n_heads": False})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -1e-5])
def test_layer_norm_eps_must_be_a_positive_number(value):
    with pytest.raises(ConfigError, match="layer_norm_eps"):
        ModelConfig.preset("tiny", layer_norm_eps=value)


@pytest.mark.parametrize("content", [b"[1, 2]", b"null", b"17"])
def test_a_config_json_that_is_not_an_object_is_one_line(content, tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="JSON object"):
        ModelConfig.load(path)


def test_train_config_json_types_are_checked_too(tmp_path):
    from scratchformer.config import TrainConfig

    with pytest.raises(ConfigError, match=r"max_steps.*'256'.*int"):
        TrainConfig.from_dict({"max_steps": "256"})
    with pytest.raises(ConfigError, match="JSON object"):
        TrainConfig.from_dict([1, 2])


# -- Hugging Face config.json -----------------------------------------------------------------------------------
def _hf_bert(tmp_path, **changes) -> None:
    pytest.importorskip("transformers")
    from scratchformer.interop.huggingface import save_pretrained
    from scratchformer.model import build_model

    config = ModelConfig.preset("bert-tiny", d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, tgt_vocab_size=50,
                                max_len=16)
    save_pretrained(build_model(config), tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    hf.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(hf))


@pytest.mark.parametrize("changes", [
    {"hidden_size": "32"}, {"hidden_size": 32.0}, {"num_hidden_layers": None}, {"num_hidden_layers": [1]},
    {"vocab_size": True}, {"hidden_dropout_prob": "0.1"}, {"model_type": ["bert"]}, {"layer_norm_eps": "x"},
    {"pad_token_id": "0"}, {"intermediate_size": {"a": 1}},
])
def test_a_hugging_face_config_with_wrong_types_is_one_line(changes, tmp_path):
    from scratchformer.interop.huggingface import from_pretrained

    _hf_bert(tmp_path, **changes)
    with pytest.raises(ConfigError) as info:
        from_pretrained(tmp_path)
    assert "config.json" in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_hugging_face_config_that_is_not_an_object_is_one_line(tmp_path):
    from scratchformer.interop.huggingface import from_pretrained

    _hf_bert(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2, 3]")
    with pytest.raises(ConfigError, match="JSON object"):
        from_pretrained(tmp_path)


# -- sizes ------------------------------------------------------------------------------------------------------
def test_the_parameter_estimate_is_close_to_the_real_count():
    from scratchformer.config import parameter_bytes
    from scratchformer.model import build_model

    for name, overrides in (("tiny", {}), ("gpt-tiny", {}), ("bert-tiny", {}), ("tiny", {"tie_embeddings": False})):
        config = ModelConfig.preset(name, **overrides)
        real = sum(p.numel() for p in build_model(config).parameters()) * 4
        assert 0.9 * real <= parameter_bytes(config) <= 1.5 * real, (name, parameter_bytes(config), real)


def test_building_a_model_bigger_than_the_machine_is_refused_before_allocating():
    from scratchformer.model import build_model

    with pytest.raises(ConfigError, match=r"would need .* TB for its weights; this machine has"):
        build_model(ModelConfig.preset("tiny", d_ff=10**12))
    with pytest.raises(ConfigError, match="would need"):
        build_model(ModelConfig.preset("tiny", max_len=10**12, positions="learned"))


# -- a vocabulary that learned nothing --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["char", "word", "bpe", "unigram"])
def test_a_vocabulary_of_only_the_specials_warns(kind):
    with pytest.warns(UserWarning, match="only its 4 special tokens"):
        train_tokenizer(kind, ["a b", "c d"] if kind in ("char", "word") else [], min_freq=100)


def test_a_real_vocabulary_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_tokenizer("char", ["hello", "world"])
