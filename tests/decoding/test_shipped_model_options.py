"""The translators' options on the shipped models/en-zh: its real loops, alignments, long paragraphs, and the CLI."""

import json
import re
import warnings
from pathlib import Path

import pytest

from scratchformer.cli import main
from scratchformer.data.corpus import load_pairs
from scratchformer.decoding.copies import COPYABLE
from scratchformer.decoding.sentences import join_translations, split_sentences
from scratchformer.engines import Translator

RUN = Path(__file__).resolve().parents[2] / "models" / "en-zh"
pytestmark = pytest.mark.skipif(not (RUN / "model.safetensors").is_file(), reason="no shipped model")

# Test-split sentences on which the shipped model loops (found by translating the whole test split)
GREEDY_LOOP = "COLOR(255;255;255;1) returns 33554431"  # greedy: 「COLOR(255;2555;1)」返回 35444444444444441
BEAM_LOOP = ("=IMSECH(2) returns 0.26580222883408 as a string. The imaginary part is equal to zero, so it is not "
             "displayed in the result.")  # beam 4: 「=IMSECH(2)」返回 0.6528282828286582 作为字符串。...


def repeated_ngrams(tokens: list[int], n: int) -> set[tuple[int, ...]]:
    grams = [tuple(tokens[i: i + n]) for i in range(len(tokens) - n + 1)]
    return {g for g in grams if grams.count(g) > 1}


@pytest.fixture(scope="module")
def run():
    from scratchformer.runs import load_run

    return load_run(RUN)


def translate(run, texts, **kw):
    return Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, **kw)


@pytest.mark.parametrize("text,beam,loop", [(GREEDY_LOOP, 1, "444444"), (BEAM_LOOP, 4, "282828")])
def test_no_repeat_ngram_3_removes_the_shipped_models_loops(run, text, beam, loop):
    (plain,) = translate(run, [text], beam=beam, return_hyps=True)
    assert loop in plain.hyps[0].text and repeated_ngrams(plain.hyps[0].tokens, 3)
    assert plain.hyps[0].text == translate(run, [text], beam=beam)[0]
    (fixed,) = translate(run, [text], beam=beam, no_repeat_ngram=3, return_hyps=True)
    assert loop not in fixed.hyps[0].text and not repeated_ngrams(fixed.hyps[0].tokens, 3)
    word = loop[:2]
    assert fixed.hyps[0].text.count(word) < plain.hyps[0].text.count(word)


@pytest.mark.parametrize("text,beam,loop,number", [(GREEDY_LOOP, 1, "444444", "33554431"),
                                                    (BEAM_LOOP, 4, "282828", "0.26580222883408")])
def test_repair_copies_puts_the_looping_number_back(run, text, beam, loop, number):
    """The loops are miscopied numbers: repair_copies (decoding/copies.py) writes the source's number instead."""
    (plain,) = translate(run, [text], beam=beam)
    (fixed,) = translate(run, [text], beam=beam, repair_copies=True)
    assert loop in plain and number not in plain
    assert loop not in fixed and f"返回 {number}" in fixed
    assert COPYABLE.sub("#", fixed) == COPYABLE.sub("#", plain)  # only spans of Latin letters and digits moved


def test_alignment_links_words_to_their_translations(run):
    """The reference is a word alignment made by hand from a dictionary (打开 = open, 文件 = file, 。 = .), not
    output of the code under test; "the" has no counterpart in Chinese and stays unaligned."""
    source = run.src_tok.tokenize("Open the file.")
    assert source == ["Open", " the", " file", "."]
    (out,) = translate(run, ["Open the file."], beam=4, align=True)
    assert out.hyps[0].text == "打开文件。"
    target = [run.tgt_tok.decode([t]) for t in out.hyps[0].tokens]
    assert target == list("打开文件。")  # the target side is one token per character
    gloss = {"打": "Open", "开": "Open", "文": " file", "件": " file", "。": "."}
    by_hand = [(source.index(gloss[char]), j) for j, char in enumerate(target)]
    assert out.hyps[0].alignment == by_hand


