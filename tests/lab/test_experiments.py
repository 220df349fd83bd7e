"""Each experiment's --quick run, checked for the DIRECTION of its effect with a margin (any CPU, any threads).
No test times anything: `complexity` is checked on its counted memory and FLOPs, never on its clock."""

import math

import pytest


def test_scaling_without_the_scale_softmax_tends_to_one_hot(quick):
    numbers, conclusion = quick("scaling")
    scaled, unscaled = numbers["softmax"]["scaled"], numbers["softmax"]["unscaled"]
    assert unscaled[-1]["max_weight"] > 0.8 > 0.4 > scaled[-1]["max_weight"]
    assert unscaled[-1]["max_weight"] > unscaled[0]["max_weight"] + 0.3  # grows with d_k
    assert max(s["max_weight"] for s in scaled) - min(s["max_weight"] for s in scaled) < 0.1  # scaled: flat
    assert unscaled[-1]["entropy"] < 0.5 * scaled[-1]["entropy"]
    assert unscaled[-1]["grad_scores"] < scaled[-1]["grad_scores"]  # the softmax's own gradient shrinks
    assert f"{unscaled[-1]['max_weight']:.3f}" in conclusion  # the conclusion quotes the measurement


def test_positions_without_pe_permuting_the_input_permutes_the_output(quick):
    numbers, conclusion = quick("positions")
    gaps, acc = numbers["permutation"], numbers["accuracy"]
    assert gaps["without PE"]["max_abs_gap"] < 1e-5 and gaps["with PE"]["max_abs_gap"] > 1e-2
    assert acc["copy, without PE"] > 0.9  # copy needs no order
    assert acc["reverse, with PE"] > acc["reverse, without PE"] + 0.3  # reverse does
    assert "attention is blind to order" in conclusion


def test_complexity_hand_written_memory_is_quadratic_and_fused_linear(quick):
    numbers, _ = quick("complexity")
    fits = numbers["exponents"]
    assert fits["hand-written"]["memory"] > 1.5 and fits["fused"]["memory"] < 1.3
    assert fits["flops"]["core"] == pytest.approx(2.0, abs=1e-6)
    assert all(m["seconds"] > 0 for rows in numbers["measured"].values() for m in rows)  # ran, not how fast


def test_layernorm_ignores_the_batch_and_batchnorm_does_not(quick):
    numbers, _ = quick("layernorm-vs-batchnorm")
    gaps, training = numbers["neighbour_gap"], numbers["training"]
    assert gaps["LayerNorm"]["train"] < 1e-4 and gaps["BatchNorm"]["train"] > 1e-2
    ln, bn = training["LayerNorm"], training["BatchNorm"]
    long = max(int(k.rsplit(" ", 1)[1]) for k in ln if k.startswith("batch statistics"))
    assert abs(ln["batch statistics, padded to 4"] - ln[f"batch statistics, padded to {long}"]) < 0.01
    assert abs(bn["batch statistics, padded to 4"] - bn[f"batch statistics, padded to {long}"]) > 0.05


def test_residual_connections_make_the_stack_trainable(quick):
    numbers, _ = quick("residual")
    acc = {k: v["accuracy"] for k, v in numbers["training"].items()}
    assert acc["N=2, with residual"] > acc["N=2, without residual"] + 0.3


@pytest.mark.slow  # over 20 s on a busy 2-core machine: `make test-slow`
def test_norm_placement_post_norm_fails_deep_without_warmup_and_pre_norm_trains(quick):
    numbers, conclusion = quick("norm-placement")
    runs, chance = numbers["runs"], numbers["chance_loss"]
    deep = numbers["depths"][-1]
    post, pre = runs[f"post, N={deep}, warm-up 0"], runs[f"pre, N={deep}, warm-up 0"]
    warm = next(v for k, v in runs.items() if k.startswith(f"post, N={deep}, warm-up") and not k.endswith(" 0"))
    assert post["diverged"] or post["final_loss"] > 0.8 * chance
    assert pre["accuracy"] > 0.8 and pre["accuracy"] > post["accuracy"] + 0.5
    assert warm["accuracy"] > post["accuracy"] + 0.3  # warm-up rescues post-norm, at least partly
    assert f"first fails at N={deep}" in conclusion or f"N={numbers['depths'][0]}" in conclusion


@pytest.mark.slow  # over 20 s on a busy 2-core machine: `make test-slow`
def test_label_smoothing_lowers_confidence_and_calibration_error(quick):
    numbers, _ = quick("label-smoothing")
    a, b = numbers["runs"]["eps=0.0"], numbers["runs"]["eps=0.1"]
    assert b["confidence"] < a["confidence"] - 0.03
    assert (b["confidence"] - b["accuracy_noisy"]) < (a["confidence"] - a["accuracy_noisy"]) - 0.03
    assert b["ece"] < a["ece"] - 0.02
    assert 0 <= b["bleu_clean"] <= 100 and 0 <= a["accuracy_clean"] <= 1


@pytest.mark.slow  # ~21 s, the longest lab experiment (make test-slow; docs/lab holds its recorded figures)
def test_extrapolation_learned_positions_fail_past_the_training_length(quick):
    numbers, _ = quick("extrapolation")
    runs = numbers["runs"]
    assert runs["sinusoidal"]["inside"] > 0.8
    assert runs["learned"]["beyond"] < runs["learned"]["inside"] - 0.15
    assert runs["learned"]["beyond"] < 0.35
    if "rope" in runs:  # relative by construction: "one to the left" is the same rule at every position
        assert runs["rope"]["beyond"] > max(runs["learned"]["beyond"], runs["sinusoidal"]["beyond"]) + 0.2
    assert len(runs["sinusoidal"]["per_position"]) == numbers["test_len"]


