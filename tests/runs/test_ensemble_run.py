"""An ensemble kept with a run: decoding.json names more weights files of the run folder; translate, evaluate and
serve decode them with the model (--engine torch), --ensemble names others, --weights alone decodes one model."""

import json
import shutil

import pytest
import torch

from scratchformer.cli import main
from scratchformer.engines import Translator
from scratchformer.errors import CheckpointError, ConfigError
from scratchformer.evaluation.translation import evaluate_run
from scratchformer.export.formats import warn_members
from scratchformer.runs import load_run
from scratchformer.runs.weights import save_weights

TEXTS = ["Hello.", "I love you."]


@pytest.fixture
def own_run(tiny_run, tmp_path):
    """A copy of the tiny run with a second member (its weights, perturbed) beside model.safetensors."""
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    model = load_run(run_dir).model
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.add_(0.5 * p.std() * torch.randn(p.shape, generator=g))
    save_weights(model, run_dir / "member-2.safetensors")
    return run_dir


def outputs(run_dir, beam=3, **kw):
    """(text, score) of the best hypothesis of each of TEXTS."""
    run = load_run(run_dir, **kw)
    return hyps(run, run.members, beam)


def hyps(run, members, beam=3):
    found = Translator.from_model(run.model, run.src_tok, run.tgt_tok, ensemble=members).translate(
        TEXTS, beam=beam, return_hyps=True)
    return [(t.hyps[0].text, round(t.hyps[0].score, 4)) for t in found]


def test_decoding_json_names_the_members_and_weights_decodes_alone(own_run):
    alone = outputs(own_run)
    (own_run / "decoding.json").write_text(json.dumps({"ensemble": ["member-2.safetensors"]}))
    run = load_run(own_run)
    assert len(run.members) == 1 and run.decoding.ensemble == ["member-2.safetensors"]
    member = load_run(own_run, own_run / "member-2.safetensors").model
    assert not load_run(own_run, own_run / "model.safetensors").members  # another main model: alone
    both = outputs(own_run)
    assert both == hyps(run, [member])
    assert both != alone  # the member changes the search (else this test could not tell)
    assert outputs(own_run, ensemble=[]) == alone


@pytest.mark.parametrize("members,message", [
    (["../model.safetensors"], "without a folder"),
    (["sub/member.safetensors"], "without a folder"),
    (["member.pt"], "a .safetensors file"),
    (["model.safetensors"], "other than model.safetensors"),
    ([3], "a .safetensors file"),
    (["a.safetensors", "a.safetensors"], "named twice"),
])
def test_a_bad_member_name_is_one_line_naming_the_file(own_run, members, message):
    (own_run / "decoding.json").write_text(json.dumps({"ensemble": members}))
    with pytest.raises(ConfigError, match="decoding.json") as e:
        load_run(own_run)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_missing_member_is_one_line(own_run, capsys):
    (own_run / "decoding.json").write_text(json.dumps({"ensemble": ["gone.safetensors"]}))
    with pytest.raises(CheckpointError, match="gone.safetensors"):
        load_run(own_run)
    assert main(["translate", str(own_run), "Hello."]) == 2
    err = capsys.readouterr().err
    assert "gone.safetensors" in err and err.count("\n") == 1


def test_cli_translate_and_evaluate_decode_the_ensemble(own_run, capsys):
    member = str(own_run / "member-2.safetensors")
    assert main(["translate", str(own_run), *TEXTS, "--beam", "3", "--ensemble", member]) == 0
    assert capsys.readouterr().out.splitlines() == [text for text, _ in outputs(own_run, ensemble=[member])]
    result = evaluate_run(own_run, "test", beam=2, limit=3, ensemble=[member])
    assert result["ensemble_size"] == 2
    assert "ensemble_size" not in evaluate_run(own_run, "test", beam=2, limit=3)


def test_other_engines_refuse_the_flag_and_warn_of_the_file(own_run, capsys):
    member = str(own_run / "member-2.safetensors")
    assert main(["translate", str(own_run), "--engine", "onnxruntime", "--ensemble", member, "Hello."]) == 2
    assert "--ensemble" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="only --engine torch"):
        evaluate_run(own_run, "test", engine="ctranslate2", ensemble=[member])
    (own_run / "decoding.json").write_text(json.dumps({"ensemble": ["member-2.safetensors"]}))
    with pytest.warns(UserWarning, match="ensemble of 2 models: the onnx export holds model.safetensors alone"):
        warn_members(load_run(own_run), "the onnx export holds")


def test_the_cli_memory_check_counts_the_members(own_run, monkeypatch, capsys):
    from scratchformer.config import decoding

    run, member = load_run(own_run), str(own_run / "member-2.safetensors")
    need = decoding.search_bytes(run.model.config, 32 * 4, run.model.config.max_positions)  # the default batch and beam
    monkeypatch.setattr(decoding, "available_memory", lambda: int(1.5 * need))
    assert main(["translate", str(own_run), "Hello."]) == 0
    capsys.readouterr()
    assert main(["translate", str(own_run), "Hello.", "--ensemble", member]) == 2
    err = capsys.readouterr().err
    # the run's decoding.json gave the beam and the batch size: named as its fields, not as flags the user never typed
    assert ("beam=4 from decoding.json with batch_size=32 from decoding.json: the search would need about" in err
            and err.count("\n") == 1)
