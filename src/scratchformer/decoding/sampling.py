"""Sampling from a decoder-only (GPT-like) model: temperature, top-k, top-p (nucleus), or greedy.

    sample(model, [[ids...], [ids...]], Sampling(max_new_tokens=20)) -> list[list[int]]   the new tokens of each prompt

Prompts of different lengths are left-padded into one batch; the attention mask hides the padding and
positions count from each prompt's first real token, so a batched prompt gives what it gives alone.
Rows that emit `eos` leave the batch (and the KV cache); the EOS itself is not returned nor streamed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from scratchformer.config.decoding import DEFAULT_MAX_NEW
from scratchformer.decoding.common import NEG_INF, check_id_lists, eval_mode, model_device, pad_ids
from scratchformer.errors import N_, ConfigError, ScratchformerWarning
from scratchformer.model.transformer import DecoderOnly


def check_sampling_args(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p={top_p} must be in (0, 1]; use 1.0 (or None) to turn nucleus sampling off")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k={top_k} must be >= 1; use None to turn top-k filtering off")
    if temperature != temperature or temperature == float("inf"):  # NaN, or a division of every logit to 0
        raise ValueError(f"temperature={temperature} must be a finite number; use 0 for greedy decoding")


@dataclass(frozen=True)
class Sampling:
    """What sample() is asked to do (spec.py's Search is its twin for the encoder-decoder):

    max_new_tokens  most tokens added to each prompt (EOS not returned)
    temperature     divides the logits; <= 0 is greedy (argmax: top_k / top_p then do nothing)
    top_k           keep only the k most likely tokens (None: off)
    top_p           nucleus: keep the fewest tokens holding this much probability, in (0, 1] (None: off)
    seed            a private generator seeded with it (reproducible); None: torch's global RNG
    eos             the id that ends a row (None: rows run to max_new_tokens)
    use_cache       False re-runs the model on the whole sequence each step (the reference loop)
    truncate        "left": a prompt too long for the model's positions is cut on the left (a warning); "error"
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    eos: int | None = None
    use_cache: bool = True
    truncate: str = "left"

    def __post_init__(self) -> None:
        check_sampling_args(self.temperature, self.top_k, self.top_p)
        if self.truncate not in ("left", "error"):
            raise ValueError(f"truncate={self.truncate!r} must be 'left' or 'error'")
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens={self.max_new_tokens} must be >= 0")


def pick_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
              generator: torch.Generator | None = None) -> Tensor:
    """logits (N, V) -> next token (N,). temperature <= 0 means greedy (argmax); top_k / top_p filter first."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature  # (N, V)
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1) the k-th largest
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V)
        probs = sorted_logits.softmax(dim=-1)
        # drop a token when the tokens before it already hold top_p of the mass (the first one always stays)
        drop = probs.cumsum(dim=-1) - probs >= top_p
        logits = logits.scatter(1, order, sorted_logits.masked_fill(drop, NEG_INF))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)  # (N,)


@torch.inference_mode()
def sample(model: DecoderOnly, input_ids: Sequence[Sequence[int]], spec: Sampling,
           on_token: Callable[[int, int], None] | None = None) -> list[list[int]]:
    """Continue each prompt by up to spec.max_new_tokens tokens; return the new tokens only (EOS excluded).

    spec (Sampling above): max_new_tokens, temperature (<= 0: greedy), top_k, top_p, seed, eos, use_cache, truncate.
    on_token(row, token) is called for each new token as it is chosen (streaming).
    A prompt that leaves no room for max_new_tokens within model.config.max_positions is cut on the left, with a
    warning (truncate="left"), or refused (truncate="error").
    """
    max_new_tokens = spec.max_new_tokens
    if isinstance(input_ids, Sequence) and not isinstance(input_ids, str) and any(
            isinstance(p, Sequence) and len(p) == 0 for p in input_ids):
        raise ValueError("every prompt needs at least one token (start it with BOS)")
    check_id_lists(input_ids, "prompts")
    if max_new_tokens == 0 or not input_ids:
        return [[] for _ in input_ids]
    fit_prompts(input_ids, model.config.max_positions, max_new_tokens, spec.truncate)
    prompts = _cut_left(input_ids, max_new_tokens, model.config.max_positions)
    device = model_device(model)
    generator = torch.Generator(device=device).manual_seed(spec.seed) if spec.seed is not None else None
    with eval_mode(model):
        steps = LMSteps(model, prompts, max_new_tokens, spec.use_cache)
        return _sample_loop(steps, len(prompts), spec, on_token,
                            lambda logits: pick_next(logits, spec.temperature, spec.top_k, spec.top_p, generator))


def fit_prompts(prompts: Sequence[Sequence[int]], max_len: int, max_new: int | None = None, truncate: str = "left",
                flags: dict[str, str] | None = None) -> int:
    """The number of tokens to add to `prompts` (max_new; None: DEFAULT_MAX_NEW, fewer to leave the prompts room)
    once it fits max_len, else a one-line ConfigError; so is a too long prompt when truncate="error"."""
    flags = {"max_new": "max_new_tokens={}", "truncate": "truncate='left'", **(flags or {})}  # a CLI's spelling
    if max_new is None:  # by default leave the prompts room (3/4 of max_len at least)
        max_new = min(DEFAULT_MAX_NEW, max(max_len - max(map(len, prompts)), max_len // 4, 1))
    room = prompt_room(max_len, max_new)
    asked = flags["max_new"].format(max_new)
    if room < 1:
        raise ConfigError(N_("{asked} does not fit in the model's max_len={max_len}"), asked=asked, max_len=max_len)
    too_long = sum(len(p) > room for p in prompts)
    if too_long and truncate == "error":
        raise ConfigError(N_("{too_long} prompt(s) longer than {room} tokens: with {asked} they exceed the model's "
                             "max_len={max_len}; shorten them or pass {truncate}"), too_long=too_long, room=room,
                          asked=asked, max_len=max_len, truncate=flags["truncate"])
    return max_new


def prompt_room(max_len: int, max_new: int) -> int:
    """Prompt tokens that fit before max_new new ones: P + max_new tokens use P + max_new - 1 positions (the last
    new token is never fed back)."""
    return max_len - max_new + 1


def _cut_left(prompts: Sequence[Sequence[int]], max_new: int, max_len: int) -> list[list[int]]:
    """The prompts with their start cut to fit max_len (with a warning saying how many were cut)."""
    room = prompt_room(max_len, max_new)
    long = sum(len(p) > room for p in prompts)
    if long:
        warnings.warn(ScratchformerWarning(N_("cut {long} prompt(s) on the left to {room} tokens to fit "
                                              "max_len={max_len}"), long=long, room=room, max_len=max_len),
                      stacklevel=3)
    return [list(p[-room:]) for p in prompts]


def _sample_loop(steps: LMSteps, b: int, spec: Sampling, on_token: Callable[[int, int], None] | None,
                 pick: Callable[[Tensor], Tensor]) -> list[list[int]]:
    max_new, eos = spec.max_new_tokens, spec.eos
    device = steps.device
    out = torch.zeros((b, max_new), dtype=torch.long, device=device)  # (B, T) new tokens by original row
    lengths = torch.full((b,), max_new, dtype=torch.long, device=device)  # (B,)
    rows = torch.arange(b, device=device)  # (A,) original row of each active row
    logits = steps.first()  # (B, V)
    for t in range(max_new):
        tok = pick(logits)  # (A,)
        out[rows, t] = tok
        ended = tok == eos if eos is not None else None
        if on_token is not None:
            for r, k in zip(rows.tolist(), tok.tolist()):
                if k != eos:
                    on_token(r, k)
        if t + 1 == max_new:
            break
        index = None
        if ended is not None and bool(ended.any()):  # one device sync per step, only when eos is given
            lengths[rows[ended]] = t
            keep = (~ended).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            rows, tok, index = rows[keep], tok[keep], keep
        logits = steps(tok, index)
    return [row[:n] for row, n in zip(out.tolist(), lengths.tolist())]


class LMSteps:
    """A DecoderOnly as a step function over left-padded prompts: first() -> logits (B, V), then
    step(new tokens (A,), index (A,) | None) -> logits (A, V); index keeps rows (finished rows drop out)."""

    def __init__(self, model: DecoderOnly, prompts: Sequence[Sequence[int]], max_new: int, use_cache: bool) -> None:
        self.model, self.device = model, model_device(model)
        self.ids = pad_ids(prompts, model.config.pad_id, self.device, left=True)  # (B, P)
        b, p = self.ids.shape
        lens = torch.tensor([len(q) for q in prompts], device=self.device)  # (B,)
        # (B, P + max_new) 1 = real token; the left padding is 0, generated positions are 1
        self.mask = torch.arange(p + max_new, device=self.device)[None, :] >= (p - lens)[:, None]
        self.padded = any(len(q) < p for q in prompts)
        self.positions = lens.clone()  # (B,) position of the next token: real tokens before it
        self.length = p  # columns fed so far
        self.cache = model.new_cache() if use_cache else None

    def first(self) -> Tensor:
        mask = self.mask[:, : self.length] if self.padded else None
        return self.model(self.ids, attention_mask=mask, cache=self.cache)[:, -1]  # (B, V)

    def __call__(self, tok: Tensor, index: Tensor | None = None) -> Tensor:
        if index is not None:
            self.mask, self.positions = self.mask[index], self.positions[index]
            if self.cache is not None:
                self.cache.reorder(index)
            else:
                self.ids = self.ids[index]
        self.length += 1
        if self.cache is None:
            self.ids = torch.cat([self.ids, tok[:, None]], dim=1)  # (A, L)
            mask = self.mask[:, : self.length] if self.padded else None
            return self.model(self.ids, attention_mask=mask)[:, -1]  # (A, V)
        # Lean path of DecoderOnly.hidden for one new token: positions tracked here, no causal mask (the new
        # token may see the whole cache), only the padding mask; cached == uncached tests guard it.
        m = self.model
        x = m.embed(tok[:, None], self.positions[:, None])  # (A, 1, D)
        mask = self.mask[:, None, None, : self.length] if self.padded else None  # (A, 1, 1, L)
        hidden = m.decoder(x, None, mask, None, self.cache)  # (A, 1, D)
        self.positions += 1
        return m.generator.logits(hidden[:, -1])  # (A, V)
