"""`evaluate --split-sentences`: each source translated sentence by sentence, as `translate --split-sentences`."""

import pytest

from scratchformer.decoding.sentences import join_translations
from scratchformer.decoding.translate import translate_texts
from scratchformer.errors import ConfigError
from scratchformer.evaluation.metrics import bleu
from scratchformer.evaluation.translation import evaluate_pairs
from scratchformer.runs import load_run


def test_evaluate_pairs_scores_the_sentence_by_sentence_translation(tiny_run):
    run = load_run(tiny_run)
    pairs = [("I love you. Good night.", "我爱你。晚安。"), ("Hello.", "你好。")]
    result = evaluate_pairs(run, pairs, beam=2, split_sentences=True)
    parts = translate_texts(run.model, run.src_tok, run.tgt_tok, ["I love you.", "Good night.", "Hello."], beam=2)
    hyps = [join_translations(parts[:2]), parts[2]]
    assert result["split_sentences"] is True
    assert result["bleu"] == round(bleu(hyps, [t for _, t in pairs])["score"], 2)
    assert "split_sentences" not in evaluate_pairs(run, pairs, beam=2)


def test_split_sentences_with_an_exported_engine_is_one_line(tiny_run):
    with pytest.raises(ConfigError, match="--split-sentences: only --engine torch"):
        evaluate_pairs(load_run(tiny_run), [("Hello.", "你好。")], engine="ctranslate2", split_sentences=True)
