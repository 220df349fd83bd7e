"""Seed 001's training flow in Keras (tf.data, Noam, Adam(0.9, 0.98, 1e-9), masked loss, GradientTape) overfits
the six toy pairs: every greedy translation exact, as our `--recipe toy` does."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import require_keras

require_keras()


def test_the_toy_pairs_are_overfit_exactly():
    from scratchformer.keras.toy import train_toy

    result = train_toy(steps=100)
    assert result["exact"] == result["pairs"] == 6, result["translations"]
    assert result["loss"] < 0.05


def test_the_noam_schedule_warms_up_then_decays():
    from scratchformer.keras.toy import NoamSchedule

    lr = NoamSchedule(64, warmup=40, factor=0.5)
    rates = [float(lr(step)) for step in (0, 19, 39, 79, 159)]  # the optimizer counts updates from 0
    assert rates[0] < rates[1] < rates[2] and rates[2] > rates[3] > rates[4]
    assert rates[2] == pytest.approx(0.5 * 64**-0.5 * 40**-0.5, rel=1e-6)  # the peak, at update 40


def test_the_masked_loss_ignores_padding_and_matches_ours_with_smoothing():
    import torch

    from scratchformer.keras.toy import masked_loss
    from scratchformer.training.loss import label_smoothed_loss

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 9)).astype(np.float32)
    target = np.array([[5, 6, 2, 0], [7, 2, 0, 0]])
    for eps in (0.0, 0.1):
        ours = label_smoothed_loss(torch.tensor(logits), torch.tensor(target), eps).loss.item()
        assert float(masked_loss(target, logits, eps)) == pytest.approx(ours, rel=1e-5)
    changed = logits.copy()
    changed[target == 0] += 100.0  # logits at padded positions do not count
    assert float(masked_loss(target, changed)) == pytest.approx(float(masked_loss(target, logits)), rel=1e-6)
