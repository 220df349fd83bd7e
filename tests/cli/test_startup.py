"""`scratchformer --version` and the top-level `--help` answer without importing torch (or numpy, or any command's
library): a newcomer's first two commands. Checked by what the fresh interpreter imported, never by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"  # the checkout under test, ahead of any installed copy
CHILD = textwrap.dedent("""
    import json, sys
    from scratchformer.cli import main
    try:
        code = main(sys.argv[2:])
    except SystemExit as e:
        code = e.code
    heavy = sorted(m for m in ("torch", "numpy", "scratchformer.training", "scratchformer.model") if m in sys.modules)
    with open(sys.argv[1], "w") as f:
        json.dump({"code": code, "heavy": heavy}, f)
""")


@pytest.mark.parametrize("argv, shows", [(["--version"], "scratchformer 0.1.0"), (["--help"], "train"),
                                         (["--lang", "zh", "--help"], "train")])
def test_version_and_help_import_no_torch(tmp_path, argv, shows):
    out = tmp_path / "imports.json"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), *argv], env=env, capture_output=True, text=True,
                          timeout=300)
    result = json.loads(out.read_text())
    assert result == {"code": 0, "heavy": []}, done.stderr
    assert shows in done.stdout
