"""The loop's two seams: a Task per job (training/tasks/) and a Parallel per way of spreading the model
(training/parallel.py); and what the loop logs of its speed (tokens/s and model-FLOP utilisation)."""

import math

from scratchformer.config import TASKS, TrainConfig
from scratchformer.inspect.flops import forward_flops
from scratchformer.runs.metrics import read_records
from scratchformer.training import tasks
from scratchformer.training.distributed import DistInfo
from scratchformer.training.parallel import DDP, FSDP, Plain, make_parallel
from scratchformer.training.trainer import Trainer

TOY = dict(corpus="toy", preset="tiny", src_tokenizer="word", tgt_tokenizer="char", warmup=10, max_tokens=512,
           save_every=0, bleu_samples=0, log_every=1, eval_every=0, max_steps=3, model={"dropout": 0.0})


def test_every_task_the_config_accepts_has_a_task_class():
    assert set(tasks.TASKS) == set(TASKS)
    for name, cls in tasks.TASKS.items():
        assert cls.name == name and cls.arch in ("encoder-decoder", "decoder", "encoder")


def test_make_parallel_picks_plain_ddp_or_fsdp():
    assert type(make_parallel(False, DistInfo())) is Plain
    assert type(make_parallel(True, DistInfo())) is Plain  # --fsdp in one process: nothing to shard
    assert type(make_parallel(False, DistInfo(0, 2))) is DDP
    assert type(make_parallel(True, DistInfo(0, 2))) is FSDP
    assert DDP.shard_validation and not FSDP.shard_validation and not Plain.shard_validation


def test_each_logged_update_records_tokens_per_second_and_mfu(tmp_path):
    trainer = Trainer(TrainConfig(**TOY), tmp_path / "run", quiet=True)
    trainer.train()
    records = [r for r in read_records(tmp_path / "run") if r["kind"] == "train"]
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] and math.isfinite(r["mfu"])
    batch = trainer._collate(trainer.train_examples[:4])
    b, ls, lt = trainer.task.batch_shape(batch)
    assert (b, ls, lt) == (4, batch["src"].shape[1], batch["tgt_in"].shape[1])
    assert forward_flops(trainer.model_config, b, ls, lt) > 0
