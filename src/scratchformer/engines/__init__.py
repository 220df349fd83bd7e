"""The run-time side: decoding a trained run, on our own search or on another library's engine.

    Translator(run, options).translate(texts)      the one way into translation, on any engine (translator.py)

backends.py holds ENGINES, the registry of `--engine` names; each engine is one file with a `Backend` class (its
search and what it SUPPORTS): torch_engine.py is our own search (decoding/search.py), ctranslate2.py, onnx.py and
keras.py decode with the files that export/ writes (kept in the run directory, rebuilt when the weights change).
Writing those files (`scratchformer export`) is export/'s job; this room only reads them.
"""

from scratchformer.engines.backends import ENGINES
from scratchformer.engines.translator import Translator

__all__ = ["ENGINES", "Translator"]
