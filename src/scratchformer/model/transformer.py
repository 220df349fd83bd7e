"""The assembled models (Figure 1, whole) and the output layer.

    Generator       (B, L, D) -> (B, L, V): Linear, then log-softmax (the "Linear + Softmax" box)
    EncoderDecoder  the paper: model(src, tgt) -> logits (B, L_tgt, V); encode() / decode() as in the seeds
    EncoderOnly     BERT-like: bidirectional self-attention with a padding mask -> hidden (B, L, D)
    DecoderOnly     GPT-like: causal self-attention, no cross-attention -> logits (B, L, V)

Which one a ModelConfig names, and the task heads on EncoderOnly, are picked in model/build.py.

"BERT keeps only the encoder, GPT only the decoder; the difference is the mask and the loss."
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer import autotune
from scratchformer.config import ModelConfig
from scratchformer.errors import N_, InputError
from scratchformer.model.attention import MultiHeadAttention, ScaledDotProductAttention
from scratchformer.model.decoder import Decoder, DecoderCache, DecoderLayer
from scratchformer.model.embedding import InputLayer
from scratchformer.model.encoder import Encoder, EncoderLayer
from scratchformer.model.feedforward import PositionwiseFeedForward
from scratchformer.model.masks import causal_mask, check_mask, combine, padding_mask
from scratchformer.model.norm import NORMS, SublayerConnection, make_norm
from scratchformer.model.rope import RotaryEmbedding


class Generator(nn.Module):
    """The output layer: a linear map to the vocabulary; `forward` adds the log-softmax, `logits` does not."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)

    def logits(self, x: Tensor) -> Tensor:
        return self.proj(x)  # (B, L, D) -> (B, L, V)

    def forward(self, x: Tensor) -> Tensor:
        return torch.log_softmax(self.proj(x), dim=-1)  # (B, L, V), log-probabilities


def check_shape(ids: Tensor, name: str) -> None:
    """One-line errors for ids that are not a non-empty (batch, length) integer tensor; no device sync."""
    if not isinstance(ids, Tensor):
        raise InputError(N_("{name} must be a (batch, length) integer tensor of token ids, got {name2}"), name=name,
                         name2=type(ids).__name__)
    if ids.dim() != 2 or ids.dtype not in (torch.long, torch.int, torch.int16, torch.uint8):
        raise InputError(N_("{name} must be a (batch, length) integer tensor of token ids, got dtype {dtype} and "
                            "shape {shape}"), name=name, dtype=ids.dtype, shape=tuple(ids.shape))
    if ids.size(0) == 0 or ids.size(1) == 0:  # kernels fail on empty rows in ways that name no input
        raise InputError(N_("{name} must hold at least one sequence of at least one token, got shape {shape}"),
                         name=name, shape=tuple(ids.shape))


def check_ids(ids: Tensor, vocab_size: int, max_len: int, name: str, offset: int = 0) -> None:
    """One-line errors for the usual mistakes; skipped inside torch.compile."""
    if torch.compiler.is_compiling():
        return
    check_shape(ids, name)
    if offset + ids.size(1) > max_len:
        raise InputError(N_("{name} reaches position {value}, longer than max_positions={max_len}: truncate the input "
                            "or build the model with a larger max_positions"), name=name, value=offset + ids.size(1),
                         max_len=max_len)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.max()) if int(ids.max()) >= vocab_size else int(ids.min())
        raise InputError(N_("{name} contains token id {bad}, outside the vocabulary [0, {vocab_size}): the "
                            "tokenizer and the model's vocab size disagree"), name=name, bad=bad, vocab_size=vocab_size)


class TransformerBase(nn.Module):
    """What every architecture shares: its config, the fused/reference switch, attention capture."""

    config: ModelConfig

    def set_fused(self, fused: bool) -> TransformerBase:
        """True: torch's fused kernels (fast). False: the hand-written formulas (the reference)."""
        for m in self.modules():
            if isinstance(m, (ScaledDotProductAttention, *NORMS.values())):
                m.fused = fused
        return self

    def keep_attention_weights(self, keep: bool = True) -> TransformerBase:
        """Keep each attention's last weights (B, h, L_q, L_k) in `.last_weights`, for heatmaps."""
        for m in self.modules():
            if isinstance(m, ScaledDotProductAttention):
                m.keep_weights, m.last_weights = keep, None
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights are counted once

    def inference_layout(self, measured: bool = False) -> TransformerBase:
        """Store every Linear weight (out, in) column-major: the same values and shapes (state dicts, tying and
        interop are unchanged), but `x @ W^T` then reaches MKL as a plain GEMM on an (in, out) matrix, which
        ran 1.3-1.7x faster for the 4-128 rows of a decoding step on a Xeon (bench_fast_paths.py of e832339).
        measured=True (load_run): only if autotune.py measures it faster on this CPU for these shapes
        (float32 CPU weights; else, and with SCRATCHFORMER_AUTOTUNE=0, the weights stay row-major).
        For decoding: training still works on this layout but gains nothing. Returns self."""
        weights = [m.weight for m in self.modules() if isinstance(m, nn.Linear) and m.weight.dim() == 2
                   and m.weight.is_contiguous() and m.weight.size(1) > 1]
        weights = list({id(w): w for w in weights}.values())  # a tied weight once
        if measured:
            cpu_fp32 = all(w.device.type == "cpu" and w.dtype == torch.float32 for w in weights)
            if not (weights and cpu_fp32 and autotune.linear_layout(weights) == "column-major"):
                return self
        with torch.no_grad():
            for w in weights:
                w.data = w.data.t().contiguous().t()  # (out, in) view of an (in, out) contiguous buffer
        return self

    def _init_weights(self) -> None:
        # Xavier-uniform for every linear map (as torch.nn.Transformer and the Annotated Transformer);
        # embeddings keep their N(0, 1/D) init from TokenEmbedding.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)