@pytest.mark.slow  # over 20 s on a busy 2-core machine: `make test-slow`
def test_heads_differ_and_cross_attention_carries_the_source(quick):
    numbers, _ = quick("heads")
    bleu = numbers["bleu"]
    assert bleu["baseline"] > 20
    assert bleu["whole_kind"]["cross"] < bleu["baseline"] / 3  # no cross-attention: the source is gone
    assert max(bleu["baseline"] - b for row in bleu["per_head"]["cross"] for b in row) > 0
    for kind, stats in numbers["statistics"].items():
        values = [v for row in stats["entropy"] for v in row]
        assert all(0 <= v < math.log(256) for v in values), kind
        assert max(values) - min(values) > 0.1, kind  # the heads are not all alike


def test_add_and_norm_the_seeds_placements_let_the_stream_grow(quick):
    numbers, conclusion = quick("add-and-norm")
    rms = numbers["stream_rms"]
    assert abs(rms["post"][-1] - 1) < 0.1  # post-norm ends every sublayer with a LayerNorm
    for seed in ("seed000", "seed003"):
        assert rms[seed][-1] > 2 * rms["post"][-1]  # x + Norm(F(x)): a unit-RMS vector added each time
        assert rms[seed][-1] > rms[seed][1]  # and it keeps growing
    assert rms["pre"][-1] > rms["post"][-1]
    assert all(0 <= r["accuracy"] <= 1 for r in numbers["training"].values())
    assert f"{rms['seed003'][-1]:.2f} (seed003)" in conclusion


def test_heads_and_layers_heads_change_the_shapes_and_layers_the_size(quick):
    """Seed 000's exercise. The shapes and parameters are exact; the training only has to have run (100 quick steps
    say nothing about which model learns better)."""
    numbers, conclusion = quick("heads-and-layers")
    runs = numbers["runs"]
    seed, heads, layers, both = runs["h=8, N=6"], runs["h=4, N=6"], runs["h=8, N=2"], runs["h=4, N=2"]
    assert seed["scores"] == [2, 8, 4, 4] and heads["scores"] == [2, 4, 4, 4]  # (B, h, L_q, L_k), read from the model
    assert heads["d_k"] == 2 * seed["d_k"] == numbers["d_model"] // 4
    assert seed["parameters"] == heads["parameters"] > layers["parameters"] == both["parameters"]
    assert (seed["attention_boxes"], layers["attention_boxes"]) == (18, 6)
    for r in runs.values():
        assert not r["diverged"] and 0 <= r["free_running_accuracy"] <= 1 and 0 <= r["sequences_right"] <= 1
    assert f"{seed['parameters']:,}" in conclusion


def test_ffn_without_it_add_fails_at_equal_parameters_and_reverse_does_not(quick):
    numbers, conclusion = quick("ffn")
    add, rev = numbers["runs"]["add"], numbers["runs"]["reverse"]
    with_ffn, narrow, equal = add["with FFN, N=2"], add["without FFN, N=2"], add["without FFN, N=4"]
    assert abs(equal["parameters"] - with_ffn["parameters"]) < 0.01 * with_ffn["parameters"]  # equal parameters
    assert narrow["parameters"] < 0.6 * with_ffn["parameters"]  # equal width
    assert with_ffn["accuracy"] > max(narrow["accuracy"], equal["accuracy"]) + 0.1  # measured +0.19 at 200 steps
    assert min(r["accuracy"] for r in rev.values()) > 0.6  # moving tokens needs no FFN
    assert "equal parameters" in conclusion


def test_exposure_bias_free_running_trails_teacher_forcing_and_errors_compound(quick):
    numbers, conclusion = quick("exposure-bias")
    tf = numbers["runs"]["teacher forcing"]
    assert tf["free_running_mean"] < tf["teacher_forced_mean"] - 0.03  # measured 71% against 88% (150 steps)
    assert all(f <= t + 0.02 for t, f in zip(tf["teacher_forced"], tf["free_running"]))  # at every position
    after = [a for a in tf["after_an_error"] if a is not None]
    assert after and sum(after) / len(after) < tf["free_running_mean"] - 0.1  # an earlier error derails
    assert tf["with_an_error_before"] == sorted(tf["with_an_error_before"])  # errors only accumulate
    assert "scheduled sampling" in numbers["runs"] and "free-running" in conclusion


def test_heads_masked_bleu_translates_through_the_translator_with_the_runs_options(tiny_run, monkeypatch):
    """The lab's run enters engines/: its greedy translations are Translator(run, run.decoding at beam 1)'s, on
    the eager step (a mask is a hook on W^O, which a compiled step could not see)."""
    from scratchformer.engines import Translator
    from scratchformer.lab.heads import masked_bleu
    from scratchformer.runs import load_run

    run = load_run(tiny_run)
    seen = []
    real = Translator.translate

    def translate(self, texts, *args, **kwargs):
        seen.append(self.options)
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", translate)
    result = masked_bleu(run, [("hello", "你好")], ("cross",))
    heads = run.model_config.n_heads * run.model_config.n_decoder_layers
    assert len(seen) == 2 + heads and result["baseline"] >= 0
    assert all(o == run.decoding.pick(beam=1, step="eager") for o in seen)
