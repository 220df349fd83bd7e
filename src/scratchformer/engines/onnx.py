"""ONNX: the export (three graphs, as Optimum writes seq2seq models) and the onnxruntime engine that decodes with them.

    export(run, out)                         out/encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx,
                                             config.json, generation_config.json, tokenizer.json (+ config,
                                             target_tokenizer/), scratchformer_onnx.json, README.md
    Backend(run).search(src_ids, beam=4)     greedy or beam search on onnxruntime (CPUExecutionProvider)

The folder is what Optimum's ORTModelForSeq2SeqLM.from_pretrained(out) loads: its file names, graph input and
output names (onnx_graphs.py), a Marian-shaped config.json (only what Optimum reads: the graphs hold the weights)
and the generation_config.json of the HF export (beam, the run's alpha as a length_penalty, max length, the
start symbol), so `generate` decodes as the HF export does.

The graphs are described in onnx_graphs.py. The engine drives our own search (decoding/beam.py's
`beam_search_core`; beam 1 is greedy there, exactly) with a step function backed by onnxruntime sessions
(`OnnxSteps`), so the output rule is ours: the same length budget, length penalty, EOS and PAD handling.
It exports on first use into RUN_DIR/export/onnx/, stamped with a sha256 of the weights the run holds (and of
its config), and exports again when they change.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from scratchformer import __version__
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import EOS_ID
from scratchformer.decoding.beam import beam_search_core
from scratchformer.decoding.common import NEG_INF, PAPER_EXTRA_LEN, length_limits, pad_ids, special_ids
from scratchformer.decoding.quantize import Int8Linear
from scratchformer.decoding.results import Hyp
from scratchformer.engines import formats, hf, hf_card, onnx_graphs
from scratchformer.engines.formats import weights_digest
from scratchformer.errors import ConfigError
from scratchformer.runs import Run

GRAPHS = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")
META = "scratchformer_onnx.json"  # what a C++ or TensorFlow user needs besides the graphs
STAMP = "stamp.json"
EXPORT_VERSION = 2  # bump when the graphs change: cached exports are then rebuilt
QUANTIZATIONS = ("float32", "int8")  # --quantization (int8: onnxruntime's dynamic quantization of the MatMul weights)


def check_expressible(run: Run) -> None:
    """The graphs run our own modules, so every encoder-decoder exports; other architectures do not (yet)."""
    arch = run.model_config.arch
    if arch != "encoder-decoder":
        raise ConfigError(f"arch={arch!r}: the ONNX export covers translation models (arch='encoder-decoder')")


def export(run: Run, out: Path, quantization: str | None = None, **options: object) -> None:
    """The three graphs (float32, or int8 weights through onnxruntime's dynamic quantization), Optimum's
    config.json and generation_config.json, the tokenizers, scratchformer_onnx.json and a README.md, into the
    empty folder `out`."""
    if quantization not in (None, "float32", "int8"):
        raise ConfigError(f"--quantization {quantization}: the ONNX export writes float32 or int8")
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
            "share_encoder_decoder_embeddings": False, "max_position_embeddings": c.max_len, "use_cache": True,
            **hf.token_ids(c)}


def _meta(run: Run, quantization: str) -> dict:
    c = run.model_config
    bos, eos, pad = special_ids(run.model, None, None, None)
    n = c.n_decoder_layers
    return {"format": "scratchformer-onnx", "version": EXPORT_VERSION, "scratchformer": __version__,
            "quantization": quantization, "graphs": list(GRAPHS),
            "decoder_start_id": bos, "eos_id": eos, "pad_id": pad, "max_len": c.max_len,
            "n_decoder_layers": n, "n_heads": c.n_heads, "d_k": c.head_dim_k, "d_v": c.head_dim_v,
            "d_model": c.d_model, "src_vocab_size": c.src_vocab_size, "tgt_vocab_size": c.tgt_vocab_size,
            "inputs": {"decoder_model": onnx_graphs.input_names(n, False),
                       "decoder_with_past_model": onnx_graphs.input_names(n, True)},
            "outputs": {"decoder_model": onnx_graphs.output_names(n, False),
                        "decoder_with_past_model": onnx_graphs.output_names(n, True)},
            "decoding": {"source": f"tokenizer_src ids[:max_len - 1] + [{EOS_ID}]",
                         "max_output_tokens": f"source length + {PAPER_EXTRA_LEN}, at most max_len, EOS not counted",
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
    """RUN_DIR/export/onnx/, exported now unless its stamp matches the run's weights (engines/formats.py keeps
    the cache)."""
    stamp = weights_stamp(run)

    def write(folder: Path) -> None:
        export(run, folder)
        (folder / STAMP).write_text(json.dumps(stamp) + "\n")

    return formats.cached_export(run, "onnx", stamp, write, STAMP,
                                 complete=lambda folder: all((folder / g).is_file() for g in GRAPHS))


# -- decoding on onnxruntime ------------------------------------------------------------------------------------

def sessions(folder: Path, threads: int | None = None) -> dict[str, object]:
    """One onnxruntime InferenceSession per graph, on the CPU: {"encoder_model": ..., "decoder_model": ...}."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return {name[: -len(".onnx")]: ort.InferenceSession(str(Path(folder) / name), options,
                                                        providers=["CPUExecutionProvider"]) for name in GRAPHS}


