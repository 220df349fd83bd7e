"""Measured choices (autotune.py) on a fake clock: the rule, the cache, SCRATCHFORMER_AUTOTUNE=0, and
load_run's layout following the measurement with the same outputs. No timing here."""

import json

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, autotune, build_model
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.runs import load_run, save_weights

from .conftest import FakeClock


def _work():
    return lambda: None


def _tuner(tmp_path, busy=False, **seconds) -> tuple[autotune.Tuner, FakeClock]:
    clock = FakeClock(seconds)
    return autotune.Tuner(tmp_path / "cache" / "autotune.json", measure=clock, busy=lambda: busy), clock


@pytest.fixture(autouse=True)
def autotune_on(monkeypatch):
    monkeypatch.setenv(autotune.ENV, "1")


@pytest.mark.parametrize("seconds, expect", [({"a": 1.0, "b": 0.5}, "b"), ({"a": 1.0, "b": 2.0}, "a"),
                                             ({"a": 1.0, "b": 0.95}, "a"), ({"a": 1.0, "b": 0.85, "c": 0.8}, "c")],
                         ids=["faster", "slower", "within-margin", "fastest-of-three"])
def test_the_rule_takes_the_faster_and_keeps_the_default_within_the_margin(tmp_path, seconds, expect):
    assert autotune.pick(seconds, "a") == expect
    tuner, clock = _tuner(tmp_path, **seconds)
    assert tuner.choose("d", [1], {name: _work() for name in seconds}, "a") == expect
    assert len(clock.calls) == len(seconds) * (1 + autotune.REPEATS)  # a warm-up and the repeats, each


def test_min_of_the_repetitions_counts(tmp_path):
    """One slow repetition (a busy machine) does not decide: the minimum does."""
    ticks = iter([9.0, 9.0] + [1.0, 0.5] * autotune.REPEATS)  # warm-ups, then a, b alternating
    tuner = autotune.Tuner(tmp_path / "t.json", measure=lambda name, work: next(ticks), busy=lambda: False)
    assert tuner.choose("d", [], {"a": _work(), "b": _work()}, "a") == "b"


def test_the_cache_serves_a_second_process_and_keys_name_the_machine(tmp_path):
    tuner, clock = _tuner(tmp_path, a=1.0, b=0.5)
    assert tuner.choose("layout", {"shapes": [[4, 4, 1]]}, {"a": _work(), "b": _work()}, "a") == "b"
    again, clock2 = _tuner(tmp_path, a=1.0, b=2.0)  # a fresh tuner on the same file (as a new process)
    assert again.choose("layout", {"shapes": [[4, 4, 1]]}, {"a": _work(), "b": _work()}, "a") == "b"
    assert clock2.calls == []
    data = json.loads((tmp_path / "cache" / "autotune.json").read_text())
    (key, entry), = data["choices"].items()
    decision, cpu, version, threads, shapes = json.loads(key)
    assert (decision, cpu, version, threads) == ("layout", autotune.cpu_name(), torch.__version__,
                                                 torch.get_num_threads())
    assert shapes == {"shapes": [[4, 4, 1]]} and entry["choice"] == "b" and entry["seconds"] == {"a": 1.0, "b": 0.5}
    assert again.choose("layout", {"shapes": [[8, 4, 1]]}, {"a": _work(), "b": _work()}, "a") == "a"  # other shapes
    assert clock2.calls


@pytest.mark.parametrize("content", ["{not json", '{"version": 1, "choices": []}', '["a"]', '{"version": 99}',
                                     "KEY"], ids=["garbage", "wrong-type", "not-a-dict", "other-version",
                                                  "unknown-choice"])
def test_a_corrupt_cache_is_measured_again_and_rewritten(tmp_path, content):
    tuner, clock = _tuner(tmp_path, a=1.0, b=0.5)
    path = tmp_path / "cache" / "autotune.json"
    path.parent.mkdir()
    key = json.dumps(["d", autotune.cpu_name(), torch.__version__, torch.get_num_threads(), []])
    path.write_text(json.dumps({"version": 1, "choices": {key: {"choice": "gone"}}}) if content == "KEY" else content)
    assert tuner.choose("d", [], {"a": _work(), "b": _work()}, "a") == "b"
    assert clock.calls
    assert json.loads(path.read_text())["choices"][key]["choice"] == "b"
    assert [p.name for p in path.parent.iterdir()] == ["autotune.json"]  # no temporary file left


