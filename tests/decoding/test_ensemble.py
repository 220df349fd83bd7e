"""Ensemble decoding: the mean of the members' probabilities, step by step, through the searches."""

import pytest
import torch

from scratchformer.data.tokenizers import SPECIALS, CharTokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.common import pad_ids
from scratchformer.decoding.ensemble import EnsembleSteps, model_steps
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator

SRC_TOK = CharTokenizer([*SPECIALS, *"abcdefghij klmnopqrstuvw"])  # 28 ids < the tiny models' 30
TGT_TOK = CharTokenizer([*SPECIALS, *"一二三四五六七八九十百千万亿天地人日月山水火木金土石"])  # 30 ids


@torch.no_grad()
def mean_probs(models, src, tokens):
    """(B, V) the mean of the models' next-token probabilities, each decoding the whole prefix (the seeds' loop)."""
    return torch.stack([torch.softmax(m.generator.logits(m.decode(m.encode(src, m.src_mask(src)), m.src_mask(src),
                                                                   tokens)[:, -1]), -1) for m in models]).mean(0)


def test_steps_are_the_log_of_the_mean_probability(make_seq2seq, random_sources):
    a, b, c = make_seq2seq(0), make_seq2seq(1), make_seq2seq(2, norm="post")
    src = pad_ids(random_sources(3, lengths=(5, 3, 4)), 0, torch.device("cpu"))  # (B, L_src)
    tokens = torch.tensor([[1, 5, 7], [1, 9, 9], [1, 3, 4]])  # (B, t): BOS and two tokens
    with torch.no_grad(), model_steps([a, b, c], src, use_cache=False) as steps:
        assert isinstance(steps, EnsembleSteps)
        got = steps(tokens, None)  # (B, V)
    assert torch.allclose(got.exp().sum(-1), torch.ones(3), atol=1e-5)
    assert torch.allclose(got, mean_probs([a, b, c], src, tokens).log(), atol=1e-5)


def test_one_model_is_its_own_step_function(make_seq2seq, random_sources):
    src = pad_ids(random_sources(2), 0, torch.device("cpu"))
    with model_steps([make_seq2seq(0)], src) as steps:
        assert not isinstance(steps, EnsembleSteps)


def test_a_model_with_copies_of_itself_searches_as_alone(seq2seq, random_sources):
    src = random_sources(4)
    alone = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=2))
    twice = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=2), ensemble=[seq2seq, seq2seq])
    assert [[h.tokens for h in s] for s in twice] == [[h.tokens for h in s] for s in alone]
    assert [h.score for s in twice for h in s] == pytest.approx([h.score for s in alone for h in s], abs=1e-4)


def test_ensemble_greedy_follows_the_argmax_of_the_mean(make_seq2seq, random_sources):
    a, b = make_seq2seq(0), make_seq2seq(1)
    src = random_sources(5)
    found = beam_search(a, src, Search(beam=1, alpha=0.0, max_output_len=8), ensemble=[b])
    for s, hyps in zip(src, found):
        x = torch.tensor([s])
        tokens, logprob = [1], 0.0
        for _ in range(8):  # greedy on the mean distribution
            mean = mean_probs([a, b], x, torch.tensor([tokens]))  # (1, V)
            mean[0, 0] = 0  # PAD is never emitted
            tok = int(mean.argmax())
            logprob += float(mean[0, tok].log())
            if tok == 2:
                break
            tokens.append(tok)
        assert hyps[0].tokens == tokens[1:]
        assert hyps[0].logprob == pytest.approx(logprob, abs=1e-4)


def test_members_differ_from_either_model_alone_somewhere(make_seq2seq, random_sources):
    a, b = make_seq2seq(0), make_seq2seq(1)
    src = random_sources(6)
    scores = [[h[0].score for h in beam_search(m, src, Search(beam=2, max_output_len=8), ensemble=e)]
              for m, e in ((a, ()), (b, ()), (a, [b]))]
    assert scores[2] != pytest.approx(scores[0]) and scores[2] != pytest.approx(scores[1])


def test_translate_texts_takes_an_ensemble_at_any_beam(make_seq2seq):
    model = make_seq2seq(2)
    texts = ["abc def", "", "hello world", "lazy dog"]
    for beam in (1, 3):
        alone = Translator.from_model(model, SRC_TOK, TGT_TOK).translate(texts, beam=beam, max_output_len=8)
        twice = Translator.from_model(model, SRC_TOK, TGT_TOK, ensemble=[model]).translate(texts, beam=beam,
                                                                                          max_output_len=8)
        assert twice == alone and twice[1] == ""
        other = Translator.from_model(model, SRC_TOK, TGT_TOK, ensemble=[make_seq2seq(1)]).translate(texts, beam=beam,
                                                                                  max_output_len=8)
        assert len(other) == 4 and other[1] == ""


def test_a_member_with_other_vocabularies_is_one_line(make_seq2seq, tiny_seq2seq, random_sources):
    from scratchformer.errors import InputError

    other = tiny_seq2seq(0, 40)  # 40 tokens, not 30
    with pytest.raises(InputError, match="ensemble member 1 is not an encoder-decoder with the model's vocab"):
        beam_search(make_seq2seq(0), random_sources(2), Search(beam=2, max_output_len=5), ensemble=[other])


def test_the_memory_check_counts_every_members_cache(make_seq2seq, monkeypatch):
    from scratchformer.config import decoding
    from scratchformer.errors import ConfigError

    model = make_seq2seq(0)
    options = decoding.DecodingOptions(beam=4, batch_size=8, max_output_len=10)
    need = decoding.search_bytes(model.config, 8 * 4, 10)  # 8 sentences x beam 4, 10 steps
    monkeypatch.setattr(decoding, "available_memory", lambda: int(1.5 * need))
    options.check_for(model.config, ())
    with pytest.raises(ConfigError, match="would need about"):
        options.check_for(model.config, (), members=2)
