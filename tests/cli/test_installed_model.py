"""The shipped model after `pip install` (issue 36): a wheel built from this checkout, installed alone into a fresh
venv, translates with `translate en-zh` from a folder outside the repository; an unknown name is one line saying
where models come from."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from scratchformer.cli import main
from scratchformer.runs.run import SHIPPED_MODELS, resolve_run, shipped_models

ROOT = Path(__file__).resolve().parents[2]


def test_a_shipped_model_is_found_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no en-zh folder here
    assert "en-zh" in shipped_models()
    assert resolve_run("en-zh") == SHIPPED_MODELS / "en-zh"
    (tmp_path / "en-zh").mkdir()
    assert resolve_run("en-zh") == Path("en-zh")  # a folder of that name here wins


def test_an_unknown_name_says_where_models_come_from(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["translate", "fr-de", "Hello."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scratchformer train" in err and "shipped with the package (en-zh)" in err


@pytest.mark.slow  # builds a wheel (~20 s) and translates with it in a fresh interpreter
def test_translate_en_zh_from_an_installed_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(ROOT)], check=True, env=env, timeout=600)
    wheel = next(wheels.glob("scratchformer-*.whl"))
    # A fresh venv without our package; the dependencies (torch, tokenizers, ...) from this interpreter's
    # site-packages through a .pth line, which adds that folder but runs none of its own .pth files (so not the
    # editable install of the checkout). The wheel goes into the venv's own site-packages, ahead of it.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, env=env)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run_env = {**env, "HOME": str(tmp_path)}
    where = subprocess.run([str(python), "-c", "import scratchformer; print(scratchformer.__file__)"], cwd=outside,
                           check=True, capture_output=True, text=True, env=run_env).stdout
    assert where.startswith(str(site)), where  # the installed copy, not the checkout
    done = subprocess.run([str(python), "-m", "scratchformer", "translate", "en-zh", "Open the file."], cwd=outside,
                          capture_output=True, text=True, env=run_env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert any("\u4e00" <= ch <= "\u9fff" for ch in done.stdout), done.stdout  # Chinese came out
