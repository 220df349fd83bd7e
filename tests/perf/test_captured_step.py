"""The captured decoding step (decoding/captured.py, chosen in engines/torch_engine.py): where a C++ compiler exists,
the same tokens as the eager step (greedy; beam 4 in the slow suite) and logits within 1e-5, the encoder's package
the modules' cross-attention keys and values within 1e-5; the eager step where none exists; `auto` never compiles;
the package's key changes with the weights. Two small compiles (a toy model's step for one row per sentence, and its
encoder) in the default suite; no timing (benchmarks/bench_decode_paths.py measures)."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import pytest
import torch

from scratchformer import autotune
from scratchformer.decoding import beam_search, captured, greedy_decode
from scratchformer.decoding.common import pad_ids
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator, torch_engine
from scratchformer.runs import load_run

REAL_MEASURE = torch_engine.CapturedStepCache._measure  # fake_compiles replaces it; one test puts it back


def _fake_time_steps(model, step, beam, sentences, steps=16, src_len=24):
    """captured.time_steps' stand-in: work that does nothing and says its batch size (for a fake clock)."""
    def work():
        return None
    work.sentences = sentences
    return work


needs_compiler = pytest.mark.skipif(not captured.compiler_available(), reason="no C++ compiler: the eager step runs")
TEXTS = ["hello world", "a b c", "the cat", "xyz", "good morning to you"]


@pytest.fixture
def private_home(tmp_path, monkeypatch):
    """A temporary HOME and XDG_CACHE_HOME: packages and autotune records land there."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run)


@pytest.fixture(scope="module")
def package(run, tmp_path_factory):
    """The run's step compiled once for one row per sentence (the default suite's one compile)."""
    if not captured.compiler_available():
        pytest.skip("no C++ compiler")
    return captured.compile_step(captured.StaticStep.for_model(run.model, 1),  # plain weights: the packed ones
                                 tmp_path_factory.mktemp("captured") / "step.pt2", prepack=False)  # in slow tests


@pytest.fixture(scope="module")
def encoder_package(run, tmp_path_factory):
    """The run's encoder with the cross-attention projections, compiled once."""
    if not captured.compiler_available():
        pytest.skip("no C++ compiler")
    return captured.compile_encoder(captured.StaticEncoder(run.model), tmp_path_factory.mktemp("enc") / "encoder.pt2",
                                    prepack=False)


def _sources(run):
    return [run.src_tok.encode(t) + [2] for t in TEXTS]


@needs_compiler
def test_greedy_tokens_and_logits_equal_the_eager_step(run, package, monkeypatch):
    monkeypatch.setattr(captured, "START", 4)  # the static caches grow (4 -> 12 -> 20 ...) within these outputs
    src = _sources(run)
    # EOS held back: each sentence runs to its own budget (its source length + 50), so the caches grow from 4 past
    # 16 and the sentences end apart (rows leave the batch) whatever this CPU's kernels trained the toy run to say
    hold = Search(max_output_len=None, min_len=10_000)
    eager = greedy_decode(run.model, src, hold, return_logits=True)  # the lean step (fast_step.py)
    fast = greedy_decode(run.model, src, hold, captured=captured.CapturedDecoder(captured.load_step(package)),
                         return_logits=True)
    assert fast.tokens == eager.tokens
    unpacked = autotune.user_cache_root() / "inductor" / "tmp"  # the package's libraries run, their copy is gone
    assert not [p.name for p in unpacked.iterdir() if p.name.startswith(("unpack-", "aotinductor_"))]
    lengths = sorted(map(len, fast.tokens))
    assert lengths[0] > 12 and lengths[0] < lengths[-1]  # grown twice; sentences end apart
    torch.testing.assert_close(fast.logits, eager.logits, rtol=0, atol=1e-5)


def test_the_tuned_package_asks_for_single_threaded_cpp_gemms_and_retries_with_aten_where_they_cannot(
        run, tmp_path, monkeypatch):
    asked, fail = [], [True]

    def aoti(exported, package_path, inductor_configs):
        asked.append(dict(inductor_configs))
        if fail.pop() if fail else False:
            raise RuntimeError("InductorError: NoValidChoicesError: No choices to select. Provided reason: ...")
        return package_path

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", aoti)
    step = captured.StaticStep.for_model(run.model, 1)
    assert captured.compile_step(step, tmp_path / "t.pt2", tuned=True, prepack=False) == tmp_path / "t.pt2"
    first, second = asked
    assert first["max_autotune_gemm_backends"] == "CPP" and first["cpp.threads"] == 1
    assert first["cpp.weight_prepack"] and first["max_autotune"]  # the template reads packed constant weights
    assert second["max_autotune_gemm_backends"] == "CPP,ATEN"
    asked.clear()
    captured.compile_step(step, tmp_path / "p.pt2", prepack=False)  # the other package: as before, plain
    assert len(asked) == 1 and "max_autotune" not in asked[0] and asked[0]["cpp.weight_prepack"] is False
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="other"):  # anything else is the compile's failure, as before
        captured.compile_step(step, tmp_path / "t.pt2", tuned=True)


