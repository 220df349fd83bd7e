"""export/ctranslate2.py and engines/ctranslate2.py: the export through CTranslate2's spec API decodes as ours
does (greedy and beam, on
tiny random runs of several architectures), the cache in the run directory follows the weights, and the bad
inputs (a missing package, an architecture CTranslate2 cannot express, an --out that holds files) are one line.
The shipped model's full test split is the slow test at the end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from scratchformer.cli import main
from scratchformer.config import ModelConfig
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import EOS_ID, train_tokenizer
from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator
from scratchformer.errors import ConfigError
from scratchformer.export import export_run
from scratchformer.runs import load_run, save_weights

ct2 = pytest.importorskip("ctranslate2")
from scratchformer.engines import ctranslate2 as engine  # noqa: E402 (after the skip: it needs the package)
from scratchformer.export import ctranslate2 as converter  # noqa: E402

TEXTS = ["Open the file.", "Close the window now.", "Save the page as text.", "Print it.", "Quit?",
         "Move the window to the left of the screen."]
ROOT = Path(__file__).resolve().parents[2]


PAIRS = [("hello", "你好"), ("how are you", "你好吗"), ("i love you", "我爱你"), ("what is this", "这是什么"),
         ("good morning", "早上好"), ("thank you", "谢谢你")]
QUERIES = ["hello", "how are you", "what is this", "good", "you love this", "how is this morning", "hello you",
           "what", "thank you", "thank this morning", "i love this good morning"]


def save_run(run_dir: Path, model, src_tok, tgt_tok) -> Path:
    """config.json, both tokenizers and model.safetensors: what load_run reads."""
    run_dir.mkdir(parents=True)
    model.config.save(run_dir / "config.json")
    src_tok.save(run_dir / "tokenizer_src.json")
    tgt_tok.save(run_dir / "tokenizer_tgt.json")
    save_weights(model, run_dir / "model.safetensors")
    return run_dir


def write_run(run_dir: Path, tiny_seq2seq, seed: int = 0, pad_logit: float | None = None, **overrides) -> Path:
    """A run of a random tiny model (char tokenizer, untied random output layer). pad_logit: the output bias of
    PAD, which a trained model learns to push far down (PAD is never a target)."""
    tok = train_tokenizer("char", TEXTS)
    model = tiny_seq2seq(seed, tok.vocab_size, tie_embeddings=False, max_len=64, **overrides)
    if pad_logit is not None:
        with torch.no_grad():
            model.generator.proj.bias[0] = pad_logit
    return save_run(run_dir, model, tok, tok)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_seq2seq) -> Path:
    return write_run(tmp_path_factory.mktemp("ct2") / "run", tiny_seq2seq)


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory) -> Path:
    """A tiny model fitted for 40 Adam steps to six pairs (about a second): it ends its outputs, so beams finish
    at different lengths and the length penalty decides, as in a real model."""
    from scratchformer.decoding.common import pad_ids
    from scratchformer.model import build_model

    torch.manual_seed(0)
    src_tok, tgt_tok = train_tokenizer("word", [s for s, _ in PAIRS]), train_tokenizer("char", [t for _, t in PAIRS])
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=src_tok.vocab_size, max_len=32,
                                           tgt_vocab_size=tgt_tok.vocab_size, tie_embeddings=False))
    src = pad_ids([src_tok.encode(s) + [EOS_ID] for s, _ in PAIRS], 0, "cpu")  # (6, L_src)
    tgt = pad_ids([[1, *tgt_tok.encode(t), EOS_ID] for _, t in PAIRS], 0, "cpu")  # (6, 1 + L_tgt)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(40):
        logits = model(src, tgt[:, :-1])  # (6, L_tgt, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return save_run(tmp_path_factory.mktemp("ct2") / "trained", model.eval(), src_tok, tgt_tok)


def sources(run, texts=TEXTS) -> list[list[int]]:
    return [run.src_tok.encode(t) for t in texts]


ARCHITECTURES = {  # test id -> config overrides: every field the spec maps
    "post-norm": {},
    "pre-norm": dict(norm="pre"),
    "pre-norm-no-final-norm": dict(norm="pre", final_norm=False),
    "learned-positions-gelu": dict(positions="learned", activation="gelu"),
    "concat-sinusoids-silu-no-bias": dict(positions="sinusoidal-concat", activation="silu", bias=False,
                                          generator_bias=False),
    "narrow-heads-unscaled-embedding-norm": dict(d_k=8, scale_embeddings=False, embedding_norm=True,
                                                 activation="gelu-tanh", layer_norm_eps=1e-6),
}


@pytest.mark.parametrize("overrides", ARCHITECTURES.values(), ids=ARCHITECTURES.keys())
def test_greedy_ids_equal_ours(tmp_path, tiny_seq2seq, overrides, equal_up_to_ties):
    run = load_run(write_run(tmp_path / "run", tiny_seq2seq, seed=1, **overrides))
    srcs = sources(run)
    ours = greedy_decode(run.model, [s + [EOS_ID] for s in srcs])
    theirs = engine.Backend(run, threads=1).translate_ids(srcs, beam=1, batch_size=4)
    equal_up_to_ties(run.model, [s + [EOS_ID] for s in srcs], ours, theirs)
    assert len({len(o) for o in ours}) > 1  # budgets differ per sentence (source length + 50): each is kept


@pytest.mark.parametrize("beam, alpha", [(4, 0.6), (2, 0.6), (4, 0.0), (4, 1.0)])
def test_beam_ids_equal_ours(trained_dir, beam, alpha):
    run = load_run(trained_dir)
    srcs = sources(run, QUERIES)
    found = beam_search(run.model, [s + [EOS_ID] for s in srcs], Search(beam=beam, alpha=alpha, n_best=beam))
    assert len({len(h.tokens) for hyps in found for h in hyps}) > 2  # finished at different lengths
    theirs = engine.Backend(run, threads=1).translate_ids(srcs, beam=beam, alpha=alpha, batch_size=4)
    assert theirs == [hyps[0].tokens for hyps in found]


def test_beam_at_each_sentences_budget(tmp_path, tiny_seq2seq):
    """A random model runs every beam to its budget (source length + 50, capped at max_len): CT2 takes one budget
    per call, so the sentences of a batch with a shorter one are searched again with their own. PAD's logit is
    pushed down as training does: CT2 drops PAD before the softmax (the export's PAD bias), ours after it, which
    changes the scores by log(1 - P(PAD)) a step, nothing for a trained model but ~5% a step for this random one."""
    run = load_run(write_run(tmp_path / "run", tiny_seq2seq, pad_logit=-30.0))
    srcs = sources(run)
    ours = [h[0].tokens for h in beam_search(run.model, [s + [EOS_ID] for s in srcs], Search(beam=4))]
    assert len({len(o) for o in ours}) > 1
    assert engine.Backend(run, threads=1).translate_ids(srcs, beam=4, batch_size=3) == ours


def test_pad_is_never_emitted(tmp_path, tiny_seq2seq):
    """PAD's logit far above every other: ours and CT2 (greedy) still pick the best of the rest."""
    run = load_run(write_run(tmp_path / "run", tiny_seq2seq, pad_logit=100.0))
    srcs = sources(run)
    ours = greedy_decode(run.model, [s + [EOS_ID] for s in srcs])
    assert engine.Backend(run, threads=1).translate_ids(srcs, beam=1) == ours
    assert all(0 not in o for o in ours) and any(ours)


def test_translate_texts_as_ours(trained_dir):
    """Same texts out, empty lines kept empty, a --max-len budget honoured, through the Translator."""
    run = load_run(trained_dir)
    texts = [QUERIES[0], "", QUERIES[5], "  ", QUERIES[-1]]
    translator = Translator(run, run.decoding.pick(engine="ctranslate2"), threads=1)
    for beam, max_len in ((1, None), (2, 2), (4, None)):
        ours = Translator(run, run.decoding.pick(engine="torch")).translate(texts, beam=beam, max_output_len=max_len)
        assert translator.translate(texts, beam=beam, max_output_len=max_len) == ours
    assert translator.translate(texts)[1] == "" and translator.translate([]) == []


def test_cache_follows_the_weights(tmp_path, tiny_seq2seq):
    run_dir = write_run(tmp_path / "run", tiny_seq2seq, seed=2)
    folder = engine.Backend(load_run(run_dir), threads=1).path
    assert folder == run_dir / "export" / "ctranslate2" and (folder / "model.bin").exists()
    built = (folder / "model.bin").stat().st_mtime_ns
    engine.Backend(load_run(run_dir), threads=1)
    assert (folder / "model.bin").stat().st_mtime_ns == built  # same weights: reused
    before = json.loads((folder / converter.STAMP).read_text())
    other = tiny_seq2seq(3, load_run(run_dir).src_tok.vocab_size, tie_embeddings=False, max_len=64)
    save_weights(other, run_dir / "model.safetensors")
    run = load_run(run_dir)
    translator = engine.Backend(run, threads=1)
    assert json.loads((folder / converter.STAMP).read_text())["weights_sha256"] != before["weights_sha256"]
    srcs = sources(run)
    assert translator.translate_ids(srcs, beam=1) == greedy_decode(run.model, [s + [EOS_ID] for s in srcs])


def test_export_float32_and_int8(tmp_path, run_dir):
    fp32 = export_run(run_dir, "ctranslate2", tmp_path / "fp32")
    int8 = export_run(run_dir, "ctranslate2", tmp_path / "int8", quantization="int8")
    for folder in (fp32, int8):
        names = {p.name for p in folder.iterdir()}
        assert {"model.bin", "config.json", "tokenizer.json", "translate_options.json", "README.md",
                converter.STAMP} <= names
    config = json.loads((fp32 / "config.json").read_text())
    assert config["add_source_eos"] and config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>"
    assert (int8 / "model.bin").stat().st_size < 0.6 * (fp32 / "model.bin").stat().st_size
    run = load_run(run_dir)
    engine = Translator(run, run.decoding.pick(engine="ctranslate2", dtype="int8"), threads=1)
    assert engine.backend.engine.compute_type.startswith("int8")  # --dtype int8 reaches CT2 (outputs are no proof)
    (out,) = engine.translate(["Open"], beam=2)
    assert isinstance(out, str)
    translator = ct2.Translator(str(int8), device="cpu", intra_threads=1)  # int8 as saved; positions end at max_len
    result = translator.translate_batch([["O", "p", "e", "n"]], beam_size=2, max_decoding_length=10)
    assert 0 < len(result[0].hypotheses[0]) <= 10


def test_missing_package_is_one_line(run_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` now raises ImportError
    for call in (lambda: Translator(load_run(run_dir), DecodingOptions(engine="ctranslate2")),
                 lambda: export_run(run_dir, "ctranslate2", tmp_path / "out")):
        with pytest.raises(ConfigError, match=r"pip install ctranslate2") as e:
            call()
        assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("overrides, field", [
    (dict(final_norm=True), "final_norm"),  # post-norm with a final LayerNorm: CT2 has one only for pre-norm
    (dict(d_k=16, d_v=8), "d_v"),
], ids=["post-norm-final-norm", "d_v-not-d_k"])
def test_inexpressible_run_is_one_line_naming_the_field(tmp_path, tiny_seq2seq, overrides, field):
    run_dir = write_run(tmp_path / "run", tiny_seq2seq, **overrides)
    with pytest.raises(ConfigError, match=rf"^{field}=") as e:
        export_run(run_dir, "ctranslate2", tmp_path / "out")
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists()  # refused before anything is written


def test_decoder_only_run_names_arch(tmp_path):
    tok = train_tokenizer("char", TEXTS)
    config = ModelConfig.preset("gpt-tiny", tgt_vocab_size=tok.vocab_size, n_decoder_layers=1, d_model=16,
                                n_heads=2, d_ff=32, max_len=32)
    (tmp_path / "lm").mkdir()
    config.save(tmp_path / "lm" / "config.json")
    tok.save(tmp_path / "lm" / "tokenizer_tgt.json")
    from scratchformer.model import build_model

    save_weights(build_model(config), tmp_path / "lm" / "model.safetensors")
    with pytest.raises(ConfigError, match=r"^arch='decoder'"):
        export_run(tmp_path / "lm", "ctranslate2", tmp_path / "out")


def test_cli_export_needs_overwrite_for_a_full_out(tmp_path, run_dir, capsys):
    out = tmp_path / "out"
    assert main(["export", str(run_dir), "--format", "ctranslate2", "--out", str(out)]) == 0
    (out / "keep.txt").write_text("x")
    capsys.readouterr()  # the first export's progress lines
    assert main(["export", str(run_dir), "--format", "ctranslate2", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--overwrite" in err
    assert main(["export", str(run_dir), "--format", "ctranslate2", "--out", str(out), "--overwrite",
                 "--quantization", "int8"]) == 0
    assert (out / "keep.txt").read_text() == "x" and (out / "model.bin").exists()  # the user's file: kept, named
    assert "kept keep.txt" in capsys.readouterr().err


@pytest.mark.slow
def test_shipped_model_matches_ours_on_the_test_split():
    """models/en-zh, 1,000 test sentences: greedy identical >= 99%, beam 4 >= 97%, BLEU within 0.2 (minutes)."""
    from scratchformer.data.corpus import load_pairs
    from scratchformer.evaluation.metrics import bleu

    run = load_run(ROOT / "models" / "en-zh")
    pairs = load_pairs("en-zh", "test")
    src, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator(run, DecodingOptions(engine="ctranslate2"), threads=1)  # from_model's options
    for beam, share in ((1, 0.99), (4, 0.97)):
        ours = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(src, beam=beam)
        theirs = translator.translate(src, beam=beam)
        assert sum(a == b for a, b in zip(ours, theirs)) >= share * len(src)
        assert abs(bleu(theirs, refs)["score"] - bleu(ours, refs)["score"]) <= 0.2
