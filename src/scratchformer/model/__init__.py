"""The architecture, one box of Figure 1 per file (read bottom-up: embedding -> attention -> norm ->
feedforward -> encoder / decoder -> transformer)."""

from scratchformer.model.transformer import (
    DecoderOnly,
    EncoderDecoder,
    EncoderOnly,
    Generator,
    TransformerBase,
    build_model,
)

__all__ = ["DecoderOnly", "EncoderDecoder", "EncoderOnly", "Generator", "TransformerBase", "build_model"]
