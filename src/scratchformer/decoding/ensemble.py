"""Several models decoding as one: at each step, the mean of their next-token probabilities (fairseq's
EnsembleModel, OpenNMT's `-model a.pt b.pt`).

    model_steps([model], src, ...)          -> Seq2SeqSteps: the one model's step function, as before
    model_steps([model, other, ...], src)   -> EnsembleSteps: log(mean_m softmax(logits_m)) as the step's logits

Every member keeps its own encoder memory and KV cache and follows the same rows (`index`), so beams and
finished sentences are reordered in all of them at once. The members must share the vocabularies (model_steps
checks their sizes; load_run builds a run's members from its own config.json). Averaging probabilities, not
logits, is what fairseq and OpenNMT do: a member sure of a token it alone likes is outvoted unless the others give
it some mass too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import ExitStack

import torch
from torch import Tensor

from scratchformer.decoding.common import Seq2SeqSteps, eval_mode
from scratchformer.errors import N_, InputError
from scratchformer.model.transformer import EncoderDecoder


class EnsembleSteps:
    """M Seq2SeqSteps as one step function: (tokens (N, t), index) -> log of the mean probability (N, V)."""

    def __init__(self, members: Sequence[Seq2SeqSteps]) -> None:
        self.members = list(members)
        self._log_m = math.log(len(self.members))

    def row_sentences(self) -> Tensor:
        return self.members[0].row_sentences()

    def __call__(self, tokens: Tensor, index: Tensor | None = None) -> Tensor:
        logprobs = torch.stack([torch.log_softmax(m(tokens, index).float(), dim=-1) for m in self.members])  # (M, N, V)
        return torch.logsumexp(logprobs, dim=0) - self._log_m  # (N, V): log of the mean probability


class model_steps(ExitStack):  # noqa: N801 - used like a function: `with model_steps(...) as steps`
    """`with model_steps(models, src, use_cache, beam, pack) as steps`: each model encodes `src` (B, L_src) and
    becomes a Seq2SeqSteps with `beam` rows per sentence; one model is its own step function, several an
    EnsembleSteps. Each is in eval mode inside; their packed weights are released on exit."""

    def __init__(self, models: Sequence[EncoderDecoder], src: Tensor, use_cache: bool = True, beam: int = 1,
                 pack: bool = False) -> None:
        super().__init__()
        first = models[0].config
        for i, m in enumerate(models[1:], 1):
            c = getattr(m, "config", None)
            if getattr(c, "arch", None) != "encoder-decoder" or (c.src_vocab_size, c.tgt_vocab_size) != (
                    first.src_vocab_size, first.tgt_vocab_size):
                raise InputError(N_("ensemble member {i} is not an encoder-decoder with the model's vocabularies "
                                    "({src} source, {tgt} target tokens): members are trainings of the same model"),
                                 i=i, src=first.src_vocab_size, tgt=first.tgt_vocab_size)
        self.models, self.src, self.options = list(models), src, dict(use_cache=use_cache, beam=beam, pack=pack)

    def __enter__(self) -> Seq2SeqSteps | EnsembleSteps:  # type: ignore[override]
        super().__enter__()
        members = []
        for model in self.models:
            self.enter_context(eval_mode(model))
            src_mask = model.src_mask(self.src)  # (B, 1, 1, L_src)
            memory = model.encode(self.src, src_mask)  # (B, L_src, D)
            members.append(self.enter_context(Seq2SeqSteps(model, memory, src_mask, **self.options)))
        return members[0] if len(members) == 1 else EnsembleSteps(members)
