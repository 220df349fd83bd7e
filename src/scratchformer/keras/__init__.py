"""scratchformer.keras: the model's boxes as Keras 3 layers, one file per box as in model/, for seed 001's readers.

    import scratchformer.keras as sk                  # registers the layers; never imports torch
    model = sk.from_run("models/en-zh")               # config.json + model.safetensors -> a keras.Model
    logits = model((src_ids, tgt_ids))                # (B, L_tgt, V), masks derived from pad_id
    sk.greedy_decode(model, [[5, 9, 2]])              # token ids, as ours
    python -m scratchformer.keras.toy                 # seed 001's training flow on the six toy pairs

Files (read bottom-up, as model/): masks, embedding, attention, feedforward, norm, encoder, decoder, transformer,
build (configs and weights), decode (greedy and beam search), toy (training). docs/keras.md maps seed 001's code
boxes to them. Written with keras.ops, tested on the TensorFlow backend (seed 001's).
"""

from scratchformer.keras.attention import MultiHeadAttention, scaled_dot_product_attention
from scratchformer.keras.build import build_keras_model, check_supported, from_run, load_state, read_state
from scratchformer.keras.decode import beam_search, greedy_decode
from scratchformer.keras.decoder import Decoder, DecoderLayer
from scratchformer.keras.embedding import (
    InputLayer,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)
from scratchformer.keras.encoder import Encoder, EncoderLayer
from scratchformer.keras.feedforward import PositionwiseFeedForward
from scratchformer.keras.masks import causal_mask, combine, padding_mask
from scratchformer.keras.norm import LayerNorm, RMSNorm, SublayerConnection
from scratchformer.keras.transformer import EncoderDecoder, Generator

__all__ = [
    "Decoder", "DecoderLayer", "Encoder", "EncoderDecoder", "EncoderLayer", "Generator", "InputLayer", "LayerNorm",
    "LearnedPositionalEmbedding", "MultiHeadAttention", "PositionwiseFeedForward", "RMSNorm",
    "SinusoidalPositionalEncoding", "SublayerConnection", "TokenEmbedding", "beam_search", "build_keras_model",
    "causal_mask", "check_supported", "combine", "from_run", "greedy_decode", "load_state", "padding_mask",
    "read_state", "scaled_dot_product_attention",
]
