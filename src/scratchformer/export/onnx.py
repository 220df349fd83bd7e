"""ONNX: a run written as three graphs, as Optimum writes seq2seq models. Decoding with them is the onnxruntime
engine's (engines/onnx.py: our own search over onnxruntime sessions); this file only writes files.

    export(run, out)                         out/encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx,
                                             config.json, generation_config.json, tokenizer.json (+ config,
                                             target_tokenizer/), scratchformer_onnx.json, decoding.json,
                                             README.md
    cached_export(run)                       the folder the engine decodes with: RUN_DIR/export/onnx/, stamped with
                                             a sha256 of the weights the run holds (and of its config), exported
                                             again when they change

The folder is what Optimum's ORTModelForSeq2SeqLM.from_pretrained(out) loads: its file names, graph input and
output names (onnx_graphs.py), a Marian-shaped config.json (only what Optimum reads: the graphs hold the weights)
and the generation_config.json of the HF export (beam, the run's alpha as a length_penalty, max length, the
start symbol), so `generate` decodes as the HF export does. The graphs are described in onnx_graphs.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from scratchformer import __version__
from scratchformer.config.budget import PAPER_EXTRA_LEN
from scratchformer.data.tokenizers import EOS_ID
from scratchformer.decoding.common import special_ids
from scratchformer.errors import N_, ConfigError
from scratchformer.export import formats, hf, hf_card, onnx_graphs
from scratchformer.export.formats import weights_digest
from scratchformer.runs import Run

GRAPHS = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")
META = "scratchformer_onnx.json"  # what a C++ or TensorFlow user needs besides the graphs
STAMP = "stamp.json"
EXPORT_NOTE = "onnx traces the model, a minute or more"  # said when an export starts (formats.export_run)
EXPORT_VERSION = 3  # bump when the files change: cached exports are then rebuilt (3: legacy BPE merges)
QUANTIZATIONS = ("float32", "int8")  # --quantization (int8: onnxruntime's dynamic quantization of the MatMul weights)


def check_expressible(run: Run) -> None:
    """The graphs run our own modules, so every encoder-decoder exports; other architectures do not (yet)."""
    arch = run.model_config.arch
    if arch != "encoder-decoder":
        raise ConfigError(N_("arch={arch!r}: the ONNX export covers translation models (arch='encoder-decoder')"),
                          arch=arch)


def export(run: Run, out: Path, quantization: str | None = None, **options: object) -> None:
    """The three graphs (float32, or int8 weights through onnxruntime's dynamic quantization), Optimum's
    config.json and generation_config.json, the tokenizers, scratchformer_onnx.json and a README.md, into the
    empty folder `out`."""
    if quantization not in (None, "float32", "int8"):
        raise ConfigError(N_("--quantization {quantization}: the ONNX export writes float32 or int8"),
                          quantization=quantization)
    out = Path(out)
    onnx_graphs.export_graphs(run.model, out)
    if quantization == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        for name in GRAPHS:  # MatMul weights to int8, activations quantized on the fly
            path = out / name
            quantize_dynamic(path, path, weight_type=QuantType.QInt8)
    write_json(out / "config.json", optimum_config(run))
    write_json(out / "generation_config.json", hf.generation_config(hf.exportable_config(run.model_config),
                                                                    run.decoding.alpha, run.decoding.beam))
    tokenizer_dirs = tokenizer_files(run, out)
    write_json(out / META, _meta(run, quantization or "float32"))
    hf_card.write_decoding(run, out)
    (out / "README.md").write_text(hf_card.client_readme(run, "onnx", tokenizer_dirs), encoding="utf-8")


def write_json(file: Path, data: dict) -> None:
    file.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def tokenizer_files(run: Run, out: Path, template: str | None = None) -> list[str]:
    """Standard tokenizer files (hf.write_tokenizers: tokenizer.json, target_tokenizer/); a `word` tokenizer,
    which has no tokenizer.json equivalent, is saved in scratchformer's own format (tokenizer_src/tgt.json)
    instead. Returns the sub-folders holding a tokenizer.json ([] for the fallback)."""
    try:
        return hf.write_tokenizers(run, out, template)
    except ConfigError:
        for side in ("src", "tgt"):
            getattr(run, f"{side}_tok").save(out / f"tokenizer_{side}.json")
        return []


def optimum_config(run: Run) -> dict:
    """config.json as Optimum reads it for an encoder-decoder: model_type (AutoConfig), the decoder's heads and
    width (its empty past and output shapes), vocab_size (the logits' width: the target vocabulary), the ids."""
    c = hf.exportable_config(run.model_config)
    return {"architectures": ["MarianMTModel"], "model_type": "marian", "is_encoder_decoder": True,
            "d_model": c.d_model, "encoder_layers": c.n_encoder_layers, "decoder_layers": c.n_decoder_layers,
            "encoder_attention_heads": c.n_heads, "decoder_attention_heads": c.n_heads, "encoder_ffn_dim": c.d_ff,
            "decoder_ffn_dim": c.d_ff, "vocab_size": c.tgt_vocab_size, "decoder_vocab_size": c.tgt_vocab_size,
            "scratchformer_src_vocab_size": c.src_vocab_size,  # the graphs' own; vocab_size is the logits' width
            "share_encoder_decoder_embeddings": False, "max_position_embeddings": c.max_positions, "use_cache": True,
            **hf.token_ids(c)}


def _meta(run: Run, quantization: str) -> dict:
    c = run.model_config
    bos, eos, pad = special_ids(run.model, None, None, None)
    n = c.n_decoder_layers
    return {"format": "scratchformer-onnx", "version": EXPORT_VERSION, "scratchformer": __version__,
            "quantization": quantization, "graphs": list(GRAPHS),
            "decoder_start_id": bos, "eos_id": eos, "pad_id": pad, "max_positions": c.max_positions,
            "n_decoder_layers": n, "n_heads": c.n_heads, "d_k": c.head_dim_k, "d_v": c.head_dim_v,
            "d_model": c.d_model, "src_vocab_size": c.src_vocab_size, "tgt_vocab_size": c.tgt_vocab_size,
            "inputs": {"decoder_model": onnx_graphs.input_names(n, False),
                       "decoder_with_past_model": onnx_graphs.input_names(n, True)},
            "outputs": {"decoder_model": onnx_graphs.output_names(n, False),
                        "decoder_with_past_model": onnx_graphs.output_names(n, True)},
            "decoding": {"source": f"tokenizer_src ids[:max_positions - 1] + [{EOS_ID}]",
                         "max_output_tokens": f"source length + {PAPER_EXTRA_LEN}, at most max_positions, EOS not "
                                              "counted",
                         "length_penalty": "score = log P(Y) / ((5 + |Y|) / 6) ** alpha, |Y| counting EOS",
                         "beam": run.decoding.beam, "alpha": run.decoding.alpha,
                         "split_sentences": run.decoding.split_sentences,
                         "repair_copies": run.decoding.repair_copies}}


# -- the cache in the run directory -----------------------------------------------------------------------------

def weights_stamp(run: Run) -> dict:
    """sha256 of the run's weights as loaded (model.safetensors, or the --weights file) and of its config."""
    config = json.dumps(run.model_config.to_dict(), sort_keys=True)
    digest = hashlib.sha256((config + weights_digest(run.model)).encode())
    return {"version": EXPORT_VERSION, "sha256": digest.hexdigest()}


def cached_export(run: Run) -> Path:
    """RUN_DIR/export/onnx/, exported now unless its stamp matches the run's weights (export/formats.py keeps
    the cache)."""
    stamp = weights_stamp(run)

    def write(folder: Path) -> None:
        export(run, folder)
        (folder / STAMP).write_text(json.dumps(stamp) + "\n")

    return formats.cached_export(run, "onnx", stamp, write, STAMP,
                                 complete=lambda folder: all((folder / g).is_file() for g in GRAPHS))
