"""A run directory as one object: the trained model, its tokenizers and the configs it was trained with.

    run = load_run("runs/long")          # checks every file and says which one is missing or wrong
    run.model, run.src_tok, run.tgt_tok, run.train_config
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from scratchformer.config import ModelConfig, TrainConfig
from scratchformer.data.tokenizers import Tokenizer
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase
from scratchformer.training import checkpoint as ckpt
from scratchformer.training.trainer import load_tokenizers


@dataclass
class Run:
    path: Path
    model: TransformerBase
    model_config: ModelConfig
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train_config: TrainConfig | None


def load_run(run_dir: str | Path, weights: str | Path | None = None, device: str = "cpu") -> Run:
    """Model (eval mode, inference layout) + tokenizers of a run; `weights` picks another safetensors file (e.g. an
    average)."""
    run_dir = Path(run_dir)
    config = ckpt.load_config(run_dir)
    src_tok, tgt_tok = load_tokenizers(run_dir)
    for tok, size, side in ((tgt_tok, config.tgt_vocab_size, "target"), (src_tok, config.src_vocab_size, "source")):
        if side == "source" and config.arch != "encoder-decoder":
            continue
        if tok.vocab_size != size:
            raise ckpt.CheckpointError(f"{run_dir}: the {side} tokenizer has {tok.vocab_size} tokens but config.json "
                                       f"says {size}: tokenizer and checkpoint come from different runs")
    model = build_model(config)
    path = Path(weights) if weights else run_dir / "model.safetensors"
    if not path.exists() and weights is None:
        latest = ckpt.latest_checkpoint(run_dir)
        if latest is None:
            raise ckpt.CheckpointError(f"{path} is missing and {run_dir}/checkpoints has none: train first")
        path = latest / "model.safetensors"
    ckpt.load_weights(model, path)  # refuses a FIFO, a folder or a device, as every reader of a run file does
    train_cfg_path = run_dir / "train_config.json"
    train_config = TrainConfig.load(train_cfg_path) if train_cfg_path.exists() else None  # errors name the file
    model = model.to(torch.device(device)).eval()
    if hasattr(model, "inference_layout"):  # column-major Linear weights where measured faster: the same numbers
        model.inference_layout(measured=True)
    return Run(run_dir, model, config, src_tok, tgt_tok, train_config)

