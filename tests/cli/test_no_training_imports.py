"""`translate`, `evaluate`, `generate`, `plot attention` and `report` import nothing from scratchformer.training:
using a finished run must not climb into the trainer (issue 11). Each command runs in a fresh interpreter on a tiny
run directory written with the package's own writers (an untrained model: the command has to run, not to be good),
then that interpreter's sys.modules is searched for scratchformer.training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from scratchformer.config import ModelConfig
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.model import build_model
from scratchformer.runs import save_weights

SRC = Path(__file__).resolve().parents[2] / "src"  # the checkout under test, ahead of any installed copy
PAIRS = [("Open the file.", "Open the file."), ("Close the window.", "Close the window."),
         ("Save the page.", "Save the page.")]
SIZES = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32)

# In the child: one command module's parser alone (cli.build_parser would import every command, train's too),
# the command's function, then the scratchformer.training modules it loaded, as JSON in the file argv[1].
CHILD = textwrap.dedent("""
    import argparse, importlib, json, sys
    module = importlib.import_module("scratchformer.cli." + sys.argv[2])
    parser = argparse.ArgumentParser()
    module.register(parser.add_subparsers())
    args = parser.parse_args(sys.argv[3:])
    code = args.func(args)
    leaked = sorted(m for m in sys.modules if m.startswith("scratchformer.training"))
    with open(sys.argv[1], "w") as f:
        json.dump({"code": code, "leaked": leaked}, f)
""")


def _write_run(run_dir: Path, config: ModelConfig, texts: list[str]) -> Path:
    """config.json, both tokenizers and model.safetensors of an untrained model: what load_run reads."""
    tok = train_tokenizer("char", texts)
    config = config.replace(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)
    run_dir.mkdir(parents=True)
    config.save(run_dir / "config.json")
    tok.save(run_dir / "tokenizer_src.json")
    tok.save(run_dir / "tokenizer_tgt.json")
    torch.manual_seed(0)
    save_weights(build_model(config), run_dir / "model.safetensors")
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("no-training")
    corpus = root / "pairs.tsv"
    corpus.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    texts = [t for pair in PAIRS for t in pair]
    return {"corpus": corpus,
            "translate": _write_run(root / "mt", ModelConfig.preset("tiny", n_encoder_layers=1, n_decoder_layers=1,
                                                                    **SIZES), texts),
            "lm": _write_run(root / "lm", ModelConfig.preset("gpt-tiny", n_decoder_layers=1, **SIZES), texts)}


COMMANDS = {  # test id -> (cli module, its arguments given the runs)
    "translate": ("translate_cmd", lambda r: [str(r["translate"]), "Open the file.", "--beam", "2"]),
    "evaluate-translation": ("evaluate_cmd", lambda r: [
        str(r["translate"]), "--corpus", str(r["corpus"]), "--limit", "2", "--show", "0", "--json"]),
    "evaluate-lm": ("evaluate_cmd", lambda r: [str(r["lm"]), "--corpus", str(r["corpus"]), "--json"]),
    "generate": ("generate_cmd", lambda r: [str(r["lm"]), "Open", "--max-new-tokens", "3", "--set", "seed=0"]),
    "plot-attention": ("plot_cmd", lambda r: ["attention", str(r["translate"]), "Open the file.", "--layer", "1",
                                              "--out", str(r["corpus"].parent / "attention.png")]),
    "report": ("report_cmd", lambda r: [str(r["translate"]), "--corpus", str(r["corpus"]), "--samples", "1",
                                        "--limit", "2", "--out", str(r["corpus"].parent / "report.html")]),
}


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def ran(request, runs, tmp_path_factory) -> dict:
    """The child's report for one command: its exit code and the scratchformer.training modules it loaded."""
    module, argv = COMMANDS[request.param]
    report = tmp_path_factory.mktemp("report") / "report.json"
    subcommand = module.removesuffix("_cmd")
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(report), module, subcommand, *argv(runs)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and report.exists(), proc.stderr[-3000:]
    return json.loads(report.read_text())


def test_the_command_runs_on_the_tiny_run(ran):
    assert ran["code"] == 0


def test_the_command_imports_nothing_from_training(ran):
    assert ran["leaked"] == []
