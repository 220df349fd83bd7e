"""`scratchformer export RUN --format hf`: the folder `transformers` loads computes what our model computes.

Small random run directories of each family (Marian: our paper layout with interleaved sinusoids, GPT-2, BERT),
written with the package's own writers, every weight moved off its init. Logits within 1e-4 on padded batches;
Hugging Face `generate` greedy gives our greedy token ids; the tokenizers encode and decode as ours. The fold of
the sinusoid permutation is also checked without `transformers`. The slow test exports the shipped models/en-zh.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from scratchformer import ConfigError, ModelConfig, build_model
from scratchformer.config import TrainConfig
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, train_tokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.sampling import Sampling, sample
from scratchformer.decoding.spec import Search
from scratchformer.export import export_run
from scratchformer.export.hf import exportable_model
from scratchformer.interop.hf_marian import concat_permutation, interleaved_to_concat
from scratchformer.model.embedding import sinusoid_table
from scratchformer.runs import load_run, save_weights

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [("Open the file.", "打开文件。"), ("Close the window now.", "现在关闭窗口。"),
         ("Save the page as text.", "将页面另存为文本。"), ("Click OK to print the table.", "单击「确定」打印表格。"),
         ("Insert a new row.", "插入新的一行。"), ("Select the cells, then copy them.", "选择单元格，然后复制。")]
SMALL = dict(d_model=64, n_heads=4, d_ff=128, dropout=0.0, max_len=32)
TRICKY = ["Open the file.", "a literal <s> and </s> in the text", "  two  spaces\tand a tab ", "表格 emoji 🙂 é",
          "x"]


def _perturb(model: torch.nn.Module, seed: int = 0) -> None:
    """Move every parameter (LayerNorm ones/zeros, zero biases) off its init, so a swapped tensor shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)


def _write_run(path: Path, config: ModelConfig, src_kind: str = "bpe", tgt_kind: str = "char",
               readme: dict | None = None) -> Path:
    """A run directory (config, tokenizers, weights, train_config) of a random model, as load_run reads it."""
    src = train_tokenizer(src_kind, [s for s, _ in PAIRS], vocab_size=300 if src_kind == "bpe" else None)
    tgt = train_tokenizer(tgt_kind, [t for _, t in PAIRS] if config.arch == "encoder-decoder" else
                          [s for s, _ in PAIRS])
    config = config.replace(src_vocab_size=src.vocab_size if config.arch == "encoder-decoder" else tgt.vocab_size,
                            tgt_vocab_size=tgt.vocab_size)
    path.mkdir(parents=True)
    config.save(path / "config.json")
    src.save(path / "tokenizer_src.json")
    tgt.save(path / "tokenizer_tgt.json")
    (path / "train_config.json").write_text(json.dumps(dataclasses.asdict(TrainConfig(corpus="en-zh"))))
    if readme is not None:
        (path / "README.json").write_text(json.dumps(readme))
    torch.manual_seed(0)
    model = build_model(config)
    _perturb(model)
    save_weights(model, path / "model.safetensors")
    return path


def _marian_run(tmp_path: Path, readme: dict | None = None, name: str = "run", **overrides) -> Path:
    """Our paper layout (post-norm, interleaved sinusoids, relu), a BPE source and a char target tokenizer."""
    config = ModelConfig.preset("tiny", **{**SMALL, "tie_embeddings": True, **overrides})
    return _write_run(tmp_path / name, config, readme=readme)


def _seq2seq_batch(run):
    """Padded sources (with EOS) and padded targets starting with <s>, and the target mask."""
    src = [run.src_tok.encode(s) + [EOS_ID] for s, _ in PAIRS]
    tgt = [[BOS_ID, *run.tgt_tok.encode(t)] for _, t in PAIRS]
    pad = lambda rows: torch.tensor([r + [PAD_ID] * (max(map(len, rows)) - len(r)) for r in rows])  # noqa: E731
    src_t, tgt_t = pad(src), pad(tgt)
    return src_t, tgt_t, (tgt_t != PAD_ID)


def _cut(row: list[int], eos: int = EOS_ID) -> list[int]:
    """A Hugging Face output row without the start symbol and from EOS on (finished rows are padded)."""
    return row[: row.index(eos)] if eos in row else row


# -- the permutation, without transformers ---------------------------------------------------------------------
@pytest.mark.parametrize("d", [64, 63, 256])
def test_permutation_maps_interleaved_onto_concatenated_sinusoids(d):
    assert torch.equal(sinusoid_table(40, d, "concat"), sinusoid_table(40, d, "interleaved")[:, concat_permutation(d)])


