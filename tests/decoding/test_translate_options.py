"""The Translator's options: n-best lists, prefixes, sentence splitting, alignments (tiny models)."""

import types
import warnings

import pytest
import torch

from scratchformer.data.tokenizers import SPECIALS, CharTokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.results import Hyp, Translation
from scratchformer.decoding.sentences import join_translations, split_sentences
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator
from scratchformer.errors import ConfigError, InputError
from scratchformer.inspect.attention import cross_attention

SRC_TOK = CharTokenizer([*SPECIALS, *"abcdefghij klmnopqrstuvw.A"])  # 30 ids: the model's vocabulary
TGT_TOK = CharTokenizer([*SPECIALS, *"一二三四五六七八九十百千万亿天地人日月山水火木金土石"])  # 30 ids
TEXTS = ["abc def", "", "hello world", "a", "quick brown fox", "   ", "jump over", "lazy dog now"]


def by(model) -> Translator:
    """The Translator of a model in memory with this file's tokenizers."""
    return Translator.from_model(model, SRC_TOK, TGT_TOK)


@pytest.fixture(scope="module")
def model(make_seq2seq):
    return make_seq2seq(2)


def src_ids(text: str) -> list[int]:
    return SRC_TOK.encode(text) + [2]


def test_n_best_scores_are_beam_searchs_own_and_non_increasing(model):
    out = by(model).translate(TEXTS, beam=4, n_best=3, max_output_len=10, batch_size=1)
    batched = by(model).translate(TEXTS, beam=4, n_best=3, max_output_len=10)
    assert [t.src for t in out] == TEXTS and all(isinstance(t, Translation) for t in out)
    for text, translation, in_batch in zip(TEXTS, out, batched):
        assert len(translation.hyps) == 3
        if not text.strip():
            assert translation.hyps == in_batch.hyps == [Hyp("", 0.0, [])] * 3
            continue
        (found,) = beam_search(model, [src_ids(text)], Search(beam=4, max_output_len=10, n_best=3))
        assert [h.score for h in translation.hyps] == [h.score for h in found]  # the very same floats
        assert [h.score for h in in_batch.hyps] == pytest.approx([h.score for h in found], abs=1e-4)  # padding
        assert [h.tokens for h in translation.hyps] == [h.tokens for h in found]
        assert [h.text for h in translation.hyps] == [TGT_TOK.decode(h.tokens) for h in found]
        scores = [h.score for h in translation.hyps]
        assert scores == sorted(scores, reverse=True)
    assert len({h.text for t in out for h in t.hyps}) > 3
    best = by(model).translate(TEXTS, beam=4, max_output_len=10)
    assert [t.hyps[0].text for t in out] == best  # hypothesis 1 is the plain output


def test_return_hyps_with_beam_1_is_greedy(model):
    out = by(model).translate(TEXTS, beam=1, max_output_len=10, return_hyps=True)
    plain = by(model).translate(TEXTS, beam=1, max_output_len=10)
    assert [t.hyps[0].text for t in out] == plain
    assert out[0].hyps[0].tokens == greedy_decode(model, [src_ids(TEXTS[0])], Search(max_output_len=10))[0]
    assert out[0].to_dict() == {"src": "abc def", "hyps": [{"text": plain[0], "score": out[0].hyps[0].score,
                                                             "tokens": out[0].hyps[0].tokens}]}


def test_a_prefix_starts_every_output(model):
    out = by(model).translate(TEXTS, beam=3, max_output_len=10, prefix="山水")
    assert all(o.startswith("山水") for t, o in zip(TEXTS, out) if t.strip())
    assert [o for t, o in zip(TEXTS, out) if not t.strip()] == ["", ""]  # empty in, empty out
    per_line = ["一", None, "二三", "", "天", None, "地", "人"]
    out = by(model).translate(TEXTS, max_output_len=10, prefix=per_line, return_hyps=True)
    for text, p, translation in zip(TEXTS, per_line, out):
        if text.strip():
            assert translation.hyps[0].text.startswith(p or "")
            assert translation.hyps[0].tokens[: len(p or "")] == TGT_TOK.encode(p or "")


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(beam=4, n_best=5), ConfigError, r"n_best=5: beam search keeps only 4 hypotheses \(beam=4\)"),
    (dict(beam=1, n_best=2), ConfigError, "n_best=2"),
    (dict(n_best=0), ConfigError, "n_best=0: must be >= 1"),
    (dict(no_repeat_ngram=-3), ConfigError, "no_repeat_ngram=-3"),
    (dict(repetition_penalty=-1.0), ConfigError, "repetition_penalty=-1.0: the penalty must be a positive"),
    (dict(prefix="一" * 11, max_output_len=10), ConfigError, "11 target tokens, more than the 10"),
    (dict(prefix="x"), InputError, "the target vocabulary lacks"),
    (dict(prefix=["一"]), InputError, "one per text"),
])
def test_bad_options_are_one_line_errors(model, kwargs, error, message):
    with pytest.raises(error, match=message) as e:
        by(model).translate(["abc", "def"], **kwargs)
    assert "\n" not in str(e.value)


