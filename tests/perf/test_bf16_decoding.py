"""bf16 decoding (`dtype: bf16 | auto`, engines/torch_engine.py; autotune.decoding_dtype): a bf16 copy of the weights
gives logits close to fp32's and mostly the same outputs, on the toy run and the shipped model; `auto` takes bf16
only on a CPU with AVX512-BF16 or AMX where it measured faster; an explicit bf16 elsewhere runs with one line; the
captured package's key names the dtype. No timing (a fake clock; benchmarks/bench_decode_paths.py measures)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from scratchformer import autotune
from scratchformer.decoding import captured, greedy_decode, packing
from scratchformer.decoding.common import Seq2SeqSteps, pad_ids
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator, torch_engine
from scratchformer.errors import ConfigError
from scratchformer.runs import load_run

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "en-zh"
TEXTS = ["hello world", "a b c", "the cat", "xyz", "good morning to you"]
WITH_AMX = "avx512f avx512_bf16 amx_bf16 amx_tile"
WITHOUT = "avx2 avx512f fma sse4_2"


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run)


def _sources(run, texts=TEXTS):
    return [run.src_tok.encode(t) + [2] for t in texts]


def test_bf16_logits_are_close_to_fp32(run):
    """The same teacher-forced tokens through both: every step's logits within a bf16 tolerance (8 bits of mantissa:
    ~0.4% per rounding, a few roundings deep), and the same argmax almost everywhere."""
    half = copy.deepcopy(run.model).to(torch.bfloat16)
    src = pad_ids(_sources(run), 0, torch.device("cpu"))
    tokens = greedy_decode(run.model, _sources(run), Search(max_output_len=12, min_len=12))
    tgt = pad_ids([[1, *t] for t in tokens], 0, torch.device("cpu"))
    logits = {}
    with torch.inference_mode():
        for name, model in (("fp32", run.model), ("bf16", half)):
            mask = model.src_mask(src)
            steps = Seq2SeqSteps(model, model.encode(src, mask), mask)
            logits[name] = torch.stack([steps(tgt[:, : t + 1]) for t in range(tgt.size(1) - 1)])  # (T, N, V)
    assert logits["bf16"].dtype == torch.float32  # the search's sums stay in fp32
    scale = logits["fp32"].abs().max()
    assert (logits["bf16"] - logits["fp32"]).abs().max() <= 0.05 * scale
    agree = (logits["bf16"].argmax(-1) == logits["fp32"].argmax(-1)).float().mean()
    assert agree >= 0.9


@pytest.mark.skipif(not (SHIPPED / "model.safetensors").exists(), reason="the shipped model is not here")
def test_bf16_translations_of_the_shipped_model_are_mostly_fp32s():
    from scratchformer.data.corpus import load_pairs

    shipped = load_run(SHIPPED)
    texts = [s for s, _ in load_pairs("en-zh", "test", on_error="skip")[:40]]
    out = {d: Translator(shipped, shipped.decoding.pick(beam=1, dtype=d, step="eager")).translate(texts)
           for d in ("fp32", "bf16")}
    same = sum(a == b for a, b in zip(out["fp32"], out["bf16"]))
    assert same >= 0.8 * len(texts)  # 93 of 100 on a Xeon with AMX


def test_an_explicit_bf16_on_a_cpu_without_it_runs_with_one_line(run, monkeypatch, capsys):
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITHOUT)
    translator = Translator(run, run.decoding.pick(beam=1, dtype="bf16", step="eager"))
    assert translator.backend.dtype == "bf16" and next(translator.backend.model.parameters()).dtype == torch.bfloat16
    assert translator.translate(TEXTS)
    assert capsys.readouterr().err.strip().splitlines() == [
        "--dtype bf16: this CPU has neither AVX512-BF16 nor AMX, so bf16 is emulated and slower than fp32"]
    assert next(run.model.parameters()).dtype == torch.float32  # the run's own model is untouched


def test_auto_takes_fp32_without_timing_on_a_cpu_without_bf16(run, monkeypatch, fake_tuner):
    clock = fake_tuner(fp32=1.0, bf16=0.1)
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITHOUT)
    assert Translator(run, run.decoding.pick(step="eager")).backend.dtype == "fp32"
    assert clock.calls == []


@pytest.mark.parametrize(("bf16_seconds", "chosen"), [(0.5, "bf16"), (0.95, "fp32")])
def test_auto_takes_bf16_where_it_measured_clearly_faster(run, monkeypatch, fake_tuner, bf16_seconds, chosen):
    clock = fake_tuner(fp32=1.0, bf16=bf16_seconds)
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITH_AMX)
    backend = Translator(run, run.decoding.pick(step="eager")).backend
    assert backend.dtype == chosen and {"fp32", "bf16"} <= set(clock.calls)
    assert next(backend.model.parameters()).dtype == (torch.bfloat16 if chosen == "bf16" else torch.float32)
    calls = len(clock.calls)
    assert Translator(run, run.decoding.pick(step="eager")).backend.dtype == chosen and len(clock.calls) == calls


@pytest.mark.parametrize(("step", "packed"), [("auto", True), ("eager", False)])
def test_auto_times_the_gemms_of_the_step_that_will_decode(run, monkeypatch, fake_tuner, step, packed):
    """Where the captured step can be built (and is not forced off), bf16 is timed through oneDNN's packed GEMMs,
    what a bf16 package runs (ATen's plain bf16 GEMM chose fp32 on a Xeon where the captured bf16 step ran 1.4-2.1x
    the fp32 one), at a batch's rows only (at 1 and 32 rows the packed witness read a tie with 2 threads while the
    packages ran 1.2-2.3x faster in bf16); the eager step's rule times ATen's at 1 and 32 rows. Two decisions, two
    records. The work runs (a fake clock reports the seconds), so the private ops are called as the rule calls them
    wherever this torch has them."""
    clock = fake_tuner(fp32=1.0, bf16=0.5)
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITH_AMX)
    monkeypatch.setattr(captured, "unavailable", lambda model: None)  # a compiler and a covered model
    rows_packed: list[int] = []
    real = torch_engine.packed_gemm

    def recording(weight):
        gemm = real(weight)
        return lambda x: (rows_packed.append(x.size(0)), gemm(x))[1]

    monkeypatch.setattr(torch_engine, "packed_gemm", recording)
    assert Translator(run, run.decoding.pick(step=step)).backend.dtype == "bf16"
    keys = [k for k in autotune.TUNER._read() if "decode-dtype" in k]
    packed = packed and packing.packing_available(torch.bfloat16)
    assert len(keys) == 1 and ('"packed"' in keys[0]) == packed
    rows = [32] if packed else [1, 32]
    assert f", {rows}".replace(" ", "") in keys[0].replace(" ", "")  # the rows are in the key: a new rule re-measures
    assert set(rows_packed) == ({32} if packed else set())  # the packed GEMMs ran at a batch's rows only
    assert clock.calls.count("bf16") >= 2  # a warm-up and the timed calls


def test_auto_times_the_eager_gemms_where_no_captured_step_can_be_built(run, monkeypatch, fake_tuner):
    fake_tuner(fp32=1.0, bf16=0.5)
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITH_AMX)
    monkeypatch.setattr(captured, "unavailable", lambda model: "no C++ compiler")
    Translator(run, run.decoding.pick(step="auto"))
    keys = [k for k in autotune.TUNER._read() if "decode-dtype" in k]
    assert len(keys) == 1 and '"packed"' not in keys[0]


def test_evaluate_scores_in_fp32_unless_bf16_is_asked(run, monkeypatch, fake_tuner):
    """A BLEU is the model's, not the CPU's: evaluate's auto decodes in fp32 even where auto would take bf16."""
    from scratchformer.evaluation.translation import evaluate_pairs

    clock = fake_tuner(fp32=1.0, bf16=0.1, packed=1.0, unpacked=1.0)  # eager bf16 asks whether to pack (a tie: no)
    monkeypatch.setattr(autotune, "cpu_flags", lambda: WITH_AMX)
    pairs = [("hello world", "x"), ("the cat", "y")]
    assert evaluate_pairs(run, pairs, step="eager")["dtype"] == "fp32" and clock.calls == []
    assert evaluate_pairs(run, pairs, step="eager", dtype="bf16")["dtype"] == "bf16"


