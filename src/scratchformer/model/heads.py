"""Task heads on top of the encoder stack (BERT): masked-token prediction and sentence classification.

    MLMHead             (B, L, D) -> (B, L, V)  dense D->D, activation, LayerNorm, then the token embedding
                                                 transposed (tied) + a bias: BERT's "cls.predictions"
    ClassificationHead  (B, L, D) -> (B, K)     the first token's vector (<s>, BERT's [CLS]) -> dense + tanh
                                                 (BERT's pooler) -> dropout -> linear to K classes
    EncoderForMLM             EncoderOnly + MLMHead
    EncoderForClassification  EncoderOnly + ClassificationHead

The wrappers hold an unchanged `EncoderOnly` as `.base`, so its weights move between them (pre-train with
MLM, fine-tune a classifier) under the names `base.*`. Which head a model has is written in
`config.extra["head"]` ("mlm" | "classification", with "n_classes" and "labels"), so `build_model(config)`
and `load_run` rebuild the whole model from a run directory.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.config import ModelConfig
from scratchformer.errors import ConfigError
from scratchformer.model.feedforward import ACTIVATIONS
from scratchformer.model.norm import LayerNorm
from scratchformer.model.transformer import EncoderOnly, TransformerBase


class MLMHead(nn.Module):
    """hidden (B, L, D) -> logits (B, L, V); the output matrix is the token embedding (V, D) itself."""

    def __init__(self, embedding: nn.Parameter, activation: str = "gelu", eps: float = 1e-12) -> None:
        super().__init__()
        vocab_size, d_model = embedding.shape
        self.dense = nn.Linear(d_model, d_model)
        self.activation = ACTIVATIONS[activation]()
        self.norm = LayerNorm(d_model, eps)
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
            raise ConfigError(f"a classifier needs at least 2 classes, got {n_classes}")
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
    if config.arch != "encoder":
        raise ConfigError(f"task heads sit on an encoder model, not {config.arch!r}: pick --preset bert-tiny")
    if head not in HEADS:
        raise ConfigError(f"unknown head {head!r}; heads: {', '.join(HEADS)}")
    return config.replace(extra={**config.extra, "head": head, **extra})


class EncoderForMLM(TransformerBase):
    """model(input_ids (B, L)) -> logits (B, L, V) over the vocabulary at every position.

    select (B, L) bool: only those positions are scored, logits (n, V) in row-major order; pre-training
    needs only the ~15% masked positions, so the (B, L, V) product is never formed.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.base = EncoderOnly(config)
        self.mlm_head = MLMHead(self.base.embed.token.weight, config.activation, config.layer_norm_eps)
        self.set_fused(config.fused)  # the head's LayerNorm follows the config too

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, select: Tensor | None = None) -> Tensor:
        hidden = self.base(input_ids, attention_mask, token_type_ids)  # (B, L, D)
        if select is not None:
            hidden = hidden[select]  # (n, D)
        return self.mlm_head(hidden)  # (B, L, V) or (n, V)


class EncoderForClassification(TransformerBase):
    """model(input_ids (B, L)) -> logits (B, K); K and the label names come from config.extra."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        n_classes = config.extra.get("n_classes")
        if not isinstance(n_classes, int):
            raise ConfigError("config.extra has no integer 'n_classes': build the config with "
                              "with_head(config, 'classification', n_classes=K)")
        self.config = config
        self.base = EncoderOnly(config)
        self.head = ClassificationHead(config.d_model, n_classes, config.dropout)
        self.set_fused(config.fused)  # the head's LayerNorm follows the config too

    @property
    def labels(self) -> list[str]:
        return list(self.config.extra.get("labels") or range(self.config.extra["n_classes"]))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        return self.head(self.base(input_ids, attention_mask, token_type_ids))  # (B, K)


HEADS: dict[str, type[TransformerBase]] = {"mlm": EncoderForMLM, "classification": EncoderForClassification}


def build_with_head(config: ModelConfig) -> TransformerBase:
    """The model named by config.extra["head"], freshly initialised."""
    head = config.extra.get("head")
    if head not in HEADS:
        raise ConfigError(f"config.extra['head']={head!r} is not one of {', '.join(HEADS)}")
    if config.arch != "encoder":
        raise ConfigError(f"head {head!r} needs arch 'encoder', the config says {config.arch!r}")
    return HEADS[head](config)
