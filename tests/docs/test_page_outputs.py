"""A page that shows a command's output shows what the command prints today, in the page's language (issues 44 and
46): docs/shapes.md's `params` and `shapes` blocks are what `--lang en` prints, docs/zh/shapes.md's what `--lang zh`
prints, and docs/install.md's unknown-run error (+ zh) is the CLI's one line. Only commands that run in a moment are
held here (no decoding, whose output may move with a CPU's kernels); the pages date the outputs they could not
re-run."""

from __future__ import annotations

import contextlib
import re
import shlex
from pathlib import Path

import pytest
import torch

from scratchformer import i18n
from scratchformer.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"en": "docs/shapes.md", "zh": "docs/zh/shapes.md"}
COMMANDS = [  # each page names the command in `inline code` right before its output block
    "scratchformer params --preset paper-base",
    "scratchformer params --table3",
    "scratchformer shapes --preset paper-base --batch 2 --lengths 10,9",
    "scratchformer shapes --preset paper-base src_vocab_size=1000 tgt_vocab_size=1000 --batch 2 --lengths "
    "4,4",
    "scratchformer shapes --preset tiny d_model=16 n_heads=8 d_ff=512 n_encoder_layers=4 n_decoder_layers=4 --batch 2 "
    "--lengths 10,9",
]


@pytest.fixture(autouse=True)
def english_after():
    yield
    i18n.set_language("en")


def block_after(text: str, command: str) -> str:
    """The first fenced block after the first place the page names `command` (its words may wrap)."""
    named = re.search(r"`" + r"\s+".join(map(re.escape, command.split())) + r"`", text)
    assert named, command
    block = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M).search(text, named.end())
    return block[1]


def printed(argv: list[str], capsys) -> str:
    """What `scratchformer ARGV` prints; `params` builds its models on the meta device (counting parameters needs
    their shapes only: Table 3's eleven models in seconds, not a minute)."""
    with torch.device("meta") if argv[0] == "params" else contextlib.nullcontext():
        assert main(argv) == 0, argv
    return capsys.readouterr().out


def tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.parametrize("lang", list(PAGES))
@pytest.mark.parametrize("command", COMMANDS)
def test_the_shapes_page_shows_what_the_command_prints_in_its_language(command, lang, capsys):
    text = (ROOT / PAGES[lang]).read_text(encoding="utf-8")
    want = printed(shlex.split(command)[1:] + ["--lang", lang], capsys)
    assert tidy(block_after(text, command)) == tidy(want)


@pytest.mark.parametrize("lang, page", [("en", "docs/install.md"), ("zh", "docs/zh/install.md")])
def test_the_install_page_shows_the_unknown_run_error_in_its_language(lang, page, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no folder named fr-de here
    assert main(["translate", "fr-de", "Open the file.", "--lang", lang]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    text = (ROOT / page).read_text(encoding="utf-8")
    shown = re.search(r"^    (scratchformer translate(?::|：).*?)\n\n", text, re.S | re.M)[1]
    assert re.sub(r"\s+", "", shown) == re.sub(r"\s+", "", line)
