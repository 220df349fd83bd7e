"""The exports as their own ecosystems load them, each in a subprocess that does not import scratchformer
(tests/clients/client.py blocks the import and reports sys.modules).

Two Pythons: this one (transformers 5.x, ctranslate2, tokenizers, as the package's test extra installs them)
SCRATCHFORMER_CLIENT_PYTHON, a second virtual environment with transformers 4.57.6 and Optimum, and
SCRATCHFORMER_CLIENT_PYTHON_OLDEST, a third with the oldest transformers the HF export claims, 4.42.4 (`make
test-clients` builds .venv-clients and .venv-clients-oldest and sets both). Tests that need one skip, saying so,
when its variable is unset."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.config import TrainConfig
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.engines import Translator
from scratchformer.export import export_run
from scratchformer.runs import load_run, save_weights

PAIRS = [("Open the file.", "打开文件。"), ("Close the window now.", "现在关闭窗口。"),
         ("Save the page as text.", "将页面另存为文本。"), ("Click OK to print the table.", "单击「确定」打印表格。"),
         ("Insert a new row.", "插入新的一行。"), ("Select the cells, then copy them.", "选择单元格，然后复制。")]
TEXTS = [s for s, _ in PAIRS] + ["Open the table.", "Copy the file, then close it.", "表格 🙂 é <s>", "x"]
SMALL = dict(d_model=64, n_heads=4, d_ff=128, dropout=0.0, max_len=32, tie_embeddings=True)


def write_run(path: Path, alpha: float = 0.0) -> Path:
    """A run directory of a random Marian-layout model: BPE source, char target (another size), tied output."""
    src = train_tokenizer("bpe", [s for s, _ in PAIRS], vocab_size=300)
    tgt = train_tokenizer("char", [t for _, t in PAIRS])
    config = ModelConfig.preset("tiny", src_vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size, **SMALL)
    path.mkdir(parents=True)
    config.save(path / "config.json")
    src.save(path / "tokenizer_src.json")
    tgt.save(path / "tokenizer_tgt.json")
    (path / "train_config.json").write_text(json.dumps(dataclasses.asdict(TrainConfig(corpus="en-zh"))))
    (path / "decoding.json").write_text(json.dumps({"alpha": alpha}))
    torch.manual_seed(0)
    model = build_model(config)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # every weight off its init: outputs differ between sentences
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
    save_weights(model, path / "model.safetensors")
    return path


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """The small model: .run, .folders ({format: exported folder}), .ours ({beam: our outputs of .texts}), .tmp,
    .texts (sources) and .targets (target-side texts)."""
    tmp = tmp_path_factory.mktemp("clients")
    run = load_run(write_run(tmp / "run"))
    folders = {fmt: export_run(run.path, fmt, tmp / fmt) for fmt in ("hf", "ctranslate2")}
    ours = {b: Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(TEXTS, beam=b,
                                                                                   alpha=run.decoding.alpha)
            for b in (1, 4)}
    assert len(set(ours[1])) > 3  # the comparison bites
    return SimpleNamespace(run=run, folders=folders, ours=ours, tmp=tmp, texts=TEXTS, targets=[t for _, t in PAIRS])


@pytest.fixture(scope="session")
def small_onnx(small) -> Path:
    """The small model's ONNX export (the dynamo exporter: about a minute on a busy 2-core machine)."""
    pytest.importorskip("onnxscript")
    return export_run(small.run.path, "onnx", small.tmp / "onnx")


CLIENT = Path(__file__).with_name("client.py")
ENV_VAR = "SCRATCHFORMER_CLIENT_PYTHON"
OLDEST_VAR = "SCRATCHFORMER_CLIENT_PYTHON_OLDEST"


def run_client(python: str, client: str, folder: Path, texts: list[str], tmp: Path, beams=(1, 4)) -> dict:
    """client.py's JSON for `texts` (see there), run by `python` without PYTHONPATH (no scratchformer on it)."""
    given = tmp / f"in-{client}.json"
    given.write_text(json.dumps({"texts": texts, "beams": list(beams)}, ensure_ascii=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    done = subprocess.run([python, str(CLIENT), client, str(folder), str(given)], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.pop("scratchformer_imported") is False
    return result


@pytest.fixture(scope="session")
def client():
    """run_client, for the test modules (a fixture: test modules import no helper module)."""
    return run_client


def _python_from(var: str, venv: str, holds: str) -> str:
    """The Python that `make test-clients` names in `var`, or a skip that says which venv to build."""
    python = os.environ.get(var)
    if not python:
        pytest.skip(f"{var} is unset: `make test-clients` builds {venv} ({holds}) and runs these tests with it")
    return python


@pytest.fixture(scope="session")
def client_python() -> str:
    """The second environment's Python (transformers 4.57.6 + Optimum), or a skip naming the variable."""
    return _python_from(ENV_VAR, ".venv-clients", "transformers 4.57.6, Optimum")


@pytest.fixture(scope="session")
def oldest_python() -> str:
    """The oldest transformers the HF export claims (4.42.4, tokenizers 0.19), or a skip naming the variable."""
    return _python_from(OLDEST_VAR, ".venv-clients-oldest", "transformers 4.42.4")


@pytest.fixture(scope="session")
def this_python() -> str:
    """This environment's Python: transformers 5.x, ctranslate2 and tokenizers, without scratchformer's import."""
    return sys.executable
