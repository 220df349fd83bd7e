"""models/en-zh in Keras: logits within 1e-4 of ours (fp32) on the first 100 test sentences, batched with
padding; greedy outputs token for token ours on at least 99 of 100; the same after `export --format keras` and a
reload in a process that never imports torch. Prints its figures as JSON lines:
PYTHONPATH=src python -m pytest -m slow -s tests/keras/test_shipped.py"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from scratchformer.data.corpus import load_pairs
from scratchformer.decoding import greedy_decode
from scratchformer.export import export_run
from scratchformer.runs import load_run

from .conftest import padded, require_keras

require_keras()
SHIPPED = Path(__file__).resolve().parents[2] / "models" / "en-zh"
TOL, N, BATCH = 1e-4, 100, 25

# Run in a fresh interpreter on the export folder: keras, numpy, tokenizers and scratchformer.keras only.
RELOADED = r"""
import json, sys
import keras, numpy as np, tokenizers
import scratchformer.keras as sk
folder, batches = sys.argv[1], json.loads(sys.stdin.read())
model = keras.models.load_model(folder + "/model.keras")
src_tok = tokenizers.Tokenizer.from_file(folder + "/tokenizer_src.json")
logits, greedy = [], []
for texts, tgt in batches:
    src = [src_tok.encode(t).ids for t in texts]
    width = max(map(len, src))
    src = np.array([s + [0] * (width - len(s)) for s in src])
    logits.append(keras.ops.convert_to_numpy(model((src, np.array(tgt)))).tolist())
    greedy += sk.greedy_decode(model, [[int(i) for i in row if i] for row in src])
print(json.dumps({"torch_imported": "torch" in sys.modules, "logits": logits, "greedy": greedy}))
"""


def batches(run, pairs):
    """[(source texts, target prefixes <s> + reference, padded)] in batches of BATCH sentences."""
    cap = run.model_config.max_positions
    out = []
    for start in range(0, len(pairs), BATCH):
        part = pairs[start: start + BATCH]
        tgt = padded([[1, *run.tgt_tok.encode(t)[: cap - 1]] for _, t in part])
        out.append(([s for s, _ in part], tgt))
    return out


@pytest.mark.slow
def test_the_shipped_model_gives_our_logits_and_greedy_outputs_in_keras_and_after_export(tmp_path):
    import scratchformer.keras as sk

    run = load_run(SHIPPED)
    model = sk.from_run(SHIPPED)
    pairs = load_pairs("en-zh", "test")[:N]
    cap = run.model_config.max_positions
    srcs = [[*run.src_tok.encode(s)[: cap - 1], 2] for s, _ in pairs]
    parts = batches(run, pairs)
    ours_logits, worst = [], 0.0
    for i, (_, tgt) in enumerate(parts):
        src = padded(srcs[i * BATCH: (i + 1) * BATCH])
        with torch.no_grad():
            ours = run.model(torch.tensor(src), torch.tensor(tgt)).numpy()  # (B, L, V)
        ours_logits.append((ours, tgt != 0))  # compared at the reference's own positions
        worst = max(worst, float(np.abs(model((src, tgt)).numpy() - ours)[tgt != 0].max()))
    ours_greedy = greedy_decode(run.model, srcs)
    keras_greedy = [t for start in range(0, N, 32) for t in sk.greedy_decode(model, srcs[start: start + 32])]
    same = sum(a == b for a, b in zip(ours_greedy, keras_greedy))

    folder = export_run(SHIPPED, "keras", tmp_path / "keras")
    feed = json.dumps([(texts, tgt.tolist()) for texts, tgt in parts])
    done = subprocess.run([sys.executable, "-c", RELOADED, str(folder)], input=feed, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    reloaded = json.loads(done.stdout.strip().splitlines()[-1])
    worst_reloaded = max(float(np.abs(np.array(theirs) - ours)[real].max())
                         for theirs, (ours, real) in zip(reloaded["logits"], ours_logits))
    same_reloaded = sum(a == b for a, b in zip(ours_greedy, reloaded["greedy"]))
    print(json.dumps({"model": "models/en-zh", "sentences": N, "max_abs_diff": worst, "greedy_identical": same,
                      "reloaded_max_abs_diff": worst_reloaded, "reloaded_greedy_identical": same_reloaded}))
    assert not reloaded["torch_imported"]
    assert worst < TOL and worst_reloaded < TOL
    assert same >= N - 1 and same_reloaded >= N - 1


def test_the_shipped_model_gives_our_logits_on_ten_padded_sentences():
    """The quick version of the test above, for every `make test-keras`."""
    import scratchformer.keras as sk

    run = load_run(SHIPPED)
    model = sk.from_run(SHIPPED)
    pairs = load_pairs("en-zh", "test")[:10]
    src = padded([[*run.src_tok.encode(s)[:255], 2] for s, _ in pairs])
    tgt = padded([[1, *run.tgt_tok.encode(t)[:255]] for _, t in pairs])
    with torch.no_grad():
        ours = run.model(torch.tensor(src), torch.tensor(tgt)).numpy()
    assert float(np.abs(model((src, tgt)).numpy() - ours)[tgt != 0].max()) < TOL
