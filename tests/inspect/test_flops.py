"""The analytic model-FLOP count (MFU's numerator) against torch's own FLOP counter on real forward passes."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from scratchformer import ModelConfig, build_model
from scratchformer.inspect.flops import forward_flops, matmul_rate, training_flops


def counted(model, *inputs) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(*inputs)
    return fc.get_total_flops()


@pytest.mark.parametrize("preset,arch", [("tiny", "encoder-decoder"), ("gpt-tiny", "decoder"),
                                         ("bert-tiny", "encoder")])
def test_forward_flops_match_torch_flop_counter(preset, arch):
    c = ModelConfig.preset(preset, dropout=0.0, fused=False)  # by-hand attention: its bmm are counted
    assert c.arch == arch
    model = build_model(c).eval()
    b, ls, lt = 3, 11, 7
    src = torch.randint(4, c.src_vocab_size if arch == "encoder-decoder" else c.tgt_vocab_size, (b, ls))
    if arch == "encoder-decoder":
        tgt = torch.randint(4, c.tgt_vocab_size, (b, lt))
        theirs = counted(model, src, tgt)
    else:
        theirs = counted(model, src)
    ours = forward_flops(c, b, ls, lt)
    assert ours == theirs  # integers: every Linear (addmm / mm) and Q K^T, A V (bmm) torch ran, no more


def test_a_training_step_is_three_forwards():
    c = ModelConfig.preset("tiny", d_model=64, d_ff=256, tgt_vocab_size=1000)
    assert training_flops(c, 4, 10, 9) == 3 * forward_flops(c, 4, 10, 9) > 0


def test_matmul_rate_is_a_positive_rate():
    assert matmul_rate("cpu", torch.float32, n=128, repeats=2) > 1e6


def test_measuring_the_rate_leaves_the_global_rng_alone():
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    matmul_rate("cpu", torch.float32, n=64, repeats=1)
    assert torch.equal(torch.rand(4), expected)  # a resumed run draws the same dropout masks as an unbroken one