@needs_compiler
def test_the_captured_encoder_gives_the_modules_cross_keys_and_values_and_tokens(run, package, encoder_package):
    """A batch of unequal sentences (padding masked), one sentence, and a 1-token source (the modules' path)."""
    dec = captured.CapturedDecoder(captured.load_step(package), captured.load_step(encoder_package))
    eager = captured.CapturedDecoder(dec.step)
    for src in (_sources(run), _sources(run)[:1], [[5]]):
        ids = pad_ids(src, run.model.config.pad_id, torch.device("cpu"))
        mask = run.model.src_mask(ids)
        got, want = dec.cross(run.model, ids, mask), eager.cross(run.model, ids, mask)
        assert len(got) == 2 * run.model.config.n_decoder_layers
        keep = mask[:, :, 0, :, None]  # (B, 1, L, 1): padded positions are masked out of every attention
        for g, w in zip(got, want):
            assert g.shape == w.shape
            torch.testing.assert_close(g * keep, w * keep, rtol=0, atol=1e-5)
    src = _sources(run)
    spec = Search(max_output_len=30)
    assert greedy_decode(run.model, src, spec, captured=dec) == greedy_decode(run.model, src, spec)


@needs_compiler
@pytest.mark.slow
def test_the_tuned_package_gives_the_same_tokens_at_any_rows(run, package, tmp_path, monkeypatch):
    """max-autotune's package serving calls of at most 4 rows (5 sentences start on the other one and finish on
    it), and every call."""
    monkeypatch.setattr(captured, "START", 4)
    small = captured.load_step(captured.compile_step(captured.StaticStep.for_model(run.model, 1),
                                                     tmp_path / "small.pt2", tuned=True))
    src = _sources(run)
    eager = greedy_decode(run.model, src, Search(max_output_len=40), return_logits=True)
    for most in (4, None):
        step = captured.CapturedDecoder(captured.by_rows(small, captured.load_step(package), most))
        fast = greedy_decode(run.model, src, Search(max_output_len=40), captured=step, return_logits=True)
        assert fast.tokens == eager.tokens
        torch.testing.assert_close(fast.logits, eager.logits, rtol=0, atol=1e-5)
        alone = [greedy_decode(run.model, [s], Search(max_output_len=40), captured=step)[0] for s in src]
        assert alone == eager.tokens


@needs_compiler
@pytest.mark.slow
def test_beam4_hypotheses_equal_the_eager_step(run, tmp_path, monkeypatch):
    monkeypatch.setattr(captured, "START", 4)
    static = captured.StaticStep.for_model(run.model, 4)
    large = captured.load_step(captured.compile_step(static, tmp_path / "s.pt2"))
    small = captured.load_step(captured.compile_step(static, tmp_path / "small.pt2", tuned=True))  # any rows
    # most 4: a batch ends on the tuned one, a sentence alone runs on it; None: everything runs on it
    for src, most in ((_sources(run), 4), (_sources(run)[:1], 4), (_sources(run), None)):
        step = captured.CapturedDecoder(captured.by_rows(small, large, most))
        eager = beam_search(run.model, src, Search(beam=4, max_output_len=30, n_best=4))
        fast = beam_search(run.model, src, Search(beam=4, max_output_len=30, n_best=4), captured=step)
        assert [[h.tokens for h in hs] for hs in fast] == [[h.tokens for h in hs] for hs in eager]
        for a, b in zip(sum(fast, []), sum(eager, [])):
            assert a.logprob == pytest.approx(b.logprob, abs=1e-4)


@needs_compiler
def test_step_captured_compiles_once_into_the_private_cache_and_auto_then_uses_it(run, fake_compiles, private_home,
                                                                                  monkeypatch, capsys):
    compiles = fake_compiles  # the fixture's packages (same weights, one row per sentence)
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(private_home / "autotune.json"))  # off (the suite's env)
    options = run.decoding.pick(beam=1, step="captured")
    first = Translator(run, options).translate(TEXTS)
    assert compiles == [(1, "packed"), (1, "tuned"), "encoder"]  # any rows, tuned for few rows, and the encoder
    err = capsys.readouterr().err
    assert err.count("compiling the decoding step") == 1 and str(private_home / "cache" / "scratchformer") in err
    folder = next((private_home / "cache" / "scratchformer").glob("captured-*"))
    assert (folder.parent.stat().st_mode & 0o777) == 0o700
    assert Translator(run, options).translate(TEXTS) == first and len(compiles) == 3  # cached: loaded
    assert Translator(run, options.pick(step="eager")).translate(TEXTS) == first
    # auto: the package is used once autotune recorded it as faster here (never measured -> eager)
    auto = Translator(run, options.pick(step="auto"))
    assert auto.backend.captured(1) is None
    monkeypatch.setenv(autotune.ENV, "1")
    key = torch_engine.CapturedStepCache(run.model, "auto").shapes(1)
    monkeypatch.setattr(autotune.TUNER, "recorded", lambda decision, shapes: "captured" if shapes == key else None)
    auto = Translator(run, options.pick(step="auto"))
    assert auto.backend.captured(1) is not None and auto.translate(TEXTS) == first and len(compiles) == 3


