"""`evaluate --split-sentences` / `--repair-copies`: as `translate`'s, on every engine."""

import pytest

from scratchformer.decoding.copies import repair_copies
from scratchformer.decoding.sentences import join_translations
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
from scratchformer.evaluation.translation import evaluate_pairs
from scratchformer.runs import load_run


def test_evaluate_pairs_scores_the_sentence_by_sentence_translation(tiny_run):
    run = load_run(tiny_run)
    pairs = [("I love you. Good night.", "我爱你。晚安。"), ("Hello.", "你好。")]
    result = evaluate_pairs(run, pairs, beam=2, split_sentences=True)
    parts = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(
        ["I love you.", "Good night.", "Hello."], beam=2)
    hyps = [join_translations(parts[:2]), parts[2]]
    assert result["split_sentences"] is True
    assert result["bleu"] == round(bleu(hyps, [t for _, t in pairs])["score"], 2)
    assert evaluate_pairs(run, pairs, beam=2)["split_sentences"] is False


def test_an_exported_engine_splits_and_repairs_too(tiny_run):
    pytest.importorskip("ctranslate2")

    run = load_run(tiny_run)
    pairs = [("I love you. Good night.", "我爱你。晚安。"), ("Hello.", "你好。")]
    result = evaluate_pairs(run, pairs, beam=2, engine="ctranslate2", split_sentences=True, repair_copies=True)
    pieces = ["I love you.", "Good night.", "Hello."]
    outputs = Translator(run, run.decoding.pick(engine="ctranslate2")).translate(pieces, beam=2)
    parts = [repair_copies(s, o) for s, o in zip(pieces, outputs, strict=True)]
    hyps = [join_translations(parts[:2]), parts[2]]
    assert result["split_sentences"] is True and result["repair_copies"] is True
    assert result["bleu"] == round(bleu(hyps, [t for _, t in pairs])["score"], 2)
