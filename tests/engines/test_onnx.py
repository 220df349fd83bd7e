"""The ONNX export and the onnxruntime engine (export/onnx.py, export/onnx_graphs.py, engines/onnx.py).

A tiny random translation model (separate source and target vocabularies, post-norm, as the shipped one) is
written as a run directory and exported once for the module (the dynamo exporter takes about a minute on a busy
2-core machine); every test reads that export. The graphs' numbers must be ours within 1e-4 (with padding), and
greedy and beam search over them must give exactly our token ids and texts.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from scratchformer.cli import main
from scratchformer.config import ModelConfig
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator
from scratchformer.engines import onnx as onnx_engine
from scratchformer.errors import ConfigError
from scratchformer.export import export_run, onnx_graphs
from scratchformer.export import onnx as onnx_export
from scratchformer.model import build_model
from scratchformer.runs import load_run, save_weights

for package in ("onnx", "onnxscript", "onnxruntime"):  # pip install -e '.[export]'
    pytest.importorskip(package)

SOURCES = ["Open the file.", "Close the window now, please.", "Save the page.", "Print it twice", "Quit."]
TARGETS = ["Ouvre le fichier.", "Ferme la fenêtre.", "Enregistre la page.", "Imprime-le deux fois", "Quitte."]
SIZES = dict(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=64,
             tie_embeddings=False, norm="post")
TOL = 1e-4


def write_run(run_dir, seed: int = 0, **overrides):
    """A run directory of a random model whose greedy outputs vary (doubled linear weights, a random output
    layer, as tests/conftest.py's tiny_seq2seq), written with the package's own writers."""
    src_tok, tgt_tok = train_tokenizer("char", SOURCES), train_tokenizer("char", TARGETS)
    config = ModelConfig.preset("tiny", src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                                **{**SIZES, **overrides})
    torch.manual_seed(seed)
    model = build_model(config)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.0)
        if hasattr(model, "generator"):
            model.generator.proj.weight.copy_(torch.randn_like(model.generator.proj.weight) / config.d_model**0.5)
    run_dir.mkdir(parents=True)
    config.save(run_dir / "config.json")
    src_tok.save(run_dir / "tokenizer_src.json")
    tgt_tok.save(run_dir / "tokenizer_tgt.json")
    save_weights(model, run_dir / "model.safetensors")
    return run_dir


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """The run and its onnxruntime Backend: the first one exports into RUN_DIR/export/onnx/."""
    run = load_run(write_run(tmp_path_factory.mktemp("onnx") / "run"))
    return run, onnx_engine.Backend(run, threads=1)


def on(run, backend):
    """The Translator of `run` on this backend (the default options, as Translator.from_model's, engine onnxruntime)."""
    return Translator(run, DecodingOptions(engine="onnxruntime"), backend=backend)


def random_ids(vocab: int, seed: int, lengths) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab, (n,), generator=g).tolist() for n in lengths]


def sources(run, seed: int = 0, lengths=(3, 9, 5, 12, 1, 7)) -> list[list[int]]:
    """Source id lists ending in EOS, of different lengths (padding in every batch)."""
    return [[*s, 2] for s in random_ids(run.model_config.src_vocab_size, seed, lengths)]


def padded(seqs: list[list[int]]) -> tuple[torch.Tensor, np.ndarray]:
    src = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)  # (B, L_src), PAD = 0
    for i, s in enumerate(seqs):
        src[i, : len(s)] = torch.tensor(s)
    return src, (src != 0).long().numpy()


def test_export_folder_holds_the_graphs_tokenizers_and_their_names(engine):
    run, translator = engine
    folder = translator.folder
    assert folder == run.path / "export" / "onnx"
    meta = json.loads((folder / onnx_export.META).read_text())
    for graph in ("decoder_model", "decoder_with_past_model"):
        session = translator.graphs[graph]
        assert [i.name for i in session.get_inputs()] == meta["inputs"][graph]
        assert [o.name for o in session.get_outputs()] == meta["outputs"][graph]
    assert [i.name for i in translator.graphs["encoder_model"].get_inputs()] == ["input_ids", "attention_mask"]
    assert [o.name for o in translator.graphs["encoder_model"].get_outputs()] == ["last_hidden_state"]  # Optimum's


