"""A run directory as one object: the trained model, its tokenizers and the configs it was trained with.

    run = load_run("runs/long")          # checks every file and says which one is missing or wrong
    run.model, run.src_tok, run.tgt_tok, run.train_config, run.decoding (decoding.json)
    run.members                          # more models decoded with run.model (decoding.json's ensemble)
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from scratchformer.config import DecodingOptions, ModelConfig, TrainConfig
from scratchformer.config.fields import loads_json
from scratchformer.data.tokenizers import Tokenizer, load_tokenizer
from scratchformer.errors import N_, CheckpointError, ConfigError
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase
from scratchformer.runs.files import atomic_path, write_json
from scratchformer.runs.layout import DECODING_FILE, weights_path
from scratchformer.runs.names import CONFIG, README_JSON, TOKENIZER_SRC, TOKENIZER_TGT, TRAIN_CONFIG, WEIGHTS
from scratchformer.runs.weights import load_weights


@dataclass
class Run:
    path: Path
    model: TransformerBase
    model_config: ModelConfig
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train_config: TrainConfig | None
    decoding: DecodingOptions = field(default_factory=DecodingOptions)  # decoding.json: its own decoding defaults
    members: list[TransformerBase] = field(default_factory=list)  # more ensemble members (decoding/ensemble.py)


# The models shipped inside the package (pyproject.toml's package data; in a checkout a link to models/): a run
# named by its folder name alone (`scratchformer translate en-zh "Hello."`) when no folder of that name is here.
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "models"


def shipped_models() -> list[str]:
    """Names of the runs shipped with the package (folders of SHIPPED_MODELS holding a config.json)."""
    if not SHIPPED_MODELS.is_dir():
        return []
    return sorted(d.name for d in SHIPPED_MODELS.iterdir() if (d / "config.json").is_file())


_SHADOWS_SAID: set[str] = set()  # the local folders named on stderr as shadowing a shipped model (once each)


def resolve_run(run_dir: str | Path) -> Path:
    """`run_dir` as a folder: the path itself when it exists (or names no shipped model), else the shipped
    model of that name (`en-zh` or `en-zh/`). A folder here with a shipped model's bare name is used, and said so
    on stderr once."""
    path = Path(run_dir)
    bare = str(run_dir).rstrip("/" + os.sep) == path.name and path.name in shipped_models()
    if not bare:
        return path
    if not path.exists() and not path.is_symlink():
        return SHIPPED_MODELS / path.name
    if path.name not in _SHADOWS_SAID:
        _SHADOWS_SAID.add(path.name)
        print(f"{path.name}: using the folder ./{path.name} here, not the shipped model {path.name} (give "
              f"{SHIPPED_MODELS / path.name} to use that one)", file=sys.stderr)
    return path


def load_config(run_dir: Path) -> ModelConfig:
    """RUN_DIR/config.json, or a one-line CheckpointError saying why RUN_DIR is not a run."""
    run_dir = resolve_run(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise CheckpointError("{run} is not a run directory (it is a file): give the folder of a run", run=run_dir)
    if not run_dir.is_dir():
        if shipped_models():
            raise CheckpointError("run directory {run} does not exist: give the folder `scratchformer train` wrote "
                                  "(--out, default runs/<recipe>) or the name of a model shipped with the package "
                                  "({shipped})", run=run_dir, shipped=", ".join(shipped_models()))
        raise CheckpointError("run directory {run} does not exist: give the folder `scratchformer train` wrote (--out, "
                              "default runs/<recipe>) or the name of a model shipped with the package (none in this "
                              "installation)", run=run_dir)
    path = run_dir / CONFIG
    if not path.exists():
        raise CheckpointError("{path} is missing: not a scratchformer run directory", path=path)
    return ModelConfig.load(path)


def load_train_config(run_dir: Path) -> TrainConfig | None:
    """RUN_DIR/train_config.json if there is one (a converted model has none); errors name the file."""
    path = Path(run_dir) / TRAIN_CONFIG
    return TrainConfig.load(path) if path.exists() else None


def load_decoding(run_dir: Path) -> DecodingOptions:
    """RUN_DIR/decoding.json if there is one (config/decoding.py), else the defaults; errors name the file."""
    path = Path(run_dir) / DECODING_FILE
    return DecodingOptions.load(path, WEIGHTS) if path.exists() else DecodingOptions()


def read_readme(run_dir: Path) -> dict:
    """RUN_DIR/README.json (the shipped model's card: its stored test scores), {} when there is none. The file is
    not trusted: anything but a JSON object (damaged, nested too deeply, a list) is one ConfigError naming it."""
    path = Path(run_dir) / README_JSON
    if not path.is_file():
        return {}
    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(N_("README.json {path} is not valid JSON: {e}"), path=path, e=str(e)[:200]) from None
    if not isinstance(data, dict):
        raise ConfigError(N_("README.json {path} must hold a JSON object, got {name}"), path=path,
                          name=type(data).__name__)
    return data


def setting_name(key: str) -> str:
    """How a README.json "test" key reads: beam1 -> greedy, beam4 -> beam 4."""
    return "greedy" if key == "beam1" else str(key).replace("beam", "beam ")


def save_decoding(run_dir: Path, decoding: DecodingOptions) -> Path:
    """Write `decoding` as RUN_DIR/decoding.json (atomically); returns its path."""
    path = Path(run_dir) / DECODING_FILE
    write_json(path, decoding.to_dict())
    return path


def save_config(run_dir: Path, config: ModelConfig) -> Path:
    """Write `config` as RUN_DIR/config.json (atomically); returns its path."""
    path = Path(run_dir) / CONFIG
    write_json(path, config.to_dict())
    return path


def save_tokenizers(run_dir: Path, tgt_tok: Tokenizer, src_tok: Tokenizer | None = None) -> None:
    """The run's tokenizers, atomically: tokenizer_tgt.json, and tokenizer_src.json when the source has its own
    (a shared or single-stack tokenizer is the target's file alone: load_tokenizers returns it twice)."""
    for tok, name in ((src_tok, TOKENIZER_SRC), (tgt_tok, TOKENIZER_TGT)):
        if tok is not None:
            with atomic_path(Path(run_dir) / name) as tmp:
                tok.save(tmp)


def copy_tokenizers(from_run: Path, run_dir: Path) -> None:
    """The tokenizer files of run `from_run` into `run_dir`, byte for byte, atomically (fine-tuning's --init)."""
    for name in (TOKENIZER_SRC, TOKENIZER_TGT):
        if (Path(from_run) / name).exists():
            with atomic_path(Path(run_dir) / name) as tmp:
                shutil.copyfile(Path(from_run) / name, tmp)


def load_tokenizers(run_dir: Path) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of a run; a shared or single-stack tokenizer is returned twice."""
    run_dir = Path(run_dir)
    tgt_path, src_path = run_dir / TOKENIZER_TGT, run_dir / TOKENIZER_SRC
    if not tgt_path.exists():
        raise CheckpointError(N_("{tgt_path} is missing: the run directory has no tokenizer"), tgt_path=tgt_path)
    tgt = load_tokenizer(tgt_path)
    return (load_tokenizer(src_path) if src_path.exists() else tgt), tgt


def load_run(run_dir: str | Path, weights: str | Path | None = None, device: str = "cpu",
             ensemble: Sequence[str | Path] | None = None) -> Run:
    """Model (eval mode, inference layout) + tokenizers of a run; `weights` picks another safetensors file (e.g. an
    average). ensemble: weights files of more members, built like the model (run.members); None takes
    decoding.json's (files in the run folder) when the run's own model.safetensors is loaded, none otherwise."""
    run_dir = resolve_run(run_dir)
    config = load_config(run_dir)
    src_tok, tgt_tok = load_tokenizers(run_dir)
    for tok, size, side in ((tgt_tok, config.tgt_vocab_size, "target"), (src_tok, config.src_vocab_size, "source")):
        if side == "source" and config.arch != "encoder-decoder":
            continue
        if tok.vocab_size != size:
            raise CheckpointError(N_("{run_dir}: the {side} tokenizer has {vocab_size} tokens but config.json says "
                                     "{size}: tokenizer and checkpoint come from different runs"), run_dir=run_dir,
                                  side=side, vocab_size=tok.vocab_size, size=size)
    train_config = load_train_config(run_dir)
    decoding = load_decoding(run_dir)
    if ensemble is None:
        ensemble = [run_dir / name for name in decoding.ensemble] if weights is None else []
    model, *members = (_load_model(config, path, device) for path in
                       [Path(weights) if weights else weights_path(run_dir), *map(Path, ensemble)])
    return Run(run_dir, model, config, src_tok, tgt_tok, train_config, decoding, members)


def _load_model(config: ModelConfig, path: Path, device: str) -> TransformerBase:
    """A model built from `config` with the weights of `path`, in eval mode and its inference layout."""
    model = build_model(config)
    load_weights(model, path)  # refuses a FIFO, a folder, a device; a missing file is one line
    model = model.to(torch.device(device)).eval()
    if hasattr(model, "inference_layout"):  # column-major Linear weights where measured faster: the same numbers
        model.inference_layout(measured=True)
    return model
