"""Hostile inputs to the Python API: tensors of the wrong rank or of zero size, id lists that are not lists of
lists, and decoding options that cannot work. Each is one InputError / ValueError line, never an IndexError deep in
a kernel."""

from __future__ import annotations

import math

import pytest
import torch

from scratchformer.config import ModelConfig
from scratchformer.data.tokenizers import SPECIALS, CharTokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.sampling import Sampling, sample
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator
from scratchformer.errors import InputError
from scratchformer.model import build_model

TOK = CharTokenizer([*SPECIALS, *"abcdefghijklmnopqrstuvwxyz "])  # 31 ids


@pytest.fixture(scope="module")
def seq2seq():
    torch.manual_seed(0)
    config = ModelConfig.preset("tiny", src_vocab_size=TOK.vocab_size, tgt_vocab_size=TOK.vocab_size, d_model=16,
                                n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=24)
    return build_model(config).eval()


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=31, d_model=16, n_heads=2, d_ff=32,
                                          n_decoder_layers=1, max_len=24, dropout=0.0)).eval()


@pytest.fixture(scope="module")
def bert():
    return build_model(ModelConfig.preset("bert-tiny", tgt_vocab_size=31, d_model=16, n_heads=2, d_ff=32,
                                          n_encoder_layers=1, max_len=24)).eval()


def _one_line(info: pytest.ExceptionInfo, *needles: str) -> None:
    message = str(info.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)


GOOD = torch.tensor([[5, 6, 7, 2]])
BAD_SHAPES = [torch.tensor([5, 6, 7, 2, 8, 9, 10]), torch.zeros((0, 4), dtype=torch.long),
              torch.zeros((2, 0), dtype=torch.long), torch.zeros((1, 2, 3), dtype=torch.long)]
IDS = ["1-D", "empty-batch", "zero-length", "3-D"]


@pytest.mark.parametrize("bad", BAD_SHAPES, ids=IDS)
def test_seq2seq_forward_encode_decode_refuse_bad_shapes(bad, seq2seq):
    with pytest.raises(InputError) as info:
        seq2seq(bad, GOOD)
    _one_line(info, "src", str(tuple(bad.shape)))
    with pytest.raises(InputError) as info:
        seq2seq(GOOD, bad)
    _one_line(info, "tgt", str(tuple(bad.shape)))
    with pytest.raises(InputError):
        seq2seq.encode(bad)
    memory = seq2seq.encode(GOOD)
    with pytest.raises(InputError):
        seq2seq.decode(memory, None, bad)


@pytest.mark.parametrize("bad", BAD_SHAPES, ids=IDS)
def test_single_stack_models_refuse_bad_shapes(bad, gpt, bert):
    for model in (gpt, bert):
        with pytest.raises(InputError) as info:
            model(bad)
        _one_line(info, "input_ids", str(tuple(bad.shape)))


def test_a_list_instead_of_a_tensor_is_one_line(seq2seq, gpt):
    with pytest.raises(InputError, match="tensor"):
        seq2seq([[5, 6, 2]], GOOD)
    with pytest.raises(InputError, match="tensor"):
        gpt([[5, 6, 2]])


@pytest.mark.parametrize("search", [greedy_decode, beam_search])
@pytest.mark.parametrize("bad", [torch.tensor([5, 6, 7, 2]), torch.zeros((2, 0), dtype=torch.long), [5, 6, 7],
                                 [[5, 6], 7], [[]], "hello", torch.zeros((1, 2, 3), dtype=torch.long)],
                         ids=["1-D", "zero-length", "flat-list", "ragged-types", "empty-sentence", "string", "3-D"])
def test_searches_refuse_bad_sources(search, bad, seq2seq):
    with pytest.raises(InputError) as info:
        search(seq2seq, bad, Search(max_output_len=4))
    _one_line(info, "src")


@pytest.mark.parametrize("search", [greedy_decode, beam_search])
def test_searches_keep_working_on_good_and_empty_batches(search, seq2seq):
    assert search(seq2seq, [], Search(max_output_len=4)) == []
    assert len(search(seq2seq, [[5, 6, 2], [7, 2]], Search(max_output_len=4))) == 2


@pytest.mark.parametrize("bad", [[5, 6], [[1, 5], 6], "hi", [[1, "a"]]], ids=["flat", "ragged", "string", "str-id"])
def test_sampling_refuses_prompts_that_are_not_id_lists(bad, gpt):
    with pytest.raises(InputError) as info:
        sample(gpt, bad, Sampling(max_new_tokens=2))
    _one_line(info, "prompt")


@pytest.mark.parametrize("temperature", [math.nan, math.inf])
def test_sampling_refuses_a_temperature_that_is_not_finite(temperature, gpt):
    with pytest.raises(ValueError, match="temperature"):
        sample(gpt, [[1, 5]], Sampling(max_new_tokens=2, temperature=temperature))


def test_translate_texts_on_empty_inputs(seq2seq):
    assert Translator.from_model(seq2seq, TOK, TOK).translate([]) == []
    for beam in (1, 3):
        out = Translator.from_model(seq2seq, TOK, TOK).translate(["", " ", "abc", ""], beam=beam, max_output_len=5)
        assert len(out) == 4 and out[0] == "" and out[1] == "" and out[3] == ""


@pytest.mark.parametrize("options, needle", [
    ({"alpha": math.nan}, "alpha"), ({"alpha": math.inf}, "alpha"), ({"alpha": -0.5}, "alpha"),
    ({"max_output_len": 10**9}, "max_output_len"),
    ({"max_len": 5}, "max_len is max_output_len now"), ({"beam": 10**5}, "beam"), ({"beam": 0}, "beam"),
    ({"batch_size": 0}, "batch"),
    ({"max_tokens": 0}, "max_tokens"),
])
def test_translate_texts_refuses_options_that_cannot_work(options, needle, seq2seq):
    with pytest.raises(ValueError) as info:
        Translator.from_model(seq2seq, TOK, TOK).translate(["abc"], **options)
    _one_line(info, needle)


def test_translate_texts_refuses_texts_that_are_not_strings(seq2seq):
    with pytest.raises(InputError, match="texts"):
        Translator.from_model(seq2seq, TOK, TOK).translate("abc")
    with pytest.raises(InputError, match="texts"):
        Translator.from_model(seq2seq, TOK, TOK).translate(["abc", None])


def test_translate_texts_on_a_single_stack_model_is_one_line(gpt, bert):
    for model in (gpt, bert):
        with pytest.raises(InputError, match="encoder-decoder"):
            Translator.from_model(model, TOK, TOK).translate(["abc"])
