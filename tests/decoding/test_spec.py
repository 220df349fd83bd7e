"""The search takes one spec (decoding/spec.py: Search), the beam width has one name, and the output length budget
is one rule (config/budget.py) that every search, engine and estimate calls."""

import ast
from pathlib import Path

import pytest

from scratchformer.config.budget import PAPER_EXTRA_LEN, output_budget
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import SPECIALS, CharTokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator

SRC = Path(__file__).resolve().parents[2] / "src" / "scratchformer"
SRC_TOK = CharTokenizer([*SPECIALS, *"abcdefghij klmnopqrstuvw"])  # 28 ids < the model's 30
TGT_TOK = CharTokenizer([*SPECIALS, *"一二三四五六七八九十百千万亿天地人日月山水火木金土石"])  # 30 ids
TEXTS = ["abc def", "hello world", "a", "quick brown fox", "jump over", "lazy dog now"]
MOST_PARAMETERS = 8


def _functions(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = node.args
    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def test_no_function_in_decoding_takes_more_than_8_parameters():
    """What a search is asked to do is one Search (or Sampling): the searches take it, the model and the batch."""
    wide = [f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({len(_parameters(node))})"
            for path, node in _functions(SRC / "decoding") if len(_parameters(node)) > MOST_PARAMETERS]
    assert wide == []


def test_the_beam_width_has_one_name_in_decoding():
    """`beam` from the option to the kernel: no parameter, attribute or variable called beam_size, group or k."""
    others = set()
    for path, tree in ((p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted((SRC / "decoding").rglob("*.py"))):
        for node in ast.walk(tree):
            name = (node.arg if isinstance(node, ast.arg) else node.id if isinstance(node, ast.Name)
                    else node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "self" else None)  # a regex match's .group() is not a width
            if name in ("beam_size", "group"):
                others.add(f"{path.name}:{node.lineno} {name}")
    assert others == set()


@pytest.fixture(scope="module")
def model(make_seq2seq):
    return make_seq2seq(2)


@pytest.mark.parametrize("options", [DecodingOptions(beam=1, max_output_len=10), DecodingOptions(beam=1),
                                     DecodingOptions(beam=3, alpha=1.0, max_output_len=9),
                                     DecodingOptions(beam=2, max_output_len=12, no_repeat_ngram=2,
                                                     repetition_penalty=1.3)])
def test_greedy_and_beam_with_the_options_spec_give_the_translators_outputs(model, options):
    """The Translator's search is greedy_decode / beam_search called with Search.from_options: nothing else."""
    spec = Search.from_options(options)
    ids = [SRC_TOK.encode(t) + [2] for t in TEXTS]  # encode_pairs: src ids + EOS
    if spec.beam == 1:
        tokens = greedy_decode(model, ids, spec)
    else:
        tokens = [hyps[0].tokens for hyps in beam_search(model, ids, spec)]
    assert Translator.from_model(model, SRC_TOK, TGT_TOK, options).translate(TEXTS) == [TGT_TOK.decode(t)
                                                                                         for t in tokens]


def test_beam_1_of_the_spec_is_greedy_and_greedy_refuses_a_beam(model):
    ids = [SRC_TOK.encode(t) + [2] for t in TEXTS]
    spec = Search(max_output_len=10)
    assert [h[0].tokens for h in beam_search(model, ids, spec)] == greedy_decode(model, ids, spec)
    with pytest.raises(ValueError, match="beam=4: use beam_search"):
        greedy_decode(model, ids, Search(beam=4))
    with pytest.raises(ValueError, match="n_best <= beam"):
        Search(beam=2, n_best=3)


def test_the_output_budget():
    assert output_budget(7, None, 512) == 7 + PAPER_EXTRA_LEN  # the paper: source length + 50
    assert output_budget(500, None, 512) == 512  # never past the model's positions
    assert output_budget(7, 20, 512) == 20 and output_budget(7, 20, 16) == 16  # the option, capped too


def test_the_length_rule_is_written_once():
    """Source length + 50 is computed in config/budget.py only: the torch search, the CTranslate2 and ONNX engines,
    serve's request cost and DecodingOptions' memory check call output_budget."""
    def adds_the_rule(node: ast.AST) -> bool:
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and any(
            (isinstance(x, ast.Name) and x.id == "PAPER_EXTRA_LEN") or (isinstance(x, ast.Constant) and x.value == 50)
            for x in (node.left, node.right))

    found = [f"{path.relative_to(SRC)}:{node.lineno}" for room in ("config", "decoding", "engines", "serve")
             for path in sorted((SRC / room).rglob("*.py")) if path.name != "budget.py"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if adds_the_rule(node)]
    assert found == []
    callers = {path.relative_to(SRC).as_posix() for room in ("config", "decoding", "engines", "serve")
               for path in (SRC / room).rglob("*.py") if "output_budget(" in path.read_text(encoding="utf-8")}
    assert {"config/decoding.py", "decoding/common.py", "engines/ctranslate2.py", "serve/app.py"} <= callers