@pytest.mark.parametrize("tie", [True, False])
def test_folded_model_computes_the_same_function(tie):
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=40, tie_embeddings=tie,
                                           **SMALL)).eval()
    _perturb(model)
    folded = exportable_model(model)
    assert (folded.config.positions, folded.config.decoder_start_id) == ("sinusoidal-concat", BOS_ID)
    src = torch.randint(4, 50, (3, 9), generator=torch.Generator().manual_seed(1))
    src[0, 6:], src[2, 3:] = PAD_ID, PAD_ID
    tgt = torch.randint(4, 40, (3, 7), generator=torch.Generator().manual_seed(2))
    tgt[:, 0] = BOS_ID
    assert greedy_decode(model, src) == greedy_decode(folded, src)
    with torch.no_grad():
        assert (model(src, tgt) - folded(src, tgt)).abs().max() < 1e-4  # float32: only the summation order differs
        model, folded = model.double(), folded.double()  # float64: the same function, to rounding
        assert (model(src, tgt) - folded(src, tgt)).abs().max() < 1e-10


def test_fold_refuses_a_parameter_it_does_not_know():
    with pytest.raises(ConfigError, match="src_embed.token_type.weight") as e:
        interleaved_to_concat({"src_embed.token_type.weight": torch.zeros(2, 8)}, 8)
    assert "\n" not in str(e.value)


# -- Marian --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tie,bias", [(True, True), (False, False)])
def test_marian_export_gives_our_logits_and_greedy_ids(tmp_path, tie, bias, equal_up_to_ties):
    transformers = pytest.importorskip("transformers")
    run = load_run(_marian_run(tmp_path, tie_embeddings=tie, generator_bias=bias))
    out = export_run(run.path, "hf", tmp_path / "hf")
    ref, info = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, output_loading_info=True)
    assert type(ref).__name__ == "MarianMTModel" and not info["unexpected_keys"]
    assert {k.split(".")[-2] for k in info["missing_keys"]} <= {"embed_positions"}  # a computed table
    src, tgt, tgt_mask = _seq2seq_batch(run)
    with torch.no_grad():
        wide = ref.eval()(input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt,
                          decoder_attention_mask=tgt_mask.long()).logits  # (B, L, max(V_src, V_tgt))
        ours = run.model(src, tgt)  # the run's own model: interleaved sinusoids
        theirs, extra = wide[..., : ours.size(-1)], wide[..., ours.size(-1):]
        assert (ours - theirs)[tgt_mask].abs().max() < 1e-4
        assert extra.numel() and (extra < -1e3).all()  # ids past the target vocabulary: never generated
        hf_ids = ref.generate(input_ids=src, attention_mask=(src != PAD_ID).long(), num_beams=1)  # generation_config
    mine = greedy_decode(run.model, src)
    equal_up_to_ties(run.model, [r[r != PAD_ID].tolist() for r in src], mine, [_cut(r[1:]) for r in hf_ids.tolist()])
    assert len({tuple(m) for m in mine}) > 1  # outputs differ between sentences: the comparison bites


def test_unequal_vocabularies_are_padded_to_one_size_for_transformers_4(tmp_path):
    """transformers 4.x sizes the decoder's embedding by vocab_size whatever decoder_vocab_size says: the export
    pads the smaller table (zero rows) and biases the extra output ids to -1e4, so both majors load it
    (tests/clients loads it in 4.42.4 and 4.57.6 themselves)."""
    from safetensors.torch import load_file

    from scratchformer.export.hf import PAD_LOGIT

    run = load_run(_marian_run(tmp_path))
    c = run.model_config
    assert c.src_vocab_size != c.tgt_vocab_size and c.tie_embeddings
    out = export_run(run.path, "hf", tmp_path / "hf")
    hf = json.loads((out / "config.json").read_text())
    big = max(c.src_vocab_size, c.tgt_vocab_size)
    assert (hf["vocab_size"], hf["decoder_vocab_size"], hf["share_encoder_decoder_embeddings"]) == (big, big, False)
    tensors = load_file(str(out / "model.safetensors"))
    dec, bias = tensors["model.decoder.embed_tokens.weight"], tensors["final_logits_bias"]
    assert dec.shape == (big, c.d_model) and bias.shape == (1, big) and "lm_head.weight" not in tensors  # tied
    table = run.model.tgt_embed.token.weight.detach()[:, concat_permutation(c.d_model)]  # (V_tgt, D), folded
    assert torch.equal(dec[: c.tgt_vocab_size], table)
    assert not dec[c.tgt_vocab_size:].any() and (bias[0, c.tgt_vocab_size:] == PAD_LOGIT).all()
    assert "transformers 4.42-4.57 and 5.x" in (out / "README.md").read_text()