def _attention(c: ModelConfig, cross: bool = False, rope: RotaryEmbedding | None = None) -> MultiHeadAttention:
    return MultiHeadAttention(d_model=c.d_model, n_heads=c.n_heads, d_k=c.head_dim_k, d_v=c.head_dim_v,
                              n_kv_heads=c.kv_heads, dropout=c.attention_dropout, bias=c.bias, cross=cross,
                              fused=c.fused, rope=rope)


def _rope(c: ModelConfig) -> RotaryEmbedding | None:
    """A rotary embedding for one self-attention (no parameters: d/2 frequencies); None unless positions="rope"."""
    if c.positions != "rope":
        return None
    return RotaryEmbedding(head_dim=c.head_dim_k, theta=c.rope_theta, scaling=c.rope_scaling)


def _ffn(c: ModelConfig) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(d_model=c.d_model, d_ff=c.d_ff, activation=c.activation,
                                   dropout=c.activation_dropout, bias=c.bias, gated=c.ffn_kind == "gated")


def _final_norm(c: ModelConfig) -> nn.Module | None:
    return make_norm(c) if c.use_final_norm else None


def _sublayers(c: ModelConfig, n: int) -> list[SublayerConnection]:
    return [SublayerConnection(norm=make_norm(c), dropout=c.dropout, placement=c.norm_placement) for _ in range(n)]


def _input_layer(c: ModelConfig, vocab_size: int) -> InputLayer:
    return InputLayer(vocab_size=vocab_size, d_model=c.d_model, max_len=c.max_positions, positions=c.positions,
                      dropout=c.dropout, pad_id=c.pad_id, scale=c.scale_embeddings, type_vocab_size=c.type_vocab_size,
                      norm=make_norm(c) if c.embedding_norm else None)


def _encoder(c: ModelConfig) -> Encoder:
    layers = [EncoderLayer(self_attn=_attention(c, rope=_rope(c)), feed_forward=_ffn(c), sublayers=_sublayers(c, 2))
              for _ in range(c.n_encoder_layers)]
    return Encoder(layers=layers, final_norm=_final_norm(c))


def _decoder(c: ModelConfig, cross: bool) -> Decoder:
    layers = [DecoderLayer(self_attn=_attention(c, rope=_rope(c)),
                           cross_attn=_attention(c, cross=True) if cross else None,
                           feed_forward=_ffn(c), sublayers=_sublayers(c, 3 if cross else 2))
              for _ in range(c.n_decoder_layers)]
    return Decoder(layers=layers, final_norm=_final_norm(c))


def _decoder_self_mask(ids: Tensor, pad_id: int | None, past: int, start_is_pad: bool = False) -> Tensor:
    """Causal (bottom-right aligned for a cache of `past` positions) and, without a cache, padding.

    start_is_pad: the decoder starts from pad_id (Marian, T5), so position 0 is the start symbol, not padding."""
    causal = causal_mask(ids.size(1), past + ids.size(1), ids.device)  # (1, 1, L, past + L)
    if past == 0 and pad_id is not None:
        pad = padding_mask(ids, pad_id)  # (B, 1, 1, L)
        if start_is_pad:
            pad[..., 0] = True
        return combine(causal, pad)  # (B, 1, L, L)
    return causal


