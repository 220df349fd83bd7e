"""Each export through the client a user would pick, in a process without scratchformer (conftest.run_client):
transformers' AutoModelForSeq2SeqLM + generate (5.x here, 4.57.6 and 4.42.4 in two more environments), Optimum's
ORTModelForSeq2SeqLM + generate, ctranslate2.Translator.translate_batch with tokenisation from the exported files
only, and tokenizers.Tokenizer.from_file. Each export's own README.md gives a translate() (client.py runs it as
printed): the client's search with scratchformer's length budget, its finished hypotheses ranked by GNMT. Its
outputs are ours, greedy and beam 4; so are the client's plain call's on the small model (alpha 0).

The fast tests use a small random model with a second, smaller target vocabulary tied to the output layer (the
shipped model's layout) and decoding.json alpha 0: every client's length penalty is then the same function as
ours (|Y|^0 = ((5 + |Y|) / 6)^0), so beam outputs must be equal too. The slow ones take the shipped models/en-zh
at its own alpha 1.5 on 100 test sentences: the README's route >= 98 of 100 greedy and beam 4 (measured: 100 and 100
through transformers 5.x, 4.57.6 and Optimum, 100 and 98 through CTranslate2), the plain call's printed too (-s).

    SCRATCHFORMER_CLIENT_PYTHON=.venv-clients/bin/python pytest -m slow -s tests/clients/test_clients.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchformer.data.tokenizers import EOS_ID
from scratchformer.engines import Translator
from scratchformer.export import export_run
from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


def _same(ours: dict[int, list[str]], theirs: dict[str, list[str]], how: str = "") -> dict[int, int]:
    """How many of each beam's outputs equal ours: the README's route (how=""), or the plain call ("plain-")."""
    return {b: sum(a == t for a, t in zip(ours[b], theirs[f"{how}{b}"])) for b in ours}


def test_transformers_5_generate_gives_our_outputs(small, this_python, client):
    transformers = pytest.importorskip("transformers")
    folders, ours, tmp, texts = small.folders, small.ours, small.tmp, small.texts
    theirs = client(this_python, "hf", folders["hf"], texts, tmp)
    assert _same(ours, theirs) == {1: len(texts), 4: len(texts)}, (transformers.__version__, theirs, ours)
    assert _same(ours, theirs, "plain-") == {1: len(texts), 4: len(texts)}, (transformers.__version__, theirs, ours)


@pytest.mark.parametrize("which", ["client_python", "oldest_python"])
def test_transformers_4_generate_gives_our_outputs(which, small, client, request):
    """The newest 4.x (4.57.6) and the oldest the export claims (4.42.4: tokenizers 0.19 reads BPE merges only as
    "a b" strings; 4.40-4.41 read a literal "<s>" in a text as the special token, split_special_tokens unread)."""
    folders, ours, tmp, texts = small.folders, small.ours, small.tmp, small.texts
    theirs = client(request.getfixturevalue(which), "hf", folders["hf"], texts, tmp)
    assert _same(ours, theirs) == {1: len(texts), 4: len(texts)}, (theirs, ours)
    assert _same(ours, theirs, "plain-") == {1: len(texts), 4: len(texts)}, (theirs, ours)


def test_optimum_generate_gives_our_outputs(client_python, small, small_onnx, client):
    ours, tmp, texts = small.ours, small.tmp, small.texts
    assert {"config.json", "generation_config.json", "tokenizer.json", "decoding.json"} <= {
        p.name for p in small_onnx.iterdir()}
    theirs = client(client_python, "optimum", small_onnx, texts, tmp)
    assert _same(ours, theirs) == {1: len(texts), 4: len(texts)}, (theirs, ours)
    assert _same(ours, theirs, "plain-") == {1: len(texts), 4: len(texts)}, (theirs, ours)


def test_ctranslate2_translate_batch_with_the_exported_tokenizer_gives_our_outputs(small, this_python, client):
    pytest.importorskip("ctranslate2")
    folders, ours, tmp, texts = small.folders, small.ours, small.tmp, small.texts
    theirs = client(this_python, "ctranslate2", folders["ctranslate2"], texts, tmp)
    same, plain = _same(ours, theirs), _same(ours, theirs, "plain-")
    # a random model's beams mostly run to max_len unfinished; one of them is ended differently by CT2 (measured)
    assert same[1] == plain[1] == len(texts) and min(same[4], plain[4]) >= len(texts) - 1, (theirs, ours)


def test_tokenizer_files_of_every_export_read_with_plain_tokenizers(small, this_python, client):
    run, folders, tmp, texts = small.run, small.folders, small.tmp, small.texts
    ids = [run.src_tok.encode(t) for t in texts]
    hf = client(this_python, "tokenizers", folders["hf"], texts, tmp)
    assert hf["ids"] == [[*s, EOS_ID] for s in ids]  # the run's batching: source + </s>
    assert hf["decoded"] == [run.src_tok.decode(s) for s in ids]
    ct2 = client(this_python, "tokenizers", folders["ctranslate2"], texts, tmp)
    assert ct2["ids"] == ids  # CTranslate2 appends </s> itself
    target = client(this_python, "tokenizers", folders["hf"] / "target_tokenizer", small.targets, tmp)
    assert target["decoded"] == small.targets


# -- the shipped model, 100 test sentences -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    from scratchformer.data.corpus import load_pairs

    tmp = tmp_path_factory.mktemp("shipped")
    run = load_run(ROOT / "models" / "en-zh")
    texts = [s for s, _ in load_pairs("en-zh", "test")[:100]]
    ours = {b: Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, beam=b,
                                                                                   alpha=run.decoding.alpha)
            for b in (1, 4)}
    return run, texts, ours, tmp


def _report(name: str, theirs: dict, ours: dict) -> tuple[dict[int, int], dict[int, int]]:
    """(the README's route, the plain call): outputs identical to ours per beam, printed (pytest -s)."""
    same, plain = _same(ours, theirs), _same(ours, theirs, "plain-")
    print(f"\nmodels/en-zh, {name}: identical to ours on {same[1]}/100 greedy, {same[4]}/100 beam 4 through the "
          f"README's translate(); the plain call: {plain[1]}/100, {plain[4]}/100 (alpha 1.5)")
    return same, plain


@pytest.mark.slow
@pytest.mark.parametrize("version", ["5.x", "4.57", "4.42"])
def test_shipped_model_through_transformers(shipped, version, this_python, request, client):
    run, texts, ours, tmp = shipped
    python = this_python if version == "5.x" else request.getfixturevalue(
        "client_python" if version == "4.57" else "oldest_python")
    out = export_run(run.path, "hf", tmp / f"hf{version}")
    same, plain = _report(f"transformers {version} generate", client(python, "hf", out, texts, tmp), ours)
    assert same[1] >= 98 and same[4] >= 98 and plain[1] >= 98 and plain[4] >= 90  # plain: |Y|^lp is not GNMT's


@pytest.mark.slow
def test_shipped_model_through_optimum_and_ctranslate2(client_python, shipped, this_python, client):
    run, texts, ours, tmp = shipped
    for fmt, name, python in (("onnx", "optimum", client_python), ("ctranslate2", "ctranslate2", this_python)):
        theirs = client(python, name, export_run(run.path, fmt, tmp / fmt), texts, tmp)
        same, plain = _report(name, theirs, ours)
        assert same[1] >= 98 and same[4] >= 98 and plain[1] >= 98 and plain[4] >= 90
