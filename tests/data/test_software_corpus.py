"""Tests for the bundled ``software`` corpus and the pure parts of scripts/build_software_corpus.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from scratchformer.data.corpus import CORPORA_DIR, load_pairs

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = CORPORA_DIR / "software"
SOURCES = ("libreoffice", "gimp", "debian-faq", "maint-guide", "debian-edu", "django", "jupyterlab")
MERGED = ("train", "valid", "test")
PER_SOURCE = tuple(f"{split}-{src}" for split in ("test", "valid") for src in SOURCES)
STATS = json.loads((BUNDLE / "STATS.json").read_text(encoding="utf-8"))

# markup, entities and control characters (everywhere)
MARKUP = re.compile(r"<[a-zA-Z/!][^>]*>|&[a-z]+;|&#\d+;|[\t\r\n\x00-\x08\ufffd]")
# gettext placeholders, format fields and accelerators (the new sources: the LibreOffice help writes
# "{installation}/program" as literal text, and its part is kept exactly as en-zh has it)
PLACEHOLDERS = re.compile(
    r"%\([a-z_]+\)[sd]|%[sd]\b|%\d\b|\{\d*\}|\{[a-z_]+\}|\(&[A-Za-z]\)|(?<![\w&])&[A-Z][a-z]"
)


def _script(name: str):
    """Import a script of scripts/ as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


SW = _script("build_software_corpus")


def norm(text: str) -> str:
    """Same loose key as build_corpus.norm_key (written out so that the test does not trust the script)."""
    t = re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).casefold())
    return t.rstrip(".。:：;；!！?？,，")


@pytest.fixture(scope="module")
def splits() -> dict[str, list[tuple[str, str]]]:
    return {name: load_pairs("software", name) for name in MERGED + PER_SOURCE}


def test_every_split_loads_through_load_pairs(splits):
    for name, pairs in splits.items():
        assert pairs, name
        assert all(en and zh for en, zh in pairs), name
    assert sorted(p.name for p in BUNDLE.glob("*.tsv.gz")) == sorted(f"{n}.tsv.gz" for n in MERGED + PER_SOURCE)


@pytest.mark.parametrize("held_out", ["test", "valid"])
@pytest.mark.parametrize("side", [0, 1])
def test_no_held_out_sentence_in_train(splits, held_out, side):
    train = splits["train"]
    for key in (lambda s: s, norm):
        train_keys = {key(p[side]) for p in train}
        leaked = [p for p in splits[held_out] if key(p[side]) in train_keys]
        assert not leaked, leaked[:3]


def test_test_and_valid_share_no_sentence(splits):
    for side in (0, 1):
        assert not {norm(p[side]) for p in splits["test"]} & {norm(p[side]) for p in splits["valid"]}


def test_english_is_unique_across_the_bundle(splits):
    english = [en for name in MERGED for en, _ in splits[name]]
    assert len(english) == len(set(english))


def test_per_source_files_partition_the_merged_ones(splits):
    for split in ("test", "valid"):
        parts = [p for src in SOURCES for p in splits[f"{split}-{src}"]]
        assert parts == splits[split], f"{split}: merged file is not the per-source files in source order"


def test_counts_match_stats_json(splits):
    for src in SOURCES:
        for split in ("test", "valid"):
            assert len(splits[f"{split}-{src}"]) == STATS["sources"][src]["pairs"][split], (src, split)
    for split in MERGED:
        assert len(splits[split]) == STATS["merged"][split] == sum(
            STATS["sources"][s]["pairs"][split] for s in SOURCES
        )
    for name, size in STATS["bytes"].items():
        assert (BUNDLE / name).stat().st_size == size, name
    assert STATS["bundle_bytes"] == sum(STATS["bytes"].values()) < 4_000_000  # "a few MB"


def test_per_source_eval_sizes():
    for src in SOURCES[1:]:
        pairs = STATS["sources"][src]["pairs"]
        # the split is made on the paragraph pairs; sentence pairs are added to train after it
        n = sum(pairs.values()) - STATS["sources"][src]["aligned"].get(SW.SENTENCE_PAIRS, 0)
        for split in ("test", "valid"):  # whole groups: may overshoot the target by a few pairs
            assert SW.eval_size(n) <= pairs[split] <= SW.eval_size(n) + 5, (src, split)


def test_libreoffice_part_is_the_en_zh_split(splits):
    """BLEU on test-libreoffice stays comparable with BLEU on the old en-zh test set."""
    assert splits["test-libreoffice"] == load_pairs("en-zh", "test")
    assert splits["valid-libreoffice"] == load_pairs("en-zh", "valid")
    assert splits["train"][: STATS["sources"]["libreoffice"]["pairs"]["train"]] == load_pairs("en-zh", "train")


