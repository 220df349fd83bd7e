"""Hostile command lines, through the real CLI in a subprocess: bad text, bad streams, absurd sizes, flags that make
no sense together. Each ends in one line on stderr (`scratchformer CMD: error: ...`) and a non-zero exit status."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import SRC, Result, assert_one_line_error, cli

WORDS = b"the cat sat on the mat\n"


def raw(*args: str | bytes, close: tuple[int, ...] = (), stdin: bytes | None = None, stdout=subprocess.PIPE,
        timeout: float = 120) -> Result:
    """Like `cli`, but with bytes arguments allowed and file descriptors `close`d in the child before it starts
    (a shell's `0<&-` / `1>&-`): `stdin=DEVNULL` is an open stream, not a closed one."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def closer() -> None:
        for fd in close:
            os.close(fd)

    proc = subprocess.run([sys.executable, "-m", "scratchformer", *args], input=stdin, env=env, timeout=timeout,
                          stdout=stdout, stderr=subprocess.PIPE, preexec_fn=closer if close else None)
    out = proc.stdout.decode("utf-8", "replace") if isinstance(proc.stdout, bytes) else ""
    return Result(proc.returncode, out, proc.stderr.decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def lm_corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("lmcorpus") / "lines.txt"
    path.write_bytes(b"".join(b"the cat sat on the mat number %d\n" % i for i in range(60)))
    return path


def _tiny_train(out, corpus, task: str, preset: str, layers: str) -> None:
    result = cli("train", "--task", task, "--corpus", str(corpus), "--preset", preset, "tgt_tokenizer=char",
                 "--max-steps", "2", "eval_every=0", "save_every=0", "bleu_samples=0",
                 "max_sentence_len=48", "--quiet", "--out", str(out), "d_model=32", "n_heads=2", "d_ff=64",
                 f"{layers}=1", "max_positions=48")
    assert result.code == 0, result.err[-3000:]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory, lm_corpus):
    """A decoder-only run of 2 steps (char tokenizer, 1 layer of width 32)."""
    out = tmp_path_factory.mktemp("lm") / "run"
    _tiny_train(out, lm_corpus, "lm", "gpt-tiny", "n_decoder_layers")
    return out


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory, lm_corpus):
    """An encoder-only (masked LM) run of 2 steps."""
    out = tmp_path_factory.mktemp("mlm") / "run"
    _tiny_train(out, lm_corpus, "mlm", "bert-tiny", "n_encoder_layers")
    return out


# -- 1. text input ----------------------------------------------------------------------------------------------
def test_invalid_utf8_on_stdin_names_the_line(toy_run):
    result = cli("translate", str(toy_run), "--beam", "1", stdin=b"hello\nhello\n\xff\xfe abc\n")
    assert_one_line_error(result, "stdin line 3", "not valid UTF-8", "iconv", code=2)
    assert result.out == ""  # refused before anything is translated


def test_invalid_utf8_in_a_file_names_file_and_line(toy_run, tmp_path):
    bad = tmp_path / "in.txt"
    bad.write_bytes(b"hello\n\xc3\x28\n")
    assert_one_line_error(cli("translate", str(toy_run), "--file", str(bad)), f"{bad} line 2", "UTF-8", code=2)


def test_invalid_utf8_in_an_argument(toy_run):
    result = raw("translate", str(toy_run), "--beam", "1", b"ok", b"caf\xe9")  # Latin-1, not UTF-8
    assert_one_line_error(result, "argument 2", "not valid UTF-8", code=2)


def test_invalid_utf8_prompt_for_generate(lm_run):
    assert_one_line_error(cli("generate", str(lm_run), stdin=b"the cat\n\xff\n"), "stdin line 2", "UTF-8", code=2)


@pytest.mark.parametrize("command", ["translate", "generate"])
def test_closed_stdin_is_one_line(command, toy_run, lm_run):
    run = toy_run if command == "translate" else lm_run
    assert_one_line_error(raw(command, str(run), close=(0,)), "stdin is closed", code=2)


def test_a_utf8_bom_on_stdin_and_in_files_is_stripped(toy_run, tmp_path):
    plain = cli("translate", str(toy_run), "--beam", "1", "hello")
    assert plain.code == 0, plain.err
    piped = cli("translate", str(toy_run), "--beam", "1", stdin=b"\xef\xbb\xbfhello\n")
    assert piped.code == 0 and piped.out == plain.out, (piped.out, plain.out, piped.err)
    file = tmp_path / "bom.txt"
    file.write_bytes(b"\xef\xbb\xbfhello\n")
    from_file = cli("translate", str(toy_run), "--beam", "1", "--file", str(file))
    assert from_file.code == 0 and from_file.out == plain.out, (from_file.out, plain.out)