def test_a_compile_over_the_cache_limit_removes_the_package_used_longest_ago_and_says_so(run, fake_compiles,
                                                                                        private_home, monkeypatch,
                                                                                        capsys):
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(private_home / "autotune.json"))
    monkeypatch.setenv("SCRATCHFORMER_CACHE_LIMIT_GB", "0")  # keep only the step compiled last
    builds, fake = [], captured.compile_step
    monkeypatch.setattr(captured, "compile_step", lambda step, path, **kwargs: (
        builds.append(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])), fake(step, path, **kwargs))[1])
    options = run.decoding.pick(beam=1, step="captured")
    first = Translator(run, options).translate(TEXTS)
    root = private_home / "cache" / "scratchformer"
    (old,) = root.glob("captured-*")
    assert len(builds) == 2 and builds[0] == builds[1] and builds[0].parent == root / "inductor" / "tmp"
    assert builds[0].name.startswith("build-") and not builds[0].exists()  # torch's build cache: this compile's own
    assert "removed" not in capsys.readouterr().err
    Translator(run, options.pick(dtype="bf16")).translate(TEXTS)  # another package (its stamp names the dtype)
    (new,) = root.glob("captured-*")
    err = capsys.readouterr().err
    assert new != old and "removed the 1 cached folder(s) used longest ago" in err and "LIMIT_GB=0" in err
    assert "failed" not in err
    assert Translator(run, options.pick(dtype="bf16")).translate(TEXTS) and len(fake_compiles) == 6  # kept: loaded
    assert Translator(run, options).translate(TEXTS) == first and len(fake_compiles) == 9  # the removed one: remade
    monkeypatch.setenv("SCRATCHFORMER_CACHE_LIMIT_GB", "lots")
    Translator(run, options.pick(dtype="bf16")).translate(TEXTS)  # removed above: compiles, and the bad value says so
    err = capsys.readouterr().err
    assert "SCRATCHFORMER_CACHE_LIMIT_GB='lots'" in err and "eager step" in err and len(fake_compiles) == 9


def test_plain_weights_compile_the_step_for_any_rows_unpacked_and_still_a_tuned_one(run, fake_compiles,
                                                                                    private_home, monkeypatch):
    """Where the rule says plain weights (MKL's plain sgemm measured faster here), the step for any rows and the
    encoder are compiled without packing, and the tuned package (which packs what it does not replace) still is:
    on a Xeon in fp32 its C++ GEMMs ran 1.8x the plain package at 1 row."""
    monkeypatch.setattr(torch_engine.CapturedStepCache, "prepack", lambda self, beam: False)
    options = run.decoding.pick(beam=1, step="captured")
    first = Translator(run, options).translate(TEXTS)
    assert fake_compiles == [(1, "plain"), (1, "tuned"), "encoder"]
    folder = next((private_home / "cache" / "scratchformer").glob("captured-*"))
    assert sorted(p.name for p in folder.glob("*.pt2")) == ["encoder.pt2", "small_step.pt2", "step.pt2"]
    again = Translator(run, options)
    assert again.backend.captured(1) is not None and again.translate(TEXTS) == first and len(fake_compiles) == 3
    assert first == Translator(run, options.pick(step="eager")).translate(TEXTS)


def test_the_packing_rule_asks_mkl_at_the_steps_rows_for_fp32_and_packs_bf16(run, monkeypatch):
    """fp32: packed only if MKL's packed sgemm measured faster at one sentence's rows and at 32 sentences' (beam x
    sentences); bf16: packed without asking. The choice is part of the package's key and of autotune's records."""
    asked = []

    def should_pack(linears, rows):
        asked.append(rows)
        return verdict

    monkeypatch.setattr(torch_engine, "should_pack", should_pack)
    monkeypatch.setattr(torch_engine, "packing_available", lambda: True)
    verdict = True
    assert torch_engine.CapturedStepCache(run.model, "captured").prepack(4) is True and asked == [4, 128]
    verdict, asked[:] = False, []
    steps = torch_engine.CapturedStepCache(run.model, "captured")
    assert steps.prepack(1) is False and asked == [1]  # the first "no" settles it
    plain_key, plain_shapes = steps.stamp(1), steps.shapes(1)
    verdict = True
    packed = torch_engine.CapturedStepCache(run.model, "captured")
    assert packed.stamp(1) != plain_key and packed.shapes(1) != plain_shapes
    asked[:] = []
    half = torch_engine.CapturedStepCache(copy.deepcopy(run.model).to(torch.bfloat16), "captured")
    assert half.prepack(1) is True and asked == []