def test_marian_beam_without_length_penalty_gives_our_beam(tmp_path):
    transformers = pytest.importorskip("transformers")
    run = load_run(_marian_run(tmp_path))
    ref = transformers.AutoModelForSeq2SeqLM.from_pretrained(export_run(run.path, "hf", tmp_path / "hf")).eval()
    src, _, _ = _seq2seq_batch(run)
    with torch.no_grad():
        hf_ids = ref.generate(input_ids=src, attention_mask=(src != PAD_ID).long(), num_beams=4, length_penalty=0.0)
    ours = [h[0].tokens for h in beam_search(run.model, src, Search(beam=4, alpha=0.0))]
    assert [_cut(r[1:]) for r in hf_ids.tolist()] == ours


def test_marian_folder_files_and_model_card(tmp_path):
    transformers = pytest.importorskip("transformers")
    yaml = pytest.importorskip("yaml")
    readme = {"test": {"beam1": {"bleu": 41.5, "chrf": 39.2, "sentences": 1000},
                       "beam4": {"bleu": 42.0, "chrf": 40.1, "sentences": 1000}}}
    run_dir = _marian_run(tmp_path, readme=readme)
    out = export_run(run_dir, "hf", tmp_path / "hf")
    hf = json.loads((out / "config.json").read_text())
    assert (hf["model_type"], hf["architectures"]) == ("marian", ["MarianMTModel"])
    assert (hf["decoder_start_token_id"], hf["bos_token_id"], hf["eos_token_id"], hf["pad_token_id"]) == (1, 1, 2, 0)
    gen = transformers.GenerationConfig.from_pretrained(out)
    assert (gen.decoder_start_token_id, gen.eos_token_id, gen.pad_token_id, gen.num_beams) == (BOS_ID, EOS_ID, 0, 4)
    assert gen.length_penalty == 0.5 and gen.max_length == SMALL["max_len"] + 1 and gen.bad_words_ids == [[PAD_ID]]
    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["license"] == "mpl-2.0" and meta["language"] == ["en", "zh"] and meta["datasets"] == ["en-zh"]
    figures = {(m["type"], m["value"]) for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert figures == {("bleu", 41.5), ("chrf", 39.2), ("bleu", 42.0), ("chrf", 40.1)}
    assert "logP / |Y|^length_penalty" in card and "((5 + |Y|) / 6)^alpha" in card
    assert (out / "target_tokenizer" / "tokenizer.json").is_file()
    assert "Text-level decoding" not in card  # no decoding.json: nothing generate leaves out


def test_hf_export_follows_the_runs_decoding_json(tmp_path):
    """decoding.json's alpha becomes a length_penalty of the same slope at |Y| = 25; what generate cannot do
    (split sentences, repair copies) is said in the card."""
    from scratchformer.config.decoding import length_penalty_for

    assert (length_penalty_for(0.6), length_penalty_for(1.5), length_penalty_for(0.0)) == (0.5, 1.25, 0.0)
    run_dir = _marian_run(tmp_path)
    (run_dir / "decoding.json").write_text('{"alpha": 1.5, "split_sentences": true, "repair_copies": true}')
    out = export_run(run_dir, "hf", tmp_path / "hf")
    assert json.loads((out / "generation_config.json").read_text())["length_penalty"] == 1.25
    card = (out / "README.md").read_text()
    assert "alpha 1.5" in card and "`length_penalty=1.25`" in card
    assert "split_sentences and repair_copies" in card and "`generate` does neither" in card


@pytest.mark.parametrize("kind", ["bpe", "char"])
def test_tokenizer_files_encode_and_decode_as_ours(tmp_path, kind):
    transformers = pytest.importorskip("transformers")
    run = load_run(_write_run(tmp_path / "run", ModelConfig.preset("tiny", **SMALL), src_kind=kind))
    out = export_run(run.path, "hf", tmp_path / "hf")
    auto = transformers.AutoTokenizer.from_pretrained(out)
    plain = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"), bos_token="<s>",
                                                 eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                                 split_special_tokens=True)
    for text in TRICKY:
        ids = run.src_tok.encode(text)
        assert auto(text)["input_ids"] == plain(text)["input_ids"] == [*ids, EOS_ID], text
        assert auto.decode(ids, skip_special_tokens=True) == run.src_tok.decode(ids), text
    target = transformers.AutoTokenizer.from_pretrained(out, subfolder="target_tokenizer")
    for _, text in PAIRS:
        ids = run.tgt_tok.encode(text)
        assert target(text)["input_ids"] == [*ids, EOS_ID]
        assert target.decode([BOS_ID, *ids, EOS_ID, PAD_ID], skip_special_tokens=True) == run.tgt_tok.decode(ids)


