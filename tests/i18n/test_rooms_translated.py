"""Every error and warning a user can meet anywhere in the package (every .py under src/scratchformer: the lower
rooms, config/, decoding/, engines/, serve/, evaluation/, cli/, autotune.py) is a template the catalog translates.

The check walks the AST: at every `raise` of one of our errors (ScratchformerError and its subclasses, found by
their class statements), every `warnings.warn(...)`, and every training log/warning line (`self.log`, `self.warn`,
`warn`), the message must be a string constant or `N_("...")` template that has a Chinese entry in
scratchformer.po; an f-string there cannot be translated (its words are fixed before the catalog sees them) and
fails too, unless ALLOWED says why it may stay. The failure lists each message with its file and line, so an English
message added later fails it."""

from __future__ import annotations

import ast
from pathlib import Path

from scratchformer import autotune, i18n
from scratchformer.errors import N_, ConfigError, Message, Text, localized

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "scratchformer"
ROOMS = ["."]  # the whole package: a room added later is checked too
LOG_CALLS = {"log", "warn"}  # self.log / self.warn of the trainer and tasks, runs/metrics.py's `warn` callback
# (file, line text that holds the message): why it may stay as it is
ALLOWED = {
    ("training/trainer.py", 'self.log(f"    {src}  ->  {hyp}")'): "a sample translation: source and output only",
    ("training/trainer.py", "self.log(line)"): "a line of samples already put together in the chosen language",
    ("training/trainer.py", "self.log(error.template, **error.fields)"): "the diverged error's own N_ template",
    ("training/trainer.py", "self.log(msg, **fields)"): "a template chosen above it (N_)",
}


def room_files(package: Path = PACKAGE) -> list[Path]:
    files: list[Path] = []
    for room in ROOMS:
        path = package / room
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
    return files


def error_classes(files: list[Path]) -> set[str]:
    """ScratchformerError and the names of the classes that derive from it (or from one of ours, to a fixpoint)."""
    bases: dict[str, set[str]] = {}
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                bases[node.name] = names
    ours = {"ScratchformerError", "ScratchformerWarning", "Localizable", "Text"}
    while True:
        more = {name for name, b in bases.items() if b & ours} - ours
        if not more:
            return ours
        ours |= more


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _messages(arg: ast.expr) -> list[str | None]:
    """The templates of a message expression: a constant, the N_("...") calls inside it; None for an f-string."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr):
        return [None]
    if isinstance(arg, ast.Call) and _name(arg.func) not in ("N_",) and arg.args:  # warn(SomeWarning(N_("..")))
        inner = _messages(arg.args[0])
        if inner:
            return inner
    found = [n.args[0].value for n in ast.walk(arg) if isinstance(n, ast.Call) and _name(n.func) == "N_"
             and n.args and isinstance(n.args[0], ast.Constant)]
    return found


def message_sites(files: list[Path], package: Path = PACKAGE) -> list[tuple[str, str, str | None]]:
    """(file:line, the source line, template or None for an f-string) of every message a user can meet."""
    ours = error_classes(files)
    sites = []
    for file in files:
        source = file.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            arg = None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and _name(node.exc.func) in ours:
                arg = node.exc.args[0] if node.exc.args else None
            elif isinstance(node, ast.Call) and node.args:
                name = _name(node.func)
                if name == "warn" and isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") \
                        == "warnings":
                    arg = node.args[0]
                elif name in LOG_CALLS and (isinstance(node.func, ast.Name) or getattr(node.func.value, "id", "")
                                            == "self"):
                    arg = node.args[0]
            if arg is None:
                continue
            where = f"{file.relative_to(package).as_posix()}:{node.lineno}"
            for template in _messages(arg):
                sites.append((where, lines[node.lineno - 1].strip(), template))
    return sites


def untranslated(files: list[Path], catalog: dict[str, str], package: Path = PACKAGE) -> list[str]:
    out = []
    for where, line, template in message_sites(files, package):
        if (where.split(":")[0], line) in ALLOWED:
            continue
        if template is None:
            out.append(f"{where}: an f-string message cannot be translated (write N_(\"...\") and fields): {line}")
        elif not catalog.get(template):
            out.append(f"{where}: no Chinese entry for {template!r}")
    return out


def test_every_message_of_the_rooms_has_a_chinese_entry():
    catalog = i18n.read_po(i18n.catalog_path("zh"))
    missing = untranslated(room_files(), catalog)
    assert not missing, "messages users can meet with no Chinese entry:\n" + "\n".join(missing)


def test_the_check_finds_raise_sites_and_warnings(tmp_path):
    """The check is only as good as its walk: each kind of site is found, and English with no entry fails."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "m.py").write_text(
        "class CorpusError(ScratchformerError): ...\n"
        "def f(x):\n"
        "    raise CorpusError(N_('{x} is bad'), x=x)\n"
        "    raise CorpusError(f'{x} is worse')\n"
        "    raise CorpusError('plain words')\n"
        "    raise ValueError(f'a programming error {x}')\n"
        "    warnings.warn(ScratchformerWarning(N_('careful with {x}'), x=x))\n"
        "    warnings.warn(f'careful {x}')\n"
        "    self.warn(N_('skipped {x}'), x=x)\n")
    sites = {(w, t) for w, _, t in message_sites(room_files(tmp_path), tmp_path)}
    assert sites == {("data/m.py:3", "{x} is bad"), ("data/m.py:4", None), ("data/m.py:5", "plain words"),
                     ("data/m.py:7", "careful with {x}"), ("data/m.py:8", None), ("data/m.py:9", "skipped {x}")}
    found = untranslated(room_files(tmp_path), {"{x} is bad": "{x} 不好", "plain words": "普通的话"}, tmp_path)
    assert [line.split(":")[1] for line in found] == ["4", "7", "8", "9"]


