"""Where a trained run goes when it leaves PyTorch: export formats, and engines that decode with them.

    export_run(run_dir, "ctranslate2" | "hf" | "onnx", out, overwrite=False, quantization=None) -> out
    Translator(run, options).translate(texts)      the one way into translation, on any engine (translator.py)

Each format is one file here (ctranslate2.py, hf.py, onnx.py) with `export(run, out, quantization)` and, where
it decodes, a `Backend` class (its search and what it SUPPORTS); torch_engine.py is our own search's.
`formats.py` holds the two registries and the shared checks.
"""

from scratchformer.engines.formats import ENGINES, FORMATS, export_run
from scratchformer.engines.translator import Translator, make_translator

__all__ = ["ENGINES", "FORMATS", "Translator", "export_run", "make_translator"]
