"""The CPU-independent parts of benchmarks/: FLOP counting, targets, the machine every figure names, the GPU script's
plan and its CUDA check (results.jsonl's rows and the rendered tables: tests/docs/test_figures.py)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import benchlib  # noqa: E402
import gpu_bench  # noqa: E402

from scratchformer import ModelConfig, build_model  # noqa: E402
from scratchformer.inspect.flops import forward_flops  # noqa: E402


def test_flops_are_six_times_matmul_params_times_tokens_plus_attention():
    c = ModelConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=60, d_model=32, d_ff=48, n_heads=4)
    model = build_model(c)
    enc = sum(m.weight.numel() for m in model.encoder.modules() if isinstance(m, nn.Linear))
    dec = sum(m.weight.numel() for m in model.decoder.modules() if isinstance(m, nn.Linear))
    cross_kv = sum(layer.cross_attn.w_kv.weight.numel() for layer in model.decoder.layers)
    b, ls, lt = 3, 7, 5
    d, n = c.d_model, c.n_encoder_layers
    attention = 2 * 2 * b * d * n * (ls * ls + lt * lt + lt * ls)  # QK^T and AV: encoder self, decoder self, cross
    linear = enc * b * ls + (dec - cross_kv) * b * lt + cross_kv * b * ls + 60 * d * b * lt
    expect = 3 * (2 * linear + attention)
    assert benchlib.training_flops(c, b, ls, lt) == expect


def test_emit_checks_targets(capsys):
    r = benchlib.emit("x", "tok/s", 3.0, 2.0, "peer", target_ratio=1.5)
    assert r["ratio"] == 1.5 and r["met"] is True and r["target"] == ">= 1.5x"
    assert benchlib.emit("m", "MiB", 3.0, 2.0, "peer", higher_is_better=False, target_ratio=1.0)["met"] is False
    assert benchlib.emit("f", "fraction", 0.8, target_ours=0.9)["met"] is False
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["figure"] for line in lines] == ["x", "m", "f"]


def test_interleave_alternates_and_times_every_round():
    calls = []
    times = benchlib.interleave({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3,
                                warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert [len(v) for v in times.values()] == [3, 3]


def test_gpu_plan_and_peaks():
    plan = gpu_bench.Plan()
    assert plan.batch * plan.seq_len <= plan.tokens < (plan.batch + 1) * plan.seq_len
    paper = ModelConfig.preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000)
    assert plan.step_flops(paper) == 3 * forward_flops(paper, plan.batch, 32, 32)
    assert gpu_bench.peak_flops("NVIDIA H200") == 989e12
    assert gpu_bench.peak_flops("NVIDIA GH200 480GB") == 989e12
    assert gpu_bench.peak_flops("Some Unknown GPU") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message printed where CUDA is absent")
def test_gpu_bench_fails_fast_without_cuda():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        gpu_bench.main([])


def test_gpu_bench_smoke_runs_every_path_on_the_cpu(capsys):
    """The train step, the MFU arithmetic and decoding of gpu_bench.py run (tiny, on the CPU) before a GPU is lent."""
    gpu_bench.main(["--smoke"])
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    names = [f["figure"] for f in figures]
    assert names[0].startswith("gpu train: tokens/s") and names[1] == "gpu train: achieved TFLOP/s, bf16"
    assert [n for n in names if n.startswith("gpu decode")] == [
        "gpu decode: greedy, bf16, batch 1, 4 new tokens", "gpu decode: greedy, bf16, batch 2, 4 new tokens"]
    assert all(f["ours"] > 0 for f in figures)


EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 avx fma avx2 bmi2\n"
SAPPHIRE = ("model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: avx2 avx512f avx512_vnni avx512_bf16 "
            "amx_tile amx_bf16 amx_int8 avx_vnni\n")


def test_simd_flags_are_read_from_cpuinfo():
    assert benchlib.simd_flags(EPYC) == ["avx2"]
    assert benchlib.simd_flags(SAPPHIRE) == ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni",
                                             "amx_bf16", "amx_int8", "amx_tile"]
    assert benchlib.simd_flags("no flags here") == []


def test_every_figure_names_its_machine(capsys):
    record = benchlib.emit("x", "tok/s", 3.0, 2.0, "peer")
    machine = json.loads(capsys.readouterr().out)["machine"]
    assert machine == record["machine"]
    assert set(machine) == {"cpu", "simd", "cores", "torch", "mkl", "onednn", "threads"}
    assert machine["torch"] == torch.__version__ and machine["threads"] == torch.get_num_threads()
    assert machine["mkl"] == torch.backends.mkl.is_available() and isinstance(machine["simd"], list)


def test_describe_machine_names_the_cpu_and_its_simd():
    info = {"cpu": "AMD EPYC", "simd": ["avx2"], "cores": 2, "threads": 2, "torch": "2.13.0+cpu", "mkl": True,
            "onednn": True}
    line = benchlib.describe_machine(info)
    assert "AMD EPYC (avx2; no AVX-512; no AMX), 2 cores, 2 torch thread(s), torch 2.13.0+cpu (MKL, oneDNN)" in line
    xeon = {**info, "cpu": "Intel Xeon", "simd": benchlib.simd_flags(SAPPHIRE), "mkl": False, "onednn": False}
    line = benchlib.describe_machine(xeon)
    assert "avx512f" in line and "amx_bf16" in line and "no AVX-512" not in line and "no MKL/oneDNN" in line