def test_export_folder_is_optimums_contract_with_the_runs_settings(engine):
    """config.json (what ORTModelForSeq2SeqLM reads), generation_config.json, standard tokenizer files; the
    run's decoding settings in scratchformer_onnx.json (tests/clients runs Optimum itself on such a folder)."""
    from tokenizers import Tokenizer

    run, translator = engine
    folder = translator.folder
    config = json.loads((folder / "config.json").read_text())
    c = run.model_config
    assert (config["model_type"], config["d_model"], config["decoder_attention_heads"]) == ("marian", c.d_model,
                                                                                            c.n_heads)
    assert (config["vocab_size"], config["decoder_start_token_id"]) == (c.tgt_vocab_size, 1)  # the logits' width
    gen = json.loads((folder / "generation_config.json").read_text())
    assert (gen["num_beams"], gen["length_penalty"], gen["decoder_start_token_id"]) == (4, 0.5, 1)
    meta = json.loads((folder / onnx_export.META).read_text())["decoding"]
    assert (meta["alpha"], meta["split_sentences"]) == (run.decoding.alpha, run.decoding.split_sentences)
    src = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tgt = Tokenizer.from_file(str(folder / "target_tokenizer" / "tokenizer.json"))
    assert src.encode(SOURCES[1]).ids == [*run.src_tok.encode(SOURCES[1]), 2]  # as the run batches: + </s>
    assert tgt.decode(run.tgt_tok.encode(TARGETS[1])) == TARGETS[1]
    assert "ORTModelForSeq2SeqLM.from_pretrained(DIR)" in (folder / "README.md").read_text()


def test_encoder_output_is_ours_with_padding(engine):
    run, translator = engine
    src, mask = padded(sources(run))
    ours = run.model.encode(src).detach().numpy()  # (B, L_src, D)
    theirs = translator.graphs["encoder_model"].run(None, {"input_ids": src.numpy(), "attention_mask": mask})[0]
    assert theirs.shape == ours.shape
    assert np.abs(theirs - ours).max() < TOL


def test_decoder_logits_are_ours_on_a_padded_target_prefix(engine):
    run, translator = engine
    src, mask = padded(sources(run, seed=1))
    prefixes = random_ids(run.model_config.tgt_vocab_size, 2, lengths=(4, 0, 6, 2, 5, 3))
    tgt, _ = padded([[1, *p] for p in prefixes])  # (B, L): BOS first, then right-padded
    with torch.no_grad():
        ours = run.model(src, tgt).numpy()  # (B, L, V)
    memory = translator.graphs["encoder_model"].run(None, {"input_ids": src.numpy(), "attention_mask": mask})[0]
    out = translator.graphs["decoder_model"].run(None, {"input_ids": tgt.numpy(), "encoder_attention_mask": mask,
                                                        "encoder_hidden_states": memory})
    assert np.abs(out[0] - ours).max() < TOL
    c = run.model_config
    assert out[1].shape == (len(src), c.n_heads, tgt.size(1), c.head_dim_k)  # present.0.decoder.key
    assert out[3].shape == (len(src), c.n_heads, src.size(1), c.head_dim_k)  # present.0.encoder.key


def test_decoder_with_past_gives_our_logits_one_token_at_a_time(engine):
    run, translator = engine
    src, mask = padded(sources(run, seed=3))
    tgt = torch.tensor([[1, *p] for p in random_ids(run.model_config.tgt_vocab_size, 3, [5] * len(src))])  # (B, 6)
    with torch.no_grad():
        ours = run.model(src, tgt).numpy()  # (B, 6, V)
    memory = translator.graphs["encoder_model"].run(None, {"input_ids": src.numpy(), "attention_mask": mask})[0]
    steps = onnx_engine.OnnxSteps(translator.graphs, memory, mask, run.model_config.n_decoder_layers)
    for t in range(tgt.size(1)):
        assert np.abs(steps(tgt[:, : t + 1]).numpy() - ours[:, t]).max() < TOL


