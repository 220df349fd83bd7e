"""The command line end to end: inspection commands, train -> translate -> evaluate, and one-line errors."""

import json
import shutil

import pytest

from scratchformer.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_params_json_reproduces_paper_base(capsys):
    code, out, _ = run(capsys, "params", "--preset", "paper-base", "--json")
    data = json.loads(out)
    assert code == 0 and data["total"] == 63_119_496 and data["paper_millions"] == 65
    assert data["components"]["decoder: cross-attention"] == 6 * (4 * 512 * 512 + 4 * 512)


def test_params_table_and_overrides(capsys):
    code, out, _ = run(capsys, "params", "--preset", "tiny", "d_model=32", "n_heads=2", "norm=pre")
    assert code == 0 and "encoder: final layer norm" in out and "seeds estimate" in out


def test_shapes_names_every_dimension(capsys):
    code, out, _ = run(capsys, "shapes", "--preset", "paper-base", "--batch", "2", "--lengths", "10,9")
    assert code == 0
    assert "self_attn.attention [ScaledDotProductAttention]  in: (B=2, h=8, L_src=10, d_k=64)" in out
    assert "generator.proj [Linear]  in: (B=2, L_tgt=9, D=512)  -> (B=2, L_tgt=9, V=37000)" in out
    assert "decoder.layers.0.cross_attn.w_kv [Linear]  in: (B=2, L_src=10, D=512)" in out


def test_shapes_for_single_stack_models(capsys):
    for preset in ("gpt-tiny", "bert-tiny"):
        code, out, _ = run(capsys, "shapes", "--preset", preset, "--lengths", "7")
        assert code == 0 and "(B=2, L=7, D=128)" in out


def test_plot_positions_writes_a_png(capsys, tmp_path):
    code, out, _ = run(capsys, "plot", "positions", "--d-model", "32", "--max-positions", "40", "--out",
                       str(tmp_path / "pe.png"))
    assert code == 0 and (tmp_path / "pe.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args,message", [
    (["params", "--preset", "paper-huge"], "valid presets: "),
    (["params", "--preset", "tiny", "d_model=30", "n_heads=4"], "not divisible by n_heads"),
    (["params", "--preset", "tiny", "colour=blue"], "unknown config field 'colour'"),
    (["params", "--preset", "tiny", "d_model=big"], "cannot read d_model='big' as int"),
    (["translate", "/nonexistent/run", "hello"], "does not exist"),
])
def test_bad_input_is_one_line(capsys, args, message):
    code, out, err = run(capsys, *args)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "toy"
    assert main(["train", "--recipe", "toy", "--out", str(out), "--quiet", "--no-test"]) == 0
    return out


def test_train_translate_evaluate(capsys, toy_run, tmp_path):
    capsys.readouterr()
    code, out, _ = run(capsys, "translate", str(toy_run), "--beam", "4", "hello", "", "good night")
    assert code == 0 and out.split("\n")[:3] == ["你好", "", "晚安"]  # an empty line gives an empty line
    code, out, _ = run(capsys, "translate", str(toy_run), "hello zzzunseen", "--beam", "1")
    assert code == 0  # an unseen word becomes <unk>, never a crash
    code, out, _ = run(capsys, "evaluate", str(toy_run), "--split", "test", "--json")
    result = json.loads(out)
    assert result["exact_match"] == 1.0 and result["bleu"] == 100.0 and "tok:zh" in result["bleu_signature"]
    assert "bleu_ci95" not in result
    code, out, _ = run(capsys, "evaluate", str(toy_run), "--split", "test", "--confidence", "--confidence-n", "100",
                       "--json")
    result = json.loads(out)  # the score is the same; the interval comes beside it (test_metrics checks its width)
    assert code == 0 and result["bleu"] == 100.0 and result["bleu_ci95"] >= 0 and "bs:100" in result["bleu_signature"]
    code, _, err = run(capsys, "translate", str(toy_run), "--show-attention", str(tmp_path / "a.png"), "i love you")
    assert code == 0 and (tmp_path / "a.png").exists()
    code, out, _ = run(capsys, "translate", str(toy_run), "--batch-size", "1", "--set", "max_tokens=8", "--threads",
                       "1", "--beam", "4", "hello", "", "good night")
    assert code == 0 and out.split("\n")[:3] == ["你好", "", "晚安"]  # same outputs, one sentence per batch
    code, out, _ = run(capsys, "translate", str(toy_run), "--set", "max_output_len=1", "--beam", "1", "good night")
    assert code == 0 and out.split("\n")[0] == "晚"  # one output token