def test_sentence_splitting_rule():
    assert split_sentences("It failed. Try again! Really? 3 left.") == ["It failed.", "Try again!", "Really?",
                                                                          "3 left."]
    assert split_sentences("Pi is 3.14 or so. See e.g. the table.") == ["Pi is 3.14 or so.", "See e.g. the table."]
    assert split_sentences("Ask Dr. Smith.") == ["Ask Dr.", "Smith."]  # the rule's known limit
    assert split_sentences("你好。我很好！「是吗？」真的。 再见。") == ["你好。", "我很好！", "「是吗？」真的。",
                                                                   "再见。"]
    assert split_sentences("  one sentence  ") == ["one sentence"]
    assert split_sentences("3.2.3. I'm using Ubuntu. How do I migrate?") == ["3.2.3. I'm using Ubuntu.",
                                                                            "How do I migrate?"]
    assert split_sentences("Figure 16.223. The Rotate Colors Dialog") == ["Figure 16.223. The Rotate Colors Dialog"]
    assert split_sentences("It costs 5. Then pay.") == ["It costs 5.", "Then pay."]  # a number ending a sentence
    # the rule before labels were joined, which the software corpus's sentence pairs were cut with
    assert split_sentences("3.2.3. How do I migrate?", join_labels=False) == ["3.2.3.", "How do I migrate?"]
    assert join_translations(["它失败了。", "再试。"]) == "它失败了。再试。"
    assert join_translations(["It failed.", "", "Try again."]) == "It failed. Try again."


def test_split_sentences_translates_every_sentence_of_a_short_paragraph_on_its_own(make_seq2seq):
    model = make_seq2seq(2)
    paragraph, parts = "Abe egg. A cab.", ["Abe egg.", "A cab."]
    split = by(model).translate([paragraph, "abc", ""], max_output_len=5, split_sentences=True)
    alone = by(model).translate(parts + ["abc"], max_output_len=5)
    assert split == [join_translations(alone[:2]), alone[2], ""]


def test_split_sentences_translates_a_long_paragraph_whole(make_seq2seq):
    short = make_seq2seq(2, max_len=20)
    paragraph = "Abc def ghij. Abe egg. A cab. Ace bed."  # 38 chars + EOS > 20
    parts = ["Abc def ghij.", "Abe egg.", "A cab.", "Ace bed."]
    assert split_sentences(paragraph) == parts
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "cut" warning
        whole = by(short).translate([paragraph, "abc"], max_output_len=5, split_sentences=True)
    one_by_one = by(short).translate(parts, max_output_len=5)
    assert whole == [join_translations(one_by_one), by(short).translate(["abc"], max_output_len=5)[0]]
    with pytest.warns(UserWarning, match="cut 1 source"):
        assert by(short).translate([paragraph], max_output_len=5) != whole[:1]
    # structured: the k-th hypotheses of the parts joined, scores summed, tokens and alignments concatenated
    (joined,) = by(short).translate([paragraph], beam=2, n_best=2, max_output_len=5,
                                split_sentences=True, align=True, prefix="天")
    alone = by(short).translate(parts, beam=2, n_best=2, max_output_len=5, align=True,
                            prefix=["天", None, None, None])
    for k, h in enumerate(joined.hyps):
        assert h.text == join_translations([t.hyps[k].text for t in alone]) and h.text.startswith("天")
        assert h.score == pytest.approx(sum(t.hyps[k].score for t in alone), rel=1e-12)
        assert h.tokens == [tok for t in alone for tok in t.hyps[k].tokens]
        src_off = [0, *torch.tensor([len(SRC_TOK.encode(p)) for p in parts]).cumsum(0).tolist()]
        tgt_off = [0, *torch.tensor([len(t.hyps[k].tokens) for t in alone]).cumsum(0).tolist()]
        assert h.alignment == [(i + src_off[n], j + tgt_off[n]) for n, t in enumerate(alone)
                               for i, j in t.hyps[k].alignment]


def test_alignment_is_the_argmax_of_the_last_layers_head_mean(model):
    texts = ["hello world", "quick brown fox", "a"]
    out = by(model).translate(texts, beam=3, n_best=2, max_output_len=10, align=True)
    run = types.SimpleNamespace(model=model, src_tok=SRC_TOK, tgt_tok=TGT_TOK)
    for text, translation in zip(texts, out):
        for h in translation.hyps:
            assert [j for _, j in h.alignment] == list(range(len(h.tokens)))  # every target token, in order
            weights, _, _ = cross_attention(run, text, h.text)  # (h, L_tgt + 1, L_src), teacher-forced
            expected = weights.mean(0)[: len(h.tokens), :-1].argmax(-1).tolist()  # source EOS never chosen
            assert [i for i, _ in h.alignment] == expected
            assert all(0 <= i < len(SRC_TOK.encode(text)) for i, _ in h.alignment)
    lines = out[0].text_lines(scores=True)
    assert lines[0] == f"{out[0].hyps[0].text}\t{out[0].hyps[0].score:.6f}\t" + \
        " ".join(f"{i}-{j}" for i, j in out[0].hyps[0].alignment)
    assert out[0].to_dict()["hyps"][0]["alignment"] == lines[0].split("\t")[2]


def test_repetition_options_reach_the_search(model):
    plain = by(model).translate(TEXTS, beam=2, max_output_len=10)
    banned = by(model).translate(TEXTS, beam=2, max_output_len=10, no_repeat_ngram=1)
    assert all(len(set(o)) == len(o) for o in banned)
    assert any(len(set(o)) < len(o) for o in plain)
    ids = [src_ids(t) for t in TEXTS if t.strip()]
    spec = Search(beam=2, max_output_len=10, repetition_penalty=2.0)
    expected = [TGT_TOK.decode(h[0].tokens) for h in beam_search(model, ids, spec)]
    got = by(model).translate(TEXTS, beam=2, max_output_len=10, repetition_penalty=2.0)
    assert [o for t, o in zip(TEXTS, got) if t.strip()] == expected