@pytest.mark.parametrize("max_len", [None, 5])
def test_greedy_ids_are_ours(engine, max_len, equal_up_to_ties):
    run, translator = engine
    for seed in range(3):
        src = sources(run, seed)
        spec = Search(max_output_len=max_len)  # beam 1: greedy, the same spec for both
        theirs = translator.search(src, spec)
        equal_up_to_ties(run.model, src, greedy_decode(run.model, src, spec), theirs)
        assert len({tuple(t) for t in theirs}) > 1  # the model does not emit one fixed output


@pytest.mark.parametrize("beam", [2, 4])
def test_beam_ids_are_ours(engine, beam):
    run, translator = engine
    for seed in range(2):
        src = sources(run, seed)
        spec = Search(beam=beam, alpha=0.6)
        ours = [h[0].tokens for h in beam_search(run.model, src, spec)]
        assert translator.search(src, spec) == ours


@pytest.mark.parametrize("beam", [1, 2])
def test_translate_gives_the_torch_engines_texts(engine, beam):
    run, translator = engine
    texts = [*SOURCES, "", "Open the window twice, then save the file."]
    ours = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, beam=beam, batch_size=3)
    assert on(run, translator).translate(texts, beam=beam, batch_size=3) == ours
    assert ours[len(SOURCES)] == ""  # an empty line stays empty
    assert on(run, translator).translate(texts[:1], beam=beam) == ours[:1]  # a batch of one row


def test_translate_cli_with_engine_onnxruntime(engine, capsys):
    run, _ = engine  # the export in the run directory is reused: its stamp matches
    texts = SOURCES[:3]
    assert main(["translate", str(run.path), *texts, "--beam", "2", "--engine", "onnxruntime"]) == 0
    theirs = capsys.readouterr().out.splitlines()
    assert theirs == Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, beam=2)


def test_the_cache_is_reused_and_rebuilt_when_the_weights_change(tmp_path, monkeypatch):
    calls = []

    def fake_export(run, out, quantization=None):  # the graphs' files only: the cache logic is under test
        calls.append(out)
        for name in onnx_export.GRAPHS:
            (out / name).write_bytes(b"")

    monkeypatch.setattr(onnx_export, "export", fake_export)
    run = load_run(write_run(tmp_path / "run"))
    folder = onnx_export.cached_export(run)
    assert onnx_export.cached_export(run) == folder and len(calls) == 1  # same weights: nothing exported
    stamp = (folder / onnx_export.STAMP).read_text()
    with torch.no_grad():
        run.model.generator.proj.bias.add_(0.5)
    save_weights(run.model, run.path / "model.safetensors")  # the run was trained further
    assert onnx_export.cached_export(load_run(run.path)) == folder and len(calls) == 2
    assert (folder / onnx_export.STAMP).read_text() != stamp
    assert sorted(p.name for p in folder.parent.iterdir()) == ["onnx"]  # no partial export left behind


def test_an_unwritable_run_directory_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    def refused(run, out, quantization=None):
        raise PermissionError(13, "Permission denied")  # as a read-only run directory would (root ignores chmod)

    monkeypatch.setattr(onnx_export, "export", refused)
    run = load_run(write_run(tmp_path / "run"))
    with pytest.raises(ConfigError, match="cannot write there") as err:
        onnx_export.cached_export(run)
    assert "\n" not in str(err.value) and list((run.path / "export").iterdir()) == []


