"""`--engine keras` and `export --format keras` on a tiny run: the same texts as our own decoder (greedy and
beam), a folder a TensorFlow user loads without torch (standard tokenizer files, the README's loop), and one-line
refusals for what the port lacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import scratchformer
from scratchformer import ModelConfig
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.engines import ENGINES, Translator
from scratchformer.errors import CheckpointError, ConfigError
from scratchformer.evaluation.translation import evaluate_run
from scratchformer.export import FORMATS, export_run
from scratchformer.runs import load_run

from .conftest import require_keras

require_keras()
TEXTS = ["hello", "how are you", "", "good night", "what is this", "i love you good morning"]


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run)


@pytest.fixture(scope="module")
def engine(run):
    return Translator(run, run.decoding.pick(engine="keras"))


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory):
    return export_run(tiny_run, "keras", tmp_path_factory.mktemp("keras") / "out")


def test_keras_is_a_format_and_an_engine_that_declares_its_options():
    from scratchformer.engines.keras import Backend

    assert "keras" in FORMATS and "keras" in ENGINES
    assert Backend.SUPPORTS == frozenset()  # beam, alpha, max_len and batching only: nothing optional


@pytest.mark.parametrize("beam, max_len", [(1, None), (1, 3), (2, None), (4, None)])
def test_translate_gives_the_torch_engines_texts(run, engine, beam, max_len):
    ours = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(TEXTS, beam=beam,
                                                                                max_output_len=max_len)
    assert engine.translate(TEXTS, beam=beam, max_output_len=max_len, batch_size=4) == ours
    assert ours[2] == "" and any(ours)


def test_evaluate_with_engine_keras_scores_as_torch(tiny_run):
    keras_scores = evaluate_run(tiny_run, "train", beam=2, engine="keras")
    torch_scores = evaluate_run(tiny_run, "train", beam=2, engine="torch")
    assert (keras_scores["bleu"], keras_scores["chrf"]) == (torch_scores["bleu"], torch_scores["chrf"])


def test_engine_options_it_does_not_have_are_one_line(run):
    with pytest.raises(ConfigError, match="the keras engine has no setting 'threads'") as err:
        Translator(run, run.decoding.pick(engine="keras"), threads=2)
    assert "\n" not in str(err.value)


def test_the_export_folder_holds_a_keras_file_and_standard_tokenizer_files(run, exported):
    import tokenizers

    visible = sorted(p.name for p in exported.iterdir() if not p.name.startswith("."))  # not the folder's marker
    assert visible == ["README.md", "model.keras", "saved_model", "tokenizer_src.json", "tokenizer_tgt.json"]
    src = tokenizers.Tokenizer.from_file(str(exported / "tokenizer_src.json"))
    tgt = tokenizers.Tokenizer.from_file(str(exported / "tokenizer_tgt.json"))
    for text in ("how are you", "晚安 hello"):
        assert src.encode(text).ids == [*run.src_tok.encode(text), 2]  # </s> appended, as our batching does
    ids = run.tgt_tok.encode("早上好 good")
    assert tgt.decode([1, *ids, 2]) == run.tgt_tok.decode([1, *ids, 2])


def test_the_readme_loop_translates_as_ours_in_a_process_without_torch(run, exported):
    """The README's ten lines, run as written in the export folder, plus a check of sys.modules."""
    code = re.search(r"```python\n(.*?)```", (exported / "README.md").read_text(encoding="utf-8"), re.S)[1]
    code = code.replace("Click OK to close the dialog.", "how are you") + "\nprint('torch' in sys.modules)\n"
    here = str(Path(scratchformer.__file__).resolve().parents[1])  # this checkout's package, from any folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "import sys\n" + code], cwd=exported, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    text, torch_imported = done.stdout.strip().splitlines()[-2:]
    assert torch_imported == "False"
    assert text == Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(["how are you"], beam=1)[0]


def test_a_reloaded_export_gives_the_models_logits(exported, tiny_run):
    import keras

    import scratchformer.keras as sk

    reloaded = keras.models.load_model(str(exported / "model.keras"))
    direct = sk.from_run(tiny_run)
    src, tgt = np.array([[5, 6, 7, 2], [8, 2, 0, 0]]), np.array([[1, 9, 10], [1, 11, 0]])
    np.testing.assert_allclose(reloaded((src, tgt)).numpy(), direct((src, tgt)).numpy(), atol=1e-6)


