"""Issue 42, the fourth red team: the input-handling findings 10, 13, 14, 15, 16 and smaller things.

10 a gzip bomb given to `train` is refused after a bounded read, in one line naming the size it can take;
13 `--input-format jsonl` with a lone surrogate is one line, as the other input paths are;
14 a weights write that fails inside safetensors (a file-size limit, as a full disk) is one CheckpointWriteError line;
15 Chinese `--help` on a stdout that cannot show Chinese falls back to English and says so;
16 a run's tokenizer.json with a pipeline part our tokenizers never write is refused in one line, and a tokenizers
   panic is one line too;
and: a 5000-digit integer in decoding.json names the file; lines of only invisible characters translate to empty
lines; the keras engine silences TensorFlow's log; a rope_scaling factor of 0 is refused.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scratchformer.errors import ScratchformerError

from .conftest import SRC, Result, assert_one_line_error, cli

SHIPPED = SRC / "scratchformer" / "models" / "en-zh"


def home_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir(exist_ok=True)
    return {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "home" / ".cache"),
            "TMPDIR": str(tmp_path)}


def copy_run(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out


# -- 10: a gzip bomb --------------------------------------------------------------------------------------------
def write_bomb(path: Path, lines: int) -> None:
    """`lines` lines of `a<TAB>b` gzipped: a few KB that expand 250 times or more."""
    block = b"a\tb\n" * 250_000
    with gzip.open(path, "wb", compresslevel=9) as f:
        for _ in range(lines // 250_000):
            f.write(block)


def test_a_gzip_bomb_is_refused_before_it_expands(tmp_path, monkeypatch):
    from scratchformer.data import corpus, reading

    bomb = tmp_path / "bomb.tsv.gz"
    write_bomb(bomb, 2_000_000)  # 8 MB of text in about 8 KB
    assert bomb.stat().st_size < 100_000
    monkeypatch.setattr(reading, "MAX_CORPUS_BYTES", 1_000_000)
    expanded = []
    real_open = gzip.open

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            chunk = self.f.read(n)
            expanded.append(len(chunk))
            return chunk

    monkeypatch.setattr(gzip, "open", lambda *a, **k: Counting(real_open(*a, **k)))
    with pytest.raises(corpus.CorpusError, match=r"bomb.tsv.gz is too big to train on.*1 MB") as e:
        corpus.load_pairs(bomb, "train", holdout="hash")
    assert "\n" not in str(e.value)
    assert sum(expanded) <= 1_000_000 + reading.CHUNK  # stopped at the limit, not after 8 MB


def test_a_corpus_past_this_machines_memory_names_the_lines_it_can_take(tmp_path, monkeypatch):
    from scratchformer.data import corpus, reading

    path = tmp_path / "big.tsv"
    path.write_text("a\tb\n" * 20_000, encoding="utf-8")
    monkeypatch.setattr(reading, "corpus_budget", lambda: 5_000_000)  # 5 MB: about 4,800 short lines
    with pytest.raises(corpus.CorpusError, match=r"big.tsv is too big.*this machine can take about [\d,]+ such lines"):
        corpus.load_pairs(path, "train")
    monkeypatch.setattr(reading, "corpus_budget", lambda: 10**9)
    assert len(corpus.load_pairs(path, "train")) == 20_000


def test_the_corpus_budget_heeds_an_address_space_limit():
    code = ("import resource; from scratchformer.data.reading import corpus_budget, _proc_kb\n"
            "used = _proc_kb('/proc/self/status', 'VmSize:') * 1024\n"
            "resource.setrlimit(resource.RLIMIT_AS, (used + 300_000_000, resource.RLIM_INFINITY))\n"
            "print(corpus_budget())")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 0 <= int(proc.stdout) <= 300_000_000


LOWERED = ("import sys; import scratchformer.data.reading as r; r.MAX_CORPUS_BYTES = 1_000_000; "
           "from scratchformer.cli import main; sys.exit(main(sys.argv[1:]))")


def test_train_on_a_gzip_bomb_is_one_line(tmp_path):
    bomb = tmp_path / "bomb.tsv.gz"
    write_bomb(bomb, 2_000_000)
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", **home_env(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", LOWERED, "train", "--recipe", "toy", "--corpus", str(bomb),
                           "--max-steps", "1", "--out", str(tmp_path / "out")], env=env, capture_output=True,
                          timeout=300)
    result = Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert_one_line_error(result, "bomb.tsv.gz is too big to train on", "1 MB", code=2)


# -- 13: jsonl input with a lone surrogate ----------------------------------------------------------------------
@pytest.mark.parametrize("line", ['{"src": "\\ud800"}', '{"src": "ok", "prefix": "\\udc80x"}'])
def test_jsonl_with_a_lone_surrogate_is_one_line_on_stdin_and_file(tiny_run, tmp_path, line):
    data = ('{"src": "hello"}\n' + line + "\n").encode()
    result = cli("translate", str(tiny_run), "--input-format", "jsonl", stdin=data, env=home_env(tmp_path))
    assert_one_line_error(result, "input line 2", "not valid UTF-8", code=2)
    file = tmp_path / "in.jsonl"
    file.write_bytes(data)
    result = cli("translate", str(tiny_run), "--input-format", "jsonl", "--file", str(file), env=home_env(tmp_path))
    assert_one_line_error(result, "input line 2", "not valid UTF-8", code=2)


# -- 14: a weights write that fails in safetensors --------------------------------------------------------------
def _limited(limit: int):
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def cli_fsize(limit: int, tmp_path: Path, *args: str) -> Result:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", **home_env(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "scratchformer", *args], env=env, capture_output=True, timeout=300,
                          preexec_fn=_limited(limit))
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def test_save_state_under_a_file_size_limit_is_a_checkpoint_write_error(tmp_path):
    code = ("import resource, signal, torch\n"
            "from scratchformer.errors import CheckpointWriteError\n"
            "from scratchformer.runs.weights import save_state\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "try:\n"
            f"    save_state({{'w': torch.zeros(100_000)}}, __import__('pathlib').Path({str(tmp_path / 'w.st')!r}))\n"
            "except CheckpointWriteError as e:\n"
            "    print('ERR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ERR cannot write") and "File too large" in proc.stdout, proc.stdout
    assert not list(tmp_path.iterdir())  # no temporary file left


def test_average_export_and_train_under_a_file_size_limit_are_one_line(toy_run, tiny_run, tmp_path):
    result = cli_fsize(20_000, tmp_path, "average", str(toy_run), "--last", "2", "--out", str(tmp_path / "avg.st"))
    assert_one_line_error(result, "cannot write", "File too large", code=2)
    result = cli_fsize(20_000, tmp_path, "export", str(tiny_run), "--format", "hf", "--out", str(tmp_path / "hf"))
    assert_one_line_error(result, "cannot write", "File too large", code=2)
    result = cli_fsize(60_000, tmp_path, "train", "--recipe", "toy", "--max-steps", "2", "save_every=1",
                       "eval_every=0", "bleu_samples=0", "--no-test", "--quiet",
                       "--out", str(tmp_path / "train"))
    assert_one_line_error(result, "cannot write", "File too large", code=2)


# -- 15: Chinese --help on a stdout that cannot show Chinese ----------------------------------------------------
@pytest.mark.parametrize("args, env", [
    (["--lang", "zh", "--help"], {"PYTHONIOENCODING": "ascii"}),
    (["train", "--help"], {"LANGUAGE": "", "LC_ALL": "zh_CN.GB18030", "LANG": "zh_CN.GB18030",
                           "PYTHONIOENCODING": "latin-1"}),
])
def test_chinese_help_on_a_stdout_that_cannot_show_it_falls_back_to_english(tmp_path, args, env):
    result = cli(*args, env={**home_env(tmp_path), **env})
    assert result.code == 0, result.err[-2000:]
    assert "Traceback" not in result.err
    assert "usage: scratchformer" in result.out
    notes = [line for line in result.err.splitlines() if line.strip()]
    assert len(notes) == 1 and "English" in notes[0], result.err


def test_chinese_help_on_utf8_stays_chinese(tmp_path):
    result = cli("--lang", "zh", "--help", env={**home_env(tmp_path), "PYTHONIOENCODING": "utf-8"})
    assert result.code == 0 and not result.err.strip(), result.err
    assert any("\u4e00" <= c <= "\u9fff" for c in result.out)


# -- 16: a tokenizer pipeline we never write --------------------------------------------------------------------
def _evil_tokenizer(path: Path, **part) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tokenizers_json"].update(part)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


REPLACE = {"normalizer": {"type": "Replace", "pattern": {"Regex": "(a|aa)+$"}, "content": "b"}}


@pytest.mark.parametrize("part", [
    REPLACE,
    {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False}},
    {"decoder": {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}},
    {"post_processor": {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}},
])
def test_load_tokenizer_refuses_pipeline_parts_we_never_write(tmp_path, part):
    from scratchformer.data.tokenizers import TokenizerError, load_tokenizer

    path = tmp_path / "tokenizer_src.json"
    shutil.copy(SHIPPED / "tokenizer_src.json", path)
    load_tokenizer(path)  # ours: accepted
    _evil_tokenizer(path, **part)
    with pytest.raises(TokenizerError, match=r"tokenizer_src.json.*(normalizer|pre_tokenizer|decoder|post_processor)"):
        load_tokenizer(path)


def test_translate_with_a_backtracking_tokenizer_is_one_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SHIPPED, run)
    _evil_tokenizer(run / "tokenizer_src.json", **REPLACE)
    result = cli("translate", str(run), "a" * 40 + "!", env=home_env(tmp_path))
    assert_one_line_error(result, "tokenizer_src.json", "normalizer", code=2)


def test_a_tokenizers_panic_is_one_tokenizer_error():
    from tokenizers import Regex, normalizers

    from scratchformer.data.tokenizers import TokenizerError, load_tokenizer

    tok = load_tokenizer(SHIPPED / "tokenizer_src.json")
    tok.hf.normalizer = normalizers.Replace(Regex("(a|aa)+$"), "b")  # past the file check: the panic itself
    for encode in (tok.encode, lambda t: tok.encode_batch([t]), tok.tokenize):
        with pytest.raises(TokenizerError, match="tokenizers library failed"):
            encode("a" * 40 + "!")


# -- smaller things ---------------------------------------------------------------------------------------------
def test_a_5000_digit_integer_in_decoding_json_names_the_file(tiny_run, tmp_path):
    from scratchformer.config import DecodingOptions

    run = copy_run(tiny_run, tmp_path)
    (run / "decoding.json").write_text('{"beam": ' + "9" * 5000 + "}", encoding="utf-8")
    with pytest.raises(ScratchformerError, match="decoding.json"):
        DecodingOptions.load(run / "decoding.json", "model.safetensors")
    result = cli("translate", str(run), "hello", env=home_env(tmp_path))
    assert_one_line_error(result, "decoding.json", "digits", code=2)


def test_a_message_names_as_flags_only_the_flags_the_user_gave(tiny_run, tmp_path):
    """decoding.json's {"batch_size": 10**11} was reported as `--beam 4 with --batch-size ...`: flags never typed."""
    run = copy_run(tiny_run, tmp_path)
    (run / "decoding.json").write_text(json.dumps({"batch_size": 10**11}), encoding="utf-8")  # beam: the default 4
    result = cli("translate", str(run), "hello", env=home_env(tmp_path))
    assert_one_line_error(result, "batch_size=100000000000 from decoding.json", code=2)
    assert "--batch-size" not in result.err and "--beam" not in result.err, result.err
    result = cli("translate", str(run), "--beam", "2", "hello", env=home_env(tmp_path))  # the one typed: a flag
    assert_one_line_error(result, "--beam 2 with batch_size=100000000000 from decoding.json", code=2)


