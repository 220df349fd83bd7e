"""RUN_DIR/decoding.json: a run's own decoding defaults, read by translate / evaluate / serve; flags win."""

import json
import shutil

import pytest

from scratchformer.cli import main
from scratchformer.config import DecodingOptions as Decoding
from scratchformer.decoding.sentences import join_translations
from scratchformer.engines import Translator
from scratchformer.errors import ConfigError
from scratchformer.evaluation.translation import evaluate_pairs
from scratchformer.runs import RUN_ENTRIES, load_decoding, load_run
from scratchformer.runs import save_decoding as write_decoding


@pytest.fixture
def own_run(tiny_run, tmp_path):
    """A copy of the shared tiny run that a test may give a decoding.json."""
    return shutil.copytree(tiny_run, tmp_path / "run")


def test_no_file_means_the_defaults(own_run):
    assert load_decoding(own_run) == Decoding() == load_run(own_run).decoding
    assert Decoding().options() == {"alpha": 0.6, "split_sentences": False, "repair_copies": False}


def test_the_file_round_trips_and_flags_win(own_run):
    write_decoding(own_run, Decoding(alpha=1.5, split_sentences=True, chosen="valid BLEU"))
    d = load_run(own_run).decoding
    assert d == Decoding(1.5, True, False, "valid BLEU")
    assert d.pick(alpha=None, split_sentences=False, repair_copies=True) == Decoding(1.5, False, True, "valid BLEU")
    assert "decoding.json" in RUN_ENTRIES  # a retrained run (--overwrite) does not keep the old model's choice


@pytest.mark.parametrize("text,message", [
    ("{", "is not valid JSON"),
    ("[1]", "must hold a JSON object, got list"),
    ('{"beams": 5}', "unknown decoding config field(s) ['beams']; known fields: align, alpha, batch_size, beam"),
    ('{"beam": 0}', "beam=0: must be >= 1"),
    ('{"beam": 4, "n_best": 5}', "n_best=5: beam search keeps only 4 hypotheses (beam=4)"),
    ('{"alpha": "1.5"}', "alpha='1.5' must be float (a number), got str"),
    ('{"alpha": true}', "alpha=True must be float (a number), got bool"),
    ('{"split_sentences": 1}', "split_sentences=1 must be bool (true or false), got int"),
    ('{"alpha": NaN}', "alpha=nan: the length penalty's exponent must be in [0, 10.0]"),
    ('{"alpha": 11}', "alpha=11.0: the length penalty's exponent must be in [0, 10.0]"),
])
def test_a_bad_file_is_one_line_naming_it(own_run, text, message):
    (own_run / "decoding.json").write_text(text)
    with pytest.raises(ConfigError, match="decoding.json") as e:
        load_run(own_run)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_bad_file_is_one_cli_line(own_run, capsys):
    (own_run / "decoding.json").write_text('{"alpha": -1}')
    assert main(["translate", str(own_run), "Hello."]) == 2
    err = capsys.readouterr().err
    assert "decoding.json: alpha=-1.0: the length penalty's exponent must be in [0, 10.0]" in err
    assert err.count("\n") == 1


def test_evaluate_uses_the_runs_choice_and_reports_it(own_run):
    pairs = [("I love you. Good night.", "我爱你。晚安。"), ("Hello.", "你好。")]
    plain = evaluate_pairs(load_run(own_run), pairs, beam=2)
    write_decoding(own_run, Decoding(alpha=1.0, split_sentences=True))
    run = load_run(own_run)
    chosen, flagged = evaluate_pairs(run, pairs, beam=2), evaluate_pairs(run, pairs, beam=2, split_sentences=False)
    parts = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(
        ["I love you.", "Good night.", "Hello."], beam=2, alpha=1.0)
    assert (plain["alpha"], plain["split_sentences"]) == (0.6, False)
    assert (chosen["alpha"], chosen["split_sentences"], chosen["repair_copies"]) == (1.0, True, False)
    assert (flagged["alpha"], flagged["split_sentences"]) == (1.0, False)
    from scratchformer.evaluation.metrics import bleu

    assert chosen["bleu"] == round(bleu([join_translations(parts[:2]), parts[2]], [t for _, t in pairs])["score"], 2)


def test_translate_cli_uses_the_runs_choice_and_the_flag_turns_it_off(own_run, capsys):
    text = "I love you. Good night."
    run = load_run(own_run)
    whole = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate([text], beam=4)[0]
    split = join_translations(Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(
        ["I love you.", "Good night."], beam=4))
    assert whole != split  # else the test could not tell them apart
    (own_run / "decoding.json").write_text(json.dumps({"split_sentences": True}))
    assert main(["translate", str(own_run), text]) == 0
    assert capsys.readouterr().out == split + "\n"
    assert main(["translate", str(own_run), "--set", "split_sentences=false", text]) == 0
    assert capsys.readouterr().out == whole + "\n"