def test_plain_packages_keyed_by_the_weights_layout(run, monkeypatch):
    """Freezing keeps the model's layout, so a plain package holds the layout of the model that compiled it: the
    layout (load_run's measured inference_layout, per thread count) is part of the package's key and of autotune's
    records, and a packed package has none of its own."""
    monkeypatch.setattr(torch_engine, "packing_available", lambda: True)
    monkeypatch.setattr(torch_engine, "should_pack", lambda linears, rows: False)
    row_major = copy.deepcopy(run.model)
    for m in row_major.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = m.weight.data.contiguous()
    column_major = copy.deepcopy(row_major).inference_layout()
    rows, columns = (torch_engine.CapturedStepCache(m, "captured") for m in (row_major, column_major))
    assert rows.layout(1) == "row-major" and columns.layout(1) == "column-major"
    assert rows.stamp(1) != columns.stamp(1) and rows.shapes(1) != columns.shapes(1)
    assert rows.stamp(1)["weights"] == columns.stamp(1)["weights"]  # the same numbers, another package
    monkeypatch.setattr(torch_engine, "should_pack", lambda linears, rows: True)
    packed = [torch_engine.CapturedStepCache(m, "captured") for m in (row_major, column_major)]
    assert {p.layout(1) for p in packed} == {"packed"} and packed[0].stamp(1) == packed[1].stamp(1)


def test_auto_never_compiles(run, private_home, monkeypatch):
    monkeypatch.setattr(captured, "compile_step", lambda *a, **k: pytest.fail("auto compiled"))
    monkeypatch.setenv(autotune.ENV, "1")
    monkeypatch.setattr(autotune.TUNER, "recorded", lambda decision, shapes: "captured")  # measured faster, no package
    translator = Translator(run, run.decoding.pick(beam=1, step="auto", dtype="fp32"))  # dtype auto would measure
    assert translator.backend.captured(1) is None
    assert translator.translate(TEXTS) == Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS)
    # no package in the cache either (autotune may record other measured choices there, e.g. MKL packing under AVX2)
    assert not list((private_home / "cache").rglob("captured-*"))


def test_without_a_compiler_the_eager_step_runs_with_one_line(run, private_home, monkeypatch, capsys):
    monkeypatch.setattr(captured, "compiler_available", lambda: False)
    monkeypatch.setattr(captured, "compile_step", lambda *a, **k: pytest.fail("compiled without a compiler"))
    translator = Translator(run, run.decoding.pick(beam=1, step="captured"))
    assert translator.backend.captured(1) is None
    assert translator.translate(TEXTS) == Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS)
    assert capsys.readouterr().err.strip().splitlines() == ["--step captured: no C++ compiler; decoding with the "
                                                            "eager step"]


def test_a_failing_compile_runs_the_eager_step_with_one_line(run, private_home, monkeypatch, capsys):
    monkeypatch.setattr(captured, "compiler_available", lambda: True)
    fail = RuntimeError("no headers\nmore")
    monkeypatch.setattr(captured, "compile_step", lambda *a, **k: (_ for _ in ()).throw(fail))
    translator = Translator(run, run.decoding.pick(beam=1, step="captured"))
    assert translator.backend.captured(1) is None
    assert translator.translate(TEXTS) == Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == "the captured decoding step failed (RuntimeError: no headers); decoding with the eager step"


@pytest.mark.parametrize("sums", [False, True])
@pytest.mark.parametrize("beam", [1, 4])
def test_the_static_step_run_eagerly_gives_the_lean_steps_outputs(tiny_model, tiny_sources, beam, sums, monkeypatch):
    """The captured step is the lean step over a static cache (fast_step.py says why they are two): run uncompiled,
    as an nn.Module, it gives the lean step's tokens and scores, beams read through their index included, with
    either form of its attention (`@`, or the tuned package's sums)."""
    monkeypatch.setattr(captured, "START", 4)  # the static caches grow (4 -> 12 -> 20) within these outputs
    model, src = tiny_model(seed=3), tiny_sources(seed=3)
    static = captured.StaticStep.for_model(model, beam)
    static.sums = sums
    step = captured.CapturedDecoder(static)  # eager: no compiler needed
    spec = Search(beam=beam, max_output_len=20, min_len=6, n_best=beam)
    ours, lean = beam_search(model, src, spec, captured=step), beam_search(model, src, spec)
    assert [[h.tokens for h in hs] for hs in ours] == [[h.tokens for h in hs] for hs in lean]
    assert [h.logprob for h in sum(ours, [])] == pytest.approx([h.logprob for h in sum(lean, [])], abs=1e-4)
    if beam == 1:
        assert greedy_decode(model, src, spec, captured=step) == greedy_decode(model, src, spec)