def test_autotunes_not_private_line_is_in_the_catalog():
    """runs/cache.py marks autotune.NOT_PRIVATE's text for the catalog (autotune imports nothing of ours)."""
    assert i18n.read_po(i18n.catalog_path("zh")).get(autotune.NOT_PRIVATE)


def test_a_message_is_english_for_str_and_chinese_where_shown():
    """A field that is itself an error (a wrapped config error) or a Text (a corpus line's reason) is translated
    with its message; str() stays the English, byte for byte."""
    inner = ConfigError(N_("d_k and d_v must be positive"))
    outer = ConfigError(N_("{path}: {e}"), path="cfg.json", e=inner)
    reason = ConfigError(N_("{name}:{lineno}: {reason} (use on_error=skip to skip bad lines)"), name="a.tsv",
                         lineno=3, reason=Text(N_("expected 2 tab-separated fields, found {n}"), n=1))
    kind = ConfigError(N_("{path} is not a regular file (it is {kind})"), path="p", kind=Message(N_("a folder")))
    assert str(outer) == "cfg.json: d_k and d_v must be positive"
    assert str(reason) == "a.tsv:3: expected 2 tab-separated fields, found 1 (use on_error=skip to skip bad lines)"
    try:
        i18n.set_language("zh")
        assert localized(outer, i18n._) == "cfg.json：d_k 和 d_v 必须为正数"
        assert localized(reason, i18n._) == ("a.tsv:3：应有 2 个用制表符分隔的字段，实际有 1 个"
                                             "（用 on_error=skip 跳过坏行）")
        assert localized(kind, i18n._) == "p 不是普通文件（它是文件夹）"
    finally:
        i18n.set_language("en")


def test_the_diverged_message_keeps_its_fields_and_is_chinese_where_shown():
    from scratchformer.errors import TrainingDiverged
    from scratchformer.training.checkpoint import diverged

    error = diverged(TrainingDiverged(4, float("nan")), Path("run") / "checkpoints" / "step-2")
    assert (error.step, str(error)) == (4, "loss became nan at step 4: the last finite checkpoint is step 2 (nothing "
                                           "was saved after it); lower lr_factor= or set clip_norm=, then "
                                           "--resume (or --overwrite)")
    assert str(diverged(TrainingDiverged(1, float("inf")), None)).startswith("loss became inf at step 1: no checkpoint")
    try:
        i18n.set_language("zh")
        assert localized(error, i18n._).startswith("第 4 步的损失变成了 nan：最后一个有限的检查点是第 2 步")
    finally:
        i18n.set_language("en")


def test_a_bad_corpus_line_is_one_chinese_line(tmp_path, monkeypatch, capsys):
    """data/corpus.py's error as `train` prints it under LANG=zh_CN.UTF-8: the reason (a Text) translated too."""
    import importlib.util

    from scratchformer.cli import main

    spec = importlib.util.spec_from_file_location("untranslated", Path(__file__).with_name("test_untranslated.py"))
    untranslated_checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(untranslated_checks)

    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    (tmp_path / "bad.tsv").write_text("hello\t你好\nthis line\thas\tthree fields\n", encoding="utf-8")
    try:
        code = main(["train", "--corpus", str(tmp_path / "bad.tsv"), "--max-steps", "1", "warmup=1",
                     "--out", str(tmp_path / "run")])
    finally:
        i18n.set_language("en")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert err.endswith("bad.tsv:2：应有 2 个用制表符分隔的字段，实际有 3 个（用 on_error=skip 跳过坏行）"), err
    assert not untranslated_checks.english_sentences(err)
