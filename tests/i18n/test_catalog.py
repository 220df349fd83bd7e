"""The Chinese catalog is complete and compiled: every message marked with _() or N_() in the source (and every
command's `add_parser(help=...)`, which cli/__init__.py translates) has a Chinese entry in
locale/zh/LC_MESSAGES/scratchformer.po, the shipped .mo is that .po compiled, and each entry keeps the entry's
placeholders ({name}), so that `.format()` cannot fail in Chinese."""

from __future__ import annotations

import ast
import gettext
import re
import string
from pathlib import Path

from scratchformer import i18n

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "scratchformer"


def marked_messages(package: Path = PACKAGE) -> dict[str, str]:
    """msgid -> 'file:line' of its first use: the string literals given to _() / N_(), and the help texts, descriptions
    and group titles given to argparse (add_parser, add_argument, add_argument_group), which the CLI translates, and
    the templates of errors and warnings raised with fields (`ConfigError("{x} ...", x=1)`; errors.py)."""
    found: dict[str, str] = {}
    for file in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            texts = []
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in ("_", "N_") and node.args and isinstance(node.args[0], ast.Constant):
                texts.append(node.args[0].value)
            if name in ("add_parser", "add_argument", "add_argument_group"):  # cli/__init__.py translates them all
                texts += [k.value.value for k in node.keywords if k.arg in ("help", "description", "title")
                          and isinstance(k.value, ast.Constant)]
            if name == "add_argument_group" and node.args and isinstance(node.args[0], ast.Constant):
                texts.append(node.args[0].value)
            if (name or "").endswith(("Error", "Warning")) and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.keywords:  # an error's template and its fields: the CLI translates it where it shows it
                texts.append(node.args[0].value)
            for text in texts:
                if isinstance(text, str):
                    found.setdefault(text, f"{file.relative_to(package.parents[1])}:{node.lineno}")
    return found


def placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def test_every_marked_message_has_a_chinese_entry():
    catalog = i18n.read_po(i18n.catalog_path("zh"))
    missing = [f"{where}: {msgid!r}" for msgid, where in marked_messages().items() if not catalog.get(msgid)]
    assert not missing, "messages without a Chinese entry in scratchformer.po:\n" + "\n".join(missing)


def test_the_extractor_finds_the_kinds_of_mark(tmp_path):
    """The check above is only as good as the extraction: each form of mark is found, a plain string is not."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    source = ('_("a")\nN_("b" "c")\nsub.add_parser("x", help="d")\nprint("e")\n_(f"{x}")\n'
              'p.add_argument("--y", help="f")\np.add_argument_group("g", description="h")\n'
              'raise ConfigError("i {x}", x=1)\nraise ConfigError("not a template {x}")\n')
    (tmp_path / "a" / "b" / "m.py").write_text(source)
    assert set(marked_messages(tmp_path / "a" / "b")) == {"a", "bc", "d", "f", "g", "h", "i {x}"}


def test_entries_keep_their_placeholders():
    catalog = i18n.read_po(i18n.catalog_path("zh"))
    wrong = [msgid for msgid, msgstr in catalog.items() if msgid and msgstr and placeholders(msgid) !=
             placeholders(msgstr)]
    assert not wrong, f"entries whose {{placeholders}} differ from their msgid: {wrong}"


def test_the_shipped_mo_is_the_po_compiled():
    po = i18n.read_po(i18n.catalog_path("zh"))
    assert i18n.catalog_path("zh", ".mo").read_bytes() == i18n.mo_bytes(po), (
        "scratchformer.mo is stale: run `python -m scratchformer.i18n`")
    with i18n.catalog_path("zh", ".mo").open("rb") as f:
        mo = gettext.GNUTranslations(f)
    assert mo.info()["content-type"].endswith("charset=UTF-8")
    for msgid, msgstr in po.items():
        if msgid and msgstr:
            assert mo.gettext(msgid) == msgstr


def test_no_stale_entries():
    """An entry whose message left the source is dead weight: the catalog holds exactly the marked messages."""
    stale = set(i18n.read_po(i18n.catalog_path("zh"))) - set(marked_messages()) - {""}
    assert not stale, f"entries no source marks any more (remove them): {sorted(stale)}"


def test_chinese_entries_are_chinese():
    """A msgstr that is only a copy of its English msgid is a missing translation under another name."""
    catalog = i18n.read_po(i18n.catalog_path("zh"))
    copies = [m for m, s in catalog.items() if m and s == m and re.search(r"[A-Za-z]{4,}", m)]
    assert not copies, f"entries left in English: {copies}"


def test_compiling_never_writes_inside_an_installed_package(tmp_path, monkeypatch, capsys):
    """Catalogs are compiled in a source checkout (or into a folder given), never inside an installed package: at
    run time the tools read the .mo shipped."""
    out = i18n.compile_catalogs(tmp_path / "locale")
    assert [p.relative_to(tmp_path) for p in out] == [Path("locale/zh/LC_MESSAGES/scratchformer.mo")]
    assert out[0].read_bytes() == i18n.catalog_path("zh", ".mo").read_bytes()
    installed = tmp_path / "site-packages" / "scratchformer" / "locale"  # no pyproject.toml two floors up
    (installed / "zh" / "LC_MESSAGES").mkdir(parents=True)
    po = installed / "zh" / "LC_MESSAGES" / "scratchformer.po"
    po.write_bytes(i18n.catalog_path("zh").read_bytes())
    monkeypatch.setattr(i18n, "LOCALE_DIR", installed)
    assert i18n.main([]) == 2
    err = capsys.readouterr().err
    assert "installed" in err and err.count("\n") == 1
    assert sorted(p.name for p in po.parent.iterdir()) == ["scratchformer.po"]  # nothing written beside it
    assert i18n.main([str(tmp_path / "elsewhere")]) == 0 and (tmp_path / "elsewhere" / "zh").is_dir()
