"""evaluate_lm: perplexity of a language-model run; and `scratchformer train --task lm` / `evaluate` wiring."""

import json
import math

import pytest
import torch

from scratchformer.cli import main
from scratchformer.data.corpus import load_text
from scratchformer.errors import ConfigError
from scratchformer.evaluation.lm import evaluate_lm
from scratchformer.model import build_model
from scratchformer.runs import load_run, save_weights

from .conftest import help_sentences


def test_a_trained_lm_has_lower_perplexity_than_an_untrained_one(lm_run, tmp_path):
    config = load_run(lm_run).model_config
    torch.manual_seed(3)
    save_weights(build_model(config), tmp_path / "untrained.safetensors")
    trained = evaluate_lm(lm_run, "test")
    untrained = evaluate_lm(lm_run, "test", weights=tmp_path / "untrained.safetensors")
    vocab = config.tgt_vocab_size
    assert untrained["perplexity"] > 0.5 * vocab  # about uniform over the vocabulary at initialisation
    assert trained["perplexity"] < 3.0 < untrained["perplexity"] / 5
    # the run's one text file: scored on its held-out test share (data/corpus.py held_out), never on train
    held_out = load_text(load_run(lm_run).train_config.corpus, "test", holdout="hash")
    assert trained["sentences"] == untrained["sentences"] == len(held_out) and 0 < len(held_out) < 400
    assert 0 < trained["bits_per_char"] < untrained["bits_per_char"]


def test_evaluate_lm_matches_the_trainers_validation_perplexity(lm_run):
    records = [json.loads(x) for x in (lm_run / "metrics.jsonl").read_text().splitlines()]
    last_valid = [r for r in records if r["kind"] == "valid"][-1]
    result = evaluate_lm(lm_run, "valid")  # a plain text file: every split is the file itself
    assert result["nll"] == pytest.approx(math.log(last_valid["valid_ppl"]), abs=1e-4)


def test_another_corpus_and_the_evaluate_command(lm_run, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("\n".join(help_sentences(50, seed=9)) + "\n")
    result = evaluate_lm(lm_run, corpus=str(other))
    assert result["corpus"] == str(other) and result["sentences"] == 50
    assert main(["evaluate", str(lm_run), "--corpus", str(other), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["perplexity"] == result["perplexity"]


def test_evaluate_lm_refuses_other_architectures(tmp_path):
    from scratchformer import ModelConfig
    from scratchformer.data.tokenizers import train_tokenizer

    tok = train_tokenizer("char", ["abc"])
    config = ModelConfig.preset("bert-tiny", tgt_vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=16)
    config.save(tmp_path / "config.json")
    tok.save(tmp_path / "tokenizer_tgt.json")
    save_weights(build_model(config), tmp_path / "model.safetensors")
    with pytest.raises(ConfigError, match="decoder-only"):
        evaluate_lm(tmp_path)


@pytest.mark.parametrize("task, preset", [("lm", "gpt-tiny"), ("mlm", "bert-tiny")])
def test_train_task_alone_picks_its_demo_recipe(task, preset, tmp_path, capsys):
    corpus = tmp_path / "text.txt"
    corpus.write_text("\n".join(help_sentences(60, seed=1)) + "\n")
    argv = ["train", "--task", task, "--corpus", str(corpus), "--max-steps", "2", "eval_every=0",
            "tgt_vocab_size=300", "--out", str(tmp_path / "run"), "--quiet", "--json", "d_model=16", "n_heads=2",
            "d_ff=16", "max_positions=64", "max_sentence_len=64"]
    assert main(argv) == 0
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["preset"] == preset and saved["tgt_tokenizer"] == "bpe" and saved["task"] == task
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["step"] == 2


@pytest.mark.parametrize("flag", [["--confidence"], ["--set", "split_sentences=true"], ["--set", "repair_copies=true"]])
def test_translation_only_evaluate_flags_on_a_language_model_are_one_line(lm_run, capsys, flag):
    assert main(["evaluate", str(lm_run), *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{' '.join(flag)} is for translation" in err and "decoder" in err and "\n" not in err