def test_tokenizer_json_spells_bpe_merges_as_every_tokenizers_release_reads_them(tmp_path):
    """tokenizers >= 0.20 saves merges as [a, b] pairs, which tokenizers 0.19 (transformers 4.42-4.44 pin it)
    cannot parse; the export writes the "a b" strings both read, and they load to the same tokenizer here."""
    from tokenizers import Tokenizer

    run = load_run(_write_run(tmp_path / "run", ModelConfig.preset("tiny", **SMALL), src_kind="bpe"))
    out = export_run(run.path, "hf", tmp_path / "hf")
    merges = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert merges and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)
    assert merges == [" ".join(m) for m in json.loads(run.src_tok.hf.to_str())["model"]["merges"]]
    loaded = Tokenizer.from_file(str(out / "tokenizer.json"))
    loaded.encode_special_tokens = True  # a literal "<s>" is text, as the card tells a user to set
    for text in TRICKY:
        assert loaded.encode(text, add_special_tokens=False).ids == run.src_tok.encode(text), text


# -- GPT-2 and BERT -------------------------------------------------------------------------------------------
def test_gpt2_export_gives_our_logits_and_greedy_ids(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = ModelConfig.preset("gpt-tiny", **{**SMALL, "n_decoder_layers": 2, "activation": "gelu-tanh"})
    run = load_run(_write_run(tmp_path / "run", config))
    out = export_run(run.path, "hf", tmp_path / "hf")
    ref, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert type(ref).__name__ == "GPT2LMHeadModel" and not info["missing_keys"] and not info["unexpected_keys"]
    tok = transformers.AutoTokenizer.from_pretrained(out)
    prompts = ["Open the", "Save", "Click OK to"]
    batch = tok(prompts, return_tensors="pt", padding=True)  # <s> + text, left-padded
    assert [[i for i in row if i != PAD_ID] for row in batch["input_ids"].tolist()] == \
        [[BOS_ID, *run.tgt_tok.encode(p)] for p in prompts]
    mask = batch["attention_mask"]
    with torch.no_grad():
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)  # as GenerationMixin derives them
        theirs = ref.eval()(**batch, position_ids=positions).logits
        ours = run.model(batch["input_ids"], attention_mask=mask)
        assert (ours - theirs)[mask.bool()].abs().max() < 1e-4
        hf_ids = ref.generate(**batch, max_new_tokens=8)
    mine = sample(run.model, [[BOS_ID, *run.tgt_tok.encode(p)] for p in prompts],
                  Sampling(max_new_tokens=8, temperature=0, eos=EOS_ID))
    assert [_cut(r[batch["input_ids"].size(1):]) for r in hf_ids.tolist()] == mine
    assert len({tuple(m) for m in mine}) > 1


