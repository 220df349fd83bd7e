"""A user's program for an exported folder, run by tests/clients in a Python that has the client library and NOT
scratchformer (an import of it fails here, and the test checks sys.modules at the end).

    python client.py {hf,optimum,ctranslate2,tokenizers} DIR INPUT.json  ->  stdout: one JSON object

INPUT.json: {"texts": [...], "beams": [1, 4]}. Output: {"1": [translations], "4": [...], "plain-1": [...], ...}
(tokenizers: {"ids": [[source ids with the template's specials]], "decoded": [...]}, the files alone). "1", "4":
the folder's own README.md, run as printed: its ```python block defines translate(texts, beam), the route it
tells a user to take (scratchformer's length budget, the n-best ranked by GNMT); "plain-1", "plain-4": the
client's own call with the folder's settings alone (generation_config.json, translate_options.json)."""

from __future__ import annotations

import importlib.abc
import json
import re
import sys


class _NoScratchformer(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "scratchformer":
            raise ImportError("this client runs without scratchformer")
        return None


sys.meta_path.insert(0, _NoScratchformer())


def _hf(folder: str, texts: list[str], beams: list[int], optimum: bool) -> dict:
    import torch
    from transformers import AutoTokenizer

    if optimum:
        from optimum.onnxruntime import ORTModelForSeq2SeqLM as Auto
    else:
        from transformers import AutoModelForSeq2SeqLM as Auto
    model = Auto.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    target = f"{folder}/target_tokenizer"
    out_tok = AutoTokenizer.from_pretrained(target) if _exists(target) else tok
    result = {}
    for beam in beams:
        outputs = []
        for i in range(0, len(texts), 20):
            batch = tok(texts[i:i + 20], return_tensors="pt", padding=True, truncation=True)
            with torch.no_grad():
                outputs += out_tok.batch_decode(model.generate(**batch, num_beams=beam), skip_special_tokens=True)
        result[str(beam)] = outputs
    return result


def _ct2(folder: str, texts: list[str], beams: list[int]) -> dict:
    import ctranslate2
    from tokenizers import Tokenizer

    translator = ctranslate2.Translator(folder, device="cpu")
    src = Tokenizer.from_file(f"{folder}/tokenizer.json")
    src.encode_special_tokens = True  # a literal "<s>" in the text is text (the docs say so; not kept in the file)
    target = f"{folder}/target_tokenizer/tokenizer.json"
    tgt = Tokenizer.from_file(target) if _exists(target) else src
    with open(f"{folder}/translate_options.json", encoding="utf-8") as f:
        options = json.load(f)
    tokens = [src.encode(t).tokens for t in texts]
    result = {}
    for beam in beams:
        found = translator.translate_batch(tokens, **{**options, "beam_size": beam})
        result[str(beam)] = [tgt.decode([tgt.token_to_id(t) for t in r.hypotheses[0]]) for r in found]
    return result


def _tokenizers(folder: str, texts: list[str]) -> dict:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
    tok.encode_special_tokens = True  # as the docs' snippet does
    encodings = [tok.encode(t) for t in texts]
    return {"ids": [e.ids for e in encodings], "decoded": [tok.decode(e.ids) for e in encodings]}


def _readme_route(folder: str, texts: list[str], beams: list[int], batch: int) -> dict:
    """translate() of the folder's README.md (its first python block, DIR set to the folder), on `texts`."""
    with open(f"{folder}/README.md", encoding="utf-8") as f:
        code = re.search(r"```python\n(.*?)```", f.read(), flags=re.S).group(1)
    code, n = re.subn(r'^DIR = ".*$', f"DIR = {folder!r}", code, count=1, flags=re.M)
    assert n == 1, "the README's snippet sets no DIR"
    space: dict = {}
    exec(compile(code, f"{folder}/README.md", "exec"), space)
    translate = space["translate"]
    return {str(b): sum((translate(texts[i:i + batch], b) for i in range(0, len(texts), batch)), []) for b in beams}


def _exists(path: str) -> bool:
    import os

    return os.path.exists(path)


def main() -> None:
    client, folder, given = sys.argv[1:4]
    with open(given, encoding="utf-8") as f:
        spec = json.load(f)
    texts, beams = spec["texts"], spec.get("beams", [1, 4])
    if client in ("hf", "optimum", "ctranslate2"):
        optimum = client == "optimum"
        plain = _ct2(folder, texts, beams) if client == "ctranslate2" else _hf(folder, texts, beams, optimum)
        result = {**_readme_route(folder, texts, beams, 20), **{f"plain-{b}": out for b, out in plain.items()}}
    else:
        result = _tokenizers(folder, texts)
    result["scratchformer_imported"] = "scratchformer" in sys.modules
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