class OnnxSteps:
    """The exported decoder as decoding/common.py's step function: (tokens (N, t), index) -> logits (N, V).

    memory (N / G, L_src, D) and mask (N / G, L_src) hold one row per sentence; the first call repeats them for
    the G = `group` rows of each sentence (its beams). Every call feeds only the newest token: the first one
    runs decoder_model, later ones decoder_with_past_model on the keys/values it returned. `index` (row i
    continues row index[i]) reorders those keys/values and the mask."""

    def __init__(self, graphs: dict[str, object], memory: np.ndarray, mask: np.ndarray, n_layers: int,
                 group: int = 1) -> None:
        self.graphs, self.n_layers = graphs, n_layers
        self.memory, self.mask = np.repeat(memory, group, axis=0), np.repeat(mask, group, axis=0)  # (N, ...)
        self.past: list[np.ndarray] | None = None  # 4 per layer, onnx_graphs.KINDS order

    def __call__(self, tokens: Tensor, index: Tensor | None = None) -> Tensor:
        new = tokens[:, -1:].numpy()  # (N, 1)
        if self.past is None:
            out = self.graphs["decoder_model"].run(None, {"input_ids": new, "encoder_attention_mask": self.mask,
                                                          "encoder_hidden_states": self.memory})
            self.past, self.memory = out[1:], None
            return torch.from_numpy(out[0][:, -1])  # (N, V)
        if index is not None:
            rows = index.numpy()
            self.mask, self.past = self.mask[rows], [p[rows] for p in self.past]
        names = onnx_graphs.input_names(self.n_layers, with_past=True)
        feed = dict(zip(names, [new, self.mask, *self.past]))
        out = self.graphs["decoder_with_past_model"].run(None, feed)
        for i in range(self.n_layers):  # the self-attention keys/values grew by one; the encoder's stay
            self.past[4 * i: 4 * i + 2] = out[1 + 2 * i: 3 + 2 * i]
        return torch.from_numpy(out[0][:, -1])  # (N, V)


class Backend:
    """Our search on onnxruntime (beam_search_core, beam 1 is greedy there); settings: `folder` (an export to use as
    is), `threads` (default: torch's thread count, which `--threads` sets)."""

    SUPPORTS: frozenset[str] = frozenset()
    models = 1

    def __init__(self, run: Run, options: DecodingOptions | None = None, folder: str | Path | None = None,
                 threads: int | None = None) -> None:
        check_expressible(run)
        if any(isinstance(m, Int8Linear) for m in run.model.modules()):
            raise ConfigError("--int8 quantizes the PyTorch model, which the onnxruntime engine does not export: drop "
                              "--int8 (int8 ONNX graphs: scratchformer export RUN --format onnx --quantization int8)")
        self.run = run
        self.folder = Path(folder) if folder is not None else cached_export(run)
        self.graphs = sessions(self.folder, threads or torch.get_num_threads())
        self.bos, self.eos, self.pad = special_ids(run.model, None, None, None)

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]:
        """The pipeline's batch: the best hypothesis of each EOS-terminated source."""
        return [[Hyp("", 0.0, tokens)] for tokens in self.search(srcs, options.beam, options.alpha, options.max_len)]

    def search(self, src: list[list[int]], beam: int = 4, alpha: float = 0.6,
               max_len: int | None = None) -> list[list[int]]:
        """Token ids of the best hypothesis per source id list (EOS-terminated, as translate() builds them)."""
        src_ids = pad_ids(src, self.pad, torch.device("cpu"))  # (B, L_src)
        mask = (src_ids != self.pad).long().numpy()  # (B, L_src), 1 = real token
        memory = self.graphs["encoder_model"].run(None, {"input_ids": src_ids.numpy(), "attention_mask": mask})[0]
        steps = OnnxSteps(self.graphs, memory, mask, self.run.model_config.n_decoder_layers, group=beam)

        def step_fn(tokens: Tensor, index: Tensor | None) -> Tensor:  # as decoding/beam.py's beam_search
            logprobs = torch.log_softmax(steps(tokens, index).float(), dim=-1)  # (N, V)
            logprobs[:, self.pad] = NEG_INF
            return logprobs

        limits = length_limits(src_ids, self.pad, max_len, self.run.model_config.max_len)  # (B,)
        hyps = beam_search_core(step_fn, len(src), beam, limits, alpha, self.bos, self.eos)
        return [h[0].tokens for h in hyps]