def test_the_saved_model_gives_the_models_encoder_output_and_next_token_logits(exported, tiny_run):
    import tensorflow as tf

    import scratchformer.keras as sk

    loaded, direct = tf.saved_model.load(str(exported / "saved_model")), sk.from_run(tiny_run)
    src, tgt = np.array([[5, 6, 7, 2], [8, 2, 0, 0]], np.int32), np.array([[1, 9, 10], [1, 11, 12]], np.int32)
    memory = loaded.encode(src)
    np.testing.assert_allclose(memory.numpy(), direct.encode(src).numpy(), atol=1e-6)
    np.testing.assert_allclose(loaded.next_logits(memory, src, tgt).numpy(), direct((src, tgt)).numpy()[:, -1],
                               atol=1e-5)


SAVED_MODEL_LOOP = r"""
import sys
import numpy as np, tensorflow as tf, tokenizers
model = tf.saved_model.load("saved_model")
src_tok, tgt_tok = (tokenizers.Tokenizer.from_file(f"tokenizer_{s}.json") for s in ("src", "tgt"))
for text in sys.argv[1:]:
    src = np.array([src_tok.encode(text).ids], np.int32)
    memory, out = model.encode(src), [1]
    for _ in range(src.shape[1] + 50):
        logits = model.next_logits(memory, src, np.array([out], np.int32)).numpy()[0]
        logits[0] = -np.inf
        out.append(int(logits.argmax()))
        if out[-1] == 2:
            break
    print(tgt_tok.decode(out))
print("torch" in sys.modules, "scratchformer" in sys.modules)
"""


@pytest.mark.slow
def test_the_saved_model_translates_as_ours_with_tensorflow_alone(run, exported):
    texts = ["how are you", "good night"]
    done = subprocess.run([sys.executable, "-c", SAVED_MODEL_LOOP, *texts], cwd=exported, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    *outputs, modules = done.stdout.strip().splitlines()[-3:]
    assert modules == "False False"  # (tensorflow itself imports keras)
    assert outputs == Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(texts, beam=1)


def test_a_word_tokenizer_is_refused_before_anything_is_written(run, tmp_path):
    from scratchformer.export import keras as keras_export

    pairs = load_pairs("toy", "train")
    word_run = SimpleNamespace(**{**vars(run), "src_tok": train_tokenizer("word", [s for s, _ in pairs])})
    with pytest.raises(ConfigError, match="tokenizer kind 'word'") as err:
        keras_export.export(word_run, tmp_path)
    assert "\n" not in str(err.value) and not any(tmp_path.iterdir())


def test_an_unsupported_architecture_is_refused_naming_the_field():
    from scratchformer.export import keras as keras_export

    decoder_only = SimpleNamespace(model_config=ModelConfig.preset("gpt-tiny"))
    with pytest.raises(ConfigError, match=r"^arch='decoder': the Keras port builds the encoder-decoder only$"):
        keras_export.check_expressible(decoder_only)


def test_from_run_without_weights_or_with_wrong_ones_is_one_line(tiny_run, tmp_path):
    import scratchformer.keras as sk

    (tmp_path / "config.json").write_text((tiny_run / "config.json").read_text())
    with pytest.raises(CheckpointError, match="model.safetensors is missing"):
        sk.from_run(tmp_path)
    model = sk.build_keras_model(ModelConfig.load(tiny_run / "config.json"))
    state = sk.read_state(tiny_run / "model.safetensors")
    state["encoder.layers.0.feed_forward.w_1.weight"] = state["encoder.layers.0.feed_forward.w_1.weight"][:3]
    with pytest.raises(CheckpointError, match=r"tensor encoder\.layers\.0\.feed_forward\.w_1\.weight has shape"):
        sk.load_state(model, state)
    del state["generator.proj.bias"]
    with pytest.raises(CheckpointError, match="missing tensors"):
        sk.load_state(model, state)


def test_export_cli_writes_the_folder(tiny_run, tmp_path, capsys):
    from scratchformer.cli import main

    main(["export", str(tiny_run), "--format", "keras", "--out", str(tmp_path / "k")])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["format"] == "keras"
    assert (tmp_path / "k" / "model.keras").is_file()
