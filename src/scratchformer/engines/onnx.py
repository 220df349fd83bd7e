"""The onnxruntime engine: our own search (decoding/beam.py's `beam_search_core`; beam 1 is greedy there, exactly)
with a step function backed by onnxruntime sessions over the ONNX export's three graphs (`OnnxSteps`), so the
output rule is ours: the same length budget, length penalty, EOS and PAD handling. It uses the export that
export/onnx.py keeps in RUN_DIR/export/onnx/ (made on first use, again when the weights change), or a given folder.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.beam import beam_search_core
from scratchformer.decoding.common import NEG_INF, length_limits, pad_ids, special_ids
from scratchformer.decoding.results import Hyp
from scratchformer.decoding.spec import PAPER, Search
from scratchformer.export import onnx_graphs
from scratchformer.export.onnx import GRAPHS, cached_export, check_expressible
from scratchformer.runs import Run


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
    the G = `beam` rows of each sentence (its beams). Every call feeds only the newest token: the first one
    runs decoder_model, later ones decoder_with_past_model on the keys/values it returned. `index` (row i
    continues row index[i]) reorders those keys/values and the mask."""

    def __init__(self, graphs: dict[str, object], memory: np.ndarray, mask: np.ndarray, n_layers: int,
                 beam: int = 1) -> None:
        self.graphs, self.n_layers = graphs, n_layers
        self.memory, self.mask = np.repeat(memory, beam, axis=0), np.repeat(mask, beam, axis=0)  # (N, ...)
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
        self.run = run
        self.folder = Path(folder) if folder is not None else cached_export(run)
        self.graphs = sessions(self.folder, threads or torch.get_num_threads())
        self.bos, self.eos, self.pad = special_ids(run.model, None, None, None)

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]:
        """The pipeline's batch: the best hypothesis of each EOS-terminated source."""
        return [[Hyp("", 0.0, tokens)] for tokens in self.search(srcs, Search.from_options(options, n_best=1))]

    def search(self, src: list[list[int]], search: Search = PAPER) -> list[list[int]]:
        """Token ids of the best hypothesis per source id list (EOS-terminated, as translate() builds them); search:
        its beam, alpha and max_output_len (spec.py)."""
        beam = search.beam
        src_ids = pad_ids(src, self.pad, torch.device("cpu"))  # (B, L_src)
        mask = (src_ids != self.pad).long().numpy()  # (B, L_src), 1 = real token
        memory = self.graphs["encoder_model"].run(None, {"input_ids": src_ids.numpy(), "attention_mask": mask})[0]
        steps = OnnxSteps(self.graphs, memory, mask, self.run.model_config.n_decoder_layers, beam=beam)

        def step_fn(tokens: Tensor, index: Tensor | None) -> Tensor:  # as decoding/beam.py's beam_search
            logprobs = torch.log_softmax(steps(tokens, index).float(), dim=-1)  # (N, V)
            logprobs[:, self.pad] = NEG_INF
            return logprobs

        limits = length_limits(src_ids, self.pad, search.max_output_len, self.run.model_config.max_positions)  # (B,)
        hyps = beam_search_core(step_fn, limits, replace(search, n_best=1, bos=self.bos, eos=self.eos, pad=self.pad))
        return [h[0].tokens for h in hyps]
