"""experiments/paper-to-llama/paper_to_llama.py's core on a micro budget: a record per variant, equal parameters,
resumable."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORDS = "the cat sat on a mat while the dog ran over hills and rivers to find its old friend".split()


def _script():
    """experiments/paper-to-llama/paper_to_llama.py as a module."""
    path = ROOT / "experiments" / "paper-to-llama" / "paper_to_llama.py"
    spec = importlib.util.spec_from_file_location("paper_to_llama", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Every variant, one seed, 5 steps on a small text file (each line served as train and valid)."""
    ptl = _script()
    tmp = tmp_path_factory.mktemp("ptl")
    corpus = tmp / "text.txt"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(4 + i % 9)) for i in range(60)]
    corpus.write_text("\n".join(lines) + "\n")
    budget = dict(corpus=str(corpus), train_len=8, steps=5, max_tokens=128, vocab=300, warmup=2, lr_factor=1.0)
    records = tmp / "records.jsonl"
    rows = ptl.measure(list(ptl.VARIANTS), [1], budget, records, tmp / "runs")
    return ptl, budget, records, rows


def test_one_record_per_variant_with_the_fields(measured):
    ptl, _, records, rows = measured
    assert [r["variant"] for r in rows] == list(ptl.VARIANTS)
    assert len(records.read_text().splitlines()) == len(ptl.VARIANTS)
    for r in rows:
        assert r["steps"] == 5 and r["valid_ppl"] > 1 and r["train_tokens_per_s"] > 0
        assert r["valid_ppl"] == pytest.approx(2.718281828 ** r["valid_nll"], rel=1e-2)
        assert r["kv_bytes_per_token"] == r["kv_bytes_per_token_cache"]  # closed form = the KVCache's nbytes
        ext = r.get("extrapolation")
        assert (ext is not None) == (r["variant"] in ptl.POSITION_VARIANTS)
        if ext:
            assert ext["long_texts"] > 0 and ext["nll_0_L"] > 0 and ext["nll_L_2L"] > 0
    kv = {r["variant"]: r["kv_bytes_per_token"] for r in rows}
    assert kv["baseline"] == 2 * 2 * 4 * 32 * 4  # 2 (K, V) * layers * heads * d_head * fp32
    assert kv["gqa"] == kv["baseline"] // 2  # n_kv_heads = n_heads / 2


def test_parameter_counts_within_five_percent_of_the_baseline(measured):
    _, _, _, rows = measured
    params = {r["variant"]: r["params"] for r in rows}
    for name, n in params.items():
        assert abs(n - params["baseline"]) / params["baseline"] < 0.05, (name, n, params["baseline"])
    assert {r["variant"]: r["model"]["d_ff"] for r in rows}["swiglu"] == round(512 * 2 / 3)


def test_a_rerun_skips_what_is_measured(measured):
    ptl, budget, records, rows = measured
    before = records.read_text()
    again = ptl.measure(list(ptl.VARIANTS), [1], budget, records, Path("/nonexistent"))  # would fail if it trained
    assert records.read_text() == before and again == rows
    assert "| gqa |" in ptl.table(again) and json.loads(before.splitlines()[0])["variant"] == "baseline"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
