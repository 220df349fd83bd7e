"""One way into translation: `Translator(run, options)` under translate, evaluate and serve, on every backend, with
one DecodingOptions (decoding.json) from which every command's decoding flags are made."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
import shutil

import pytest

from scratchformer.cli import build_parser, main
from scratchformer.config.decoding import OPTIONAL, OPTIONAL_DTYPES, DecodingOptions
from scratchformer.config.decoding_flags import BY_NAME, FLAGS
from scratchformer.decoding.pipeline import batches, chunks, run_pipeline
from scratchformer.decoding.results import Hyp
from scratchformer.engines import ENGINES, Translator
from scratchformer.engines.backends import engine_module
from scratchformer.errors import ConfigError
from scratchformer.evaluation.translation import evaluate_pairs
from scratchformer.runs import load_decoding, load_run
from scratchformer.serve.decoder import Options, RunTranslator

TEXTS = ["i love you. How are you", "hello", "", "good night. What is this. Good morning", "what is this"]
GRID = [dict(zip(("beam", "alpha", "split_sentences", "repair_copies", "max_output_len"), values))
        for values in itertools.product((1, 4), (0.6, 1.5), (False, True), (False, True), (None, 3))]


def installed(engine: str) -> bool:
    """Whether the packages ENGINES names for `engine` are installed."""
    import importlib.util

    return all(importlib.util.find_spec(p) is not None for p in (ENGINES[engine][1] or "").split())


def flags(options: dict) -> list[str]:
    """`options` as command-line flags, and `--set KEY=VALUE` for the options that are not flags."""
    out = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if not BY_NAME[name].flag:
            out += ["--set", f"{name}={'none' if value is None else str(value).lower()}"]
        elif isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            out += [flag, str(value)]
    return out


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture
def own_run(tiny_run, tmp_path):
    """A copy of the tiny toy run (CJK outputs) that a test may give a decoding.json; its exports are cached in it."""
    return shutil.copytree(tiny_run, tmp_path / "run")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_translate_evaluate_and_serve_agree_over_a_grid_of_options(own_run, engine):
    if not installed(engine):
        pytest.skip(f"{engine} is not installed")
    run = load_run(own_run)
    refs = [(t, "你好") for t in TEXTS]
    for options in GRID:
        given = {"engine": engine, **options}
        code, printed = cli("translate", str(own_run), *TEXTS, *flags(given), "--threads", "1")
        assert code == 0
        translated = printed.split("\n")[:-1]
        evaluated = [s["hyp"] for s in evaluate_pairs(run, refs, show=len(refs), **given)["samples"]]
        served = [h[0][0] for h in RunTranslator(run, given).translate(TEXTS, Options(options["beam"]))]
        library = Translator(run, DecodingOptions(**given)).translate(TEXTS)
        assert translated == evaluated == served == library, given
        assert translated[2] == "" and len(translated) == len(TEXTS)
        if engine == "torch":  # the compatibility face is the same pipeline
            assert Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(TEXTS, **options) == translated


def test_the_grid_tells_its_options_apart(untrained_run):
    """Beam, sentence splitting and max_len each change some output of a run like the grid's (else the test above
    could not see them ignored; alpha and copy repair rarely change a toy model's outputs, pipeline tests pin them).
    The run is untrained: the fitted one's beam and greedy outputs can agree on all five texts, as they did under
    ATen's baseline kernels (`make test-kernels`), while an untrained run's part on four of five under each."""
    run = load_run(untrained_run)
    base = dict(beam=1, alpha=0.6, split_sentences=False, repair_copies=False, max_output_len=None)
    plain = Translator(run, DecodingOptions(**base)).translate(TEXTS)
    # a budget one token short of the longest output cuts it, whatever this CPU's kernels trained the run to say
    longest = max(len(run.tgt_tok.encode(t)) for t in plain)
    assert longest >= 2, plain
    for change in (dict(beam=4), dict(split_sentences=True), dict(max_output_len=longest - 1)):
        assert Translator(run, DecodingOptions(**{**base, **change})).translate(TEXTS) != plain, change


@pytest.mark.parametrize("engine", list(ENGINES))
def test_an_unsupported_option_is_one_line_naming_the_backend(own_run, engine, capsys):
    if not installed(engine):
        pytest.skip(f"{engine} is not installed")
    run = load_run(own_run)
    supports = engine_module(engine).Backend.SUPPORTS
    on = {"n_best": 2, "no_repeat_ngram": 2, "repetition_penalty": 1.5, "align": True}
    for name, value in on.items():
        options = DecodingOptions(engine=engine, **{name: value})
        if (engine, name) == ("torch", "int8"):
            continue  # its own line: test_torch_int8_is_refused_in_one_line_naming_the_way
        if name in supports:
            Translator(run, options)  # honoured: no error
            continue
        with pytest.raises(ConfigError, match=f"the {engine} backend does not have this option") as e:
            Translator(run, options)
        assert str(e.value).startswith(f"{name}=") and "\n" not in str(e.value)
        assert main(["translate", str(own_run), "hello", "--engine", engine, *flags({name: value})]) == 2
        err = capsys.readouterr().err
        assert f"the {engine} backend" in err and err.count("\n") == 1
    if "prefix" not in supports:
        with pytest.raises(ConfigError, match=f"prefix: the {engine} backend"):
            Translator(run, DecodingOptions(engine=engine)).translate(["hello"], prefix="你")
    for dtype in OPTIONAL_DTYPES:  # bf16, int8: the dtype is the search itself; one line where it has none
        options = DecodingOptions(engine=engine, dtype=dtype)
        if dtype in supports:
            continue
        with pytest.raises(ConfigError, match=f"^dtype={dtype}: ") as e:
            Translator(run, options)
        assert "\n" not in str(e.value)
        assert main(["translate", str(own_run), "hello", "--engine", engine, "--dtype", dtype]) == 2
        err = capsys.readouterr().err
        assert f"--dtype {dtype}: " in err and err.count("\n") == 1
    assert set(supports) <= set(OPTIONAL) | set(OPTIONAL_DTYPES)


def test_torch_supports_every_option():
    assert engine_module("torch").Backend.SUPPORTS == frozenset(OPTIONAL) | {"bf16"}  # int8: CTranslate2's


def test_torch_int8_is_refused_in_one_line_naming_the_way(own_run, capsys):
    """The torch engine's own int8 was dropped (slower than CTranslate2's): one line says what to use instead."""
    run = load_run(own_run)
    with pytest.raises(ConfigError, match="the torch engine has no int8 .*--engine ctranslate2 --dtype int8") as e:
        Translator(run, run.decoding.pick(engine="torch", dtype="int8"))
    assert "\n" not in str(e.value)
    assert importlib.util.find_spec("scratchformer.decoding.quantize") is None


def test_old_decoding_files_load(own_run):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    d = load_decoding(root / "models" / "en-zh")  # the shipped 4-key file
    assert (d.alpha, d.split_sentences, d.repair_copies, d.beam, d.engine) == (1.5, True, True, 4, "torch")
    for old in ({"alpha": 1.0}, {"alpha": 1.5, "split_sentences": True, "repair_copies": False, "chosen": "x"},
                {"ensemble": []}):
        (own_run / "decoding.json").write_text(json.dumps(old))
        loaded = load_decoding(own_run)
        assert loaded == DecodingOptions(**old) and loaded.beam == 4
    every = DecodingOptions(alpha=1.2, split_sentences=True, repair_copies=True, chosen="all", engine="onnxruntime",
                            beam=3, max_output_len=20, batch_size=8, max_tokens=500, n_best=2, no_repeat_ngram=3,
                            repetition_penalty=1.2, align=True, dtype="int8")
    (own_run / "decoding.json").write_text(json.dumps(every.to_dict()))
    assert load_decoding(own_run) == every


def test_one_default_beam_everywhere(own_run):
    parser = build_parser()
    commands = {"translate": [str(own_run), "x"], "evaluate": [str(own_run)], "serve": [str(own_run)],
                "report": [str(own_run), "--out", "r.html"]}
    from scratchformer.config.decoding_flags import from_args

    for beam_in_file in (None, 2):
        if beam_in_file:
            (own_run / "decoding.json").write_text(json.dumps({"beam": beam_in_file}))
        run = load_run(own_run)
        want = beam_in_file or 4
        for command, args in commands.items():
            parsed = parser.parse_args([command, *args])
            assert parsed.beam is None  # the flag's default is the run's
            assert from_args(run.decoding, parsed).beam == want, command
        assert Translator(run).options.beam == want
        assert RunTranslator(run).options.beam == want
        assert evaluate_pairs(run, [("hello", "你好")])["beam"] == want
    assert DecodingOptions().beam == 4  # from_model's default, and a run's without the file


def test_the_decoding_flags_are_made_from_the_table():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("translate", "evaluate", "serve", "report"):
        actions = {a.dest: a for a in sub.choices[command]._actions}
        made = {f.name for f in FLAGS if command in f.commands and f.flag}
        assert made <= set(actions), command
        for name in made:
            assert actions[name].default is None  # the run's decoding.json decides
            assert actions[name].help.count("default") == 1, (command, name)  # one default shown
        keys = {f.name for f in FLAGS if command in f.commands and not f.flag}
        assert not keys & set(actions) and all(f"{k}: " in actions["set"].help for k in keys)  # --set's keys
        assert list(actions["engine"].choices) == list(ENGINES)
    assert {f.name for f in FLAGS} == set(DecodingOptions.__dataclass_fields__) - {"chosen", "ensemble", "named_as"}


def test_max_tokens_caps_padded_source_tokens_per_batch():
    lengths = [9, 7, 7, 3, 3, 3, 1]
    assert batches(list(range(7)), lengths, batch_size=32, max_tokens=None) == [[0, 1, 2, 3, 4, 5, 6]]
    cut = batches(list(range(7)), lengths, batch_size=32, max_tokens=14)
    assert cut == [[0], [1, 2], [3, 4, 5, 6]]
    assert all(len(b) * lengths[b[0]] <= 14 for b in cut)
    assert batches([0, 1, 2], [20, 2, 2], batch_size=2, max_tokens=5) == [[0], [1, 2]]  # one too long: alone


def test_chunks_read_lazily():
    read = []

    def lines():
        for i in range(7):
            read.append(i)
            yield str(i)

    stream = chunks(lines(), 3)
    assert next(stream) == ["0", "1", "2"] and read == [0, 1, 2]  # nothing past the first chunk was read
    assert list(stream) == [["3", "4", "5"], ["6"]]


def test_translate_file_prints_each_chunk_before_reading_the_next(own_run, monkeypatch, capsys):
    from scratchformer.cli import translate_cmd

    seen_at = {}

    def lines():
        for i, text in enumerate(TEXTS * 2):
            if i == 2:  # the third line is asked for only after the first chunk's outputs were printed
                seen_at["printed"] = capsys.readouterr().out
            yield text

    monkeypatch.setattr(translate_cmd, "CHUNK", 2)
    monkeypatch.setattr(translate_cmd, "_inputs", lambda args: lines())
    assert main(["translate", str(own_run), "--beam", "1"]) == 0
    rest = capsys.readouterr().out
    whole = Translator(load_run(own_run), DecodingOptions(beam=1)).translate(TEXTS * 2)
    assert seen_at["printed"].split("\n")[:-1] == whole[:2]
    assert (seen_at["printed"] + rest).split("\n")[:-1] == whole


def test_translate_file_streams_a_file(own_run, tmp_path, monkeypatch, capsys):
    from scratchformer.cli import translate_cmd

    path = tmp_path / "in.txt"
    path.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")
    monkeypatch.setattr(translate_cmd, "CHUNK", 4)
    assert main(["translate", str(own_run), "--file", str(path), "--beam", "1"]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == Translator(load_run(own_run), DecodingOptions(beam=1)).translate(
        TEXTS * 3)


def test_progress_shows_a_bar_on_stderr(own_run, capsys):
    Translator(load_run(own_run)).translate(TEXTS, progress=True)
    err = capsys.readouterr().err
    assert "translating" in err and "4/4" in err  # four non-empty sentences
    Translator(load_run(own_run)).translate(TEXTS)
    assert capsys.readouterr().err == ""


def test_evaluate_shows_progress(own_run, capsys):
    assert main(["evaluate", str(own_run), "--limit", "2", "--beam", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert "translating" in captured.err and json.loads(captured.out)["beam"] == 1


def test_serve_accepts_what_decoding_json_holds(own_run):
    every = dict(beam=2, alpha=1.2, split_sentences=True, repair_copies=True, max_output_len=1, batch_size=3,
                 max_tokens=40, no_repeat_ngram=2, repetition_penalty=1.3)
    (own_run / "decoding.json").write_text(json.dumps(every))
    run = load_run(own_run)
    served = [h[0][0] for h in RunTranslator(run).translate(TEXTS, Options(2))]
    code, printed = cli("translate", str(own_run), *TEXTS)
    assert code == 0 and served == printed.split("\n")[:-1]
    assert served == Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(TEXTS, **every)
    assert served != Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(TEXTS, beam=2)  # file used


class Miscopier:
    """A backend that copies each source back, miscopying two names: what copy repair is for."""

    SUPPORTS = frozenset()
    models = 1

    def __init__(self, tok):
        self.tok = tok

    def decode_batch(self, srcs, options, prefixes, structured):
        texts = [self.tok.decode(s[:-1]) for s in srcs]
        wrong = [t.replace("dlocate", "dlat").replace("gentoo", "gent").replace(".", "。") + "的" for t in texts]
        return [[Hyp("", 0.0, self.tok.encode(w))] for w in wrong]


def test_copy_repair_puts_back_each_sentences_own_source():
    from scratchformer.data.tokenizers import train_tokenizer

    tok = train_tokenizer("char", ["Use dlocate. Use gentoo. x 。的"])
    options = DecodingOptions(split_sentences=True, repair_copies=True)
    out = run_pipeline(Miscopier(tok), (tok, tok), 64, ["Use dlocate. Use gentoo.", "x"], options)
    assert out == ["Use dlocate。的Use gentoo。的", "x的"]
    plain = run_pipeline(Miscopier(tok), (tok, tok), 64, ["Use dlocate."], DecodingOptions())
    assert plain == ["Use dlat。的"]


def test_one_door_into_translation():
    """translate_texts and make_translator are gone: the lab, inspect, training and the benchmarks all go through
    engines.Translator (from_model for a model in memory), so a run's decoding.json is never skipped."""
    from pathlib import Path

    import scratchformer.decoding as decoding
    import scratchformer.engines as engines

    assert not hasattr(decoding, "translate_texts") and not hasattr(engines, "make_translator")
    root = Path(__file__).resolve().parents[2]
    for folder in ("src", "benchmarks"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "translate_texts" not in text and "make_translator" not in text, path


def test_from_model_is_a_run_in_memory(own_run):
    """Translator.from_model(model, src_tok, tgt_tok, options) decodes as Translator(run, options) does; it takes
    our own engine only, and a model that does not translate is one line."""
    run = load_run(own_run)
    for options in GRID:
        given = DecodingOptions(**options)
        assert (Translator.from_model(run.model, run.src_tok, run.tgt_tok, given).translate(TEXTS)
                == Translator(run, given).translate(TEXTS)), options
    with pytest.raises(ConfigError, match="engine"):
        Translator.from_model(run.model, run.src_tok, run.tgt_tok, DecodingOptions(engine="ctranslate2"))


def test_the_progress_bar_counts_what_the_result_counts(monkeypatch):
    """With split sentences the bar counts texts, as evaluate's result does (1,498 texts, not their 1,797
    sentences); an empty text is not counted (nothing to translate)."""
    from scratchformer.data.tokenizers import train_tokenizer
    from scratchformer.decoding import pipeline

    bars = []

    class Bar:
        def __init__(self, total, progress):
            self.total, self.done = total, 0
            bars.append(self)

        def update(self, n):
            self.done += n

        def close(self):
            pass

    monkeypatch.setattr(pipeline, "_bar", Bar)
    tok = train_tokenizer("char", ["Use dlocate. Use gentoo. x 。的"])
    texts = ["Use dlocate. Use gentoo.", "x", "", "Use x. Use x. Use x."]
    run_pipeline(Miscopier(tok), (tok, tok), 64, texts, DecodingOptions(split_sentences=True, batch_size=2), None,
                 False, True)
    assert [(b.total, b.done) for b in bars] == [(3, 3)]


def test_the_shims_only_tests_used_are_gone():
    """One name each: DecodingOptions (not its old alias), config's check_repetition, repair_copies per pair; the
    packs' and int8's test-only helpers are gone too."""
    from scratchformer import config
    from scratchformer.config import decoding as config_decoding
    from scratchformer.decoding import constraints, copies, packing

    for module, name in ((config, "DecodingConfig"), (config_decoding, "DecodingConfig"),
                         (constraints, "check_repetition_options"), (copies, "repair_all"), (packing, "drop_packs")):
        assert not hasattr(module, name), (module.__name__, name)