def test_an_unwritable_cache_folder_just_means_no_cache(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    clock = FakeClock({"a": 1.0, "b": 0.5})
    tuner = autotune.Tuner(tmp_path / "file" / "scratchformer" / "autotune.json", measure=clock, busy=lambda: False)
    assert tuner.choose("d", [], {"a": _work(), "b": _work()}, "a") == "b"


def test_a_busy_machine_takes_the_default_for_this_process_and_caches_nothing(tmp_path):
    tuner, clock = _tuner(tmp_path, busy=True, a=1.0, b=0.1)
    assert tuner.choose("d", [], {"a": _work(), "b": _work()}, "a") == "a"
    assert clock.calls == [] and not (tmp_path / "cache" / "autotune.json").exists()
    quiet, clock = _tuner(tmp_path, a=1.0, b=0.1)  # a later, quieter process measures
    assert quiet.choose("d", [], {"a": _work(), "b": _work()}, "a") == "b"


@pytest.mark.parametrize("planted", [-5, "many", 1.5, True, None])
def test_a_count_adds_up_across_processes_starts_again_and_reads_a_damaged_value_as_zero(tmp_path, monkeypatch,
                                                                                      planted):
    """tally / count (the step rule's tokens decoded eagerly): kept on a busy machine too (a count, not a timing)."""
    tuner, _ = _tuner(tmp_path, busy=True)
    assert tuner.count("n", {"s": 1}) == 0
    assert tuner.tally("n", {"s": 1}, 300) == 300
    assert _tuner(tmp_path)[0].tally("n", {"s": 1}, 200) == 500  # a second process adds to it
    assert tuner.count("n", {"s": 2}) == 0  # other shapes: their own count
    assert tuner.tally("n", {"s": 1}, 7, restart=True) == 7 and tuner.count("n", {"s": 1}) == 7
    key = tuner._key("n", {"s": 1})
    path = tmp_path / "cache" / "autotune.json"
    data = json.loads(path.read_text())
    data["choices"][key] = {"count": planted}
    path.write_text(json.dumps(data))
    assert tuner.count("n", {"s": 1}) == 0 and tuner.tally("n", {"s": 1}, 10) == 10
    monkeypatch.setenv(autotune.ENV, "0")
    assert tuner.tally("n", {"s": 1}, 10) == 0 and tuner.count("n", {"s": 1}) == 0


def test_autotune_0_takes_the_default_and_measures_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(autotune.ENV, "0")
    tuner, clock = _tuner(tmp_path, a=1.0, b=0.1)
    assert tuner.choose("d", [], {"a": _work(), "b": _work()}, "a") == "a"
    assert clock.calls == [] and not (tmp_path / "cache").exists()


def test_the_cache_lives_under_xdg_cache_home_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert autotune.default_cache_path() == tmp_path / "xdg" / "scratchformer" / "autotune.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert autotune.default_cache_path() == tmp_path / "home" / ".cache" / "scratchformer" / "autotune.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative value is ignored
    assert autotune.default_cache_path() == tmp_path / "home" / ".cache" / "scratchformer" / "autotune.json"


def _run_dir(tmp_path):
    tmp_path.mkdir()
    tok = train_tokenizer("char", ["abcdefghijklmnopqrstuvwxyz .,"])
    config = ModelConfig.preset("tiny", src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    model = build_model(config).eval()
    config.save(tmp_path / "config.json")
    tok.save(tmp_path / "tokenizer_tgt.json")  # one shared tokenizer
    save_weights(model, tmp_path / "model.safetensors")
    return tmp_path, model


def _column_major(model) -> list[bool]:
    return [not m.weight.is_contiguous() for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize("seconds, column_major", [({"row-major": 1.0, "column-major": 0.5}, True),
                                                   ({"row-major": 1.0, "column-major": 0.95}, False),
                                                   ({"row-major": 1.0, "column-major": 2.0}, False)],
                         ids=["column-major-faster", "within-margin", "row-major-faster"])
def test_load_run_takes_the_measured_layout_with_the_same_outputs(tmp_path, fake_tuner, seconds, column_major):
    clock = fake_tuner(**seconds)
    run_dir, model = _run_dir(tmp_path / "run")
    run = load_run(run_dir)
    assert set(clock.calls) == {"row-major", "column-major"}
    assert set(_column_major(run.model)) == {column_major}
    src, tgt = torch.randint(4, 30, (3, 7)), torch.randint(4, 30, (3, 5))
    with torch.no_grad():
        torch.testing.assert_close(run.model(src, tgt), model(src, tgt), atol=1e-6, rtol=0)


def test_load_run_stays_row_major_with_autotune_off(tmp_path, monkeypatch):
    monkeypatch.setenv(autotune.ENV, "0")
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(tmp_path / "t.json", measure=None))  # never called
    run_dir, _ = _run_dir(tmp_path / "run")
    assert set(_column_major(load_run(run_dir).model)) == {False}
