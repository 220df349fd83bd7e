"""experiments/software/train_software_gpu.py (the GPU run of the software recipe), the other software studies in
experiments/, and scripts/eval_software.py (docs/translation.md's
per-source table): every step runs on the CPU before a GPU is lent; the GPU plan is the recipe itself."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# the studies live in experiments/<study>/ (each with its rows and write-up); eval_software stays a tool of scripts/
HOMES = {"train_software_gpu": "experiments/software", "copy_twins": "experiments/copy-twins",
         "add_member": "experiments/ensemble", "forward_translate": "experiments/forward-translation",
         "eval_software": "scripts", "ship_checkpoint": "scripts"}


def _path(name: str) -> Path:
    return ROOT / HOMES[name] / f"{name}.py"


def _script(name: str):
    """The script NAME as a module (its folder on sys.path, as when it runs, for its sibling imports)."""
    folder = str(_path(name).parent)
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, _path(name))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(folder)


def test_the_gpu_plan_is_the_software_recipe_on_cuda_scored_on_every_source(tmp_path):
    gpu = _script("train_software_gpu")
    p = gpu.plan(tmp_path / "run", 7.0, smoke=False)
    train = p["train"]
    assert train[:3] == ["train", "--recipe", "software"]
    assert "device=cuda" in train and "time_limit=7.0" in train
    assert p["sources"][0] == "libreoffice" and {"gimp", "django", "jupyterlab"} <= set(p["sources"])
    assert p["beam"] == 4 and p["limit"] is None


def test_the_gpu_script_smoke_trains_averages_and_scores(tmp_path, capsys):
    gpu = _script("train_software_gpu")
    out = tmp_path / "run"
    assert gpu.main(["--smoke", "--out", str(out)]) == 0
    records = [json.loads(x) for x in (out / "gpu_run.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in records] == ["train", "average", "test"]
    assert records[0]["steps"] == 4 and records[0]["best_valid_nll"] > 0
    assert records[1]["exists"] and (out / "averaged.safetensors").is_file()
    assert records[2]["source"] == "django" and records[2]["sentences"] == 5 and 0 <= records[2]["bleu"] <= 100


def test_eval_software_lists_the_bundled_sources_in_order():
    sources = _script("eval_software").sources()
    assert sources == ["libreoffice", "gimp", "debian-faq", "maint-guide", "debian-edu", "django", "jupyterlab"]


def test_eval_software_passes_alpha_and_split_sentences_to_the_evaluation(tiny_run):
    from scratchformer.data.corpus import load_pairs
    from scratchformer.evaluation.translation import evaluate_pairs
    from scratchformer.runs import load_run

    scores = _script("eval_software").score_sources(tiny_run, "valid", beam=2, only=["django"], limit=4,
                                                    split_sentences=True, alpha=1.5)
    pairs = load_pairs("software", "valid-django")[:4]
    expected = evaluate_pairs(load_run(tiny_run), pairs, beam=2, alpha=1.5, split_sentences=True)
    assert list(scores) == ["django"] and scores["django"]["split_sentences"] is True
    assert (scores["django"]["bleu"], scores["django"]["chrf"]) == (expected["bleu"], expected["chrf"])
    assert "bleu_ci95" not in scores["django"]


def test_eval_software_confidence_adds_the_bootstrap_half_width_to_the_table_and_rows(tiny_run, tmp_path,
                                                                                         monkeypatch, capsys):
    out = tmp_path / "rows.jsonl"
    monkeypatch.setattr(sys, "argv", ["eval_software.py", str(tiny_run), "--split", "valid", "--beam", "1",
                                      "--only", "django", "--confidence", "--out", str(out)])
    _script("eval_software").main()
    row = json.loads(out.read_text())
    assert row["source"] == "django" and row["bleu_ci95"] >= 0
    assert f"| django | {row['bleu']} ± {row['bleu_ci95']} / {row['chrf']} |" in capsys.readouterr().out


def test_shipping_new_weights_drops_the_old_weights_decoding_json(tiny_run, tmp_path, monkeypatch, capsys):
    """decoding.json was chosen on valid for the weights it sat beside: new weights start from the defaults."""
    import shutil

    from scratchformer.runs import load_run

    ship, run, out = _script("ship_checkpoint"), shutil.copytree(tiny_run, tmp_path / "run"), tmp_path / "shipped"
    (run / "metrics.jsonl").write_text('{"kind": "train", "step": 40, "elapsed_s": 1.0, "tokens_per_s": 1.0}\n')
    shutil.copytree(run, out)
    (out / "decoding.json").write_text('{"alpha": 1.5, "split_sentences": true, "ensemble": ["m.safetensors"]}')
    shutil.copy(out / "model.safetensors", out / "m.safetensors")
    monkeypatch.setattr(sys, "argv", ["ship_checkpoint.py", str(run), str(out), "--valid-limit", "4"])
    ship.main()
    assert not (out / "decoding.json").exists() and "removed" in capsys.readouterr().out
    assert not (out / "m.safetensors").exists()  # the old model's ensemble member goes with its decoding.json
    assert load_run(out).decoding.split_sentences is False


def test_copy_twins_swap_each_copied_name_on_both_sides_and_nothing_else():
    twins = _script("copy_twins")
    pairs = [("Open gimp.conf in Vim.", "在 Vim 中打开 gimp.conf。"), ("Run dpkg now.", "现在运行 dpkg。"),
             ("Click the button.", "点击按钮。")]
    assert twins.copied(*pairs[0]) == ["Vim", "gimp.conf"]
    out = twins.twins(pairs, seed=3)
    assert len(out) <= 2  # the pair that copies nothing has no twin
    for s, t in out:
        assert t.startswith("在 ") or t.startswith("现在运行 ")
        assert set(twins.copied(s, t)) <= {"Vim", "gimp.conf", "dpkg"}  # names come from what the corpus copies
    assert out == twins.twins(pairs, seed=3)  # seeded


def test_copy_twins_refuses_an_output_it_cannot_write_in_one_line(tmp_path):
    import subprocess

    for out in (tmp_path, tmp_path / "no" / "such.tsv"):
        r = subprocess.run([sys.executable, str(_path("copy_twins")), str(out)], capture_output=True,
                           text=True)
        assert r.returncode == 2 and "give a file path in an existing folder" in r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 2  # usage + the error


def test_add_member_writes_a_float16_member_and_names_it_in_decoding_json(tiny_run, tmp_path, monkeypatch, capsys):
    import shutil

    import torch
    from safetensors.torch import load_file

    from scratchformer.runs import load_run

    add, run, out = _script("add_member"), shutil.copytree(tiny_run, tmp_path / "run"), tmp_path / "shipped"
    shutil.copytree(run, out)
    (out / "decoding.json").write_text('{"alpha": 1.5, "chosen": "valid"}')
    monkeypatch.setattr(sys, "argv", ["add_member.py", str(run), str(out), "--name", "member-2.safetensors"])
    add.main()
    shipped = load_run(out)
    assert shipped.decoding.ensemble == ["member-2.safetensors"] and shipped.decoding.alpha == 1.5
    assert len(shipped.members) == 1 and "member-2.safetensors" in capsys.readouterr().out
    assert {t.dtype for t in load_file(out / "member-2.safetensors").values()} == {torch.float16}
    for name, bad in (("member-2.safetensors", "named twice"), ("../x.safetensors", "without a folder")):
        monkeypatch.setattr(sys, "argv", ["add_member.py", str(run), str(out), "--name", name])
        with pytest.raises(SystemExit, match="2"):
            add.main()
        assert bad in capsys.readouterr().err
    (run / "tokenizer_tgt.json").write_text((run / "tokenizer_tgt.json").read_text() + " ")  # another vocabulary file
    monkeypatch.setattr(sys, "argv", ["add_member.py", str(run), str(out), "--name", "member-3.safetensors"])
    with pytest.raises(SystemExit, match="2"):
        add.main()
    assert "must share the model's vocabularies" in capsys.readouterr().err


def test_forward_translate_keeps_new_english_only_never_a_held_out_sentence():
    """experiments/forward-translation/forward_translate.py: the monolingual English for self-training passes the
    corpus's English-side filters, and the bundle's keys block every valid/test paragraph and each of its sentences
    (exact and normalised), so no held-out sentence is translated into the training data."""
    from scratchformer.data.corpus import load_pairs
    from scratchformer.decoding.sentences import split_sentences

    ft = _script("forward_translate")
    assert ft.english_ok("Click the Crop tool to cut the image.")
    for bad in ("Two words", "$ make install now please", "<b>Bold</b> text here", "Hello %(name)s, you won",
                " ".join(["word"] * 61)):
        assert not ft.english_ok(bad), bad
    keys = ft.bundle_keys()
    gimp_test = load_pairs("software", "test-gimp")
    assert all(f"en:{en}" in keys for en, _ in gimp_test)
    long_one = next(en for en, _ in gimp_test if len(split_sentences(en)) > 1)
    for sentence in split_sentences(long_one):
        assert ft.sw._sentence_keys(sentence, "en") & keys  # a held-out sentence, alone, is blocked too
        assert ft.sw._sentence_keys(sentence.upper() + " ", "en") & keys  # normalised: case, spaces
    assert not ft.sw._sentence_keys("A sentence no manual has, surely.", "en") & keys


def test_forward_translate_mix_is_the_shipped_upsampled_data_then_the_synthetic_pairs(tmp_path):
    from scratchformer.config.train import upsample_factors
    from scratchformer.data.corpus import load_pairs, read_tsv, upsample_sources

    ft = _script("forward_translate")
    synthetic = tmp_path / "synthetic.tsv"
    synthetic.write_text("Open the file.\t打开文件。\nSave it twice.\t保存两次。\n", encoding="utf-8")
    assert ft.main(["mix", str(synthetic), "--out", str(tmp_path / "mix.tsv"), "--times", "2"]) == 0
    rows = read_tsv(tmp_path / "mix.tsv")
    shipped = json.loads((ROOT / "models" / "en-zh" / "train_config.json").read_text(encoding="utf-8"))["upsample"]
    real = upsample_sources(load_pairs("software", "train"), "software", upsample_factors(shipped))
    assert rows == real + [("Open the file.", "打开文件。"), ("Save it twice.", "保存两次。")] * 2


@pytest.mark.parametrize("argv, says", [
    (["mix", "{tmp}/missing.tsv", "--out", "{tmp}/mix.tsv"], "missing.tsv"),
    (["mix", "{tmp}/s.tsv", "--out", "{tmp}/no/such/folder/mix.tsv"], "give a file path in an existing folder"),
    (["mix", "{tmp}/s.tsv", "--out", "{tmp}"], "give a file path in an existing folder"),
    (["mix", "{tmp}/s.tsv", "--out", "{tmp}/mix.tsv", "--times", "0"], "not a whole number >= 1"),
    (["translate", "{tmp}/no-run", "{tmp}/s.tsv", "--out", "{tmp}/out.tsv"], "no-run"),
    (["translate", "{tmp}/no-run", "{tmp}/s.tsv", "--out", "{tmp}/out.tsv", "--batch-size", "-3"], ">= 1"),
])
def test_forward_translate_bad_input_is_one_line(tmp_path, capsys, argv, says):
    ft = _script("forward_translate")
    (tmp_path / "s.tsv").write_text("Open the file.\t打开文件。\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        ft.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and says in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "mix.tsv").exists() and not (tmp_path / "out.tsv").exists()
