"""The teaching tools under bad input: shapes, plot, --show-attention and masks written the TensorFlow way."""

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.errors import InputError
from scratchformer.model.attention import MultiHeadAttention

from .conftest import assert_one_line_error, cli


# -- shapes: sizes that cannot run -------------------------------------------------------------------------
@pytest.mark.parametrize("args,needle", [
    (["--batch", "0"], "--batch 0"),
    (["--batch", "-3"], "--batch -3"),
    (["--lengths", "0,9"], "--lengths 0"),
    (["--lengths", "10,-1"], "--lengths -1"),
    (["--lengths", "100000"], "--lengths 100000 is longer than the model's max_positions=256"),
    (["--lengths", "10,257"], "--lengths 257"),
    (["--lengths", "10,x"], "--lengths 10,x: give SRC,TGT"),
])
def test_shapes_with_impossible_sizes_is_one_line(args, needle):
    assert_one_line_error(cli("shapes", "--preset", "tiny", *args), needle, code=2)


def test_shapes_at_the_longest_length_still_works():
    result = cli("shapes", "--preset", "tiny", "--batch", "1", "--lengths", "256,1")
    assert result.code == 0 and "L_src=256" in result.out and "L_tgt=1" in result.out, result.err[-2000:]


# -- plot ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,needle", [
    (["--d-model", "0"], "--d-model 0"), (["--d-model", "7"], "even d_model"), (["--d-model", "-2"], "--d-model -2"),
    (["--max-positions", "0"], "--max-positions 0"),
])
def test_plot_with_impossible_sizes_is_one_line(tmp_path, args, needle):
    assert_one_line_error(cli("plot", "positions", *args, "--out", str(tmp_path / "pe.png")), needle, code=2)


def test_plot_into_a_directory_writes_the_file_it_reports(tmp_path):
    result = cli("plot", "positions", "--d-model", "16", "--max-positions", "10", "--out", str(tmp_path))
    assert result.code == 0, result.err[-2000:]
    reported = result.out.strip().removeprefix("wrote ")
    assert reported == str(tmp_path / "positions.png")
    assert open(reported, "rb").read(4) == b"\x89PNG"


# -- translate --show-attention without a sentence ----------------------------------------------------------
def test_show_attention_without_input_is_one_line(toy_run, tmp_path):
    result = cli("translate", str(toy_run), "--beam", "1", "--show-attention", str(tmp_path / "a.png"), stdin=b"")
    assert_one_line_error(result, "--show-attention", "there is none", code=2)
    assert not (tmp_path / "a.png").exists()


def test_show_attention_of_an_empty_first_line_is_one_line(toy_run, tmp_path):
    result = cli("translate", str(toy_run), "--beam", "1", "--show-attention", str(tmp_path / "a.png"),
                 stdin=b"\nhello\n")
    assert_one_line_error(result, "--show-attention", "empty", code=2)
    assert len(result.out.splitlines()) == 2  # both lines were still translated and printed


def test_show_attention_of_a_sentence_draws_it(toy_run, tmp_path):
    result = cli("translate", str(toy_run), "--beam", "1", "--show-attention", str(tmp_path / "a.png"), "hello")
    assert result.code == 0 and (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG", result.err[-2000:]


# -- masks: bool only, True = may attend --------------------------------------------------------------------
def _seq2seq():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=50, n_encoder_layers=1,
                                           n_decoder_layers=1)).eval()
    src, tgt = torch.randint(4, 50, (2, 5)), torch.randint(4, 50, (2, 4))
    return model, src, tgt


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.uint8])
def test_a_non_boolean_src_mask_is_refused_with_the_convention(dtype):
    model, src, tgt = _seq2seq()
    tf_style = torch.zeros(2, 5, dtype=dtype)  # TensorFlow: 1 = masked, 0 = keep
    tf_style[0, 3:] = 1
    with pytest.raises(InputError, match=r"src_mask must be a bool tensor, True = may attend; got "
                                         rf"{dtype}.*TensorFlow-style 1 = masked\? use src_mask == 0"):
        model(src, tgt, src_mask=tf_style)
    with pytest.raises(InputError, match="src_mask must be a bool tensor"):
        model.encode(src, tf_style)


def test_a_non_boolean_tgt_mask_and_decode_src_mask_are_refused():
    model, src, tgt = _seq2seq()
    causal_tf = torch.triu(torch.ones(4, 4), diagonal=1)[None]  # (1, L, L), 1 above the diagonal = masked
    with pytest.raises(InputError, match="tgt_mask must be a bool tensor"):
        model(src, tgt, tgt_mask=causal_tf.expand(2, 4, 4))
    memory = model.encode(src)
    with pytest.raises(InputError, match="src_mask must be a bool tensor"):
        model.decode(memory, torch.ones(2, 5), tgt)


def test_the_boolean_equivalent_of_a_tf_mask_gives_the_padding_result():
    model, src, tgt = _seq2seq()
    tf_style = torch.zeros(2, 5)
    tf_style[0, 3:] = 1
    with torch.no_grad():
        ours = model(src, tgt, src_mask=tf_style == 0)  # the fix the message suggests
        padded = src.clone()
        padded[0, 3:] = 0  # pad_id: the derived padding mask hides the same keys
        expected = model(padded, tgt)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("fused", [True, False])
def test_multi_head_attention_refuses_a_float_mask(fused):
    mha = MultiHeadAttention(d_model=16, n_heads=2, d_k=8, d_v=8, fused=fused).eval()
    x = torch.randn(2, 3, 16)
    additive_or_tf = torch.zeros(2, 1, 1, 3)  # the fused kernel would ADD this to the scores, silently
    with pytest.raises(InputError, match="mask must be a bool tensor, True = may attend; got torch.float32"):
        mha(x, mask=additive_or_tf)
    assert mha(x, mask=torch.ones(2, 1, 1, 3, dtype=torch.bool)).shape == (2, 3, 16)


def test_hugging_face_style_attention_mask_still_works_for_encoder_models():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("bert-tiny", n_encoder_layers=1, dropout=0.0,
                                           attention_dropout=0.0)).eval()
    ids = torch.randint(4, 1000, (2, 6))
    hf = torch.ones(2, 6, dtype=torch.long)
    hf[1, 4:] = 0  # Hugging Face: 1 = real token (our polarity)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, attention_mask=hf), model(ids, attention_mask=hf.bool()),
                                   atol=1e-6, rtol=0)
    with pytest.raises(InputError, match="attention_mask of dtype torch.int64 must be a \\(B, L\\) mask of 0/1"):
        model(ids, attention_mask=hf * 2)
