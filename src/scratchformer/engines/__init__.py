"""Where a trained run goes when it leaves PyTorch: export formats, and engines that decode with them.

    export_run(run_dir, "ctranslate2" | "hf" | "onnx", out, overwrite=False, quantization=None) -> out
    make_translator(run, "torch" | "ctranslate2" | "onnxruntime") -> Translator

Each format is one file here (ctranslate2.py, hf.py, onnx.py) with `export(run, out, quantization)` and, where
it decodes, a Translator class; `formats.py` holds the two registries and the shared checks.
"""

from scratchformer.engines.formats import ENGINES, FORMATS, Translator, export_run, make_translator

__all__ = ["ENGINES", "FORMATS", "Translator", "export_run", "make_translator"]