@pytest.mark.parametrize("source", SW.OWN_CORPUS)
def test_a_one_source_corpus_holds_exactly_that_sources_splits(splits, source):
    """data/corpora/gimp (fine-tuning, README): its valid/test are the software bundle's, its train is that
    source's part of the merged train, in order."""
    for split in ("test", "valid"):
        assert load_pairs(source, split) == splits[f"{split}-{source}"]
    counts = [STATS["sources"][s]["pairs"]["train"] for s in SOURCES]
    i = SOURCES.index(source)
    start = sum(counts[:i])
    assert load_pairs(source, "train") == splits["train"][start : start + counts[i]]
    assert "Licence: GFDL" in (CORPORA_DIR / source / "NOTICE").read_text(encoding="utf-8")


def test_no_markup_or_placeholder_left(splits):
    everything = [p for name in MERGED for p in splits[name]]
    bad = [p for p in everything if MARKUP.search(p[0]) or MARKUP.search(p[1])]
    assert not bad, bad[:5]
    n_lo = STATS["sources"]["libreoffice"]["pairs"]["train"]
    new = splits["train"][n_lo:] + [p for name in PER_SOURCE if "libreoffice" not in name for p in splits[name]]
    assert len(new) == sum(sum(STATS["sources"][s]["pairs"].values()) for s in SOURCES[1:])
    bad = [p for p in new if PLACEHOLDERS.search(p[0]) or PLACEHOLDERS.search(p[1])]
    assert not bad, bad[:5]


def test_notice_has_a_section_per_source_with_its_versions():
    notice = (BUNDLE / "NOTICE").read_text(encoding="utf-8")
    for src in SOURCES:
        assert f"\n{src}\n" in notice, src
        for package, version in STATS["sources"][src]["packages"].items():
            assert f"{package}  {version}" in notice


# --------------------------------------------------------------------------- pure functions of the script


def test_placeholders_are_detected_and_accelerators_removed():
    for text in ("Deleted %(object)s.", "Change %s", "Loading %1 files", "Page {0} of {1}", "Hello {name}",
                 "Select {} items"):
        assert SW.has_placeholder(text), text
    for text in ("Done at 100%.", "Use %% for a percent sign", "Save the file now"):
        assert not SW.has_placeholder(text), text
    assert SW.strip_placeholders("&Open the file") == "Open the file"
    assert SW.strip_placeholders("_Save all files") == "Save all files"
    assert SW.strip_placeholders("打开文件(&O)") == "打开文件"
    assert SW.strip_placeholders("R&D stays, a_b stays") == "R&D stays, a_b stays"


def test_partly_untranslated_chinese_is_caught():
    assert SW.partly_untranslated("Figure 16.8. The “Create” submenu", "图 16.8. The “Create” submenu")
    assert SW.partly_untranslated("Figure 7.30. The Palette Editor", "图 7.30. The Palette Editor")
    assert not SW.partly_untranslated("LTSP server: 40 GiB.", "LTSP 服务器：40 GiB。")
    assert not SW.partly_untranslated("Open the file in Debian", "在 Debian 中打开文件")
    assert SW.filter_pair("Figure 12.6. Playground Settings Page", "图 12.6. Playground Settings Page")
    assert SW.filter_pair("$ sudo apt-get install gimp", "$ sudo apt-get install gimp 安装") == "command"
    assert SW.filter_pair("Open file.", "打开文件。", min_words=3) == "short"
    assert SW.filter_pair("Open the file now.", "现在打开文件。", min_words=3) is None


def test_structure_alignment_drops_sections_that_differ():
    en = [("h2", "Intro"), ("p", "One."), ("pre", ""), ("h2", "More"), ("p", "Two."), ("p", "Three.")]
    zh_same = [("h2", "介绍"), ("p", "一。"), ("pre", ""), ("h2", "更多"), ("p", "二。"), ("p", "三。")]
    stats: dict[str, int] = {}
    assert SW.align_page(en, zh_same, stats) == [("Intro", "介绍"), ("One.", "一。"), ("More", "更多"),
                                                  ("Two.", "二。"), ("Three.", "三。")]
    zh_short = [("h2", "介绍"), ("p", "一。"), ("pre", ""), ("h2", "更多"), ("p", "二和三。")]
    assert SW.align_page(en, zh_short, stats) == [("Intro", "介绍"), ("One.", "一。")]
    assert SW.align_page(en, zh_short[:3], stats) == []  # section counts differ: the page is dropped
    assert stats == {"pages aligned": 1, "sections aligned": 1, "sections dropped (structure differs)": 1,
                     "pages dropped (structure differs)": 1}


def _built(name: str, kind: str, train, valid=(), test=(), long=()):
    src = SW.Source(name, kind, (), "", "", "")
    return SW.Built(src, [], {"train": list(train), "valid": list(valid), "test": list(test)}, {}, "", list(long))


