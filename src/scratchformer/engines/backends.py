"""The registry of decoding engines: name -> the module whose `Backend` class searches (with what it SUPPORTS) for
engines/translator.py's Translator, keyed by config/decoding.py's Engine names (the typed choice of `engine`, checked
there); torch_engine.py is our own search, the others decode with an export (export/) kept in the run directory."""

from __future__ import annotations

from typing import Any

from scratchformer.config.decoding import DecodingOptions, Engine
from scratchformer.decoding.pipeline import Backend
from scratchformer.export.formats import load_module, warn_members
from scratchformer.runs import Run

# name -> (module under scratchformer.engines, the pip package it needs, or None)
ENGINES: dict[Engine, tuple[str, str | None]] = {
    "torch": ("torch_engine", None),
    "ctranslate2": ("ctranslate2", "ctranslate2"),
    "onnxruntime": ("onnx", "onnxruntime onnx onnxscript"),
    "keras": ("keras", "keras tensorflow"),
}


def engine_module(name: str) -> Any:
    """The module of engine `name`: one line for an unknown engine or a missing package (`pip install ...`)."""
    return load_module(ENGINES, name, "engine", "engines")


def make_backend(run: Run, options: DecodingOptions, **settings: Any) -> Backend:
    """The search of `options.engine` for `run` (exported into the run directory on first use, cached); `settings`
    are the engine's own (threads, patience, folder). engines/translator.py's Translator is the door that uses it."""
    module = engine_module(options.engine)
    if options.engine != "torch":
        warn_members(run, f"the {options.engine} engine decodes")
    return module.Backend(run, options, **settings)
