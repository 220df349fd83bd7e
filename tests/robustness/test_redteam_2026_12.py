"""Issue 35, the red team of December 2026: loading models and files, silently wrong results, memory and time.

Deep JSON in every file a user can hand us, GGUF metadata (tests/interop/test_gguf_metadata.py), chat templates,
`report` on damaged metrics and README.json, a damaged tokenizer.json, `chat` on invalid UTF-8, rope_scaling's
older key, model overrides checked before anything is written, and the bounds on --upsample and bootstrap
resamples. Each case is one ScratchformerError line (or a clean skip), never a traceback, a hang or a run lost.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from scratchformer.config import ModelConfig, TrainConfig
from scratchformer.errors import CheckpointError, ConfigError, ScratchformerError

from .conftest import SRC, assert_one_line_error, cli

DEEP = "[" * 100_000  # json.loads: RecursionError
DEEP_OBJECT = '{"a": ' * 50_000


# -- deep JSON --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT])
def test_a_deep_run_config_json_is_one_config_error(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError, match="config.json.*nested deeper"):
        ModelConfig.load(tmp_path / "config.json")


def test_a_deep_decoding_json_train_config_and_config_flag_are_one_config_error(tmp_path):
    from scratchformer.config import DecodingOptions
    from scratchformer.training.launch import read_config_file

    (tmp_path / "deep.json").write_text(DEEP)
    for read in (lambda path: DecodingOptions.load(path, "model.safetensors"), TrainConfig.load, read_config_file):
        with pytest.raises(ConfigError, match="deep.json"):
            read(tmp_path / "deep.json")


def test_a_deep_tokenizer_file_is_one_tokenizer_error(tmp_path):
    from scratchformer.data.tokenizers import TokenizerError, load_tokenizer

    (tmp_path / "tokenizer_src.json").write_text(DEEP)
    with pytest.raises(TokenizerError, match="tokenizer_src.json.*nested deeper"):
        load_tokenizer(tmp_path / "tokenizer_src.json")


def test_a_deep_resume_state_is_one_checkpoint_error(tmp_path):
    from scratchformer.training.checkpoint import TRAINER_JSON, load_trainer_state

    (tmp_path / TRAINER_JSON).write_text(DEEP)
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_trainer_state(tmp_path)


def test_a_deep_hugging_face_config_is_one_config_error(tmp_path):
    from scratchformer.interop.huggingface import from_pretrained
    from scratchformer.interop.pretrained import is_pretrained

    (tmp_path / "config.json").write_text(DEEP)
    assert is_pretrained(tmp_path) is False
    with pytest.raises(ConfigError, match="config.json"):
        from_pretrained(tmp_path)


def test_a_deep_override_value_is_one_config_error():
    from scratchformer.cli.common import parse_overrides

    with pytest.raises(ConfigError, match="rope_scaling"):
        parse_overrides(["rope_scaling=" + DEEP])


def test_a_deep_jsonl_input_line_is_one_line(toy_run):
    line = b'{"src": "hello"}\n' + DEEP.encode() + b"\n"
    assert_one_line_error(cli("translate", str(toy_run), "--input-format", "jsonl", stdin=line), "line 2")


# -- chat templates ---------------------------------------------------------------------------------------------
def _lm(template):
    from scratchformer.interop.pretrained import PretrainedLM

    return PretrainedLM(model=None, tokenizer=None, chat_template=template, source="tiny.gguf")


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("template", "needle"), [
    ("{% for m in messages %}{{ m.content }}", "not valid Jinja"),
    ("{% if messages[0].role == 'user' %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}",
     "Conversation roles must alternate"),
    ("{{ no_such_function() }}", "no_such_function"),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "unsafe"),
])
def test_template_errors_are_one_config_error(template, needle):
    with pytest.raises(ConfigError, match="tiny.gguf") as info:
        _lm(template).chat_prompt(HI)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_transformers_template_globals_are_there():
    text = _lm("{{ strftime_now('%Y') }}|{{ messages|tojson }}{% for m in messages %}{% break %}{% endfor %}")
    year, rest = text.chat_prompt([{"role": "user", "content": "héllo"}]).split("|")
    assert year.isdigit() and len(year) == 4
    assert rest == '[{"role": "user", "content": "héllo"}]'  # transformers' tojson keeps non-ASCII text


@pytest.mark.parametrize("named", [
    [{"name": "tool_use", "template": "TOOLS"}, {"name": "default", "template": "{{ messages[0].content }}!"}],
    {"default": "{{ messages[0].content }}!", "rag": "RAG"},
])
def test_named_templates_use_the_default_one(named):
    assert _lm(named).chat_prompt(HI) == "hi!"


def test_named_templates_without_a_default_are_one_line():
    with pytest.raises(ConfigError, match="no 'default'"):
        _lm([{"name": "rag", "template": "x"}]).chat_prompt(HI)


def test_nested_huge_ranges_stop_at_once():
    """Today's sandbox allows range(100000): nested, 10^10 steps. Run apart so a hang fails instead of blocking."""
    code = textwrap.dedent("""
        from scratchformer.interop.pretrained import PretrainedLM
        from scratchformer.errors import ConfigError
        lm = PretrainedLM(None, None, "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                                      "{% endfor %}")
        try:
            lm.chat_prompt([{"role": "user", "content": "hi"}])
        except ConfigError as e:
            print(e)
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        pytest.fail("the template still ran after 120 s")
    assert "range of 100,000 numbers" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("template", [
    "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",  # each range allowed
    "{% set l = range(5000)|list %}{% for i in l %}{% for j in l %}{% endfor %}{% endfor %}",  # no call inside
])
def test_slow_templates_are_stopped(template, monkeypatch):
    from scratchformer.interop import chat_template

    monkeypatch.setattr(chat_template, "RENDER_SECONDS", 0.2)
    with pytest.raises(ConfigError, match="ran longer than"):
        _lm(template).chat_prompt(HI)


@pytest.mark.parametrize(("template", "needle"), [
    ("{{ 'x' * 1000000000 }}", "repeated"),
    ("{{ 2 ** 100000000 }}", "bits"),
    ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "built"),
    ("{% for i in range(10000) %}{{ 'y' * 200 }}{% endfor %}", "output"),
])
def test_templates_that_would_eat_memory_are_stopped(template, needle):
    with pytest.raises(ConfigError, match=needle):
        _lm(template).chat_prompt(HI)


# -- a Hugging Face folder: damaged tokenizer.json, named templates, chat on invalid UTF-8 --------------------------
@pytest.fixture
def llama_folder(tmp_path):
    """A tiny Llama folder of ours: config.json, model.safetensors, a word-level tokenizer.json and a template."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from scratchformer.interop.huggingface import save_pretrained
    from scratchformer.model import build_model

    torch.manual_seed(0)
    words = ["<unk>", "<s>", "</s>", "hi", "there", "user", "assistant"]
    config = ModelConfig.preset("llama-tiny", tgt_vocab_size=len(words), src_vocab_size=len(words), d_model=32,
                                d_ff=48, n_decoder_layers=1, max_len=64, pad_id=0)
    folder = save_pretrained(build_model(config).eval(), tmp_path / "llama")
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TURNS}))
    return folder