def test_sentence_pairs_come_from_train_and_long_paragraphs_only_and_never_from_held_out_text():
    para = ("Open the file first. Then save it again.", "首先打开文件。然后再次保存它。")
    uneven = ("Open the box. Close the box.", "打开并关闭盒子。")  # 2 English sentences, 1 Chinese: no pair
    long = ("Print the whole page now. Print the other page later.", "现在打印整个页面。稍后打印另一个页面。")
    held = ("Then save it again.", "然后再次保存它。")  # a test pair: its sentences must not become train pairs
    docbook = _built("doc", "docbook", [para, uneven], test=[held], long=[long])
    gettext = _built("msg", "gettext", [("Save the file now. Close it too.", "立即保存文件。也关闭它。")])
    SW.add_sentence_pairs([docbook, gettext])
    assert docbook.splits["train"] == [para, uneven, ("Open the file first.", "首先打开文件。"),
                                       ("Print the whole page now.", "现在打印整个页面。"),
                                       ("Print the other page later.", "稍后打印另一个页面。")]
    assert docbook.stats == {SW.SENTENCE_PAIRS: 3} and docbook.splits["test"] == [held]
    assert len(gettext.splits["train"]) == 1 and not gettext.stats  # messages are never split


def test_bundled_sentence_pairs_are_sentences_of_their_sources_train_paragraphs(splits):
    """Every added pair is one sentence on each side; the held-out splits hold none of their sentences."""
    from scratchformer.decoding.sentences import split_sentences

    counts = [STATS["sources"][s]["pairs"]["train"] for s in SOURCES]
    held = {norm(x) for name in PER_SOURCE for en, zh in splits[name] for t in (en, zh)
            for x in (t, *split_sentences(t))}
    for i, src in enumerate(SOURCES):
        added = STATS["sources"][src]["aligned"].get(SW.SENTENCE_PAIRS, 0)
        assert (added > 100) == (src in ("gimp", "debian-faq", "maint-guide", "debian-edu")), src
        end = sum(counts[: i + 1])
        for en, zh in splits["train"][end - added : end]:
            assert split_sentences(en) == [en] and split_sentences(zh) == [zh], (en, zh)
            assert norm(en) not in held and norm(zh) not in held, (en, zh)


def test_html_blocks_skip_navigation_and_mark_code():
    page = (
        '<html><body><div class="navheader"><p>Prev</p></div><div class="toc"><p>Contents</p></div>'
        '<h2 class="title"><a id="x"></a>1. Start</h2><p>Run <code class="literal">ls</code> now.</p>'
        '<pre class="screen">$ ls</pre><ul><li><p>Item</p></li></ul></body></html>'
    )
    assert SW.html_blocks(page) == [("h2", "1. Start"), ("p", "Run ls now."), ("pre", ""), ("p", "Item")]


def test_eval_size():
    assert [SW.eval_size(n) for n in (100, 300, 500, 700, 10_000)] == [20, 50, 50, 70, 500]


def test_sentence_pairs_come_back_from_the_bundles_own_paragraphs():
    """Without downloads, part of what --check does: each DocBook source's train part is its paragraphs, then the
    sentence pairs cut from them, then those cut from paragraphs too long to keep (not bundled). Re-running the
    build's sentence step on the bundled paragraphs must give exactly the first of the bundled sentence pairs.
    It failed when the build followed `translate`'s rule as that changed (section numbers kept with their
    sentence): 113 of GIMP's pairs came back where 169 are bundled, and no longer in order."""
    train, offset, built, bundled = load_pairs("software", "train"), 0, [], {}
    for name in SOURCES:
        n, k = STATS["sources"][name]["pairs"]["train"], STATS["sources"][name]["aligned"].get(SW.SENTENCE_PAIRS, 0)
        part, offset = train[offset : offset + n], offset + n
        src = next(s for s in SW.SOURCES if s.name == name)
        held = {split: load_pairs("software", f"{split}-{name}") for split in ("valid", "test")}
        built.append(SW.Built(src, [], {"train": part[: n - k], **held}))
        bundled[name] = (n - k, part[n - k :])
    SW.add_sentence_pairs(built)
    for b in built:
        n_paragraphs, sentences = bundled[b.src.name]
        again = b.splits["train"][n_paragraphs:]
        assert again == sentences[: len(again)], b.src.name
        if b.src.kind == "docbook":
            assert len(again) > len(sentences) / 3, b.src.name  # most come from kept paragraphs


@pytest.mark.skipif(os.environ.get("SCRATCHFORMER_CORPUS_CHECK") != "1",
                    reason="needs apt-get and pip downloads; set SCRATCHFORMER_CORPUS_CHECK=1")
def test_rebuild_is_byte_identical():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_software_corpus.py"), "--check"],
                            capture_output=True, text=True, timeout=1800)
    verdict = result.stdout.strip().splitlines()[-1:]
    assert result.returncode == 0 and verdict[0].startswith("OK"), result.stdout + result.stderr[-2000:]


def test_bundled_corpora_name_their_languages():
    """serve and the HF model card read a run's languages from its corpus: en-zh by name, software/gimp by table."""
    from scratchformer.data.corpus import corpus_languages

    assert corpus_languages("en-zh") == corpus_languages("software") == corpus_languages("gimp") == ("en", "zh")
    assert corpus_languages("de-en") == ("de", "en")
    assert corpus_languages("my.tsv") is None and corpus_languages(None) is None
