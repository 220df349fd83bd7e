"""The practitioner's first hour (issue 36): own data held out honestly, the warm-up warning, flags that are not
abbreviated, --version, help defaults that are the recipe's, a run evaluated from another folder, --no-test kept by
--resume, and a readable end-of-training summary."""

from __future__ import annotations

import json
import os
import random

import pytest

from scratchformer.cli import build_parser, main
from scratchformer.config import RECIPES, TrainConfig
from scratchformer.data.corpus import HOLDOUT_MAX, held_out, load_pairs, load_text

WORDS = "open close save print copy paste the file window page table cell row column new old".split()
TINY = ["--preset", "tiny", "src_tokenizer=word", "tgt_tokenizer=word", "max_tokens=256",
        "eval_every=0", "save_every=2", "bleu_samples=0", "max_sentence_len=16", "--quiet",
        "d_model=16", "n_heads=2", "d_ff=16", "n_encoder_layers=1", "n_decoder_layers=1", "max_positions=16"]


def _write_tsv(path, n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        src = " ".join(rng.choice(WORDS) for _ in range(2 + i % 4)) + f" {i}"
        pairs.append((src, src.upper()))
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return pairs


# -- the held-out split ------------------------------------------------------------------------------------------

def test_one_file_is_split_without_overlap_deterministically(tmp_path):
    pairs = _write_tsv(tmp_path / "mine.tsv", 400)
    pairs.append(pairs[0])  # a repeated sentence must land in one split only
    (tmp_path / "mine.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    splits = {s: load_pairs(tmp_path / "mine.tsv", s, holdout="hash") for s in ("train", "valid", "test")}
    sources = {s: {src for src, _ in rows} for s, rows in splits.items()}
    assert not sources["train"] & sources["valid"] and not sources["train"] & sources["test"]
    assert not sources["valid"] & sources["test"]
    assert len(sources["valid"]) == len(sources["test"]) == 20  # 5% of 400 distinct sources each
    assert sum(len(rows) for rows in splits.values()) == len(pairs)  # nothing lost
    # the same rows in another order: the same split (a hash of the sentence, not its line number)
    shuffled = list(pairs)
    random.Random(3).shuffle(shuffled)
    (tmp_path / "shuffled.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in shuffled), encoding="utf-8")
    assert set(load_pairs(tmp_path / "shuffled.tsv", "test", holdout="hash")) == set(splits["test"])
    # the old way, asked for by name: the file serves every split
    assert load_pairs(tmp_path / "mine.tsv", "test", holdout="none") == pairs


def test_held_out_bounds_and_text_files(tmp_path):
    rows = [f"sentence {i}" for i in range(100_000)]
    assert len(held_out(rows, "valid")) == len(held_out(rows, "test")) == HOLDOUT_MAX
    small = [f"s {i}" for i in range(19)]
    assert held_out(small, "test") == small  # too few to split: the caller says so (note_splits)
    (tmp_path / "text.txt").write_text("\n".join(rows[:200]) + "\n")
    train, test = (set(load_text(tmp_path / "text.txt", s, holdout="hash")) for s in ("train", "test"))
    assert len(test) == 10 and not train & test


def test_a_bundled_corpus_keeps_its_own_splits():
    assert load_pairs("toy", "test", holdout="hash") == load_pairs("toy", "test", holdout="none")


def test_train_config_written_before_the_rule_reads_as_no_holdout(tmp_path):
    (tmp_path / "train_config.json").write_text(json.dumps({"corpus": "mine.tsv"}))
    assert TrainConfig.load(tmp_path / "train_config.json").holdout == "none"  # what that run trained on
    assert TrainConfig().holdout == "hash"


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """`train --corpus mine.tsv` with a relative path, 2 updates, from inside the data folder."""
    root = tmp_path_factory.mktemp("own")
    _write_tsv(root / "mine.tsv", 400)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["train", "--corpus", "mine.tsv", "--out", "run", "--max-steps", "2", "--no-test", *TINY])
    finally:
        os.chdir(cwd)
    assert code == 0, err.getvalue()
    return root, out.getvalue(), err.getvalue()


def test_train_on_one_file_holds_out_says_so_and_records_it(own_run):
    root, out, err = own_run
    saved = json.loads((root / "run" / "train_config.json").read_text())
    assert saved["holdout"] == "hash"
    assert saved["corpus"] == str((root / "mine.tsv").resolve())  # absolute: evaluate works from anywhere
    assert "data: " in out and "held out by hash" in out and "(360 train, 20 valid, 20 test)" in out
    assert "one file, split by a hash" not in err  # --quiet: the log line is silenced, the summary says it


def test_warm_up_longer_than_the_run_is_a_warning(own_run):
    _, _, err = own_run
    assert "warning: the run ends (--max-steps 2) before its warm-up (warmup=1000) does" in err


def test_summary_is_readable_and_json_on_request(own_run, tmp_path, capsys):
    _, out, _ = own_run
    assert out.startswith("trained run: 2 updates") and not out.lstrip().startswith("{")
    assert "valid (step 2): loss" in out
    root = own_run[0]
    code = main(["train", "--corpus", str(root / "mine.tsv"), "--out", str(tmp_path / "j"), "--max-steps", "1",
                 "warmup=1", "--no-test", "--json", *TINY])
    printed = capsys.readouterr()
    summary = json.loads(printed.out.strip().splitlines()[-1])
    assert code == 0 and summary["step"] == 1 and summary["data"]["test"] == 20
    assert "warm-up" not in printed.err  # --warmup 1 <= --max-steps 1: no warning


def test_evaluate_from_another_folder_uses_the_held_out_test(own_run, tmp_path, capsys, monkeypatch):
    root, _, _ = own_run
    monkeypatch.chdir(tmp_path)  # not where mine.tsv was given relative to
    assert main(["evaluate", str(root / "run"), "--json", "--show", "0"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 20 and result["corpus"] == str((root / "mine.tsv").resolve())


def test_no_test_is_kept_across_resume(own_run, tmp_path, capsys):
    import shutil

    root, _, _ = own_run
    run = tmp_path / "run"
    shutil.copytree(root / "run", run)
    assert json.loads((run / "train_config.json").read_text())["test_report"] is False
    code = main(["train", "--resume", "--out", str(run), "--max-steps", "3", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "test (" not in printed.out and "BLEU" not in printed.out  # no test report: the run said --no-test
    assert json.loads((run / "train_config.json").read_text())["test_report"] is False


def test_a_too_small_file_is_said_to_serve_every_split(tmp_path, capsys):
    _write_tsv(tmp_path / "tiny.tsv", 10)
    code = main(["train", "--corpus", str(tmp_path / "tiny.tsv"), "--out", str(tmp_path / "run"), "--max-steps", "1",
                 "warmup=1", "--no-test", *TINY])
    printed = capsys.readouterr()
    assert code == 0 and "too few distinct sentences to hold out" in printed.err
    assert "too small to hold out" in printed.out


# -- the parser ---------------------------------------------------------------------------------------------------

def test_an_abbreviated_flag_is_refused_naming_the_flag_it_resembles(capsys):
    """One line from the command (not the top-level usage), naming the flag meant."""
    for argv, bad, meant in ((["train", "--max-step", "5"], "--max-step", "--max-steps"),
                             (["translate", "r", "x", "--beams=2"], "--beams=2", "--beam"),
                             (["evaluate", "r", "--split", "test", "--limt", "3"], "--limt", "--limit")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"scratchformer {argv[0]}: error: unrecognized arguments: {bad}")
        assert f"did you mean {meant}?" in err
    with pytest.raises(SystemExit):
        main(["train", "--zzzz"])
    assert "did you mean" not in capsys.readouterr().err  # nothing close: nothing suggested


def test_every_parser_refuses_abbreviations():
    parser = build_parser()
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    assert parser.allow_abbrev is False
    assert all(p.allow_abbrev is False for p in subs.choices.values())


def test_version(capsys):
    from scratchformer import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"scratchformer {__version__}"


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    # the options part (not the usage line), argparse's wrapping undone: compare with single spaces
    return " ".join(capsys.readouterr().out.split("options:", 1)[1].split())


def test_train_help_shows_one_default_each_the_recipes(capsys):
    text = _help(capsys)
    assert "(default: None)" not in text and "(default: True)" not in text
    demo = RECIPES["demo"]
    for flag, field in (("--max-steps", "max_steps"),):
        after = text.split(f"{flag} {field.upper()} ", 1)[1]
        assert after.count("default") >= 1 and f"default: {demo[field]} from the demo recipe" in after.split("--")[0]
    for key in ("warmup", "max_tokens"):  # KEY=VALUE settings, listed below the flags
        after = text.split(f" {key}= ", 1)[1]
        assert f"default: {demo[key]} from the demo recipe" in after.split("=", 1)[0]
    no_test = text.split("--no-test ", 1)[1].split(" --")[0]
    assert "default" not in no_test  # a switch: no misleading "(default: True)"
    assert "TSV" in text.split("--corpus CORPUS", 1)[1].split(" --")[0]
    assert text.count("(default:") == text.count("default:")  # one form, once per option


# -- one BLEU headline per model -----------------------------------------------------------------------------------

def test_the_headline_is_what_evaluate_prints_with_its_args(tiny_run, tmp_path, capsys):
    """scripts/ship_checkpoint.py --headline: README.json's one figure, with split, sentences, decoding and signature,
    equal to `evaluate MODEL` with the headline's args (what the demo runs)."""
    import importlib.util
    import shutil
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("ship_checkpoint", root / "scripts" / "ship_checkpoint.py")
    ship = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(root / "scripts"))
    try:
        spec.loader.exec_module(ship)
    finally:
        sys.path.remove(str(root / "scripts"))
    model = shutil.copytree(tiny_run, tmp_path / "model")
    (model / "decoding.json").write_text('{"alpha": 1.0, "split_sentences": true}')
    (model / "README.json").write_text('{"corpus": "toy"}')
    ship.write_headline(model)
    capsys.readouterr()
    meta = json.loads((model / "README.json").read_text())
    head = meta["headline"]
    assert meta["corpus"] == "toy"  # the rest kept
    assert head["split"] == "toy test" and head["sentences"] > 0 and head["bleu_signature"].startswith("nrefs:1")
    assert "greedy (beam 1), alpha 1.0, split_sentences (its decoding.json)" == head["decoding"]
    assert main(["evaluate", str(model), *head["args"], "--json", "--show", "0"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["bleu"], result["sentences"]) == (head["bleu"], head["sentences"])


def test_the_shipped_readme_has_one_headline_with_split_decoding_and_signature():
    """models/en-zh/README.json: the one figure the demo prints and measures again (`evaluate en-zh` + its args),
    with the decoding that its decoding.json gives (measured with scripts/ship_checkpoint.py's rule)."""
    from pathlib import Path

    model = Path(__file__).resolve().parents[2] / "models" / "en-zh"
    meta = json.loads((model / "README.json").read_text(encoding="utf-8"))
    head, decoding = meta["headline"], json.loads((model / "decoding.json").read_text(encoding="utf-8"))
    corpus = json.loads((model / "train_config.json").read_text(encoding="utf-8"))["corpus"]
    assert head["split"] == f"{corpus} test" and head["args"] == ["--split", "test", "--beam", "1"]
    assert head["sentences"] == len(load_pairs(corpus, "test"))
    assert f"alpha {decoding['alpha']}" in head["decoding"] and head["bleu_signature"].startswith("nrefs:1|")
    assert ("split_sentences" in head["decoding"]) == decoding["split_sentences"]
    assert ("repair_copies" in head["decoding"]) == decoding["repair_copies"]


def test_a_merged_flag_fails_in_one_line_naming_its_replacement(capsys):
    """`--test-report false` did what `--no-test` does: one flag stays, the other names it."""
    with pytest.raises(SystemExit) as e:
        main(["train", "--test-report", "false"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("scratchformer train: error: --test-report is gone") and "--no-test" in err
    assert "--test-report" not in build_parser()._subparsers._group_actions[0].choices["train"].format_help()


def test_serve_has_one_token_budget_flag(capsys):
    """serve's --max-tokens (padded tokens per batch) and --max-batch-tokens (tokens merged into one call) did one
    job: max_batch_tokens stays, a --set key (decoding.json's max_tokens still caps each batch), --max-tokens names
    it."""
    serve = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    assert "max_batch_tokens: " in serve and "--max-tokens" not in serve and "max_tokens: " not in serve
    with pytest.raises(SystemExit) as e:
        main(["serve", "en-zh", "--max-tokens", "100"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("scratchformer serve: error: --max-tokens is gone: use --set max_batch_tokens=100")