def test_a_bom_at_the_start_of_a_corpus_is_not_part_of_its_first_sentence(toy_run, tmp_path):
    import json

    corpus = tmp_path / "bom.tsv"
    corpus.write_bytes(b"\xef\xbb\xbfhello\tworld\n")
    result = cli("evaluate", str(toy_run), "--corpus", str(corpus), "--show", "1", "--json")
    assert result.code == 0, result.err[-2000:]
    assert json.loads(result.out)["samples"][0]["src"] == "hello"  # today: "\ufeffhello"


def test_read_lines_drops_the_bom_of_stdin_and_of_files(monkeypatch, tmp_path):
    import io

    from scratchformer.cli.common import read_lines

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfhello\r\nworld\n")))
    assert read_lines("-") == ["hello", "world"]
    file = tmp_path / "in.txt"
    file.write_bytes(b"\xef\xbb\xbfhello\n")
    assert read_lines(str(file)) == ["hello"]


# -- 2. output --------------------------------------------------------------------------------------------------
def test_stdout_on_a_full_disk_is_one_line(toy_run):
    with open("/dev/full", "wb") as full:
        result = cli("translate", str(toy_run), "--beam", "1", "hello", stdout=full)
    assert_one_line_error(result, "cannot write", "no space left", code=2)


def test_closed_stdout_is_an_error_not_a_silent_success(toy_run):
    assert_one_line_error(raw("translate", str(toy_run), "--beam", "1", "hello", close=(1,)), "stdout is closed",
                          code=2)


def test_a_broken_pipe_stays_a_quiet_exit_0(toy_run):
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "shapes", "--preset", "tiny", "--all-layers"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # `| head -c 10`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == "", err


# -- 3. files ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer_tgt.json", "tokenizer_src.json",
                                  "train_config.json"])
def test_a_fifo_in_a_run_directory_is_refused_not_waited_on(name, toy_run, tmp_path):
    run = shutil.copytree(toy_run, tmp_path / "run")
    (run / name).unlink()
    os.mkfifo(run / name)
    result = cli("translate", str(run), "--beam", "1", "hello", timeout=60)  # today: blocks for ever
    assert_one_line_error(result, f"{run / name} is not a regular file", code=2)


def test_a_fifo_as_a_corpus_file_is_refused(toy_run, tmp_path):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("hello\n")
    os.mkfifo(tgt)
    result = cli("evaluate", str(toy_run), "--corpus", f"{src},{tgt}", timeout=60)
    assert_one_line_error(result, f"{tgt} is not a regular file", code=2)


