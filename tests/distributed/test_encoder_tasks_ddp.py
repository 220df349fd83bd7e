"""The encoder tasks (BERT-style MLM pre-training, then sentence classification) under torchrun: 2 gloo ranks
train, validate and save; only rank 0 writes and reports."""

import json
import random

import pytest

WORDS = "red blue green cat dog bird runs sees big small".split()


@pytest.mark.slow  # ~37 s; DDP is in test_ddp.py and MLM -> classify in tests/tasks, both in `make test`
def test_mlm_then_classify_on_two_ranks(launcher, tmp_path):
    rng = random.Random(0)
    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(" ".join(rng.choice(WORDS) for _ in range(3 + i % 5)) + ("\tpos\n" if i % 2 else
                                                                                        "\tneg\n") for i in range(64)))
    common = ["--corpus", str(corpus), "--preset", "bert-tiny", "tgt_tokenizer=word", "--max-steps", "4",
              "max_tokens=64", "warmup=2", "eval_every=2", "save_every=2", "--no-test",
              "--quiet", "--json", "device=cpu"]
    for task, extra in (("mlm", []), ("classify", [f"init={tmp_path / 'mlm'}"])):
        proc = launcher.torchrun_script("-m", "scratchformer", "train", "--task", task, "--out", str(tmp_path / task),
                                        *common, *extra, timeout=240)  # fails with the ranks' output if one fails
        summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"run_dir"')]
        assert len(summaries) == 1 and summaries[0]["step"] == 4, proc.stdout  # rank 0 alone reports
        records = [json.loads(x) for x in (tmp_path / task / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records if r["kind"] == "valid"] == [2, 4]
        assert sorted(p.name for p in (tmp_path / task / "checkpoints").iterdir() if p.is_dir()) == \
            ["step-00000002", "step-00000004"]
    assert json.loads((tmp_path / "classify" / "config.json").read_text())["labels"] == ["neg", "pos"]
