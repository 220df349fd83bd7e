"""Label smoothing against its closed form; the Noam schedule against the paper's formula."""

import math

import pytest
import torch

from scratchformer.training.loss import label_smoothed_loss
from scratchformer.training.schedule import noam_lr, noam_scheduler, paper_optimizer


def _explicit(logits, target, eps, pad):
    """Build q for every real position as a full distribution and take -sum q log p."""
    v = logits.size(-1)
    total, n = 0.0, 0
    for row, y in zip(logits.reshape(-1, v), target.reshape(-1)):
        if y == pad:
            continue
        q = torch.full((v,), eps / (v - 2))
        q[y] = 1 - eps
        q[pad] = 0.0
        assert abs(float(q.sum()) - 1) < 1e-6
        total += float(-(q * torch.log_softmax(row, -1)).sum())
        n += 1
    return total / n


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_closed_form(eps):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0
    target[2, 1:] = 0
    out = label_smoothed_loss(logits, target, eps, pad_id=0)
    assert out.n_tokens == int((target != 0).sum())
    assert float(out.loss) == pytest.approx(_explicit(logits, target, eps, 0), abs=1e-5)
    real = target != 0
    nll = torch.nn.functional.cross_entropy(logits[real], target[real], reduction="sum")
    assert float(out.nll_sum) == pytest.approx(float(nll), rel=1e-5)


def test_padding_positions_do_not_matter():
    torch.manual_seed(0)
    logits, target = torch.randn(2, 4, 9), torch.tensor([[3, 4, 0, 0], [5, 0, 0, 0]])
    a = label_smoothed_loss(logits, target, 0.1)
    logits[0, 2:] = 100 * torch.randn(2, 9)  # garbage where the target is padding
    logits[1, 1:] = -50
    b = label_smoothed_loss(logits, target, 0.1)
    assert float(a.loss) == pytest.approx(float(b.loss))


def test_no_gradient_flows_to_the_pad_logit_mass():
    logits = torch.zeros(1, 1, 6, requires_grad=True)
    label_smoothed_loss(logits, torch.tensor([[2]]), 0.1, pad_id=0).loss.backward()
    # softmax gradient: p - q; q(pad) = 0 so the pad logit is pushed down by exactly p(pad)
    assert float(logits.grad[0, 0, 0]) == pytest.approx(1 / 6, abs=1e-6)


def test_noam_formula_and_peak():
    d, w = 512, 4000
    assert noam_lr(1, d, w) == pytest.approx(d**-0.5 * 1 * w**-1.5)
    assert noam_lr(w, d, w) == pytest.approx(d**-0.5 * w**-0.5)
    assert noam_lr(4 * w, d, w) == pytest.approx(noam_lr(w, d, w) / 2)
    peak = max(range(1, 3 * w), key=lambda s: noam_lr(s, d, w))
    assert peak == w


def test_scheduler_counts_optimizer_updates():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = paper_optimizer([p])
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    sched = noam_scheduler(opt, 64, warmup=10, factor=2.0)
    seen = []
    for _ in range(15):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([noam_lr(s, 64, 10, 2.0) for s in range(1, 16)])
    assert math.isclose(max(seen), noam_lr(10, 64, 10, 2.0))
