"""Shared tools for the robustness suite: the CLI in a real subprocess, the one-line-error check, and small
trained runs to break.

Every bad input in this folder must end in one clear line on stderr (`scratchformer CMD: error: ...`), a
non-zero exit status and no traceback; a good input next to it must still work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"  # the checkout under test, ahead of any installed copy


@dataclass
class Result:
    code: int
    out: str
    err: str


def cli(*args: str, stdin: bytes | None = b"", cwd: Path | None = None, env: dict | None = None,
        timeout: float = 300, stdout=None) -> Result:
    """`python -m scratchformer ARGS` in a subprocess (one torch thread); stdin bytes, decoded output."""
    full_env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "scratchformer", *args], input=stdin, cwd=cwd, env=full_env,
                          timeout=timeout, stdout=stdout if stdout is not None else subprocess.PIPE,
                          stderr=subprocess.PIPE)
    out = proc.stdout.decode("utf-8", "replace") if isinstance(proc.stdout, bytes) else ""
    return Result(proc.returncode, out, proc.stderr.decode("utf-8", "replace"))


def assert_one_line_error(result: Result, *needles: str, code: int | None = None) -> None:
    """A failed command that said why in one line: no traceback, non-zero status, each needle in the line."""
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    assert "Traceback" not in result.err, result.err[-3000:]
    assert result.code != 0, (result.code, result.out[-500:], result.err[-500:])
    if code is not None:
        assert result.code == code, (result.code, result.err)
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1, result.err[-3000:]
    for needle in needles:
        assert needle.lower() in errors[0].lower(), (needle, errors[0])


TOY_TRAIN = ["--recipe", "toy", "--max-steps", "12", "eval_every=0", "save_every=6", "bleu_samples=0",
             "--quiet", "--no-test"]


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> Path:
    """A tiny translation run (the toy recipe, 12 steps, checkpoints at 6 and 12). Read-only for tests: copy it
    (shutil.copytree) before changing anything in it."""
    out = tmp_path_factory.mktemp("robust") / "toy"
    result = cli("train", *TOY_TRAIN, "--out", str(out))
    assert result.code == 0, result.err[-3000:]
    return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Path:
    """HOME, XDG_CACHE_HOME and TMPDIR inside tmp_path (tempfile forgets its cached folder), tmp_path/work as the
    current directory, and TORCHINDUCTOR_CACHE_DIR unset (recorded, so that the value our code sets is undone
    after the test)."""
    import tempfile

    for var, name in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("TMPDIR", "tmp")):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path
