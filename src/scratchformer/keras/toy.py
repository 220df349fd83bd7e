"""Seed 001's training flow in Keras on TensorFlow, on its six toy pairs: `python -m scratchformer.keras.toy`.

    tf.data         the pairs as id lists, shuffled and padded per batch (padded_batch), prefetched
    NoamSchedule    a keras LearningRateSchedule: lr = factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5)
    Adam            beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 (the paper; Keras' default beta_2 is 0.999)
    masked_loss     cross-entropy over real target tokens only, label smoothing optional (training/loss.py's q)
    train_step      a tf.function around GradientTape: teacher forcing, tgt[:, :-1] in, tgt[:, 1:] out
    greedy          decode.py's greedy_decode: all six translations must come out exact (the overfit check)

Tokenizers as our `--recipe toy`: English words (`word`), Chinese characters (`char`); model: the `tiny` preset.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from scratchformer.config import ModelConfig
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, train_tokenizer
from scratchformer.keras.build import build_keras_model
from scratchformer.keras.decode import greedy_decode


@keras.saving.register_keras_serializable(package="scratchformer")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Section 5.3's schedule; `step` is the optimizer's update count from 0, so the first update is step 1."""

    def __init__(self, d_model: int, warmup: int = 4000, factor: float = 1.0) -> None:
        self.d_model, self.warmup, self.factor = d_model, warmup, factor

    def __call__(self, step: Any) -> Any:
        step = tf.cast(step, tf.float32) + 1.0
        return self.factor * self.d_model**-0.5 * tf.minimum(tf.math.rsqrt(step), step * self.warmup**-1.5)

    def get_config(self) -> dict[str, Any]:
        return {"d_model": self.d_model, "warmup": self.warmup, "factor": self.factor}


def masked_loss(target: Any, logits: Any, smoothing: float = 0.0, pad_id: int = PAD_ID) -> Any:
    """Mean over real target tokens of -sum_k q(k) log p(k): q(y) = 1 - eps, q(k) = eps / (V - 2) elsewhere, no
    mass on padding (training/loss.py). Seed 001's loss_function is the eps = 0 case."""
    vocab = logits.shape[-1]
    log_p = tf.nn.log_softmax(logits, axis=-1)  # (B, L, V)
    nll = -tf.gather(log_p, target, batch_dims=2)  # (B, L)  -log p(y)
    per_token = nll
    if smoothing > 0:
        rest = -tf.reduce_sum(log_p, -1) - nll + log_p[..., pad_id]  # sum over k != y, k != pad of -log p(k)
        per_token = (1 - smoothing) * nll + smoothing / (vocab - 2) * rest
    real = tf.cast(tf.not_equal(target, pad_id), per_token.dtype)  # (B, L)
    return tf.reduce_sum(per_token * real) / tf.maximum(tf.reduce_sum(real), 1.0)


def dataset(pairs: list[tuple[list[int], list[int]]], batch_size: int, seed: int) -> tf.data.Dataset:
    """(src (B, L_src), tgt (B, 1 + L_tgt + 1)) batches: src ids + </s>, <s> + tgt ids + </s>, padded with 0."""
    def gen() -> Any:
        for s, t in pairs:
            yield np.array([*s, EOS_ID], np.int32), np.array([BOS_ID, *t, EOS_ID], np.int32)

    spec = (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32))
    data = tf.data.Dataset.from_generator(gen, output_signature=spec)
    return data.shuffle(len(pairs), seed=seed).padded_batch(batch_size, padding_values=PAD_ID).prefetch(
        tf.data.AUTOTUNE)


def train_toy(steps: int = 200, warmup: int = 40, factor: float = 0.5, smoothing: float = 0.0, batch_size: int = 6,
              seed: int = 0) -> dict[str, Any]:
    """Fit the toy pairs for `steps` updates; returns the last loss and each pair's greedy translation."""
    keras.utils.set_random_seed(seed)
    pairs = load_pairs("toy", "train")
    src_tok = train_tokenizer("word", [s for s, _ in pairs])
    tgt_tok = train_tokenizer("char", [t for _, t in pairs])
    ids = [(src_tok.encode(s), tgt_tok.encode(t)) for s, t in pairs]
    config = ModelConfig.preset("tiny", src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size)
    model = build_keras_model(config)
    optimizer = keras.optimizers.Adam(NoamSchedule(config.d_model, warmup, factor), beta_1=0.9, beta_2=0.98,
                                      epsilon=1e-9)
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec])  # one trace for every padded length
    def train_step(src: Any, tgt: Any) -> Any:
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # teacher forcing: predict each next token
        with tf.GradientTape() as tape:
            loss = masked_loss(tgt_out, model((src, tgt_in), training=True), smoothing)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    data, step, loss = dataset(ids, batch_size, seed), 0, float("nan")
    while step < steps:
        for src, tgt in data:
            loss = float(train_step(src, tgt))
            step += 1
            if step == steps:
                break
    outputs = greedy_decode(model, [[*s, EOS_ID] for s, _ in ids])
    rows = [{"src": s, "ref": t, "hyp": tgt_tok.decode(o)} for (s, t), o in zip(pairs, outputs)]
    return {"steps": steps, "loss": round(loss, 4), "exact": sum(r["hyp"] == r["ref"] for r in rows),
            "pairs": len(rows), "translations": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scratchformer.keras.toy", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    result = train_toy(args.steps, smoothing=args.label_smoothing, seed=args.seed)
    for r in result["translations"]:
        print(f"{r['src']:>14} -> {r['hyp']}" + ("" if r["hyp"] == r["ref"] else f"   (want {r['ref']})"))
    print(json.dumps({k: v for k, v in result.items() if k != "translations"}))
    return 0 if result["exact"] == result["pairs"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
