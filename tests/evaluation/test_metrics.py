"""sacreBLEU BLEU / chrF with signatures, exact match, perplexity against closed forms."""

import math

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.data.batching import collate_lm, collate_pairs
from scratchformer.evaluation.metrics import bleu, chrf, exact_match, perplexity

EN = ["The cat sat on the mat.", "It is raining today.", "I like green tea very much."]
ZH = ["猫坐在垫子上。", "今天下雨了。", "我非常喜欢绿茶。"]


def test_bleu_of_identical_text_is_100_with_a_signature():
    for refs in (EN, ZH):
        result = bleu(refs, refs)
        assert result["score"] == pytest.approx(100.0)
        assert result["signature"].startswith("nrefs:1|")


def test_bleu_picks_the_zh_tokenizer_for_chinese_references():
    assert "tok:zh" in bleu(ZH, ZH)["signature"]
    assert "tok:13a" in bleu(EN, EN)["signature"]
    assert "tok:char" in bleu(ZH, ZH, tokenize="char")["signature"]
    # with 13a an unsegmented Chinese sentence is one "word": one wrong character zeroes the match;
    # zh splits characters and gives partial credit
    hyp = ["猫坐在垫子下。", "今天下雨了。", "我非常喜欢红茶。"]
    assert bleu(hyp, ZH, tokenize="13a")["score"] < bleu(hyp, ZH)["score"] < 100
    assert bleu(hyp, ZH)["score"] > 30


def test_bleu_is_corpus_level_and_drops_with_errors():
    partial = ["The cat sat on a mat.", "It rains today.", "I like green tea very much."]
    score = bleu(partial, EN)["score"]
    assert 0 < score < 100
    assert bleu(["completely unrelated words here"] * 3, EN)["score"] < 5


def test_bleu_confidence_is_sacrebleus_bootstrap_and_narrows_with_more_sentences():
    hyp = ["猫坐在垫子下。", "今天下雨了。", "我非常喜欢红茶。"]
    few, many = bleu(hyp, ZH, n_bootstrap=200), bleu(hyp * 20, ZH * 20, n_bootstrap=200)
    assert few["score"] == pytest.approx(bleu(hyp, ZH)["score"])  # the point estimate is unchanged
    assert many["score"] == pytest.approx(few["score"])  # the same corpus statistics, 20 times over
    assert 0 < many["ci95"] < few["ci95"]  # 60 sentences pin BLEU down better than 3
    assert "bs:200|seed:" in few["signature"]
    assert bleu(hyp, ZH, n_bootstrap=200) == few  # a fixed seed: the same outputs give the same interval
    assert bleu(ZH, ZH, n_bootstrap=50)["ci95"] == pytest.approx(0.0)  # every resample is perfect
    assert "ci95" not in bleu(hyp, ZH)
    with pytest.raises(ValueError, match="n_bootstrap=0"):
        bleu(hyp, ZH, n_bootstrap=0)


def test_chrf_sanity():
    assert chrf(EN, EN)["score"] == pytest.approx(100.0)
    assert "nc:6" in chrf(EN, EN)["signature"]  # character n-grams up to 6
    near = chrf(["The cat sat on the hat.", "It is raining today!", "I like tea."], EN)["score"]
    far = chrf(["xyz", "qqq", "zzz"], EN)["score"]
    assert 0 <= far < near < 100


def test_exact_match():
    assert exact_match(["a b", " c ", "d"], ["a b", "c", "e"]) == pytest.approx(2 / 3)
    assert exact_match([], []) == 0.0
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        exact_match(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="lists of strings"):
        bleu("a b c", "a b c")


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    model = build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=50, dropout=0.0))
    with torch.no_grad():
        model.generator.proj.weight.zero_()  # tied with the embedding: this also zeroes the input embedding
    batch = collate_lm([[1, 5, 6, 7, 2], [1, 9, 2]])
    assert perplexity(model, [batch]) == pytest.approx(50.0, rel=1e-5)


def test_perplexity_is_exp_mean_nll_over_non_pad_tokens():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=50, dropout=0.0)).eval()
    seqs = [[1, 5, 6, 7, 8, 2], [1, 9, 2], [1, 30, 31, 2]]
    nll, n = 0.0, 0
    for s in seqs:  # each sequence alone, no padding at all
        logprobs = model(torch.tensor([s[:-1]])).log_softmax(-1)[0]  # (L, V)
        nll -= logprobs.gather(-1, torch.tensor(s[1:])[:, None]).sum().item()
        n += len(s) - 1
    expected = math.exp(nll / n)
    batches = [collate_lm(seqs[:2]), collate_lm(seqs[2:])]
    assert perplexity(model, batches) == pytest.approx(expected, rel=1e-5)
    padded = collate_lm(seqs)  # raw padded id tensors work too
    raw = torch.cat([padded["input_ids"], padded["labels"][:, -1:]], dim=1)
    assert perplexity(model, [raw]) == pytest.approx(expected, rel=1e-5)


def test_perplexity_of_an_encoder_decoder():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=30, tgt_vocab_size=30)).train()
    batch = collate_pairs([([5, 6, 2], [1, 7, 8, 2]), ([9, 2], [1, 4, 2])])
    logits = model.eval()(batch["src"], batch["tgt_in"])
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=0)
    model.train()
    assert perplexity(model, [batch]) == pytest.approx(math.exp(nll.item()), rel=1e-5)
    assert model.training  # mode restored


def test_spurious_quotes_count_only_sentences_whose_reference_has_none():
    from scratchformer.evaluation.metrics import spurious_quote_rate

    hyps = ["点击「确定」。", "点击确定。", "打开「文件」。", "选择「格式」。"]
    refs = ["点击确定。", "点击确定。", "打开文件。", "选择「格式」。"]  # the last reference quotes: not counted
    assert spurious_quote_rate(hyps, refs) == pytest.approx(2 / 3)
    assert spurious_quote_rate(["「a」"], ["「a」"]) == 0.0


def test_unseen_ngram_rate_is_the_share_of_output_ngrams_no_training_target_has():
    from scratchformer.evaluation.metrics import char_ngrams, unseen_ngram_rate

    assert char_ngrams("ab cd", 2) == {"ab", "bc", "cd"}  # whitespace removed first
    train = ["打开文件", "保存文档"]
    assert unseen_ngram_rate(["打开文件"], train, n=2) == 0.0  # all copied from training
    assert unseen_ngram_rate(["关闭窗口"], train, n=2) == 1.0
    assert unseen_ngram_rate(["打开窗口"], train, n=2) == pytest.approx(2 / 3)  # 打开 seen; 开窗, 窗口 not
    assert unseen_ngram_rate([""], train) == 0.0
