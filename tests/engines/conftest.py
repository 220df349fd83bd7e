"""Shared by the engine tests: greedy outputs of two engines are equal, except where they part at a near-tie
of our own logits.

Two engines compute the same function with different kernels (MKL, oneDNN, CTranslate2's own), so their
logits differ by about 1e-6. Where the best two tokens of a step are closer than that, argmax may pick either
on another CPU or thread count, and a bit-exact comparison of the ids would fail there and nowhere else (the
house rule: never compare bit-exactly across kernels). So at the first step where two outputs part, our model
is run on the shared prefix and the two chosen tokens must be a near-tie (log-probs within `tol`); any other
difference fails, and so does more than `max_ties` such partings (the comparison still bites)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from scratchformer.data.tokenizers import EOS_ID
from scratchformer.decoding.common import special_ids


def parting(a: Sequence[int], b: Sequence[int], eos: int = EOS_ID) -> tuple[int, int, int]:
    """(step, token of a, token of b) where a and b first differ; an ended list gives EOS there."""
    j = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return j, (a[j] if j < len(a) else eos), (b[j] if j < len(b) else eos)


def assert_equal_up_to_ties(model, srcs: Sequence[Sequence[int]], ours: Sequence[Sequence[int]],
                            theirs: Sequence[Sequence[int]], tol: float = 1e-4, max_ties: int = 1) -> None:
    """`ours` == `theirs` sentence by sentence, but for at most `max_ties` partings at near-ties (see above).
    srcs: the source id lists as our model reads them (EOS included, no padding)."""
    assert len(ours) == len(theirs)
    bos, eos, _ = special_ids(model, None, None, None)  # as greedy_decode starts and ends
    ties = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if list(a) == list(b):
            continue
        j, ta, tb = parting(a, b, eos)
        with torch.no_grad():
            logp = model(torch.tensor([list(srcs[i])]), torch.tensor([[bos, *a[:j]]]))[0, -1]  # (V,)
        gap = (logp[ta] - logp[tb]).abs().item()
        assert gap < tol, (f"sentence {i}: the engines part at step {j} ({ta} vs {tb}) where our log-probs differ "
                           f"by {gap:.2e}: not a near-tie (tol {tol:g}); ours {list(a)}, theirs {list(b)}")
        ties.append(i)
    assert len(ties) <= max_ties, f"{len(ties)} sentences part at near-ties ({ties}): more than {max_ties}"


@pytest.fixture
def equal_up_to_ties():
    """assert_equal_up_to_ties, for the engine tests (a fixture: test modules import no helper module)."""
    return assert_equal_up_to_ties