def test_the_torch_engine_refuses_int8_in_one_line_and_an_unknown_dtype_is_refused(run):
    with pytest.raises(ConfigError, match=r"^--dtype int8: the torch engine has no int8 \(it was slower than "
                                          r"CTranslate2's\): use --engine ctranslate2 --dtype int8, or --dtype bf16$"):
        Translator(run, run.decoding.pick(named_as=True, dtype="int8"))
    with pytest.raises(ConfigError, match="dtype=fp16: must be one of auto, fp32, bf16, int8"):
        run.decoding.pick(dtype="fp16")


def test_the_captured_package_key_names_the_dtype(run):
    fp32 = torch_engine.CapturedStepCache(run.model, "auto")
    bf16 = torch_engine.CapturedStepCache(copy.deepcopy(run.model).to(torch.bfloat16), "auto")
    assert fp32.stamp(1)["dtype"] == "float32" and bf16.stamp(1)["dtype"] == "bfloat16"
    assert fp32.shapes(1)["dtype"] != bf16.shapes(1)["dtype"]  # autotune's records of the step apart too


@pytest.mark.slow
@pytest.mark.skipif(not captured.compiler_available(), reason="no C++ compiler")
def test_the_captured_step_in_bf16_gives_the_eager_bf16_tokens(run, tmp_path):
    half = copy.deepcopy(run.model).to(torch.bfloat16)
    package = captured.compile_step(captured.StaticStep.for_model(half, 1), tmp_path / "step.pt2")
    src = _sources(run)
    eager = greedy_decode(half, src, Search(max_output_len=30), return_logits=True)
    fast = greedy_decode(half, src, Search(max_output_len=30),
                         captured=captured.CapturedDecoder(captured.load_step(package)), return_logits=True)
    assert fast.tokens == eager.tokens
    torch.testing.assert_close(fast.logits, eager.logits, rtol=0, atol=0.05 * float(eager.logits.abs().max()))
