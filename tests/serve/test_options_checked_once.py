"""Issue 43, "checked once": a DecodingOptions checks itself once when it is made (`check`, from __post_init__), and
once more against the model and the backend when a Translator is made (`check_for`, called by Translator.__init__
only); nothing else checks an option. Counted from the flags to a translation, and from a serve request to its
answer: `beam` followed from the flag to the search."""

from __future__ import annotations

import json

from scratchformer.cli import build_parser
from scratchformer.config import decoding
from scratchformer.config.decoding_flags import from_args
from scratchformer.engines import Translator
from scratchformer.runs import load_decoding, load_run
from scratchformer.serve import Settings
from scratchformer.serve.decoder import RunTranslator

from .conftest import asgi, run_service


def counting(monkeypatch) -> dict[str, int]:
    """Counts of DecodingOptions.check and .check_for calls (each still runs)."""
    calls = {"check": 0, "check_for": 0}
    for name in calls:
        real = getattr(decoding.DecodingOptions, name)

        def counted(self, *args, real=real, name=name, **kwargs):
            calls[name] += 1
            return real(self, *args, **kwargs)

        monkeypatch.setattr(decoding.DecodingOptions, name, counted)
    return calls


def test_translate_from_flags_checks_each_options_once_and_the_model_once(monkeypatch, tiny_run):
    args = build_parser().parse_args(["translate", str(tiny_run), "hello", "--beam", "2", "--set", "alpha=1.0"])
    run = load_run(tiny_run)
    calls = counting(monkeypatch)
    options = from_args(load_decoding(tiny_run), args)  # two options made: the file's (or the default), the flags'
    assert calls == {"check": 2, "check_for": 0} and options.beam == 2
    translator = Translator(run, options)
    assert calls == {"check": 2, "check_for": 1}  # the Translator checks against model and backend, once
    assert translator.translate(["hello"]) and calls == {"check": 2, "check_for": 1}  # the search checks nothing


def test_a_serve_request_is_one_pick_and_one_translator(monkeypatch, tiny_run):
    run = load_run(tiny_run)
    calls = counting(monkeypatch)
    translator = RunTranslator(run, {"beam": 3})
    assert calls == {"check": 2, "check_for": 1}  # the flags over the file, then n_best 1 / no alignment; a Translator
    settings = Settings("en", "zh", batch_wait_ms=0)
    body = json.dumps({"q": "hello", "beam": 2, "alternatives": 1}).encode()
    out = run_service(translator, settings, lambda app: asgi(app, "POST", "/translate", body,
                                                             content_type="application/json"))
    assert out.status == 200 and len(out.body["alternatives"]) == 1, out
    assert calls == {"check": 3, "check_for": 2}  # the request's beam and n-best: one pick, one Translator
    out = run_service(translator, settings, lambda app: asgi(app, "POST", "/translate", body,
                                                             content_type="application/json"))
    assert out.status == 200 and calls == {"check": 3, "check_for": 2}  # the same options again: made once
