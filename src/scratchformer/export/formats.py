"""The registry of export formats and the checks every export shares: the output folder is runs/folders.py's
(--overwrite only on its own earlier export), a missing optional package is one line naming `pip install ...`,
and the export an engine keeps in the run directory (`cached_export`, runs/cache.py's content-hashed cache).

A format module registers itself here by name in FORMATS; `scratchformer export` knows only this table. The
engines that decode with these files are engines/backends.py's ENGINES.
"""

from __future__ import annotations

import hashlib
import importlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from scratchformer.errors import N_, ConfigError, ScratchformerWarning
from scratchformer.runs import Run, Writes, load_run, prepare_run_dir, read_marker, writing_folder
from scratchformer.runs import cache as runs_cache

# name -> (module under scratchformer.export, the pip package it needs, or None)
FORMATS: dict[str, tuple[str, str | None]] = {
    "ctranslate2": ("ctranslate2", "ctranslate2"),
    "hf": ("hf", None),  # written with safetensors and tokenizers; loading it needs transformers
    "onnx": ("onnx", "onnxruntime onnx onnxscript"),
    "keras": ("keras", "keras tensorflow"),  # Keras 3 on TensorFlow: pip install 'scratchformer[keras]'
}
# name -> every name a format writes at the top of --out: all that `export --overwrite` ever deletes there (never a
# name read from the folder's marker, which anyone can write)
_TOKENIZERS = ("tokenizer.json", "tokenizer_config.json", "target_tokenizer", "tokenizer_src.json",
               "tokenizer_tgt.json")
_CARD = ("README.md", "decoding.json", "config.json")
WRITES: dict[str, frozenset[str]] = {
    "ctranslate2": frozenset({*_TOKENIZERS, *_CARD, "model.bin", "shared_vocabulary.json", "source_vocabulary.json",
                              "target_vocabulary.json", "shared_vocabulary.txt", "source_vocabulary.txt",
                              "target_vocabulary.txt", "translate_options.json", "scratchformer_export.json"}),
    "hf": frozenset({*_TOKENIZERS, *_CARD, "generation_config.json", "model.safetensors"}),
    "onnx": frozenset({*_TOKENIZERS, *_CARD, "generation_config.json", "scratchformer_onnx.json",
                       "encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"}),
    "keras": frozenset({"tokenizer_src.json", "tokenizer_tgt.json", "README.md", "model.keras", "saved_model"}),
}

def require(package: str | None, what: str) -> None:
    """A one-line ConfigError naming `pip install ...` when an optional package is missing."""
    for name in (package or "").split():
        module = {"onnxscript": "onnxscript", "onnxruntime": "onnxruntime"}.get(name, name)
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(N_("{what} needs the optional package {name!r}: pip install {package}"), what=what,
                              name=name, package=package) from None


def load_module(table: dict[str, tuple[str, str | None]], name: str, what: str, room: str) -> Any:
    """scratchformer.<room>.<module> for `name` in `table`: one line for an unknown name or a missing package."""
    if name not in table:
        raise ConfigError(N_("unknown {what} {name!r}; choose one of {table}"), what=what, name=name,
                          table=', '.join(table))
    module, package = table[name]
    require(package, f"{what} {name}")
    return importlib.import_module(f"scratchformer.{room}.{module}")


def export_run(run_dir: str | Path, fmt: str, out: str | Path, overwrite: bool = False,
               quantization: str | None = None, progress: Callable[[str], None] | None = None,
               **options: Any) -> Path:
    """Export the run in `run_dir` to `out` in format `fmt`; returns `out`. The export is written beside `out` and
    moved in when complete: a failure leaves `out` as it was; --overwrite keeps (and names) the user's files.
    progress: told what runs now, once every check has passed (the CLI prints it, with the format's EXPORT_NOTE:
    an ONNX trace takes a minute)."""
    module = load_module(FORMATS, fmt, "export format", "export")
    before = read_marker(Path(out)) if overwrite else None  # its "format" only picks one of the lists of WRITES
    writes = Writes("export", WRITES[fmt] | WRITES.get(str((before or {}).get("format")), frozenset()))
    # before any work: new or empty, or with --overwrite its own earlier export (runs/prepare.py)
    out = prepare_run_dir(out, writes, overwrite=overwrite)
    run = load_run(run_dir)
    warn_members(run, f"the {fmt} export holds")
    module.check_expressible(run)  # before anything is written: a one-line error naming the field
    allowed = getattr(module, "QUANTIZATIONS", (None, "float32"))
    if quantization is not None and quantization not in allowed:  # None: the format's default (float32)
        raise ConfigError(N_("--quantization {quantization}: format {fmt} writes {value} weights"),
                          quantization=quantization, fmt=fmt, value=' or '.join(q for q in allowed if q))
    with writing_folder(out, writes, overwrite, format=fmt) as tmp:
        if progress is not None:
            note = getattr(module, "EXPORT_NOTE", "")  # what only some formats need to say (onnx: its trace)
            progress(f"{run_dir} -> {fmt} in {out} (converting and writing{'; ' + note if note else ''})")
        module.export(run, tmp, quantization=quantization, **options)
    return out


def warn_members(run: Run, who: str) -> None:
    """One warning when a run's decoding.json names ensemble members that only our own decoder averages in."""
    if run.members:
        warnings.warn(ScratchformerWarning(N_("{path}: decoding.json's ensemble of {n} models: {who} model.safetensors "
                                              "alone (only --engine torch decodes the ensemble)"), path=run.path,
                                           n=len(run.members) + 1, who=who), stacklevel=3)



# -- the export an engine keeps in the run directory ------------------------------------------------------------

def weights_digest(model: torch.nn.Module) -> str:
    """sha256 of the weights in memory (names, shapes, dtypes, values): it changes whenever a weight does, whichever
    file (model.safetensors, or --weights averaged.safetensors) they came from."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def cached_export(run: Run, name: str, stamp: dict[str, Any], write: Callable[[Path], None], stamp_file: str,
                  complete: Callable[[Path], bool] = lambda folder: True) -> Path:
    """RUN_DIR/export/<name>/ (or this user's cache folder when the run folder cannot be written), made by
    `write(folder)` unless the one there was made from `stamp` and its files' sha256 still match (runs/cache.py).
    `stamp_file`: the file `write` stamps, part of what is hashed."""
    return runs_cache.cached_export(Path(run.path), name, stamp, write, complete)
