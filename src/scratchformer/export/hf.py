"""Hugging Face export (`scratchformer export RUN --format hf --out DIR`): a folder `transformers` loads with
AutoModelForSeq2SeqLM (encoder-decoder -> Marian), AutoModelForCausalLM (decoder -> GPT-2) or AutoModel
(encoder -> BERT), with the same outputs as ours.

    DIR/config.json, model.safetensors   interop/huggingface.save_pretrained, after `exportable_model`
    DIR/generation_config.json           start / end / pad ids; seq2seq: num_beams 4, length_penalty, PAD banned
    DIR/tokenizer.json                   the input tokenizer (source; the only one of a decoder or encoder run)
    DIR/tokenizer_config.json            so that AutoTokenizer.from_pretrained(DIR) reads it
    DIR/target_tokenizer/                the target tokenizer, when it differs from the source one
    DIR/decoding.json                    seq2seq: the run's decoding settings (its alpha: the card's GNMT ranking)
    DIR/README.md                        the model card (export/hf_card.py)

The paper's interleaved sinusoids are folded into the weights as a fixed permutation of the D dimensions
(interop/hf_marian.interleaved_to_concat, exact), and our decoder's start symbol <s> becomes Marian's
decoder_start_token_id. Tokenizers: a subword tokenizer already wraps a `tokenizers` object and is saved as is;
a `char` one becomes an equivalent WordLevel model; `word` (its detokenizer's spacing rules have no
`tokenizers` decoder) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from scratchformer.config import ModelConfig
from scratchformer.config.decoding import DecodingOptions, length_penalty_for
from scratchformer.data.tokenizers import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, Tokenizer
from scratchformer.errors import N_, ConfigError
from scratchformer.export import hf_card
from scratchformer.export.hf_card import model_card
from scratchformer.interop.hf_marian import interleaved_to_concat
from scratchformer.interop.huggingface import check_expressible as check_config
from scratchformer.interop.huggingface import save_pretrained
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase
from scratchformer.runs import Run
from scratchformer.runs.weights import read_tensors, save_state

PAD_LOGIT = -1e4  # the output bias of ids past the target vocabulary (even_vocabularies): exp(-1e4 - max) is 0
# What the tokenizer adds around a text, per arch and side (our batching: src + </s>, <s> + tgt + </s>; LM
# prompts <s> + text; encoder inputs <s> + text + </s>).
TEMPLATES = {"encoder-decoder": f"$A {EOS}", "decoder": f"{BOS} $A", "encoder": f"{BOS} $A {EOS}"}


def exportable_config(c: ModelConfig) -> ModelConfig:
    """The config of the model actually written: interleaved sinusoids -> concatenated, and the decoder's start
    symbol named (ours: <s>) for an encoder-decoder; unchanged otherwise."""
    if c.arch != "encoder-decoder":
        return c
    changes: dict[str, Any] = {}
    if c.positions == "sinusoidal":
        changes["positions"] = "sinusoidal-concat"
    if c.decoder_start_id is None and c.extra.get("decoder_start_token_id") is None:
        changes["decoder_start_id"] = BOS_ID  # what decoding/common.special_ids starts from
    return c.replace(**changes) if changes else c


def exportable_model(model: TransformerBase) -> TransformerBase:
    """A model computing the same function that save_pretrained can write (a task head is left behind:
    AutoModel gives BertModel's hidden states)."""
    base = getattr(model, "base", model)
    c = exportable_config(base.config)
    if c is base.config:
        return base
    state = base.state_dict()
    if c.positions != base.config.positions:
        state = interleaved_to_concat(state, c.d_model)
    new = build_model(c)
    new.load_state_dict(state)
    return new.eval()


def token_ids(c: ModelConfig) -> dict[str, int | None]:
    """bos / eos / pad (and the decoder's start) ids: an imported model's own, else our tokenizers' specials."""
    ids = {"bos_token_id": c.extra.get("bos_token_id", BOS_ID), "eos_token_id": c.extra.get("eos_token_id", EOS_ID),
           "pad_token_id": c.pad_id if c.pad_id is not None else PAD_ID}
    if c.arch == "encoder-decoder":
        start = c.decoder_start_id if c.decoder_start_id is not None else c.extra.get("decoder_start_token_id")
        ids["decoder_start_token_id"] = start
    return ids


def generation_config(c: ModelConfig, alpha: float = DecodingOptions.alpha,
                      beam: int = DecodingOptions.beam) -> dict[str, Any] | None:
    """generation_config.json: our search's defaults as far as Hugging Face's options reach (None: an encoder);
    alpha: the run's own (decoding.json), as a length_penalty of the same slope (length_penalty_for)."""
    if c.arch == "encoder":
        return None
    ids = token_ids(c)
    # max_length counts the start symbol: max_len + 1 lets the decoder see positions 0 .. max_len - 1, as ours
    gen: dict[str, Any] = {**ids, "max_length": c.max_positions + 1, "do_sample": False}
    if c.arch == "encoder-decoder":
        gen.update(num_beams=beam, length_penalty=length_penalty_for(alpha), early_stopping=False,
                   forced_eos_token_id=None,
                   bad_words_ids=[[ids["pad_token_id"]]])  # ours never emits PAD (greedy and beam search)
    return gen


def _tokenizer_problem(tok: Tokenizer) -> str | None:
    if tok.kind == "word":
        return N_("tokenizer kind 'word' has no tokenizer.json equivalent (its detokenizer's spacing rules are no "
                  "`tokenizers` decoder): train the run with --tokenizer bpe, unigram or char")
    return None


def check_expressible(run: Run) -> None:
    """One-line ConfigError naming the field a Hugging Face folder cannot express."""
    check_config(exportable_config(getattr(run.model, "base", run.model).config))
    for tok in _tokenizers(run).values():
        problem = _tokenizer_problem(tok)
        if problem:
            raise ConfigError(problem)


def _tokenizers(run: Run) -> dict[str, Tokenizer]:
    """Sub-folder ("" = DIR itself) -> tokenizer: the input one, and the target one where it differs."""
    if run.model_config.arch != "encoder-decoder":
        return {"": run.tgt_tok}
    if run.src_tok is run.tgt_tok or run.src_tok.to_dict() == run.tgt_tok.to_dict():
        return {"": run.src_tok}
    return {"": run.src_tok, "target_tokenizer": run.tgt_tok}


def hf_tokenizer(tok: Tokenizer, template: str) -> Any:
    """A `tokenizers.Tokenizer` that encodes and decodes as `tok` does, adding the specials of `template`."""
    from tokenizers import Regex, decoders, models, pre_tokenizers, processors
    from tokenizers import Tokenizer as HFTokenizer

    if problem := _tokenizer_problem(tok):
        raise ConfigError(problem)
    if tok.kind == "char":
        hf = HFTokenizer(models.WordLevel({t: i for i, t in enumerate(tok.tokens)}, unk_token=UNK))
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one piece per character
        hf.decoder = decoders.Fuse()  # joined without spaces
        hf.add_special_tokens(list(SPECIALS))  # already ids 0-3 of the vocabulary
    else:
        hf = HFTokenizer.from_str(tok.hf.to_str())
    hf.post_processor = processors.TemplateProcessing(single=template, special_tokens=[(BOS, BOS_ID), (EOS, EOS_ID)])
    return hf


def save_tokenizer_json(hf: Any, path: Path) -> None:
    """`hf` (a `tokenizers.Tokenizer`) as the file every `tokenizers` release since 0.19 reads: BPE merges as "a b"
    strings, not the [a, b] pairs that tokenizers >= 0.20 writes and 0.19 (transformers 4.40-4.44's) refuses ("data
    did not match any variant of untagged enum ModelWrapper"). Pairs stay where a part holds a space (no legacy
    spelling exists); ByteLevel and Metaspace BPE never do."""
    data = json.loads(hf.to_str())
    model = data.get("model") or {}
    merges = model.get("merges")
    if merges and all(isinstance(m, list) and len(m) == 2 and " " not in m[0] + m[1] for m in merges):
        model["merges"] = [f"{a} {b}" for a, b in merges]
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")


def write_tokenizers(run: Run, out: Path, template: str | None = None) -> list[str]:
    """tokenizer.json + tokenizer_config.json (PreTrainedTokenizerFast) of the input side in `out`, and of the
    target side in out/target_tokenizer/ where it differs: standard files `tokenizers.Tokenizer.from_file` and
    AutoTokenizer read. template: the specials added around a text (default: the run's batching, TEMPLATES).
    Returns the sub-folders written ("" = out)."""
    tokenizers = _tokenizers(run)
    arch = run.model_config.arch
    for sub, tok in tokenizers.items():
        _save_tokenizer(tok, arch, out / sub, run.model_config.max_positions, template or TEMPLATES[arch])
    return sorted(tokenizers)


def _save_tokenizer(tok: Tokenizer, arch: str, folder: Path, max_len: int, template: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_tokenizer_json(hf_tokenizer(tok, template), folder / "tokenizer.json")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS, "pad_token": PAD,
              "unk_token": UNK, "model_max_length": max_len, "clean_up_tokenization_spaces": False,
              "split_special_tokens": True,  # a literal "<s>" in the text is text, as in ours
              "model_input_names": ["input_ids", "attention_mask"],  # transformers 4.x would add token_type_ids
              "padding_side": "left" if arch == "decoder" else "right"}  # prompts are continued at the right end
    _write_json(folder / "tokenizer_config.json", config)


def even_vocabularies(out: Path, hf: dict[str, Any]) -> dict[str, Any]:
    """A Marian folder whose two vocabularies differ in size, rewritten so that transformers 4.x loads it too.

    transformers 4.x builds the decoder's embedding as a copy of the source one (vocab_size rows) whatever
    decoder_vocab_size says, so a target table of another size fails to load ("size mismatch ... [1743, 256] vs
    [8000, 256]"); 5.x sizes it by decoder_vocab_size. Both majors load a folder where the two sizes are equal:
    the smaller table gets zero rows up to V = max(sizes), and the output's extra ids a bias of PAD_LOGIT, so
    they are never generated (softmax gives them 0 in float32) and the logits of the real ids are unchanged.
    The target tokenizer keeps its own size: ids >= its vocabulary never come out. Returns the updated config."""
    src, tgt = hf.get("vocab_size"), hf.get("decoder_vocab_size")
    if hf.get("model_type") != "marian" or tgt is None or src == tgt:
        return hf
    big = max(src, tgt)
    tensors = read_tensors(out / "model.safetensors")

    def grow(t: torch.Tensor, fill: float = 0.0) -> torch.Tensor:  # (n, ...) -> (big, ...), new rows `fill`
        return torch.cat([t, t.new_full((big - t.size(0), *t.shape[1:]), fill)]) if t.size(0) < big else t

    for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
        if name in tensors:
            tensors[name] = grow(tensors[name]).contiguous()
    bias = tensors.get("final_logits_bias", torch.zeros(1, tgt))  # (1, V_tgt); absent: Marian's zeros
    tensors["final_logits_bias"] = grow(bias.T, PAD_LOGIT).T.contiguous()  # (1, big)
    save_state(tensors, out / "model.safetensors")  # runs/: a failed write is one CheckpointWriteError
    return {**hf, "vocab_size": big, "decoder_vocab_size": big}


def _write_json(file: Path, data: dict[str, Any]) -> None:
    file.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def export(run: Run, out: Path, quantization: str | None = None, **options: Any) -> None:
    """Write the Hugging Face folder of `run` into the empty folder `out`."""
    if quantization not in (None, "float32"):
        raise ConfigError(N_("--quantization {quantization}: the Hugging Face export is float32 only (quantize it "
                             "in transformers, e.g. with torch.ao.quantization or bitsandbytes)"),
                          quantization=quantization)
    model = exportable_model(run.model)
    c = model.config
    save_pretrained(model, out, save=save_state)
    hf = even_vocabularies(out, json.loads((out / "config.json").read_text(encoding="utf-8")))
    (out / "model.safetensors").chmod((out / "config.json").stat().st_mode & 0o777)  # safetensors writes 0600
    hf.update({k: v for k, v in token_ids(c).items() if hf.get(k) is None})
    _write_json(out / "config.json", hf)
    gen = generation_config(c, run.decoding.alpha, run.decoding.beam)
    if gen is not None:
        _write_json(out / "generation_config.json", gen)
    if c.arch == "encoder-decoder":
        hf_card.write_decoding(run, out)
    (out / "README.md").write_text(model_card(run, hf, gen, write_tokenizers(run, out)), encoding="utf-8")
