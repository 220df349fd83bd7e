"""FSDP2 (fully_shard) on 2 gloo CPU ranks: it trains the same weights as one process, its sharded checkpoints
resume (on 2 ranks, or in 1 process), and their consolidated single file gives the sharded model's logits
and translations in a plain single process."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from scratchformer.cli import main
from scratchformer.decoding.spec import Search
from scratchformer.errors import ConfigError
from scratchformer.runs import load_run
from scratchformer.training import fsdp
from scratchformer.training.distributed import DistInfo

STEPS = 4
TOL = 1e-5
WORKER = str(Path(__file__).with_name("fsdp_worker.py"))


def _weights(run: Path, step: int):
    return load_file(str(run / "checkpoints" / f"step-{step:08d}" / "model.safetensors"))


def _max_diff(a, b) -> float:
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_fsdp_trains_resumes_and_consolidates(runs, launcher, capsys):
    runs.start_torchrun_jobs()
    reference = runs.one_process_2b
    half = runs.fsdp_half
    ckpt = half / "checkpoints" / "step-00000002"
    assert sorted(p.name for p in (ckpt / fsdp.SHARDS).iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert not (ckpt / "model.safetensors").exists()  # the shards only: nothing gathered on one rank
    assert [p.name for p in (half / "checkpoints").iterdir() if p.name.startswith(".")] == []  # no temp folders

    run = runs.copy(half, "fsdp_full")
    launcher.torchrun_script(WORKER, str(run), str(STEPS))  # resume from the sharded step-2 checkpoint on 2 ranks
    path = fsdp.consolidate(run)  # the latest: step 4
    assert path == run / "checkpoints" / f"step-{STEPS:08d}" / "model.safetensors"

    # the same weights as 1 process with the 2-rank batch, at the sharded checkpoint and after resuming from it
    assert main(["consolidate", str(half), "--step", "2"]) == 0
    assert '"weights"' in capsys.readouterr().out
    assert _max_diff(_weights(reference, 2), _weights(half, 2)) < TOL
    assert _max_diff(_weights(reference, STEPS), _weights(run, STEPS)) < TOL
    # the best-on-validation file, gathered by the trainer itself, is the consolidated step 4
    assert _max_diff(load_file(str(run / "model.safetensors")), _weights(run, STEPS)) == 0

    # a plain single process reproduces what the sharded model computed
    sharded = torch.load(run / "sharded_outputs.pt", weights_only=False)
    single = load_run(run, weights=path)
    with torch.no_grad():
        logits = single.model(sharded["src"], sharded["tgt_in"])
    torch.testing.assert_close(logits, sharded["logits"], atol=TOL, rtol=0)
    from scratchformer.decoding.greedy import greedy_decode
    from scratchformer.engines import Translator

    greedy = greedy_decode(single.model, sharded["src"], Search(max_output_len=8), return_logits=True)
    assert greedy.tokens == sharded["greedy_tokens"]
    torch.testing.assert_close(greedy.logits, sharded["greedy_logits"], atol=TOL, rtol=0)
    translator = Translator.from_model(single.model, single.src_tok, single.tgt_tok)
    assert translator.translate(sharded["sources"], beam=1) == sharded["hyps"]


def test_sharded_checkpoint_resumes_in_one_process(runs, launcher):
    """DCP reads the 2 shards into an unsharded model and optimiser; accum_steps=2 keeps the update size."""
    run = runs.copy(runs.fsdp_half, "fsdp_then_one")
    proc = launcher.single(run, "--resume", "accum_steps=2")
    assert "checkpoint written with world size 2, resuming with 1" in proc.stdout + proc.stderr
    assert _max_diff(_weights(runs.one_process_2b, STEPS), _weights(run, STEPS)) < TOL


def test_fsdp_without_fully_shard_names_the_torch_version(monkeypatch):
    import torch.distributed.fsdp

    monkeypatch.delattr(torch.distributed.fsdp, "fully_shard")
    with pytest.raises(ConfigError, match=r"FSDP needs torch >= 2\.6 \(fully_shard\); this is torch "):
        fsdp.shard_model(torch.nn.Linear(2, 2), DistInfo(0, 2))


def test_a_weight_tied_across_a_layer_boundary_is_refused():
    from scratchformer.config import ModelConfig
    from scratchformer.model import build_model

    model = build_model(ModelConfig.preset("tiny", d_model=32, src_vocab_size=20, tgt_vocab_size=20))
    assert fsdp.tied_names(model) == {"tgt_embed.token.weight", "generator.proj.weight"}  # tied at the root: fine
    model.encoder.layers[0].feed_forward.w_1.weight = model.tgt_embed.token.weight
    with pytest.raises(ConfigError, match="tied to a parameter of encoder.layers.0"):
        fsdp.shard_model(model, DistInfo(0, 2))


def test_consolidate_explains_a_run_without_shards(runs, capsys):
    assert main(["consolidate", str(runs.one_process_2b)]) == 2
    assert "no sharded (FSDP) checkpoint" in capsys.readouterr().err