def test_split_sentences_translates_a_paragraph_beyond_max_len(run):
    sources = [s for s, _ in load_pairs("en-zh", "test") if re.fullmatch(r"[A-Z][^.!?]*\.", s)]
    paragraph, n = "", 0
    while len(run.src_tok.encode(paragraph)) + 1 <= run.model.config.max_positions:
        paragraph, n = (paragraph + " " + sources[n]).strip(), n + 1
    assert split_sentences(paragraph) == sources[:n]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not cut
        (whole,) = translate(run, [paragraph], split_sentences=True)
    assert whole == join_translations(translate(run, sources[:n]))
    with pytest.warns(UserWarning, match="cut 1 source"):
        (cut,) = translate(run, [paragraph])
    assert len(whole) > len(cut)


# -- the command line ---------------------------------------------------------------------------------------------


def cli(capsys, *args, stdin=None, monkeypatch=None):
    if stdin is not None:
        import io
        import sys

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    code = main(["translate", str(RUN), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_n_best_lines_carry_beam_searchs_scores(capsys, run):
    code, out, _ = cli(capsys, "--n-best", "3", "Open the file.", "", "Close the window.")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 9 and all(line.count("\t") == 1 for line in lines)
    api = translate(run, ["Open the file.", "", "Close the window."], beam=4, n_best=3,
                    **run.decoding.options())  # the CLI decodes as models/en-zh/decoding.json says
    assert lines == [f"{h.text}\t{h.score:.6f}" for t in api for h in t.hyps]
    scores = [float(line.split("\t")[1]) for line in lines[:3]]
    assert scores == sorted(scores, reverse=True) and lines[3:6] == ["\t0.000000"] * 3


def test_cli_jsonl_in_and_out(capsys, monkeypatch):
    stdin = '{"src": "Open the file.", "prefix": "请"}\n{"src": "Close the window."}\n\n'
    code, out, _ = cli(capsys, "--input-format", "jsonl", "--format", "jsonl", "--align", "--prefix", "关",
                       stdin=stdin, monkeypatch=monkeypatch)
    objects = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [o["src"] for o in objects] == ["Open the file.", "Close the window.", ""]
    first, second, empty = (o["hyps"] for o in objects)
    assert len(first) == 1 and first[0]["text"].startswith("请") and second[0]["text"].startswith("关")
    assert set(first[0]) == {"text", "score", "tokens", "alignment"} and isinstance(first[0]["tokens"][0], int)
    assert re.fullmatch(r"\d+-0( \d+-\d+)*", first[0]["alignment"])
    assert empty == [{"text": "", "score": 0.0, "tokens": [], "alignment": ""}]


@pytest.mark.parametrize("args,message", [
    (["--n-best", "5"], "--n-best 5: beam search keeps only 4 hypotheses (beam=4 from decoding.json)"),
    (["--set", "repetition_penalty=-1"], "--set repetition_penalty=-1.0: the penalty must be a positive number"),
    (["--set", "no_repeat_ngram=-3"], "--set no_repeat_ngram=-3"),
    (["--set", "max_output_len=3", "--prefix", "打开文件。"], "prefix '打开文件。': 5 target tokens, more than the 3"),
    (["--engine", "ctranslate2", "--n-best", "2"], "--n-best 2: the ctranslate2 backend does not have this option"),
    (["--engine", "onnxruntime", "--align"], "--align: the onnxruntime backend does not have this option"),
    (["--input-format", "jsonl"], "input line 1 is not JSON"),
])
def test_cli_bad_options_are_one_line(capsys, args, message):
    code, out, err = cli(capsys, *args, "Open the file.")
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err and out == ""


@pytest.mark.slow
def test_no_repeat_ngram_on_the_whole_test_split(run):
    """Greedy on the 1,000 test sentences: 288 outputs hold a repeated character 3-gram (the references: 212);
    with no_repeat_ngram=3 none do, at a cost of BLEU 44.96 -> 42.85 (the references repeat 3-grams too)."""
    from scratchformer.evaluation.metrics import bleu

    pairs = load_pairs("en-zh", "test")
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    plain = translate(run, sources, return_hyps=True)
    fixed = translate(run, sources, no_repeat_ngram=3, return_hyps=True)
    assert sum(bool(repeated_ngrams(t.hyps[0].tokens, 3)) for t in plain) > 250
    assert not any(repeated_ngrams(t.hyps[0].tokens, 3) for t in fixed)
    plain_bleu = bleu([t.hyps[0].text for t in plain], refs)["score"]
    fixed_bleu = bleu([t.hyps[0].text for t in fixed], refs)["score"]
    assert plain_bleu - 3 < fixed_bleu < plain_bleu
