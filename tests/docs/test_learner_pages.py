"""Issue 44's small gaps, on the pages a learner reads (each in both languages): seed 001's readers are told that
their tensorflow==2.10 will not run the Keras port and what the keras extra installs instead; seed 002's "我 爱 中国"
has a recipe whose commands the CLI accepts; `plot relations` is reachable from the index, the positions pages and
the FAQ."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from scratchformer.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["docs/keras.md", "docs/zh/keras.md"])
def test_the_keras_page_tells_tf_2_10_readers_what_to_install(page):
    text = read(page)
    extra = re.findall(r'"([^"]+)"', re.search(r"^keras = \[(.*)\]$", read("pyproject.toml"), re.M)[1])
    assert extra and any(r.startswith("keras") for r in extra)  # pyproject.toml's keras extra (tomllib is 3.11+)
    section = text.split("tensorflow==2.10.0", 1)[1].split("\n## ", 1)[0]  # the section seed 001's readers land on
    assert "keras.ops" in section and "Keras 2" in section  # why 2.10 cannot run it
    assert "pip install -e '.[keras]'" in section
    for requirement in extra:  # what the extra installs, as pyproject.toml says today
        assert requirement in section, requirement


@pytest.mark.parametrize("page", ["docs/keras.md", "docs/zh/keras.md"])
def test_the_keras_page_no_longer_repeats_seed_001s_broadcast_diagnosis(page):
    text = read(page)
    assert "cannot happen" not in text and "在这里不会发生" not in text  # it implied the seed's broadcast bug was real
    assert "seed-errata.md" in text


def commands(page: str) -> list[str]:
    """The scratchformer command lines of the page's "我 爱 中国" section, comments dropped."""
    section = re.split(r"\n## ", read(page).split("我 爱 中国", 1)[1])[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].split("| ", 1)[-1].strip()
            if line.startswith("scratchformer "):
                lines.append(line)
    return lines


@pytest.mark.parametrize("page", ["docs/pictures.md", "docs/zh/pictures.md"])
def test_the_wo_ai_zhongguo_recipe_parses(page):
    lines = commands(page)
    assert [shlex.split(c)[1:3] for c in lines if "train" in c][0][0] == "train"
    assert sum("plot attention" in c and "我 爱 中国" in c for c in lines) == 2
    parser = build_parser()
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])  # argparse exits (SystemExit) on an unknown flag or choice
    assert "src_tokenizer=word" in " ".join(lines)  # the seed's three words as tokens, not byte pieces


PAGES_FOR_RELATIONS = ["docs/README.md", "docs/zh/README.md", "docs/pictures.md", "docs/zh/pictures.md",
                       "docs/lab/positions.md", "docs/zh/lab/positions.md", "docs/zh/faq.md"]


@pytest.mark.parametrize("page", PAGES_FOR_RELATIONS)
def test_plot_relations_is_on_the_pages_about_positions(page):
    assert "plot relations" in read(page)
