"""docs/export-clients.md and its Chinese twin: every "# client: NAME" snippet runs as printed, with DIR set to
an export of the small model (conftest.small), in a process without scratchformer, and prints our translation
(beam 4, the folder's own settings) or the tokenizer's round trip. The hf, optimum and ctranslate2 snippets are the
exports' own READMEs' translate() (export/hf_card.py writes them), comments and DIR aside."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "export-clients.md", ROOT / "docs" / "zh" / "export-clients.md"]
FOLDERS = {"hf": "hf", "optimum": "onnx", "ctranslate2": "ctranslate2", "tokenizers": "hf"}
SENTENCE = "Click OK to print the table."
GUARD = ("import importlib.abc, sys\nclass _No(importlib.abc.MetaPathFinder):\n    def find_spec(self, name, *a):\n"
         "        if name.split('.')[0] == 'scratchformer': raise ImportError('no scratchformer here')\n"
         "sys.meta_path.insert(0, _No())\n")


def snippets(doc: Path) -> dict[str, str]:
    """{client name: code} of the doc's python blocks that start with "# client: NAME"."""
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    return {m.group(1): code for code in blocks if (m := re.match(r"# client: (\w+)\n", code))}


@pytest.mark.parametrize("doc", DOCS, ids=["en", "zh"])
def test_each_doc_has_a_snippet_per_client(doc):
    assert set(snippets(doc)) == set(FOLDERS)


def _code(text: str) -> list[str]:
    """The code lines, without comments, blank lines or the DIR line (what the Chinese twin or a README changes)."""
    lines = [re.sub(r"\s+#.*$", "", line) for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [line for line in lines if line.strip() and not line.startswith("DIR = ")]


@pytest.mark.parametrize("doc", DOCS, ids=["en", "zh"])
def test_client_snippets_are_the_exports_readme_code(doc):
    from scratchformer.export.hf_card import ct2_route, hf_route

    readme = {"hf": hf_route("AutoModelForSeq2SeqLM", "transformers", True),
              "optimum": hf_route("ORTModelForSeq2SeqLM", "optimum.onnxruntime", True), "ctranslate2": ct2_route(True)}
    for name, lines in readme.items():
        assert _code(snippets(doc)[name]) == _code("\n".join(lines[1:-1])), name


def _run(python: str, code: str, folder: Path, cwd: Path) -> list[str]:
    code = re.sub(r'^DIR = ".*"$', f"DIR = {str(folder)!r}", code, count=1, flags=re.M)
    assert f"DIR = {str(folder)!r}" in code
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    done = subprocess.run([python, "-c", GUARD + code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("doc", DOCS, ids=["en", "zh"])
@pytest.mark.parametrize("name", ["hf", "ctranslate2", "tokenizers", "hf-4", "optimum"])
def test_snippet_runs_without_scratchformer_and_prints_ours(doc, name, small, this_python, request):
    from scratchformer.engines import Translator

    client = name.split("-")[0]
    needs_second = name == "hf-4" or client == "optimum"
    python = request.getfixturevalue("client_python") if needs_second else this_python
    pytest.importorskip({"hf": "transformers", "ctranslate2": "ctranslate2"}.get(client, "tokenizers"))
    folder = request.getfixturevalue("small_onnx") if client == "optimum" else small.folders[FOLDERS[client]]
    printed = _run(python, snippets(doc)[client], folder, small.tmp)
    run = small.run
    if client == "tokenizers":
        assert printed == [SENTENCE]
    else:
        assert printed == Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate([SENTENCE], beam=4,
                                          alpha=run.decoding.alpha)
