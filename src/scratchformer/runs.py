"""A run directory as one object: the trained model, its tokenizers and the configs it was trained with.

    run = load_run("runs/long")          # checks every file and says which one is missing or wrong
    run.model, run.src_tok, run.tgt_tok, run.train_config
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from scratchformer.config import ModelConfig, regular_file
from scratchformer.data.tokenizers import Tokenizer
from scratchformer.errors import ConfigError
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase
from scratchformer.training import checkpoint as ckpt
from scratchformer.training.config import TrainConfig
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
    _check_files(run_dir, weights)
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
    ckpt.load_weights(model, regular_file(path, ckpt.CheckpointError))
    train_cfg_path = run_dir / "train_config.json"
    train_config = _train_config(train_cfg_path) if train_cfg_path.exists() else None
    model = model.to(torch.device(device)).eval()
    if hasattr(model, "inference_layout"):  # column-major Linear weights where measured faster: the same numbers
        model.inference_layout(measured=True)
    return Run(run_dir, model, config, src_tok, tgt_tok, train_config)


RUN_FILES = ("config.json", "train_config.json", "tokenizer_src.json", "tokenizer_tgt.json", "model.safetensors",
             "checkpoints/latest")


def _check_files(run_dir: Path, weights: str | Path | None) -> None:
    """Refuse a FIFO, folder or device where a run file belongs, before anything opens it (a FIFO blocks the
    reader for ever); missing files are left to the loaders, which say what each one is for."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ckpt.CheckpointError(f"{run_dir} is not a run directory (it is a file): give the folder of a run")
    for name in RUN_FILES:
        regular_file(run_dir / name, ckpt.CheckpointError)
    if weights is not None:
        regular_file(weights, ckpt.CheckpointError)


def _train_config(path: Path) -> TrainConfig:
    try:
        return TrainConfig.load(path)
    except ConfigError as e:  # name the file: the message alone says only which field is wrong
        raise ConfigError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
