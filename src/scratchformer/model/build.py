"""build_model: a ModelConfig -> the model it names, freshly initialised; the one place that picks the class.

    ARCHITECTURES  arch -> EncoderDecoder (the paper) | EncoderOnly (BERT-like) | DecoderOnly (GPT-like)
    HEADS          head -> EncoderForMLM | EncoderForClassification: an unchanged EncoderOnly as `.base`, plus the
                   task head of model/heads.py on top

The wrappers keep the encoder's weights under `base.*`, so they move between them (pre-train with MLM, fine-tune a
classifier). transformer.py and heads.py import neither each other nor this file: the arrows end here.
"""

from __future__ import annotations

from torch import Tensor

from scratchformer.config import ModelConfig, check_fits_in_memory
from scratchformer.errors import N_, ConfigError
from scratchformer.model.heads import ClassificationHead, MLMHead
from scratchformer.model.norm import make_norm
from scratchformer.model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly, TransformerBase


class EncoderForMLM(TransformerBase):
    """model(input_ids (B, L)) -> logits (B, L, V) over the vocabulary at every position.

    select (B, L) bool: only those positions are scored, logits (n, V) in row-major order; pre-training
    needs only the ~15% masked positions, so the (B, L, V) product is never formed.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.base = EncoderOnly(config)
        self.mlm_head = MLMHead(embedding=self.base.embed.token.weight, norm=make_norm(config),
                                activation=config.activation)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, select: Tensor | None = None) -> Tensor:
        hidden = self.base(input_ids, attention_mask, token_type_ids)  # (B, L, D)
        if select is not None:
            hidden = hidden[select]  # (n, D)
        return self.mlm_head(hidden)  # (B, L, V) or (n, V)


class EncoderForClassification(TransformerBase):
    """model(input_ids (B, L)) -> logits (B, K); K and the label names are config.n_classes and config.labels."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.n_classes is None:
            raise ConfigError(N_("the config has no n_classes: build it with with_head(config, 'classification', "
                                 "n_classes=K)"))
        self.config = config
        self.base = EncoderOnly(config)
        self.head = ClassificationHead(config.d_model, config.n_classes, config.dropout)


    @property
    def labels(self) -> list[str]:
        return list(self.config.labels or range(self.config.n_classes))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        return self.head(self.base(input_ids, attention_mask, token_type_ids))  # (B, K)


ARCHITECTURES: dict[str, type[TransformerBase]] = {
    "encoder-decoder": EncoderDecoder,
    "encoder": EncoderOnly,
    "decoder": DecoderOnly,
}
HEADS: dict[str, type[TransformerBase]] = {"mlm": EncoderForMLM, "classification": EncoderForClassification}


def build_model(config: ModelConfig) -> TransformerBase:
    """ModelConfig -> EncoderDecoder | EncoderOnly | DecoderOnly, or the encoder with the head `config.head` names."""
    config.validate()
    check_fits_in_memory(config)  # before allocating: d_ff=10**12 is one line, not a crash or a frozen machine
    if config.head is not None:
        return HEADS[config.head](config)
    return ARCHITECTURES[config.arch](config)
