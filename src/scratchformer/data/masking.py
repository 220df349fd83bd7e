"""Masked-language-model batches (BERT, Devlin et al. 2019, section 3.1 and appendix A.1).

    mask_id = add_mask_token(tokenizer)           # "<mask>" appended as the LAST id (= the old vocab_size)
    batch = collate_mlm(seqs, mask_id, vocab_size)  # input_ids (B, L) with masks, labels (B, L), n_tokens

Of the real tokens of each batch (never <pad>, <s>, </s>, <unk> nor <mask> itself) 15% are selected,
each independently (Bernoulli, as Hugging Face's DataCollatorForLanguageModeling; at least one per batch).
A selected token is replaced by <mask> with probability 0.8, by a random non-special token with 0.1,
and left unchanged with 0.1. `labels` holds the original id at the selected positions and PAD_ID elsewhere,
so the loss (which skips PAD_ID targets) is computed on the selected positions only.

The <mask> token is added to a trained tokenizer without changing any existing id, so the tokenizer file
stays readable by older code and every id it produced before keeps its meaning. Typed text never becomes
<mask>: the char and word kinds split "<mask>" into pieces, the subword kinds treat it as plain text.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from scratchformer.data.tokenizers import PAD_ID, SPECIALS, UNK_ID, SubwordTokenizer, Tokenizer, VocabTokenizer

MASK = "<mask>"
MLM_PROB = 0.15  # share of real tokens selected for prediction
MASK_PROB, RANDOM_PROB = 0.8, 0.1  # of the selected: -> <mask>, -> a random token (the rest stay unchanged)
N_SPECIALS = len(SPECIALS)


def add_mask_token(tok: Tokenizer) -> int:
    """Append <mask> to `tok`'s vocabulary (in place) unless it is there; return its id."""
    found = tok.token_to_id(MASK)
    if found != UNK_ID:
        return found
    new_id = tok.vocab_size
    if isinstance(tok, VocabTokenizer):
        tok.tokens.append(MASK)
        tok.ids[MASK] = new_id
    elif isinstance(tok, SubwordTokenizer):
        from tokenizers import AddedToken

        tok.hf.add_special_tokens([AddedToken(MASK, special=True, normalized=False)])
    else:
        raise TypeError(f"cannot add {MASK} to a {type(tok).__name__}")
    if tok.token_to_id(MASK) != new_id or tok.vocab_size != new_id + 1:
        raise RuntimeError(f"{MASK} did not become id {new_id} (the last one)")
    return new_id


def mask_tokens(ids: Tensor, mask_id: int, vocab_size: int, generator: torch.Generator | None = None,
                prob: float = MLM_PROB) -> tuple[Tensor, Tensor]:
    """ids (B, L) -> (input_ids (B, L), labels (B, L)); see the module docstring for the 80/10/10 rule."""
    if vocab_size - N_SPECIALS - 1 < 1:
        raise ValueError(f"vocab_size={vocab_size} leaves no ordinary token to draw at random")
    maskable = (ids >= N_SPECIALS) & (ids != mask_id)  # (B, L) real tokens only
    selected = (torch.rand(ids.shape, generator=generator) < prob) & maskable
    if not bool(selected.any()) and bool(maskable.any()):  # a tiny batch: still predict one token
        candidates = maskable.flatten().nonzero().squeeze(1)
        pick = candidates[torch.randint(len(candidates), (1,), generator=generator)]
        selected.view(-1)[pick] = True
    roll = torch.rand(ids.shape, generator=generator)  # (B, L) which of the three fates
    to_mask = selected & (roll < MASK_PROB)
    to_random = selected & (roll >= MASK_PROB) & (roll < MASK_PROB + RANDOM_PROB)
    # uniform over the ordinary tokens [N_SPECIALS, vocab_size) without mask_id
    random_ids = torch.randint(N_SPECIALS, vocab_size - 1, ids.shape, generator=generator)
    random_ids = random_ids + (random_ids >= mask_id).long()
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, random_ids, inputs)
    labels = torch.where(selected, ids, torch.full_like(ids, PAD_ID))
    return inputs, labels


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> Tensor:
    """(B, L) long tensor, right-padded to the longest sequence."""
    return torch.nn.utils.rnn.pad_sequence([torch.as_tensor(s, dtype=torch.long) for s in seqs],
                                           batch_first=True, padding_value=pad_id)


def collate_mlm(seqs: Sequence[Sequence[int]], mask_id: int, vocab_size: int,
                generator: torch.Generator | None = None) -> dict[str, Tensor]:
    """Padded MLM batch: input_ids (B, L) (masked), labels (B, L) (PAD_ID = not scored), n_tokens (scalar)."""
    if not seqs:
        raise ValueError("cannot collate an empty batch")
    inputs, labels = mask_tokens(pad_right(seqs), mask_id, vocab_size, generator)
    return {"input_ids": inputs, "labels": labels, "n_tokens": (labels != PAD_ID).sum()}