@pytest.mark.parametrize("flag", ["--batch-size", "--set max_tokens", "--set max_output_len", "--threads"])
def test_translate_rejects_non_positive_sizes(capsys, toy_run, flag):
    given = [flag, "0"] if " " not in flag else ["--set", flag.split()[1] + "=0"]
    code, out, err = run(capsys, "translate", str(toy_run), *given, "hello")
    assert code == 2 and flag.lstrip("-").replace("-", "_") in err.replace("-", "_") and err.count("\n") == 1


def test_existing_run_is_not_overwritten_silently(capsys, toy_run):
    code, _, err = run(capsys, "train", "--recipe", "toy", "--out", str(toy_run))
    assert code == 2 and "--resume" in err and "--overwrite" in err


def test_run_dir_with_missing_or_foreign_files(capsys, toy_run, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(toy_run, broken)
    (broken / "tokenizer_tgt.json").unlink()
    code, _, err = run(capsys, "translate", str(broken), "hello")
    assert code == 2 and "tokenizer_tgt.json is missing" in err
    foreign = tmp_path / "foreign"
    shutil.copytree(toy_run, foreign)
    config = json.loads((foreign / "config.json").read_text())
    config["d_ff"] = 96
    (foreign / "config.json").write_text(json.dumps(config))
    code, _, err = run(capsys, "translate", str(foreign), "hello")
    assert code == 2 and "another config" in err and "model.safetensors" in err


def test_malformed_corpus_line_is_reported_with_its_number(capsys, tmp_path):
    """The error names the line and the flag that skips it; the same command with that flag then trains into the
    same --out (the failed start saved nothing: its folder is reusable without --overwrite), warning once."""
    corpus = tmp_path / "bad.tsv"
    corpus.write_text("hello\t你好\nno tab here\ngood night\t晚安\n")
    argv = ["train", "--corpus", str(corpus), "--preset", "tiny", "--out", str(tmp_path / "r"), "--max-steps", "2",
            "--quiet", "--no-test", "bleu_samples=0", "src_tokenizer=word", "max_tokens=64",
            "warmup=2"]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "bad.tsv:2:" in err and "on_error=skip" in err
    (tmp_path / "r" / "notes.txt").write_text("mine")
    code, _, err = run(capsys, *argv, "on_error=skip")
    assert code == 0, err
    assert err.count("skipped 1 malformed line") == 1, err
    assert (tmp_path / "r" / "notes.txt").read_text() == "mine" and (tmp_path / "r" / "model.safetensors").exists()
    code, _, err = run(capsys, *argv, "on_error=skip")  # now it holds a trained run: refused as before
    assert code == 2 and "already holds a run" in err


def test_training_reads_each_split_once(capsys, tmp_path, monkeypatch):
    """The train split feeds both the tokenizer and the examples from one read (a `--on-error skip` warning or a
    slow corpus shows up once)."""
    import scratchformer.training.tasks.base as trainer  # Task.pairs reads every split of a translation corpus

    reads, real = [], trainer.load_pairs

    def counting(source, split="train", **kw):
        reads.append(split)
        return real(source, split, **kw)

    monkeypatch.setattr(trainer, "load_pairs", counting)
    corpus = tmp_path / "c.tsv"
    corpus.write_text("hello\t你好\ngood night\t晚安\n")
    code, _, _ = run(capsys, "train", "--corpus", str(corpus), "--preset", "tiny", "--out", str(tmp_path / "r"),
                     "--max-steps", "1", "--quiet", "--no-test", "bleu_samples=0", "src_tokenizer=word",
                     "max_tokens=64", "warmup=2")
    assert code == 0 and reads.count("train") == 1 and reads.count("valid") == 1
