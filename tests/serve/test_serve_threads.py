"""serve's torch threads without --threads: every core but one (the HTTP server, the batcher and the tokenizers keep
it); OMP_NUM_THREADS, where set, and one core keep torch's own choice; --threads always wins. No timing here:
benchmarks/bench_serve.py measured why (docs/serving.md)."""

import torch

from scratchformer.cli import serve_cmd


def test_every_core_but_one_unless_omp_num_threads_or_one_core_says_otherwise(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    assert serve_cmd.default_threads() == 3
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert serve_cmd.default_threads() is None
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert serve_cmd.default_threads() is None


def test_cmd_serve_sets_the_default_and_a_given_threads_wins(monkeypatch):
    import scratchformer.cli.common as common
    import scratchformer.serve as serve

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    seen = []
    monkeypatch.setattr(common, "set_threads", seen.append)  # cmd_serve imports it from there at call time
    monkeypatch.setattr(serve, "serve", lambda *a, **k: 0)
    from scratchformer.cli import build_parser

    args = build_parser().parse_args(["serve", "models/en-zh"])
    assert serve_cmd.cmd_serve(args) == 0 and seen == [7]
    args.threads = 2
    assert serve_cmd.cmd_serve(args) == 0 and seen == [7, 2]
