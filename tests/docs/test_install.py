"""The install says what it downloads and how to get torch's CPU build: `make demo`'s set-up prints what it is about
to fetch, and TORCH_INDEX (empty by default: the default install depends on no other host) points pip at torch's
CPU wheel index, as docs/install.md (and its Chinese twin) say. Read with `make -n`: nothing is run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def dry_run(*variables: str) -> str:
    done = subprocess.run(["make", "-n", "-B", "install-demo", *variables], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_demo_install_says_what_it_downloads_and_takes_an_index_for_torch():
    plain = dry_run()
    assert "--index-url" not in plain  # the default: the machine's own index
    said = [line for line in plain.splitlines() if line.startswith("echo")]
    assert any("torch" in line and "GB" in line for line in said), plain
    cpu = dry_run(f"TORCH_INDEX={CPU_INDEX}")
    assert "pip install -q torch==" in cpu and f"--index-url {CPU_INDEX}" in cpu


def test_the_docs_name_the_cpu_index_and_the_variable():
    for page in ("docs/install.md", "docs/zh/install.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"--index-url {CPU_INDEX}" in text and f"make demo TORCH_INDEX={CPU_INDEX}" in text, page
