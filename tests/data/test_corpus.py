"""Tests for scratchformer.data.corpus: TSV and two-file loading, bad lines, bundled corpora."""

from __future__ import annotations

import gzip
import re
import warnings
from pathlib import Path

import pytest

from scratchformer.data import corpus
from scratchformer.data.corpus import CorpusError, CorpusWarning, bundled_corpora, load_pairs, load_text

GOOD = "Hello.\t你好。\nThe cat sat.\t猫坐着。\n"


def write(path: Path, text: str) -> Path:
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def fake_bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A corpora folder with a multi-split en-zh and a train-only toy, in place of the real one."""
    root = tmp_path / "corpora"
    (root / "en-zh").mkdir(parents=True)
    (root / "toy").mkdir()
    (root / "empty").mkdir()
    write(root / "en-zh" / "train.tsv.gz", GOOD)
    write(root / "en-zh" / "valid.tsv.gz", "Valid.\t验证。\n")
    write(root / "toy" / "train.tsv", "a b\tA B\n")
    monkeypatch.setattr(corpus, "CORPORA_DIR", root)
    return root


@pytest.mark.parametrize("name", ["c.tsv", "c.tsv.gz"])
def test_tsv_plain_and_gzip(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, GOOD + "\n")  # a trailing blank line is ignored
    assert load_pairs(path) == [("Hello.", "你好。"), ("The cat sat.", "猫坐着。")]
    assert load_pairs(str(path), split="test") == load_pairs(path)  # split ignored for a user file


def test_crlf_and_surrounding_spaces(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", " Hi \t 嗨 \r\n")
    assert load_pairs(path) == [("Hi", "嗨")]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("no tab here", "expected 2 tab-separated fields, found 1"),
        ("a\tb\tc", "expected 2 tab-separated fields, found 3"),
        ("\tonly target", "empty source side"),
        ("only source\t  ", "empty target side"),
    ],
)
def test_stop_reports_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    path = write(tmp_path / "corpus.tsv", GOOD + line + "\n" + GOOD)
    with pytest.raises(CorpusError) as err:
        load_pairs(path, on_error="stop")
    assert str(err.value) == f"{path}:3: {reason} (use on_error=skip to skip bad lines)"
    assert isinstance(err.value, ValueError)


def test_skip_counts_and_warns_once(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.tsv", "bad\n" + GOOD + "x\ty\tz\n" + GOOD + "\tq\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = load_pairs(path, on_error="skip")
    assert len(pairs) == 4
    msgs = [str(w.message) for w in caught if issubclass(w.category, CorpusWarning)]
    assert len(msgs) == 1
    assert "skipped 3 malformed line(s)" in msgs[0] and "lines 1, 4, 7" in msgs[0]


def test_bad_on_error_value(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="on_error"):
        load_pairs(write(tmp_path / "c.tsv", GOOD), on_error="ignore")


def test_two_files(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "Hello.\nThe cat.\n")
    tgt = write(tmp_path / "a.zh", "你好。\n猫。\n")
    assert load_pairs(f"{src},{tgt}") == [("Hello.", "你好。"), ("The cat.", "猫。")]


def test_two_files_count_mismatch(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.zh", "一\n二\n")
    with pytest.raises(CorpusError, match=r"has 3 lines but .*a\.zh has 2"):
        load_pairs(f"{src},{tgt}")


def test_two_files_empty_side(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "1\n\n3\n")
    tgt = write(tmp_path / "a.zh", "一\n二\n三\n")
    with pytest.raises(CorpusError, match=r":2: empty source side"):
        load_pairs(f"{src},{tgt}")
    with pytest.warns(CorpusWarning, match="skipped 1"):
        assert load_pairs(f"{src},{tgt}", on_error="skip") == [("1", "一"), ("3", "三")]


def test_two_files_missing(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "1\n")
    with pytest.raises(CorpusError, match="no such file"):
        load_pairs(f"{src},{tmp_path / 'missing.zh'}")


def test_bundled_names_and_splits(fake_bundled: Path) -> None:
    assert bundled_corpora() == ["en-zh", "toy"]  # "empty" holds no .tsv
    assert load_pairs("en-zh") == [("Hello.", "你好。"), ("The cat sat.", "猫坐着。")]
    assert load_pairs("en-zh", split="valid") == [("Valid.", "验证。")]
    for split in ("train", "valid", "test"):
        assert load_pairs("toy", split=split) == [("a b", "A B")]  # train-only: one file for all splits


def test_bundled_missing_split_lists_available(fake_bundled: Path) -> None:
    with pytest.raises(CorpusError, match="no split 'test'; it has: train, valid"):
        load_pairs("en-zh", split="test")


def test_unknown_source_lists_bundled(fake_bundled: Path) -> None:
    with pytest.raises(CorpusError, match=r"not found.*bundled: en-zh, toy"):
        load_pairs("de-en")
    with pytest.raises(CorpusError, match="not found"):
        load_pairs(fake_bundled / "nope.tsv")


def test_bundled_error_names_the_file(fake_bundled: Path) -> None:
    write(fake_bundled / "toy" / "train.tsv", "a\tb\nbroken\n")
    with pytest.raises(CorpusError, match=r"^toy/train\.tsv:2: expected 2"):
        load_pairs("toy")


def test_load_text_sides(fake_bundled: Path, tmp_path: Path) -> None:
    assert load_text("en-zh", side="src") == ["Hello.", "The cat sat."]
    assert load_text("en-zh", side="tgt") == ["你好。", "猫坐着。"]
    assert load_text("en-zh", side="both") == ["Hello.", "The cat sat.", "你好。", "猫坐着。"]
    plain = write(tmp_path / "lm.txt", "first line\n\n  second\twith tab \n")
    assert load_text(plain) == ["first line", "second\twith tab"]
    with pytest.raises(ValueError, match="side"):
        load_text("en-zh", side="left")


@pytest.mark.skipif("en-zh" not in bundled_corpora(), reason="bundled en-zh corpus not built yet")
def test_real_bundled_en_zh_loads() -> None:
    pairs = load_pairs("en-zh", split="train")
    assert len(pairs) > 100
    assert all(s and t for s, t in pairs[:1000])


# -- --upsample: repeat some sources of a multi-source corpus -------------------------------------------------

def test_upsample_repeats_each_named_source_in_rounds_in_corpus_order():
    from scratchformer.data.corpus import corpus_sources, upsample_sources

    parts = corpus_sources("software")
    assert [name for name, _ in parts][:2] == ["libreoffice", "gimp"] and corpus_sources("en-zh") is None
    pairs = load_pairs("software", "train")
    spans, start = {}, 0
    for name, n in parts:
        spans[name], start = pairs[start : start + n], start + n
    out = upsample_sources(pairs, "software", {"gimp": 3, "django": 2})
    assert out == pairs + spans["gimp"] + spans["django"] + spans["gimp"]  # round 1: gimp, django; round 2: gimp
    assert upsample_sources(pairs, "software", {"gimp": 1}) == pairs


@pytest.mark.parametrize("corpus, factors, needle", [
    ("software", {"gimpp": 2}, "gimpp: not a source of software (libreoffice, gimp,"),
    ("en-zh", {"gimp": 2}, "needs a bundled corpus made of several sources"),
])
def test_upsample_refuses_unknown_sources_and_single_source_corpora(corpus, factors, needle):
    from scratchformer.data.corpus import upsample_sources

    with pytest.raises(CorpusError, match=re.escape(needle)):
        upsample_sources(load_pairs(corpus, "train"), corpus, factors)


@pytest.mark.parametrize("spec", ["gimp", "gimp=0", "gimp=2.5", "gimp=2,gimp=3", "=2", "gimp=x"])
def test_upsample_syntax_errors_are_one_line(spec):
    from scratchformer.config import TrainConfig
    from scratchformer.errors import ConfigError

    with pytest.raises(ConfigError, match="SOURCE=N") as e:
        TrainConfig(corpus="software", upsample=spec)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="--task translate"):
        TrainConfig(task="lm", corpus="software", upsample="gimp=2")


def test_a_file_read_again_does_not_warn_again(tmp_path: Path) -> None:
    """train reads a corpus, then its test report reads it again: the skipped lines are said once per process
    (the same file with other bad lines, or another file, is said again)."""
    path = write(tmp_path / "again.tsv", "bad\n" + GOOD)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert len(load_pairs(path, on_error="skip")) == 2
        write(path, "bad\n" + GOOD + "worse\n")
        load_pairs(path, on_error="skip")
    msgs = [str(w.message) for w in caught if issubclass(w.category, CorpusWarning)]
    assert len(msgs) == 2 and "lines 1)" in msgs[0] and "lines 1, 4)" in msgs[1]
