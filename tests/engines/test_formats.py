"""The checks every export shares (export/formats.py), on a stand-in format module: what --quantization each
format takes, and that a refusal comes before --out is touched."""

import types

import pytest

from scratchformer.errors import ConfigError
from scratchformer.export import formats


@pytest.fixture
def fake_format(monkeypatch, tmp_path):
    written = []
    module = types.SimpleNamespace(QUANTIZATIONS=("float32", "int8"), check_expressible=lambda run: None,
                                   export=lambda run, out, quantization=None: written.append(quantization))
    monkeypatch.setattr(formats, "load_module", lambda table, name, what, room: module)
    monkeypatch.setattr(formats, "load_run", lambda run_dir: types.SimpleNamespace(members=[]))  # a Run of one model
    monkeypatch.setitem(formats.WRITES, "fake", frozenset())  # the names it writes: none
    return module, written


def test_no_quantization_means_the_formats_default(fake_format, tmp_path):
    _, written = fake_format
    formats.export_run(tmp_path / "run", "fake", tmp_path / "out")
    formats.export_run(tmp_path / "run", "fake", tmp_path / "out2", quantization="int8")
    assert written == [None, "int8"]


def test_a_quantization_the_format_lacks_is_refused_before_out_exists(fake_format, tmp_path):
    module, written = fake_format
    del module.QUANTIZATIONS  # a format that declares none writes float32 only
    with pytest.raises(ConfigError, match="--quantization int8: format fake writes float32 weights"):
        formats.export_run(tmp_path / "run", "fake", tmp_path / "out", quantization="int8")
    assert not (tmp_path / "out").exists() and written == []


def test_the_onnx_and_ctranslate2_formats_take_int8():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ctranslate2")
    from scratchformer.export import ctranslate2, onnx

    assert "int8" in onnx.QUANTIZATIONS and "int8" in ctranslate2.QUANTIZATIONS