def test_int8_export_quantizes_the_graphs_and_still_translates(engine, tmp_path, monkeypatch):
    run, translator = engine

    def copy_graphs(model, out):  # the float32 graphs of the module's export: one dynamo export is enough
        for name in onnx_export.GRAPHS:
            shutil.copy(translator.folder / name, out / name)

    monkeypatch.setattr(onnx_graphs, "export_graphs", copy_graphs)
    out = tmp_path / "int8"
    out.mkdir()
    onnx_export.export(run, out, quantization="int8")
    assert json.loads((out / onnx_export.META).read_text())["quantization"] == "int8"
    import onnx

    ops = {node.op_type for node in onnx.load(str(out / "decoder_with_past_model.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeLinear" in ops
    outputs = on(run, onnx_engine.Backend(run, folder=out, threads=1)).translate(SOURCES, beam=1)
    assert len(outputs) == len(SOURCES) and all(isinstance(o, str) for o in outputs)


def test_a_missing_onnxruntime_is_one_line_naming_pip_install(engine, monkeypatch):
    run, _ = engine
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ConfigError) as err:
        Translator(run, run.decoding.pick(engine="onnxruntime"))
    assert "pip install onnxruntime" in str(err.value) and "\n" not in str(err.value)


def test_a_decoder_only_run_is_refused_naming_the_field(tmp_path):
    run_dir = write_run(tmp_path / "lm", arch="decoder", n_encoder_layers=0)
    with pytest.raises(ConfigError, match=r"^arch='decoder': ") as err:
        export_run(run_dir, "onnx", tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()


def test_an_existing_out_folder_needs_overwrite(tmp_path):
    run_dir = write_run(tmp_path / "run")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="--overwrite") as err:
        export_run(run_dir, "onnx", tmp_path / "out")
    assert "\n" not in str(err.value) and (tmp_path / "out" / "keep.txt").read_text() == "mine"


SHIPPED = Path(__file__).resolve().parents[2] / "models" / "en-zh"


@pytest.mark.slow
def test_the_shipped_model_gives_our_logits_and_greedy_outputs(tmp_path):
    """models/en-zh, the first 100 test sentences: logits teacher-forced on the references (both decoder graphs,
    batches of 10 with padding) within 1e-4, and greedy outputs identical. Prints the figures as one JSON line:
    PYTHONPATH=src python -m pytest -m slow -s tests/engines/test_onnx.py -k shipped"""
    run = load_run(SHIPPED)
    translator = onnx_engine.Backend(run, folder=export_run(SHIPPED, "onnx", tmp_path / "onnx"))
    pairs = load_pairs("en-zh", "test")[:100]
    cap = run.model_config.max_positions
    worst = {"decoder_model": 0.0, "decoder_with_past_model": 0.0, "encoder_model": 0.0}
    for start in range(0, len(pairs), 10):
        batch = pairs[start: start + 10]
        src, mask = padded([[*run.src_tok.encode(s)[: cap - 1], 2] for s, _ in batch])
        tgt, _ = padded([[1, *run.tgt_tok.encode(t)[: cap - 1]] for _, t in batch])  # (B, L): BOS + reference
        with torch.no_grad():
            memory_ours = run.model.encode(src)
            ours = run.model(src, tgt).numpy()  # (B, L, V)
        memory = translator.graphs["encoder_model"].run(None, {"input_ids": src.numpy(), "attention_mask": mask})[0]
        full = translator.graphs["decoder_model"].run(None, {"input_ids": tgt.numpy(), "encoder_attention_mask": mask,
                                                             "encoder_hidden_states": memory})[0]
        real = (tgt != 0).numpy()  # (B, L): the reference's own positions (padding is compared by the tiny tests)
        steps = onnx_engine.OnnxSteps(translator.graphs, memory, mask, run.model_config.n_decoder_layers)
        stepped = np.stack([steps(tgt[:, : t + 1]).numpy() for t in range(tgt.size(1))], axis=1)  # (B, L, V)
        worst["encoder_model"] = max(worst["encoder_model"], float(np.abs(memory - memory_ours.numpy()).max()))
        worst["decoder_model"] = max(worst["decoder_model"], float(np.abs(full - ours)[real].max()))
        worst["decoder_with_past_model"] = max(worst["decoder_with_past_model"],
                                               float(np.abs(stepped - ours)[real].max()))
    texts = [s for s, _ in pairs]
    same = {}
    for beam in (1, 4):
        ours = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, beam=beam)
        theirs = on(run, translator).translate(texts, beam=beam)
        same[f"beam{beam}_identical"] = sum(a == b for a, b in zip(ours, theirs))
    print(json.dumps({"model": "models/en-zh", "sentences": len(pairs), "max_abs_diff": worst, **same}))
    assert max(worst.values()) < TOL
    assert same["beam1_identical"] == len(pairs)

