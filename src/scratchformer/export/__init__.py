"""The import/export side's outbound half: a trained run written in another library's format.

    export_run(run_dir, "ctranslate2" | "hf" | "onnx" | "keras", out, overwrite=False, quantization=None) -> out

Each format is one file here with `check_expressible(run)` and `export(run, out, quantization)`: ctranslate2.py,
hf.py (+ hf_card.py, the model card and the client READMEs), onnx.py (+ onnx_graphs.py, the three graphs) and
keras.py. formats.py holds FORMATS, the shared checks and the cache an engine keeps in the run directory. Reading
other libraries' weights in is interop/'s job; decoding with these files is engines/'s.
"""

from scratchformer.export.formats import FORMATS, export_run

__all__ = ["FORMATS", "export_run"]