class EncoderDecoder(TransformerBase):
    """The paper's Transformer: model(src (B, L_src), tgt (B, L_tgt)) -> logits (B, L_tgt, V_tgt)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = _input_layer(c, c.src_vocab_size)
        self.tgt_embed = _input_layer(c, c.tgt_vocab_size)
        self.encoder = _encoder(c)
        self.decoder = _decoder(c, cross=True)
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.generator_bias)
        self._init_weights()
        if c.tie_embeddings:  # section 3.4: one matrix for both embeddings and the pre-softmax linear map
            self.generator.proj.weight = self.tgt_embed.token.weight
            if c.src_vocab_size == c.tgt_vocab_size:
                self.src_embed.token.weight = self.tgt_embed.token.weight
        self.set_fused(c.fused)  # every attention and norm, the sublayers' included

    def src_mask(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """(B, 1, 1, L_src) padding mask, derived from pad_id unless given."""
        if src_mask is None:
            return padding_mask(src, self.config.pad_id)
        return check_mask(src_mask, src.size(0), 1, src.size(1), "src_mask")

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src (B, L_src) -> memory (B, L_src, D)."""
        check_ids(src, self.config.src_vocab_size, self.config.max_positions, "src")
        return self.encoder(self.src_embed(src), self.src_mask(src, src_mask))

    def decode(self, memory: Tensor, src_mask: Tensor | None, tgt: Tensor, tgt_mask: Tensor | None = None,
               cache: DecoderCache | None = None) -> Tensor:
        """tgt (B, L_tgt) attends to itself (causally) and to memory (B, L_src, D) -> hidden (B, L_tgt, D).

        With a cache, `tgt` holds only the new positions; earlier keys and values come from the cache.
        """
        past = cache.length if cache is not None else 0
        check_ids(tgt, self.config.tgt_vocab_size, self.config.max_positions, "tgt", past)
        if tgt_mask is None:
            start_is_pad = self.config.decoder_start_id == self.config.pad_id
            tgt_mask = _decoder_self_mask(tgt, self.config.pad_id, past, start_is_pad)
        else:
            tgt_mask = check_mask(tgt_mask, tgt.size(0), tgt.size(1), past + tgt.size(1), "tgt_mask")
        if src_mask is not None:
            src_mask = check_mask(src_mask, memory.size(0), 1, memory.size(1), "src_mask")
        x = self.tgt_embed(tgt, offset=past)  # (B, L_tgt, D)
        return self.decoder(x, memory, tgt_mask, src_mask, cache)

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.config.n_decoder_layers, cross=True)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None) -> Tensor:
        if not torch.compiler.is_compiling():
            check_shape(src, "src")  # before a padding mask is derived from it
        src_mask = self.src_mask(src, src_mask)  # (B, 1, 1, L_src)
        memory = self.encode(src, src_mask)  # (B, L_src, D)
        hidden = self.decode(memory, src_mask, tgt, tgt_mask)  # (B, L_tgt, D)
        return self.generator.logits(hidden)  # (B, L_tgt, V)


class EncoderOnly(TransformerBase):
    """BERT-like: model(input_ids (B, L), attention_mask=None) -> hidden states (B, L, D).

    attention_mask: (B, L) with 1 = real token (Hugging Face style) or a boolean mask of our convention;
    None derives it from pad_id.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        self.embed = _input_layer(c, c.tgt_vocab_size)
        self.encoder = _encoder(c)
        self._init_weights()
        self.set_fused(c.fused)  # every attention and norm, the sublayers' included

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, position_ids: Tensor | None = None) -> Tensor:
        check_ids(input_ids, self.config.tgt_vocab_size, self.config.max_positions, "input_ids")
        if attention_mask is None:
            mask = padding_mask(input_ids, self.config.pad_id)  # (B, 1, 1, L)
        else:
            mask = check_mask(attention_mask, input_ids.size(0), 1, input_ids.size(1), "attention_mask")
        x = self.embed(input_ids, position_ids, token_type_ids)  # (B, L, D)
        return self.encoder(x, mask, position_ids)  # (B, L, D); position_ids reach attention only for rope


class DecoderOnly(TransformerBase):
    """GPT-like: model(input_ids (B, L)) -> logits (B, L, V), each position seeing only the past.

    attention_mask (B, L_past + L), 1 = real token, is needed only with left padding (batched prompts of
    different lengths); positions are then counted from each row's first real token.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        self.embed = _input_layer(c, c.tgt_vocab_size)
        self.decoder = _decoder(c, cross=False)
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.generator_bias)
        self._init_weights()
        if c.tie_embeddings:
            self.generator.proj.weight = self.embed.token.weight
        self.set_fused(c.fused)  # every attention and norm, the sublayers' included

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.config.n_decoder_layers, cross=False)

    def hidden(self, input_ids: Tensor, attention_mask: Tensor | None = None,
               position_ids: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        past = cache.length if cache is not None else 0
        check_ids(input_ids, self.config.tgt_vocab_size, self.config.max_positions, "input_ids", past)
        length = input_ids.size(1)
        mask = causal_mask(length, past + length, input_ids.device)  # (1, 1, L, past + L)
        if attention_mask is not None:
            if attention_mask.shape != (input_ids.size(0), past + length):
                raise InputError(N_("attention_mask has shape {shape}, expected (B={size}, L_past + L={value})"),
                                 shape=tuple(attention_mask.shape), size=input_ids.size(0), value=past + length)
            mask = mask & attention_mask.bool()[:, None, None, :]  # (B, 1, L, past + L)
            if position_ids is None:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]  # (B, L)
        x = self.embed(input_ids, position_ids, offset=past)  # (B, L, D)
        return self.decoder(x, None, mask, None, cache, position_ids)  # (B, L, D); rope turns q, k by position_ids

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                position_ids: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        return self.generator.logits(self.hidden(input_ids, attention_mask, position_ids, cache))
