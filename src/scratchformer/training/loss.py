"""Label-smoothed cross-entropy (section 5.4, epsilon_ls = 0.1), one formula, checked against a closed form.

For a target token y over a vocabulary of V with padding id `pad`, the smoothed target distribution is

    q(k) = 1 - eps              if k == y
    q(k) = eps / (V - 2)        if k != y and k != pad      (no probability mass on padding)
    q(pad) = 0

and the loss per token is  -sum_k q(k) log p(k)  (cross-entropy with q; equals KL(q || p) + H(q)).
Positions whose target is padding contribute nothing; the loss is averaged over the real tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LossOutput:
    loss: Tensor  # mean label-smoothed loss over real tokens
    loss_sum: Tensor  # its sum over real tokens (the trainer divides by the tokens of a whole update)
    nll_sum: Tensor  # sum of -log p(y) over real tokens (for perplexity / validation loss)
    n_tokens: int


def label_smoothed_loss(logits: Tensor, target: Tensor, eps: float = 0.1, pad_id: int = 0) -> LossOutput:
    """logits (B, L, V) or (N, V), target (B, L) or (N,) -> LossOutput."""
    vocab = logits.size(-1)
    logits, target = logits.reshape(-1, vocab), target.reshape(-1)  # (N, V), (N,)
    real = target != pad_id
    logits, target = logits[real], target[real]  # only real positions: no work spent on padding
    n = target.numel()
    log_p = torch.log_softmax(logits.float(), dim=-1)  # (n, V), fp32 even under autocast
    nll = -log_p.gather(-1, target[:, None]).squeeze(-1)  # (n,)  -log p(y)
    if eps > 0:
        # sum over k != y, k != pad of -log p(k)  =  -sum_all - (-log p(y)) - (-log p(pad))
        rest = -log_p.sum(-1) - nll + log_p[:, pad_id]  # (n,)
        per_token = (1 - eps) * nll + eps / (vocab - 2) * rest
    else:
        per_token = nll
    loss_sum = per_token.sum()
    return LossOutput(loss_sum / max(n, 1), loss_sum, nll.detach().sum(), n)
