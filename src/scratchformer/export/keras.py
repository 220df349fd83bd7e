"""Keras 3 on TensorFlow: the export (`scratchformer export RUN --format keras --out DIR`); this file only writes
files. Decoding with the Keras model is the keras engine's (engines/keras.py: `translate --engine keras`).

    export(run, out)                         out/model.keras, saved_model/, tokenizer_src.json, tokenizer_tgt.json,
                                             README.md
    keras_model(run)                         the run's model as Keras 3 layers with our weights (the engine's too)

The tokenizer files are standard `tokenizers` files (`tokenizers.Tokenizer.from_file`; transformers'
PreTrainedTokenizerFast(tokenizer_file=...)), converted as the Hugging Face export converts them (hf.py): the
source one appends </s> as our batching does; a `word` tokenizer has no such file and is refused. Loading the
folder needs `import scratchformer.keras` (it registers the custom layers) and never imports torch. The
TensorFlow SavedModel beside it needs neither: `tf.saved_model.load(DIR/saved_model)` has two functions,
`encode(input_ids)` -> memory and `next_logits(memory, input_ids, decoder_input_ids)` -> the logits of the next token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scratchformer.errors import N_, ConfigError
from scratchformer.export.hf import TEMPLATES, hf_tokenizer, save_tokenizer_json
from scratchformer.runs import Run

MODEL_FILE, SAVED_MODEL = "model.keras", "saved_model"


def check_expressible(run: Run) -> None:
    """One-line ConfigError for what the Keras port cannot build (scratchformer/keras/build.py's check)."""
    from scratchformer.keras.build import check_supported

    check_supported(run.model_config)


def keras_model(run: Run) -> Any:
    """The run's model in Keras, with the weights the run holds in memory (model.safetensors or --weights)."""
    from scratchformer.keras.build import build_keras_model, load_state

    state = {name: t.detach().float().cpu().numpy() for name, t in run.model.state_dict().items()}
    return load_state(build_keras_model(run.model_config), state, f"{run.path}'s weights")


def export(run: Run, out: Path, quantization: str | None = None, **options: object) -> None:
    """model.keras, the two tokenizers as `tokenizers` files and README.md, into the empty folder `out`."""
    if quantization not in (None, "float32"):
        raise ConfigError(N_("--quantization {quantization}: the Keras export writes float32 weights"),
                          quantization=quantization)
    template = TEMPLATES["encoder-decoder"]  # "$A </s>": encode(text).ids is the source as our batching makes it
    tokenizers = [hf_tokenizer(getattr(run, f"{side}_tok"), template) for side in ("src", "tgt")]  # word: refused
    model = keras_model(run)
    model.save(str(Path(out) / MODEL_FILE))
    saved_model(model, Path(out) / SAVED_MODEL)
    for side, tok in zip(("src", "tgt"), tokenizers):
        save_tokenizer_json(tok, Path(out) / f"tokenizer_{side}.json")
    (Path(out) / "README.md").write_text(readme(run), encoding="utf-8")


def saved_model(model: Any, folder: Path) -> None:
    """A TensorFlow SavedModel of `model` with the two functions a decoding loop needs (ids are int32):
    encode(input_ids (B, L_src)) -> memory (B, L_src, D); next_logits(memory, input_ids, decoder_input_ids (B, t))
    -> (B, V), the logits after the last decoder position. Loading it needs TensorFlow only."""
    import keras
    import tensorflow as tf

    ids = tf.TensorSpec([None, None], tf.int32)
    memory = tf.TensorSpec([None, None, model.model_config.d_model], tf.float32)

    def next_logits(memory: Any, src: Any, tgt: Any) -> Any:
        hidden = model.decode(memory, model.src_mask(src), tgt)  # (B, t, D)
        return model.logits(hidden[:, -1:])[:, 0]  # (B, V)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("encode", lambda src: model.encode(src), input_signature=[ids])
    archive.add_endpoint("next_logits", next_logits, input_signature=[memory, ids, ids])
    archive.write_out(str(folder), verbose=False)


def readme(run: Run) -> str:
    """How to load the folder and translate with it, in TensorFlow, without torch."""
    from scratchformer.keras.decode import special_ids

    bos, eos, pad = special_ids(run.model_config)
    return f"""# {Path(run.path).name} in Keras 3

Exported by `scratchformer export {run.path} --format keras`: the model as a Keras file and its two tokenizers as
standard `tokenizers` files. Install: `pip install 'scratchformer[keras]'` (keras, tensorflow-cpu; torch is not
needed). Every weight, mask and formula is our PyTorch model's (tests/keras prove the logits equal within 1e-4).

- `model.keras`: `keras.models.load_model` after `import scratchformer.keras` (it registers the custom layers).
- `tokenizer_src.json` appends `</s>` ({eos}) to the source; `tokenizer_tgt.json` decodes the output ids.
- Decoding starts from `<s>` ({bos}), never emits `<pad>` ({pad}), ends at `</s>` ({eos}); at most source length +
  50 tokens, and at most {run.model_config.max_positions} positions.

- `saved_model/`: the same model for `tf.saved_model.load` alone (no scratchformer): `encode(input_ids)` -> memory,
  `next_logits(memory, input_ids, decoder_input_ids)` -> the next token's logits (int32 ids).

Greedy translation in ten lines (beam search: `scratchformer.keras.beam_search(model, [ids], 4, 0.6)`):

```python
import keras, numpy as np, tokenizers
import scratchformer.keras  # registers the layers; imports no torch

model = keras.models.load_model("model.keras")
src_tok, tgt_tok = (tokenizers.Tokenizer.from_file(f"tokenizer_{{s}}.json") for s in ("src", "tgt"))
src = np.array([src_tok.encode("Click OK to close the dialog.").ids])  # (1, L_src), ends in </s>
memory, mask, out = model.encode(src), model.src_mask(src), [{bos}]
for _ in range(min(src.shape[1] + 50, {run.model_config.max_positions})):
    logits = keras.ops.convert_to_numpy(model.logits(model.decode(memory, mask, np.array([out])))[0, -1])
    logits[{pad}] = -np.inf  # never <pad>
    out.append(int(logits.argmax()))
    if out[-1] == {eos}:
        break
print(tgt_tok.decode(out))
```
"""
