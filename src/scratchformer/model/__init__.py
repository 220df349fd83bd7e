"""The architecture, one box of Figure 1 per file (read bottom-up: embedding -> attention -> norm ->
feedforward -> encoder / decoder -> transformer, heads -> build)."""

from scratchformer.model.build import build_model
from scratchformer.model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly, Generator, TransformerBase

__all__ = ["DecoderOnly", "EncoderDecoder", "EncoderOnly", "Generator", "TransformerBase", "build_model"]