@pytest.mark.parametrize("sums", [False, True])
@pytest.mark.parametrize("queries", [1, 4])
def test_attend_written_out_is_scaled_dot_product_attention(queries, sums):
    """captured.attend, with `@` or as broadcast products and sums (the tuned package's form), is SDPA with a
    boolean mask: one query (greedy, a beam's own history) and G queries of one memory row (a beam's
    cross-attention), keys masked."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 2, queries, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(3, 2, 5, 8, generator=g, dtype=torch.float64) for _ in range(2))
    visible = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)[:, None, None]
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=visible)
    torch.testing.assert_close(captured.attend(q, k, v, visible, sums), expected)


def test_uncovered_models_take_the_eager_step(tiny_model, run, private_home):
    assert captured.StaticStep.for_model(tiny_model(seed=0, positions="rope")) is None
    assert captured.unavailable(tiny_model(seed=0, n_kv_heads=1)) is not None


def test_the_package_key_changes_with_the_weights(run, monkeypatch):
    cache = torch_engine.CapturedStepCache(run.model, "auto")
    before = cache.stamp(1)
    assert cache.stamp(4) != before  # and with the rows per sentence
    changed = torch_engine.CapturedStepCache(run.model, "auto")
    with torch.no_grad():
        weight = run.model.generator.proj.weight
        kept = weight[0, 0].clone()
        weight[0, 0] += 1.0
        try:
            assert changed.stamp(1)["weights"] != before["weights"]
        finally:
            weight[0, 0] = kept  # exactly (x + 1 - 1 may not be x): later tests compare digests with a fresh load


def test_the_step_option_is_checked():
    from scratchformer.config.decoding import DecodingOptions
    from scratchformer.errors import ConfigError

    with pytest.raises(ConfigError, match="step=fast: must be one of auto, eager, captured"):
        DecodingOptions(step="fast").check()


def test_from_model_says_it_runs_the_eager_step_when_asked_for_the_captured_one(tmp_path, monkeypatch):
    """A model in memory has no run to key a package by: it decodes eagerly, and says so, not silently."""
    from scratchformer import ModelConfig, build_model
    from scratchformer.config.decoding import DecodingOptions
    from scratchformer.data.tokenizers import train_tokenizer

    torch.manual_seed(0)
    tok = train_tokenizer("char", ["abc def"])
    model = build_model(ModelConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=16,
                                    n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_positions=8)).eval()
    with pytest.warns(UserWarning, match="eager step.*Translator"):
        out = Translator.from_model(model, tok, tok, DecodingOptions(beam=1, step="captured")).translate(["abc"])
    assert out == Translator.from_model(model, tok, tok, DecodingOptions(beam=1, step="eager")).translate(["abc"])


# -- the default step rule (`step: auto`, engines/torch_engine.py): no timing, a fake cost model ---------------------

@pytest.fixture
def autotune_on(private_home, monkeypatch):
    """Autotune on (the suite runs with it off), its records in the temporary cache, never busy; the compiler found."""
    monkeypatch.setenv(autotune.ENV, "1")
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(private_home / "cache" / "scratchformer" / "autotune.json",
                                                          busy=lambda: False))
    monkeypatch.setattr(captured, "compiler_available", lambda: True)
    return private_home


@pytest.fixture
def fake_compiles(package, encoder_package, monkeypatch):
    """Compiles replaced by copies of the fixtures' packages (one row per sentence); the timing after a compile
    replaced by fixed figures. Returns the list of what was compiled."""
    compiles = []

    def fake_compile(step, path, tuned=False, prepack=True):
        compiles.append((step.beam, "tuned" if tuned else "packed" if prepack else "plain"))
        shutil.copy(package, path)
        return path

    def fake_encoder(encoder, path, prepack=True):
        compiles.append("encoder")
        shutil.copy(encoder_package, path)
        return path

    monkeypatch.setattr(captured, "compile_step", fake_compile)
    monkeypatch.setattr(captured, "compile_encoder", fake_encoder)
    monkeypatch.setattr(torch_engine.CapturedStepCache, "_measure",  # the unmeasured rows rule, nothing kept
                        lambda self, small, large, encoder, beam: captured.CapturedDecoder(
                            captured.by_rows(small, large, captured.SMALL_ROWS), encoder))
    monkeypatch.setattr(torch_engine.CapturedStepCache, "prepack", lambda self, beam: True)  # the measured rule's
    # choice pinned (it differs by CPU): packed weights, three packages; test_plain_weights_* pins the other
    return compiles


def test_a_one_sentence_call_on_a_fresh_cache_runs_eager_and_never_compiles(run, autotune_on, monkeypatch, capsys):
    monkeypatch.setattr(captured, "compile_step", lambda *a, **k: pytest.fail("a one-sentence call compiled"))
    # even where a compile would cost nothing
    monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 0.0)
    for beam in (1, 4):
        translator = Translator(run, run.decoding.pick(beam=beam, step="auto", dtype="fp32"))
        assert translator.translate(TEXTS[:1])
        assert translator.backend.captured(1 if beam == 1 else beam) is None
        assert translator.backend.step_in_use() == "eager fp32"
    assert "compil" not in capsys.readouterr().err


def test_the_rule_compiles_when_the_estimated_saving_exceeds_the_compile_cost(run, autotune_on, monkeypatch):
    monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 100.0)
    monkeypatch.setattr(torch_engine, "SAVING_PER_ROW_TOKEN", 1e-3)
    steps = torch_engine.CapturedStepCache(run.model, "auto", expected_tokens=200_000)
    assert steps.pays(1) == (True, 100.0, pytest.approx(200.0))
    assert steps.pays(4)[0] and steps.pays(4)[2] == pytest.approx(800.0)  # beams: more rows per token saved
    assert not steps.pays(1, tokens=50_000)[0]  # 50 s saved < 100 s of compiling
    assert not torch_engine.CapturedStepCache(run.model, "auto").pays(1)[0]  # size unknown: never
    # measured figures replace the constants: a compile measured at 10 s here, a saving of 1 ms per token
    shapes = steps.shapes(1)
    assert autotune.record("decode-compile", shapes, {"seconds": 10.0})
    assert autotune.record("decode-step", shapes, {"choice": "captured", "saving_per_token": 1e-3})
    assert steps.pays(1, tokens=50_000) == (True, 10.0, pytest.approx(50.0))
    assert not steps.pays(1, tokens=5_000)[0]


@needs_compiler
def test_a_big_file_compiles_once_saying_so_and_a_second_run_uses_the_cached_package(
        run, tiny_run, autotune_on, fake_compiles, monkeypatch, capsys, tmp_path):
    from scratchformer.cli import main

    monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 1.0)
    monkeypatch.setattr(torch_engine, "SAVING_PER_ROW_TOKEN", 1e-3)
    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    small.write_text("hello world\n")  # ~12 tokens: saves ~0.012 s < 1 s
    big.write_text("\n".join(TEXTS * 40) + "\n")  # 200 lines, ~2,000 tokens: ~2 s > 1 s
    args = ["translate", str(tiny_run), "--beam", "1", "--dtype", "fp32"]
    assert main([*args, "--file", str(small)]) == 0
    assert fake_compiles == [] and "compil" not in capsys.readouterr().err
    assert main([*args, "--file", str(big)]) == 0
    out = capsys.readouterr()
    assert fake_compiles == [(1, "packed"), (1, "tuned"), "encoder"]
    err = out.err.splitlines()
    assert err[0].startswith("compiling the captured decoding step: this call's ")  # and the small file's, eager
    assert "should save about 2 s for about 1 s of compiling" in err[0]
    assert [line.split(" (")[0].strip() for line in err if line.strip().startswith("[")] == [
        "[1/3] the step for any batch", "[2/3] the step tuned by max-autotune", "[3/3] the encoder"]
    eager = Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS * 40)
    assert out.out.splitlines() == eager
    # a second run, even of one sentence, finds the package: no compile, the captured step at once
    warm = Translator(run, run.decoding.pick(beam=1, step="auto", dtype="fp32"))
    assert warm.backend.captured(1) is not None and warm.backend.step_in_use() == "captured fp32"
    assert warm.translate(TEXTS) == eager[: len(TEXTS)] and len(fake_compiles) == 3
    assert "compil" not in capsys.readouterr().err


@needs_compiler
def test_files_too_small_to_pay_alone_compile_once_their_tokens_together_pay(
        run, tiny_run, autotune_on, fake_compiles, monkeypatch, capsys, tmp_path):
    """The rent-or-buy rule (CapturedStepCache.pays): each call that runs eager because its own tokens would not pay
    for the compile counts them; the call whose tokens with the counted ones pay compiles, says so, and the count
    starts again."""
    from scratchformer.cli import main

    monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 1.0)
    monkeypatch.setattr(torch_engine, "SAVING_PER_ROW_TOKEN", 1e-3)
    file = tmp_path / "some.txt"
    file.write_text("\n".join(TEXTS * 8) + "\n")  # 40 lines, ~400 tokens: ~0.4 s saved < 1 s
    args = ["translate", str(tiny_run), "--beam", "1", "--dtype", "fp32", "--file", str(file)]
    shapes = torch_engine.CapturedStepCache(run.model, "auto").shapes(1)
    assert main(args) == 0
    first = autotune.count("decode-eager-tokens", shapes)
    assert 300 < first < 500 and fake_compiles == [] and "compil" not in capsys.readouterr().err
    assert main(args) == 0  # ~800 tokens together: ~0.8 s, still < 1 s
    assert autotune.count("decode-eager-tokens", shapes) == 2 * first and fake_compiles == []
    capsys.readouterr()
    assert main(args) == 0  # ~1,200: pays
    out = capsys.readouterr()
    assert fake_compiles == [(1, "packed"), (1, "tuned"), "encoder"]
    assert out.err.splitlines()[0].startswith(
        f"compiling the captured decoding step: this call's {first} tokens and the {2 * first} that earlier calls "
        "decoded with the eager step should save about 1 s")
    assert autotune.count("decode-eager-tokens", shapes) == 0
    assert out.out.splitlines() == Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS * 8)


def test_rows_served_is_the_largest_count_up_to_which_the_tuned_package_was_faster_at_every_count():
    def seconds(*tuned):  # the other package: 1.0 s at every count
        return {rows: {"tuned": t, "any": 1.0} for rows, t in zip((1, 2, 4, 8, 16, 32), tuned)}

    assert captured.rows_served(seconds(0.5, 0.5, 0.9, 1.2, 0.5, 0.5)) == 4  # a later win does not count
    assert captured.rows_served(seconds(0.5, 0.5, 0.5, 0.5, 0.5, 0.9)) is None  # every count: every call
    assert captured.rows_served(seconds(1.0, 0.5, 0.5, 0.5, 0.5, 0.5)) == 0  # a tie at one row: never
    assert captured.rows_served({}) is None


@needs_compiler
def test_after_a_compile_the_tuned_package_serves_the_rows_where_it_timed_faster_and_a_reload_keeps_it(
        run, autotune_on, fake_compiles, monkeypatch):
    """The real _measure on a fake clock: the tuned package times faster up to 4 sentences (greedy: 4 rows), slower
    from 8; the record keeps `small_rows` 4 with the verdict, and a later load serves by it (a damaged value: the
    package for any rows alone)."""
    monkeypatch.setattr(torch_engine.CapturedStepCache, "_measure", REAL_MEASURE)

    def clock(name, work):
        return {"tuned": 1.0 if work.sentences <= 4 else 3.0, "any": 2.0, "eager": 5.0, "captured": 1.0}[name]

    monkeypatch.setattr(captured, "time_steps", _fake_time_steps)
    monkeypatch.setattr(autotune.TUNER, "measure", clock)
    served = []
    by_rows = captured.by_rows
    monkeypatch.setattr(captured, "by_rows", lambda small, large, most: served.append(most) or by_rows(small, large,
                                                                                                      most))
    steps = torch_engine.CapturedStepCache(run.model, "auto")
    steps.prepare(1)
    record = autotune.entry("decode-step", steps.shapes(1))
    assert record["small_rows"] == 4 and record["choice"] == "captured" and served == [4]
    assert torch_engine.CapturedStepCache(run.model, "auto")(1) is not None and served == [4, 4]  # from the record
    assert autotune.record("decode-step", steps.shapes(1), {**record, "small_rows": "all"})
    assert torch_engine.CapturedStepCache(run.model, "auto")(1) is not None and served[-1] == 0
    assert len(fake_compiles) == 3


@needs_compiler
def test_a_package_that_fails_while_timed_runs_the_eager_step_with_one_line(run, autotune_on, fake_compiles,
                                                                           monkeypatch, capsys):
    monkeypatch.setattr(torch_engine.CapturedStepCache, "_measure", REAL_MEASURE)

    def broken(*args, **kwargs):
        raise RuntimeError("a kernel failed\nmore")

    monkeypatch.setattr(captured, "time_steps", broken)
    steps = torch_engine.CapturedStepCache(run.model, "auto")
    steps.prepare(1)
    assert steps(1) is None and steps.in_use(1) == "eager"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "the captured decoding step failed (RuntimeError: a kernel failed); decoding with the eager step")


@needs_compiler
def test_the_verdict_weighs_one_sentence_as_much_as_a_batch(run, autotune_on, fake_compiles, monkeypatch):
    """Captured twice as fast for one sentence, 1% slower for 32 (in seconds, ten times the work): over the summed
    seconds (11 eager, 10.6 captured) it would lose the 10% margin; each size weighing alike, it wins."""
    monkeypatch.setattr(torch_engine.CapturedStepCache, "_measure", REAL_MEASURE)

    seconds = {1: {"eager": 1.0, "captured": 0.5}, 32: {"eager": 10.0, "captured": 10.1}}
    monkeypatch.setattr(captured, "time_steps", _fake_time_steps)
    monkeypatch.setattr(autotune.TUNER, "measure", lambda name, work: seconds.get(work.sentences, {}).get(name, 1.0))
    steps = torch_engine.CapturedStepCache(run.model, "auto")
    steps.prepare(1)
    record = autotune.entry("decode-step", steps.shapes(1))
    assert record["choice"] == "captured" and record["seconds"] == {"eager": 11.0, "captured": 10.6}
    assert record["saving_per_token"] < 0  # at 32 sentences it saves nothing: the compile rule reads this


@needs_compiler
def test_prepare_times_a_cached_package_that_has_no_record_for_these_threads(run, autotune_on, fake_compiles,
                                                                             monkeypatch):
    """A package serves every thread count, its rules are timed per thread count: serve's start-up (prepare) and a
    big file time a cached package that has no record for their threads, without compiling again; a plain call does
    not wait for it."""
    monkeypatch.setattr(torch_engine.CapturedStepCache, "_measure", REAL_MEASURE)
    monkeypatch.setattr(captured, "time_steps", lambda model, step, beam, sentences, steps=16, src_len=24: lambda: None)
    monkeypatch.setattr(autotune.TUNER, "measure", lambda name, work: {"tuned": 1.0, "any": 2.0, "eager": 3.0,
                                                                        "captured": 1.0}[name])
    threads = torch.get_num_threads()
    try:
        torch_engine.CapturedStepCache(run.model, "auto").prepare(1)  # compiled, timed: a record at these threads
        assert len(fake_compiles) == 3
        torch.set_num_threads(threads + 1)
        plain = torch_engine.CapturedStepCache(run.model, "auto")
        assert plain(1) is not None and autotune.entry("decode-step", plain.shapes(1)) is None  # used, not timed
        other = torch_engine.CapturedStepCache(run.model, "auto")
        other.prepare(1)
        assert autotune.entry("decode-step", other.shapes(1))["small_rows"] is None and len(fake_compiles) == 3
        torch.set_num_threads(threads + 2)  # a big file (a call that could pay for a compile) times it too
        monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 1.0)
        big = torch_engine.CapturedStepCache(run.model, "auto", expected_tokens=10_000_000)
        assert big(1) is not None and autotune.entry("decode-step", big.shapes(1)) is not None
    finally:
        torch.set_num_threads(threads)


@needs_compiler
def test_a_package_measured_slower_here_is_not_used(run, autotune_on, fake_compiles):
    steps = torch_engine.CapturedStepCache(run.model, "auto")
    steps.prepare(1)  # compiled (faked) and cached
    assert steps(1) is not None and len(fake_compiles) == 3
    assert autotune.record("decode-step", steps.shapes(1), {"choice": "eager"})
    assert torch_engine.CapturedStepCache(run.model, "auto")(1) is None


def test_without_a_compiler_a_call_that_would_compile_runs_eager_with_one_line(run, autotune_on, monkeypatch,
                                                                               capsys):
    monkeypatch.setattr(captured, "compiler_available", lambda: False)
    monkeypatch.setattr(captured, "compile_step", lambda *a, **k: pytest.fail("compiled without a compiler"))
    monkeypatch.setattr(torch_engine, "COMPILE_SECONDS", 0.0)
    options = run.decoding.pick(beam=1, step="auto", dtype="fp32")
    translator = Translator(run, options, expected_tokens=10_000)
    assert translator.translate(TEXTS) == Translator(run, options.pick(step="eager")).translate(TEXTS)
    assert capsys.readouterr().err.strip().splitlines() == [
        "the captured decoding step cannot be built here (no C++ compiler); decoding with the eager step"]
    Translator(run, options).translate(TEXTS[:1])  # a one-sentence call would not have compiled: no line
    assert capsys.readouterr().err == ""


@needs_compiler
def test_serve_compiles_in_the_background_and_answers_eagerly_until_ready(run, autotune_on, fake_compiles,
                                                                          monkeypatch):
    import threading

    from scratchformer.serve import RunTranslator, create_app
    from scratchformer.serve.app import Settings

    release = threading.Event()
    compile_step = captured.compile_step

    def slow_compile(step, path, tuned=False, prepack=True):
        assert release.wait(60)
        return compile_step(step, path, tuned, prepack)

    monkeypatch.setattr(captured, "compile_step", slow_compile)
    served = RunTranslator(run, {"beam": 1, "dtype": "fp32"})
    assert served.step() == "compiling fp32"
    eager = Translator(run, run.decoding.pick(beam=1, step="eager")).translate(TEXTS)
    assert [hs[0][0] for hs in served.translate(TEXTS, served_options(served))] == eager  # answered meanwhile
    assert served.translator.backend.captured(1) is None
    from fastapi.testclient import TestClient

    with TestClient(create_app(served, Settings("en", "zh")), base_url="http://localhost") as client:
        health = client.get("/health")
        assert health.json().get("step") == "compiling fp32", health.text
        release.set()
        for _ in range(600):
            if served.step() != "compiling fp32":
                break
            threading.Event().wait(0.1)
        assert client.get("/health").json()["step"] == "captured fp32"
    assert served.translator.backend.captured(1) is not None
    assert [hs[0][0] for hs in served.translate(TEXTS, served_options(served))] == eager


def served_options(served):
    from scratchformer.serve import Options

    return Options(beam=served.options.beam)
