"""`scratchformer generate`: streaming, batches, stdin, greedy at temperature 0, one-line errors, truncation."""

import io
import sys

import torch

from scratchformer.cli import main
from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.runs import load_run


class Recorder(io.StringIO):
    """stdout that remembers every write and flush, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def write(self, s: str) -> int:
        self.events.append(("write", s))
        return super().write(s)

    def flush(self) -> None:
        self.events.append(("flush", ""))


def greedy_by_hand(run_dir, prompt: str, max_new: int) -> str:
    """Argmax continuation without the KV cache or any sampling code: the reference for temperature 0."""
    run = load_run(run_dir)
    ids = [BOS_ID, *run.tgt_tok.encode(prompt)]
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(run.model(torch.tensor([ids]))[0, -1].argmax())
            if nxt == EOS_ID:
                break
            ids.append(nxt)
    return run.tgt_tok.decode(ids)


def test_single_prompt_streams_piece_by_piece(lm_run, monkeypatch):
    out = Recorder()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["generate", str(lm_run), "Click the", "--max-new-tokens", "12", "--set", "seed=0"]) == 0
    writes = [s for kind, s in out.events if kind == "write"]
    assert writes[0] == "Click the"  # the prompt first, at once
    assert writes[-1] == "\n"
    assert len([s for s in writes[1:-1] if s]) >= 3  # the continuation arrives in several pieces ...
    first_piece = out.events.index(("write", writes[1]))
    assert out.events[first_piece + 1] == ("flush", "")  # ... each flushed as it is written
    assert out.getvalue() == "".join(writes) and out.getvalue().count("\n") == 1


def test_temperature_zero_is_greedy_and_ignores_the_seed(lm_run, capsys):
    outputs = []
    for seed in ("1", "2"):
        assert main(["generate", str(lm_run), "Select the", "--set", "temperature=0", "--max-new-tokens", "20",
                     "--set", f"seed={seed}"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == greedy_by_hand(lm_run, "Select the", 20) + "\n"


def test_several_prompts_are_one_batch_one_line_each(lm_run, capsys):
    prompts = ["Open", "Move the slide", "C"]
    assert main(["generate", str(lm_run), *prompts, "--set", "temperature=0", "--max-new-tokens", "15"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # left padding changes nothing: each line is what the prompt gives alone
    assert lines == [greedy_by_hand(lm_run, p, 15) for p in prompts]


def test_prompts_from_stdin(lm_run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Open\nDelete the\n"))
    assert main(["generate", str(lm_run), "--set", "temperature=0", "--max-new-tokens", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [greedy_by_hand(lm_run, p, 10) for p in ("Open", "Delete the")]
    monkeypatch.setattr(sys, "stdin", io.StringIO("Copy\n"))
    assert main(["generate", str(lm_run), "-", "--set", "temperature=0", "--max-new-tokens", "10"]) == 0
    assert capsys.readouterr().out == greedy_by_hand(lm_run, "Copy", 10) + "\n"


def test_same_seed_same_text(lm_run, capsys):
    runs = []
    for _ in range(2):
        assert main(["generate", str(lm_run), "Click", "--set", "seed=7", "--set", "temperature=1.5"]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1]


def test_top_p_outside_the_interval_is_one_line_exit_2(lm_run, capsys):
    for bad in ("0", "1.5", "-0.1"):
        assert main(["generate", str(lm_run), "Click", "--set", f"top_p={bad}"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
        assert captured.err.startswith("scratchformer generate: error: top_p=") and "(0, 1]" in captured.err


def test_non_positive_threads_is_one_line_exit_2(lm_run, capsys):
    for bad in ("0", "-1"):
        assert main(["generate", str(lm_run), "Click", "--threads", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and f"--threads {bad}" in err


def test_long_prompt_is_cut_on_the_left_with_a_warning_or_refused(lm_run, capsys):
    long_prompt = "Click the table in the dialog. " * 3  # 93 characters > max_len 48
    assert main(["generate", str(lm_run), long_prompt, "--max-new-tokens", "8", "--set", "temperature=0"]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("scratchformer generate: warning: cut 1 prompt(s)")
    assert captured.out.startswith(long_prompt)  # the whole prompt is shown, the model read its last 41 tokens

    assert main(["generate", str(lm_run), long_prompt, "--max-new-tokens", "8", "--set", "truncate=error"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("scratchformer generate: error: 1 prompt(s) longer than")


def test_a_run_that_is_not_a_language_model_is_refused(tmp_path, capsys):
    from scratchformer import ModelConfig, build_model
    from scratchformer.data.tokenizers import train_tokenizer
    from scratchformer.runs import save_weights

    tok = train_tokenizer("char", ["abc"])
    config = ModelConfig.preset("bert-tiny", tgt_vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=16)
    config.save(tmp_path / "config.json")
    tok.save(tmp_path / "tokenizer_tgt.json")
    save_weights(build_model(config), tmp_path / "model.safetensors")
    assert main(["generate", str(tmp_path), "a"]) == 2
    assert "generate needs a language-model" in capsys.readouterr().err
