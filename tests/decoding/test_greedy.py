"""Greedy decoding: KV cache == full re-run, batch == alone, length rules, scores, PAD never emitted."""

import pytest
import torch

from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search


def test_cached_equals_uncached_tokens_and_step_logits(seq2seq, random_sources):
    src = random_sources(0)
    cached = greedy_decode(seq2seq, src, Search(max_output_len=12), return_scores=True, return_logits=True)
    full = greedy_decode(seq2seq, src, Search(max_output_len=12, use_cache=False), return_scores=True,
                         return_logits=True)
    assert cached.tokens == full.tokens
    assert cached.logits.shape == full.logits.shape == (len(src), 12, 30)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-5, rtol=0)
    assert cached.scores == pytest.approx(full.scores, abs=1e-4)


def test_the_test_models_give_non_trivial_outputs(make_seq2seq, random_sources):
    # guards the tests above: varied tokens and sentences of different lengths, so drop-outs are exercised
    outs = [greedy_decode(make_seq2seq(seed), random_sources(0), Search(max_output_len=12)) for seed in (0, 2)]
    lengths = {len(t) for out in outs for t in out}
    assert len(lengths) >= 3 and 12 in lengths
    assert max(len(set(t)) for out in outs for t in out) >= 4


def test_sentence_alone_equals_sentence_in_padded_batch(seq2seq, random_sources):
    src = random_sources(1)
    batch = greedy_decode(seq2seq, src, Search(max_output_len=12))
    alone = [greedy_decode(seq2seq, [s], Search(max_output_len=12))[0] for s in src]
    assert batch == alone


def test_tensor_and_list_inputs_agree(make_seq2seq, random_sources):
    model, src = make_seq2seq(0), random_sources(2)
    padded = torch.zeros(len(src), max(map(len, src)), dtype=torch.long)
    for i, s in enumerate(src):
        padded[i, : len(s)] = torch.tensor(s)
    spec = Search(max_output_len=10)
    assert greedy_decode(model, padded, spec) == greedy_decode(model, src, spec)


def test_default_max_len_is_source_plus_50_capped_by_model_max_len(make_seq2seq, random_sources):
    model = make_seq2seq(0)
    with torch.no_grad():
        model.generator.proj.bias[2] = -1e4  # never EOS
    src = random_sources(0, lengths=(2, 6))
    assert [len(t) for t in greedy_decode(model, src)] == [3 + 50, 7 + 50]  # src_len counts its EOS
    short = make_seq2seq(0, max_len=20)
    with torch.no_grad():
        short.generator.proj.bias[2] = -1e4
    assert [len(t) for t in greedy_decode(short, src)] == [20, 20]


def test_force_len_and_min_len(make_seq2seq, random_sources):
    model = make_seq2seq(0)  # its sentences 2-4 emit EOS at once (see the test above)
    src = random_sources(0)
    forced = greedy_decode(model, src, Search(force_len=7))
    assert all(len(t) == 7 and 2 not in t for t in forced)
    at_least = greedy_decode(model, src, Search(max_output_len=12, min_len=3))
    assert all(len(t) >= 3 for t in at_least)
    assert any(len(t) < 3 for t in greedy_decode(model, src, Search(max_output_len=12)))
    with pytest.raises(ValueError, match="force_len"):
        greedy_decode(model, src, Search(force_len=10_000))


def test_pad_is_never_emitted(make_seq2seq, random_sources):
    model = make_seq2seq(2)
    with torch.no_grad():
        model.generator.proj.bias[0] = 1e4  # PAD would win every argmax
    out = greedy_decode(model, random_sources(0), Search(max_output_len=8))
    assert all(0 not in t for t in out) and all(len(t) for t in out)


def test_scores_are_teacher_forced_log_probs(make_seq2seq, random_sources):
    model, src = make_seq2seq(2), random_sources(3)
    out = greedy_decode(model, src, Search(max_output_len=12), return_scores=True)
    for s, tokens, score in zip(src, out.tokens, out.scores):
        ended = len(tokens) < 12
        tgt = torch.tensor([[1, *tokens, *([2] if ended else [])]])
        logprobs = model(torch.tensor([s]), tgt[:, :-1]).log_softmax(-1)  # (1, L, V)
        expected = logprobs.gather(-1, tgt[:, 1:, None]).sum().item()
        assert score == pytest.approx(expected, abs=1e-4)


def test_train_mode_is_restored(make_seq2seq, random_sources):
    model = make_seq2seq(0).train()
    greedy_decode(model, random_sources(0), Search(max_output_len=3))
    assert model.training


def test_empty_batch(make_seq2seq):
    model = make_seq2seq(0)
    assert greedy_decode(model, []) == []
    assert beam_search(model, [], Search(beam=4)) == []


def test_special_ids_default_to_the_models_own(tiny_seq2seq):
    """An imported Marian-style model starts from its decoder_start_id and ends at its eos_token_id."""
    from scratchformer.decoding.common import special_ids

    model = tiny_seq2seq(0, 40, decoder_start_id=0, extra={"eos_token_id": 5})
    assert special_ids(model, None, None, None) == (0, 5, 0)
    assert special_ids(model, 1, 2, 3) == (1, 2, 3)
    ours = tiny_seq2seq(0, 40, extra={"eos_token_id": None, "decoder_start_token_id": None})  # null ids in a file
    assert special_ids(ours, None, None, None) == (1, 2, 0)
    src = [[7, 8, 9, 5]]
    out = greedy_decode(model, src, Search(max_output_len=8), return_logits=True)
    explicit = greedy_decode(model, src, Search(max_output_len=8, bos=0, eos=5, pad=0), return_logits=True)
    assert out.tokens == explicit.tokens and torch.equal(out.logits, explicit.logits)
    assert 5 not in out.tokens[0]  # generation stops at the model's EOS, which is never returned
    assert [h[0].tokens for h in beam_search(model, src, Search(beam=4, max_output_len=8))] == \
        [h[0].tokens for h in beam_search(model, src, Search(beam=4, max_output_len=8, eos=5, bos=0, pad=0))]
