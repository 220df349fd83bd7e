"""BLEU taken apart: the precisions are the clipped n-gram counts a hand count gives, BP x geometric mean is
sacreBLEU's own score, and seed 001's "simple BLEU" is the seed's code, blind to order and to short output."""

import math

import pytest

from scratchformer.evaluation.metrics import bleu, bleu_explained, format_bleu_explained, seed_simple_bleu

ZH = ["猫坐在垫子上。", "今天下雨了。", "我非常喜欢绿茶。"]
HYP = ["猫坐在垫子下。", "今天下雨", "我非常喜欢红茶。"]


def seed_001(reference, candidate):
    """Seed 001's function, verbatim (section 5.3)."""
    ref_tokens = list(reference)
    cand_tokens = list(candidate)
    matches = sum(min(ref_tokens.count(t), cand_tokens.count(t)) for t in set(cand_tokens))
    precision = matches / len(cand_tokens) if cand_tokens else 0
    brevity_penalty = min(1.0, len(ref_tokens) / len(cand_tokens)) if cand_tokens else 0
    return precision * brevity_penalty


def ngrams(chars, n):
    return [tuple(chars[i : i + n]) for i in range(len(chars) - n + 1)]


def test_precisions_are_the_clipped_counts_of_a_hand_count():
    e = bleu_explained(HYP, ZH)
    for g in e["ngrams"]:  # tok:zh splits every Chinese character: n-grams of characters
        n = g["n"]
        matches = sum(sum(min(ngrams(h, n).count(x), ngrams(r, n).count(x)) for x in set(ngrams(h, n)))
                      for h, r in zip(HYP, ZH))
        total = sum(len(ngrams(h, n)) for h in HYP)
        assert (g["matches"], g["total"]) == (matches, total)
        assert g["precision"] == pytest.approx(100 * matches / total)
    assert (e["hyp_len"], e["ref_len"]) == (sum(map(len, HYP)), sum(map(len, ZH)))  # 19, 21: short
    assert e["brevity_penalty"] == pytest.approx(math.exp(1 - 21 / 19))


def test_bp_times_geometric_mean_is_sacrebleus_score():
    for hyps, refs in ((HYP, ZH), (ZH, ZH), (["The cat sat on a mat today ."], ["The cat sat on the mat ."])):
        e = bleu_explained(hyps, refs)
        assert e["recombined"] == pytest.approx(e["score"], abs=1e-9)
        plain = bleu(hyps, refs)
        assert e["score"] == pytest.approx(plain["score"]) and e["signature"] == plain["signature"]
    assert bleu_explained(["The cat sat on a mat today ."], ["The cat sat on the mat ."])["brevity_penalty"] == 1.0


def test_simple_bleu_is_seed_001s_code():
    for r, h in [*zip(ZH, HYP), ("今天下雨了。", ""), ("ab", "abab"), ("ab", "a")]:
        assert seed_simple_bleu(r, h) == pytest.approx(seed_001(r, h))
    assert bleu_explained(HYP, ZH)["simple_bleu"] == pytest.approx(100 * sum(map(seed_001, ZH, HYP)) / 3)


def test_simple_bleu_ignores_order_and_rewards_short_output_where_bleu_does_not():
    e = bleu_explained(HYP, ZH)
    assert e["shuffled_simple_bleu"] == pytest.approx(e["simple_bleu"])  # the same bag of characters
    assert e["shuffled_bleu"] < e["score"] / 2
    short = bleu_explained(["猫"], ["猫坐在垫子上。"])
    assert seed_simple_bleu("猫坐在垫子上。", "猫") == 1.0 and short["score"] < 1  # one right character


def test_the_explanation_prints_the_measured_figures():
    e = bleu_explained(HYP, ZH)
    text = format_bleu_explained(e)
    assert f"{e['score']:.2f}" in text and "tok:zh" in text and f"{e['simple_bleu']:.2f}" in text
    assert "p4 =       5 / 10" in text and "exp(1 - 21/19)" in text
