"""The near-tie comparison of conftest.py bites: a parting that is not a near-tie fails, and so do too many."""

from __future__ import annotations

import pytest
import torch

from scratchformer.config import ModelConfig
from scratchformer.data.tokenizers import EOS_ID
from scratchformer.decoding import greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.model import build_model


@pytest.fixture(scope="module")
def model_and_outputs():
    torch.manual_seed(0)
    model = build_model(ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=32, n_heads=2, d_ff=64,
                                    n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_positions=64)).eval()
    g = torch.Generator().manual_seed(1)
    srcs = [[*torch.randint(4, 30, (n,), generator=g).tolist(), EOS_ID] for n in (3, 6, 9)]
    return model, srcs, greedy_decode(model, srcs, Search(max_output_len=8))


def test_equal_outputs_pass(model_and_outputs, equal_up_to_ties):
    model, srcs, ours = model_and_outputs
    equal_up_to_ties(model, srcs, ours, [list(o) for o in ours])


def test_a_parting_that_is_no_near_tie_fails(model_and_outputs, equal_up_to_ties):
    model, srcs, ours = model_and_outputs
    theirs = [list(o) for o in ours]
    with torch.no_grad():
        logp = model(torch.tensor([srcs[1]]), torch.tensor([[1]]))[0, -1]
    theirs[1] = [int(logp.argmin())]  # the least likely first token: far from a tie with ours
    with pytest.raises(AssertionError, match="not a near-tie"):
        equal_up_to_ties(model, srcs, ours, theirs)


def test_too_many_near_ties_fail(model_and_outputs, equal_up_to_ties):
    model, srcs, ours = model_and_outputs
    theirs = [[*o, 5] if len(o) < 8 else o[:-1] for o in ours]  # every sentence parts at its end
    with pytest.raises(AssertionError):
        equal_up_to_ties(model, srcs, ours, theirs, tol=float("inf"), max_ties=1)