def test_lines_of_invisible_characters_translate_to_empty_lines(tiny_run, tmp_path):
    lines = ["hello", "\u200f\u200e", "\u200d", "\x00", " \u2067\u2069\ufeff ", "hello"]
    result = cli("translate", str(tiny_run), stdin=("\n".join(lines) + "\n").encode(), env=home_env(tmp_path))
    assert result.code == 0, result.err[-2000:]
    out = result.out.split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == "", result.out
    assert out[1:5] == ["", "", "", ""], out
    assert out[0] == out[5]


def test_the_keras_engine_silences_tensorflows_log():
    code = "import os, scratchformer.engines.keras; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(SRC)}, capture_output=True,
                          text=True, timeout=300)
    assert proc.stdout.strip() == "3", proc.stderr[-2000:]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**env, "PYTHONPATH": str(SRC), "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert proc.stdout.strip() == "0", proc.stderr[-2000:]  # a user's own choice is kept


@pytest.mark.parametrize("factor", ["0", "-2", "0.0"])
def test_a_rope_scaling_factor_of_zero_or_less_is_refused(tmp_path, factor):
    from scratchformer.config import ModelConfig
    from scratchformer.errors import ConfigError

    with pytest.raises(ConfigError, match="factor must be > 0"):
        ModelConfig.preset("tiny", positions="rope", rope_scaling={"rope_type": "linear", "factor": float(factor)})
    result = cli("params", "--preset", "tiny", "positions=rope",
                 'rope_scaling={"rope_type": "linear", "factor": ' + factor + "}", env=home_env(tmp_path))
    assert_one_line_error(result, "rope_scaling", "factor must be > 0", code=2)