@pytest.mark.parametrize("value, expected", [
    ("256", "int"), (None, "int"), ([256], "int"), (256.0, "int"), (True, "int"),
])
def test_config_json_with_a_wrong_type_names_field_value_and_type(value, expected, toy_run, tmp_path):
    import json

    run = shutil.copytree(toy_run, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["d_model"] = value
    (run / "config.json").write_text(json.dumps(config))
    result = cli("translate", str(run), "hello")
    assert_one_line_error(result, "config.json", "d_model", repr(value), expected, code=2)


@pytest.mark.parametrize("content", [
    b'{"format": "scratchformer-tokenizer", "kind": "ch', b"not json at all",
    b'{"format": "scratchformer-tokenizer", "version": 1, "kind": "char", "tokens": 5}', b'[1, 2, 3]', b'\xff\xfe{}',
])
def test_a_corrupt_tokenizer_file_is_one_line_naming_it(content, toy_run, tmp_path):
    run = shutil.copytree(toy_run, tmp_path / "run")
    (run / "tokenizer_tgt.json").write_bytes(content)
    assert_one_line_error(cli("translate", str(run), "hello"), str(run / "tokenizer_tgt.json"), code=2)


def test_a_truncated_tsv_gz_corpus_is_one_line(toy_run, tmp_path):
    whole = gzip.compress(b"".join(b"hello %d\tworld %d\n" % (i, i) for i in range(2000)))
    bad = tmp_path / "cut.tsv.gz"
    bad.write_bytes(whole[: len(whole) // 2])
    result = cli("evaluate", str(toy_run), "--corpus", str(bad))
    assert_one_line_error(result, str(bad), "truncated or not gzip", code=2)


# -- 4. sizes ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["shapes", "--preset", "tiny"], ["params", "--preset", "tiny"]])
def test_a_model_bigger_than_the_machine_is_refused_before_allocating(command):
    result = cli(*command, "d_ff=1000000000000")
    assert_one_line_error(result, "would need", "this machine has", code=2)


def test_training_a_model_bigger_than_the_machine_is_refused(tmp_path):
    from .conftest import TOY_TRAIN

    result = cli("train", *TOY_TRAIN, "--out", str(tmp_path / "big"), "d_ff=1000000000000")
    assert_one_line_error(result, "would need", code=2)


@pytest.mark.parametrize("flags, needles", [
    (["--set", "max_output_len=1000000000"], ["--set max_output_len=1000000000", "positions end at"]),
    (["--beam", "100000"], ["--beam"]),
    (["--threads", "100000"], ["--threads"]),
    (["--set", "alpha=nan"], ["--set alpha=nan"]),
    (["--set", "alpha=inf"], ["--set alpha=inf"]),
    (["--set", "alpha=-1"], ["--set alpha=-1"]),
    (["--batch-size", "0"], ["--batch-size"]),
    (["--set", "max_tokens=0"], ["--set max_tokens=0"]),
])
def test_absurd_translate_sizes_are_one_line(flags, needles, toy_run):
    assert_one_line_error(cli("translate", str(toy_run), *flags, "hello", timeout=120), *needles, code=2)


@pytest.mark.parametrize("flags, needles", [
    (["--max-new-tokens", "1000000000"], ["--max-new-tokens"]),
    (["--set", "temperature=nan"], ["temperature"]),
    (["--set", "temperature=inf"], ["temperature"]),
    (["--set", "top_p=1.5"], ["top_p"]),
    (["--set", "top_p=nan"], ["top_p"]),
    (["--set", "top_k=0"], ["top_k"]),
    (["--threads", "100000"], ["--threads"]),
    (["--set", "batch_size=0"], ["batch_size"]),
    (["--set", "seed=-1"], ["seed"]),
    (["--set", f"seed={2**70}"], ["seed"]),
])
def test_absurd_generate_flags_are_one_line(flags, needles, lm_run):
    assert_one_line_error(cli("generate", str(lm_run), *flags, "the cat", timeout=120), *needles, code=2)


# -- 5. meaning -------------------------------------------------------------------------------------------------
def test_translate_on_a_language_model_points_at_generate(lm_run):
    assert_one_line_error(cli("translate", str(lm_run), "hello"), "decoder", "scratchformer generate", code=2)


def test_translate_on_an_encoder_run_points_at_evaluate(mlm_run):
    assert_one_line_error(cli("translate", str(mlm_run), "hello"), "encoder", "scratchformer evaluate", code=2)


def test_translate_with_both_a_file_and_text_is_refused(toy_run, tmp_path):
    file = tmp_path / "in.txt"
    file.write_text("hello\n")
    assert_one_line_error(cli("translate", str(toy_run), "--file", str(file), "goodbye"), "--file", code=2)


@pytest.mark.parametrize("flags, needles", [
    (["--limit", "0"], ["--limit", ">= 1"]),
    (["--limit", "-2"], ["--limit", ">= 1"]),
    (["--show", "-1"], ["--show", ">= 0"]),
    (["--split", "tset"], ["tset", "train"]),
    (["--confidence", "--confidence-n", "1"], ["--confidence-n 1", "2 or more"]),
])
def test_evaluate_flags_that_would_score_the_wrong_data(flags, needles, toy_run):
    assert_one_line_error(cli("evaluate", str(toy_run), *flags), *needles, code=2)


def test_good_inputs_next_to_the_bad_ones_still_work(toy_run, tmp_path):
    ok = cli("evaluate", str(toy_run), "--limit", "2", "--show", "0", "--split", "test", "--json")
    assert ok.code == 0, ok.err[-2000:]
    file = tmp_path / "in.txt"
    file.write_bytes(b"hello\n\nhello\n")
    out = cli("translate", str(toy_run), "--beam", "2", "--file", str(file))
    assert out.code == 0 and len(out.out.splitlines()) == 3, out.err[-2000:]


# -- main() itself: failures no subprocess can provoke on demand (in-process, the command replaced) ---------------
@pytest.mark.parametrize("error, needles", [
    (MemoryError(), ["out of memory", "--batch-size", "--beam"]),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to "
                  "allocate 99999999999 bytes"), ["out of memory"]),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), ["not valid UTF-8", "iconv"]),
    (OSError(5, "Input/output error", "/data/corpus.tsv"), ["/data/corpus.tsv", "Input/output error"]),
])
def test_main_turns_the_remaining_failures_into_one_line(error, needles, monkeypatch, capsys):
    from scratchformer.cli import build_parser, main

    def explode(args):
        raise error

    parser = build_parser()
    monkeypatch.setattr("scratchformer.cli.build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["shapes"].set_defaults(func=explode)
    assert main(["shapes", "--preset", "tiny"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(Result(2, "", err), *needles, code=2)