def test_bert_export_gives_our_hidden_states(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = ModelConfig.preset("bert-tiny", **{**SMALL, "n_encoder_layers": 2})
    run = load_run(_write_run(tmp_path / "run", config, tgt_kind="bpe"))
    out = export_run(run.path, "hf", tmp_path / "hf")
    ref = transformers.AutoModel.from_pretrained(out).eval()
    assert type(ref).__name__ == "BertModel" and not (out / "generation_config.json").exists()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    batch = tok([s for s, _ in PAIRS], return_tensors="pt", padding=True, truncation=True)
    assert tok(PAIRS[0][0])["input_ids"] == [BOS_ID, *run.tgt_tok.encode(PAIRS[0][0]), EOS_ID]
    with torch.no_grad():
        theirs = ref(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        ours = run.model(batch["input_ids"], attention_mask=batch["attention_mask"])
    assert (ours - theirs)[batch["attention_mask"].bool()].abs().max() < 1e-4


# -- what cannot be exported: one line -------------------------------------------------------------------------
def test_refusals_are_one_line(tmp_path):
    cases = [(_write_run(tmp_path / "word", ModelConfig.preset("tiny", **SMALL), tgt_kind="word"), None,
              "tokenizer kind 'word'"),
             (_marian_run(tmp_path, name="pre", norm="pre"), None, "norm_placement='pre'"),
             (_marian_run(tmp_path, name="int8"), "int8", "--quantization int8")]
    for run_dir, quantization, field in cases:
        with pytest.raises(ConfigError, match=field) as e:
            export_run(run_dir, "hf", tmp_path / f"out-{run_dir.name}", quantization=quantization)
        assert "\n" not in str(e.value)
    assert not any((tmp_path / f"out-{n}").exists() for n in ("word", "pre", "int8"))  # refused before writing


def test_cli_export_and_existing_folder(tmp_path, capsys):
    from scratchformer.cli import main

    run_dir = _marian_run(tmp_path)
    argv = ["export", str(run_dir), "--format", "hf", "--out", str(tmp_path / "hf")]
    assert main(argv) == 0 and (tmp_path / "hf" / "model.safetensors").is_file()
    capsys.readouterr()  # the first export's progress lines
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--overwrite" in err and "\n" not in err


# -- the shipped model ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_shipped_model_exports_and_decodes_as_ours(tmp_path):
    """models/en-zh: logits max |diff| on padded batches, HF greedy == ours on the first 100 test sentences, and
    how often HF's beam 4 (generation_config.json: the length_penalty of the run's alpha, hf.length_penalty_for)
    equals ours (GNMT, the run's alpha from decoding.json): printed with -s, the README's figures."""
    transformers = pytest.importorskip("transformers")
    from scratchformer.data.corpus import load_pairs

    transformers.logging.set_verbosity_error()  # "max_new_tokens and max_length both set": meant

    run = load_run(ROOT / "models" / "en-zh")
    out = export_run(run.path, "hf", tmp_path / "hf")
    ref = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    pairs = load_pairs("en-zh", "test")[:100]
    srcs = [s for s, _ in pairs]
    ids = [run.src_tok.encode(s)[: run.model.config.max_positions - 1] + [EOS_ID] for s in srcs]
    assert [tok(s, truncation=True)["input_ids"] for s in srcs] == ids
    ours = greedy_decode(run.model, ids)
    alpha = run.decoding.alpha
    lp = json.loads((out / "generation_config.json").read_text())["length_penalty"]
    ours_beam = [h[0].tokens for i in range(0, len(ids), 20)
                 for h in beam_search(run.model, ids[i:i + 20], Search(beam=4, alpha=alpha))]
    same, same_beam, diff = 0, 0, 0.0
    for i in range(0, len(srcs), 20):
        batch = tok(srcs[i:i + 20], return_tensors="pt", padding=True, truncation=True)
        limits = [min(len(s) + 50, run.model.config.max_positions) for s in ids[i:i + 20]]  # ours: source + 50
        tgt = [[BOS_ID, *run.tgt_tok.encode(t)] for _, t in pairs[i:i + 20]]
        tgt_t = torch.tensor([r + [PAD_ID] * (max(map(len, tgt)) - len(r)) for r in tgt])
        with torch.no_grad():
            theirs = ref(**batch, decoder_input_ids=tgt_t, decoder_attention_mask=(tgt_t != PAD_ID).long()).logits
            mine = run.model(batch["input_ids"], tgt_t)
            theirs = theirs[..., : mine.size(-1)]  # the padded ids past the target vocabulary (even_vocabularies)
            diff = max(diff, float((mine - theirs)[tgt_t != PAD_ID].abs().max()))
            hf_ids = ref.generate(**batch, num_beams=1, max_new_tokens=max(limits))
            hf_beam = ref.generate(**batch, max_new_tokens=max(limits))  # generation_config: beam 4
        for j, (row, beam_row) in enumerate(zip(hf_ids.tolist(), hf_beam.tolist())):
            same += _cut(row[1:])[: limits[j]] == ours[i + j]
            same_beam += _cut(beam_row[1:]) == ours_beam[i + j]
    print(f"\nmodels/en-zh -> hf: logits max |diff| {diff:.2e} (5 padded batches of 20 test pairs); HF greedy == "
          f"ours on {same} of {len(srcs)} test sentences; HF beam 4 (length_penalty {lp}) == ours (alpha {alpha}) "
          f"on {same_beam}")
    assert diff < 1e-4 and same == len(srcs) and same_beam >= 0.9 * len(srcs)  # 94 at alpha 1.5 (README)


def test_the_export_says_only_what_applies_to_its_format(tiny_run, tmp_path):
    """The progress line of an hf export (2-3 s) does not warn of ONNX's minute-long trace; onnx's does."""
    from scratchformer.export.formats import FORMATS, load_module

    lines = []
    export_run(tiny_run, "hf", tmp_path / "hf", progress=lines.append)
    assert len(lines) == 1 and "minute" not in lines[0] and "onnx" not in lines[0]
    notes = {fmt: getattr(load_module(FORMATS, fmt, "export format", "export"), "EXPORT_NOTE", "")
             for fmt in ("hf", "onnx")}
    assert "minute" in notes["onnx"] and not notes["hf"]