TURNS = "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}assistant"


def test_a_damaged_tokenizer_json_is_one_config_error(llama_folder):
    from scratchformer.interop.pretrained import load_lm

    (llama_folder / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"')
    with pytest.raises(ConfigError, match="tokenizer.json cannot be read"):
        load_lm(llama_folder)


def test_a_folder_with_named_chat_templates_chats(llama_folder):
    from scratchformer.interop.pretrained import load_lm

    named = [{"name": "tool_use", "template": "x"}, {"name": "default", "template": TURNS}]
    (llama_folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": named}))
    assert load_lm(llama_folder).chat_prompt(HI) == "user hi assistant"


def test_chat_on_invalid_utf8_is_one_line_as_generate(llama_folder):
    result = cli("chat", str(llama_folder), "--max-new-tokens", "2", "--set", "temperature=0",
                 stdin=b"hi there\nhi \xff there\n", timeout=240)
    assert_one_line_error(result, "stdin line 2 is not valid UTF-8")


# -- report -----------------------------------------------------------------------------------------------------
def test_metrics_lines_that_are_not_records_are_skipped(tmp_path):
    from scratchformer.runs.metrics import read_records

    good = [{"kind": "train", "step": 1, "loss": 2.0}, {"kind": "valid", "step": 2, "valid_loss": 1.5, "bleu": None}]
    lines = [json.dumps(good[0]), "[1, 2, 3]", '"text"', '{"kind": "train", "step": "3", "loss": 1}',
'{"kind": "valid", "step": 5, "valid_loss": [1]}', DEEP, "{torn",
             json.dumps(good[1])]
    (tmp_path / "metrics.jsonl").write_bytes("\n".join(lines).encode() + b"\n\xff\xfe\n")
    assert read_records(tmp_path) == good


def test_metrics_are_read_in_bounded_memory(tmp_path):
    """50,000 train records and 500 valid ones, read with 100 points per kind: each curve is thinned evenly to at
    most 2 x 100 points (+ the last), in step order; the file is never held whole (a 300 MB log took 3 GB)."""
    from scratchformer.runs import metrics

    with open(tmp_path / "metrics.jsonl", "w") as f:
        for step in range(1, 50_001):
            f.write(json.dumps({"kind": "train", "step": step, "loss": 1.0 / step}) + "\n")
            if step % 100 == 0:
                f.write(json.dumps({"kind": "valid", "step": step, "valid_loss": 1.0}) + "\n")
    records = metrics.read_records(tmp_path, limit=100)
    train = [r["step"] for r in records if r["kind"] == "train"]
    valid = [r["step"] for r in records if r["kind"] == "valid"]
    assert 100 <= len(train) <= 201 and 100 <= len(valid) <= 201
    assert train[0] == 1 and train[-1] == 50_000 and valid[-1] == 50_000
    assert train == sorted(train) and len(set(train)) == len(train)
    gaps = {b - a for a, b in zip(train[:-2], train[1:-1])}
    assert len(gaps) == 1  # evenly thinned (the last point aside)


def test_a_huge_metrics_line_is_skipped_not_held(tmp_path, monkeypatch):
    from scratchformer.runs import metrics

    monkeypatch.setattr(metrics, "MAX_LINE", 1000)
    record = {"kind": "train", "step": 1, "loss": 1.0}
    (tmp_path / "metrics.jsonl").write_text('{"kind": "train", "step": 0, "loss": "' + "x" * 5000 + '"}\n'
                                            + json.dumps(record) + "\n")
    assert metrics.read_records(tmp_path) == [record]


def test_readme_json_that_is_a_list_is_one_config_error(tmp_path):
    from scratchformer.evaluation.report import stored_scores

    (tmp_path / "README.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="README.json.*JSON object"):
        stored_scores(SimpleNamespace(path=tmp_path))


def test_readme_json_with_a_null_chrf_is_a_row_without_chrf(tmp_path):
    from scratchformer.evaluation.report import stored_scores
    from scratchformer.inspect.report import summary

    (tmp_path / "README.json").write_text(json.dumps({"test": {
        "beam1": {"bleu": 20.5, "chrf": None, "sentences": 10}, "beam4": {"bleu": "high"}, "beam5": [1]}}))
    rows = stored_scores(SimpleNamespace(path=tmp_path))
    assert [(r["setting"], r["bleu"], r["chrf"]) for r in rows] == [("greedy", 20.5, None)]
    run = SimpleNamespace(model_config=ModelConfig.preset("tiny"),
                          model=SimpleNamespace(num_parameters=lambda: 1_000_000))
    assert "test BLEU 20.50, chrF not stored" in summary(run, [], {"note": "", "rows": rows})


def test_report_on_damaged_metrics_and_a_null_chrf_writes_the_page(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('[1, 2]\n{"kind": "train", "step": 13}\n{"kind": "valid", "step": 13, "valid_loss": null}\n')
    (run / "README.json").write_text(json.dumps({"test": {"beam1": {"bleu": 1.0, "chrf": None, "sentences": 3}}}))
    result = cli("report", str(run), "--out", str(tmp_path / "report.html"), "--samples", "1", timeout=300)
    assert result.code == 0, result.err[-3000:]
    assert "chrF not stored" in (tmp_path / "report.html").read_text(encoding="utf-8")


# -- silently wrong ---------------------------------------------------------------------------------------------
def test_rope_scaling_older_type_key_scales():
    from scratchformer.model.rope import rope_frequencies

    config = ModelConfig.preset("llama-tiny", rope_scaling={"type": "linear", "factor": 4.0})
    assert config.rope_scaling == {"rope_type": "linear", "factor": 4.0}
    torch.testing.assert_close(rope_frequencies(config.head_dim_k, config.rope_theta, config.rope_scaling),
                               rope_frequencies(config.head_dim_k, config.rope_theta) / 4.0)
    with pytest.raises(ConfigError, match="keep one"):
        ModelConfig.preset("llama-tiny", rope_scaling={"type": "linear", "rope_type": "llama3", "factor": 4.0})


@pytest.mark.parametrize("model", [{"dropout": 1.5}, {"d_model": 100, "n_heads": 3}, {"norm_placement": "mid"},
                                   {"rope_scaling": {"rope_type": "yarn"}, "positions": "rope"}])
def test_model_overrides_meet_the_model_checks_in_train_config(model):
    with pytest.raises(ConfigError, match="model override"):
        TrainConfig(model=model)


def test_model_overrides_leave_vocabulary_ids_to_the_real_vocabulary():
    """pad_id=7000 lies outside the demo preset's own vocabulary: the config takes it (the tokenizers' sizes are not
    known yet) and keeps it, and the real vocabulary decides: one that holds id 7000 takes it, a smaller one refuses."""
    config = TrainConfig(model={"pad_id": 7000})
    assert config.model == {"pad_id": 7000}
    assert ModelConfig.preset(config.preset, **config.model, src_vocab_size=8000, tgt_vocab_size=8000).pad_id == 7000
    with pytest.raises(ConfigError, match="pad_id=7000 is outside the vocabulary"):
        ModelConfig.preset(config.preset, **config.model, src_vocab_size=4000, tgt_vocab_size=4000)


def test_a_bad_model_override_fails_before_overwrite_deletes_the_run(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    before = sorted(p.name for p in run.iterdir())
    result = cli("train", "--recipe", "toy", "--out", str(run), "--overwrite", "dropout=1.5", "--max-steps", "2")
    assert_one_line_error(result, "dropout must be in [0, 1)")
    assert sorted(p.name for p in run.iterdir()) == before


@pytest.mark.parametrize("override", ["lr_factor=-1", "lr_factor=0"])
def test_lr_factor_as_an_override_is_refused_like_the_flag(override, tmp_path):
    assert_one_line_error(cli("train", "--recipe", "toy", "--out", str(tmp_path / "r"), override), "lr_factor")
    with pytest.raises(ConfigError, match="lr_factor"):
        TrainConfig(lr_factor=float(override.split("=")[1]))


# -- memory and time --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["gimp=99999999999", "gimp=101", "gimp=²"])
def test_upsample_is_bounded(spec):
    from scratchformer.config.train import upsample_factors

    with pytest.raises(ConfigError, match="upsample="):
        upsample_factors(spec)
    assert upsample_factors("gimp=100,django=1") == {"gimp": 100, "django": 1}


def test_bootstrap_resamples_are_bounded():
    from scratchformer.evaluation.metrics import bleu

    with pytest.raises(ScratchformerError, match="10,000"):
        bleu(["a b c"], ["a b c"], n_bootstrap=10_001)


def test_evaluate_confidence_n_is_bounded(toy_run):
    result = cli("evaluate", str(toy_run), "--confidence", "--confidence-n", "1000000000", "--limit", "2",
                 timeout=120)
    assert_one_line_error(result, "--confidence-n", "10,000")


def test_translate_jsonl_still_reads_good_lines(toy_run):
    result = cli("translate", str(toy_run), "--input-format", "jsonl", stdin=b'{"src": "hello"}\n')
    assert result.code == 0 and len(result.out.splitlines()) == 1, result.err[-2000:]

