"""Task heads for the encoder stack (BERT): masked-token prediction and sentence classification.

    MLMHead             (B, L, D) -> (B, L, V)  dense D->D, activation, norm, then the token embedding
                                                 transposed (tied) + a bias: BERT's "cls.predictions"
    ClassificationHead  (B, L, D) -> (B, K)     the first token's vector (<s>, BERT's [CLS]) -> dense + tanh
                                                 (BERT's pooler) -> dropout -> linear to K classes
    with_head           an encoder ModelConfig -> the same with its head recorded

Which head a model has is a typed field of its config (`head`: "mlm" | "classification", with `n_classes` and
`labels`), so `build_model(config)` and `load_run` rebuild the whole model from a run directory. The models that
put a head on an `EncoderOnly` (EncoderForMLM, EncoderForClassification) are assembled in model/build.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.config.model import HEAD_FIELDS, ModelConfig
from scratchformer.errors import N_, ConfigError
from scratchformer.model.feedforward import make_activation


class MLMHead(nn.Module):
    """hidden (B, L, D) -> logits (B, L, V); the output matrix is the token embedding (V, D) itself."""

    def __init__(self, *, embedding: nn.Parameter, norm: nn.Module, activation: str = "gelu") -> None:
        super().__init__()
        vocab_size, d_model = embedding.shape
        self.dense = nn.Linear(d_model, d_model)
        self.activation = make_activation(activation)
        self.norm = norm  # BERT: a LayerNorm (make_norm)
        self.decoder = nn.Linear(d_model, vocab_size)  # its bias is BERT's output bias
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)
        nn.init.zeros_(self.decoder.bias)
        self.decoder.weight = embedding  # tied, as in BERT

    def forward(self, hidden: Tensor) -> Tensor:
        x = self.norm(self.activation(self.dense(hidden)))  # (..., D)
        return self.decoder(x)  # (..., V)


class ClassificationHead(nn.Module):
    """hidden (B, L, D) -> logits (B, K), from the first position only (the <s> token, BERT's [CLS])."""

    def __init__(self, d_model: int, n_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        if n_classes < 2:
            raise ConfigError(N_("a classifier needs at least 2 classes, got {n_classes}"), n_classes=n_classes)
        self.pooler = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_classes)
        for m in (self.pooler, self.classifier):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        pooled = torch.tanh(self.pooler(hidden[:, 0]))  # (B, D): BERT's pooler output
        return self.classifier(self.dropout(pooled))  # (B, K)


def with_head(config: ModelConfig, head: str, **extra: Any) -> ModelConfig:
    """A copy of an encoder config that records its head: with_head(c, "classification", n_classes=3, labels=[..])."""
    # n_classes, labels and mask_id are fields; any other keyword is kept as a note in `extra`, as it always was
    fields = {k: v for k, v in extra.items() if k in HEAD_FIELDS}
    notes = {k: v for k, v in extra.items() if k not in HEAD_FIELDS}
    return config.replace(head=head, **fields, extra={**config.extra, **notes})
