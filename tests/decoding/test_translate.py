"""Translator.from_model(...).translate: strings in, strings out, in order; empty lines; over-long sources."""

import pytest

from scratchformer.data.tokenizers import SPECIALS, CharTokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator

SRC_TOK = CharTokenizer([*SPECIALS, *"abcdefghij klmnopqrstuvw"])  # 28 ids < the model's 30
TGT_TOK = CharTokenizer([*SPECIALS, *"一二三四五六七八九十百千万亿天地人日月山水火木金土石"])  # 30 ids
TEXTS = ["abc def", "", "hello world", "a", "quick brown fox", "   ", "jump over", "lazy dog now"]


def by(model) -> Translator:
    """The Translator of a model in memory with this file's tokenizers."""
    return Translator.from_model(model, SRC_TOK, TGT_TOK)


@pytest.fixture(scope="module")
def model(make_seq2seq):
    return make_seq2seq(2)


def test_order_restored_and_batching_does_not_change_outputs(model):
    one_by_one = [by(model).translate([t], beam=1, max_output_len=10)[0] for t in TEXTS]
    assert by(model).translate(TEXTS, batch_size=3, beam=1, max_output_len=10) == one_by_one
    assert by(model).translate(TEXTS, max_tokens=24, beam=1, max_output_len=10) == one_by_one
    assert len({o for o in one_by_one if o}) >= 2  # outputs differ between sentences


def test_outputs_are_detokenized_greedy_tokens(model):
    ids = SRC_TOK.encode("hello world") + [2]  # encode_pairs: src ids + EOS
    tokens = greedy_decode(model, [ids], Search(max_output_len=10))[0]
    assert by(model).translate(["hello world"], beam=1, max_output_len=10) == [TGT_TOK.decode(tokens)]
    assert all("\u4e00" <= ch <= "\u9fff" for ch in TGT_TOK.decode(tokens))


def test_empty_lines_give_empty_outputs(model):
    out = by(model).translate(["", "abc", "  "], beam=1, max_output_len=10)
    assert out[0] == "" and out[2] == ""
    assert by(model).translate([]) == []


def test_beam_uses_the_best_hypothesis(model):
    out = by(model).translate(TEXTS, beam=3, max_output_len=10)
    for text, got in zip(TEXTS, out):
        if text.strip():
            best = beam_search(model, [SRC_TOK.encode(text) + [2]], Search(beam=3, max_output_len=10))[0][0]
            assert got == TGT_TOK.decode(best.tokens)


def test_long_source_is_cut_with_a_warning(make_seq2seq):
    short = make_seq2seq(2, max_len=20)
    text = "abcdefghij" * 4  # 40 chars + EOS > 20
    with pytest.warns(UserWarning, match="cut 1 source"):
        out = by(short).translate([text, "abc"], max_output_len=5)
    assert out[0] == by(short).translate([text[:19]], max_output_len=5)[0]
