"""torchrun worker for test_fsdp.py: resume an FSDP run to `max_steps`, then record what the sharded model
computes (teacher-forced logits of a few training pairs, greedy decoding's per-step logits on the KV cache,
translated texts) for the single-process side of
the test to compare with.

    torchrun --nproc-per-node 2 tests/distributed/fsdp_worker.py RUN_DIR MAX_STEPS
"""

import sys
from pathlib import Path

import torch

from scratchformer.config import TrainConfig
from scratchformer.data.corpus import load_pairs
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.engines import Translator
from scratchformer.training import distributed as dist_utils
from scratchformer.training.fsdp import is_sharded, root_unsharded
from scratchformer.training.trainer import Trainer

N_PROBE = 6


def main(run: Path, max_steps: int) -> None:
    cfg = TrainConfig.load(run / "train_config.json")
    cfg.max_steps = max_steps
    trainer = Trainer(cfg, run, resume=True, quiet=True)
    try:
        trainer.train()
        assert is_sharded(trainer.model), "the trainer did not shard the model"
        batch = trainer._collate(trainer.train_examples[:N_PROBE])
        sources = [s for s, _ in load_pairs(cfg.corpus, "train")[:N_PROBE]]
        trainer.model.eval()
        with torch.no_grad():
            logits = trainer.train_model(batch["src"], batch["tgt_in"])  # (B, L_tgt, V), through FSDP's hooks
            with root_unsharded(trainer.model):
                greedy = greedy_decode(trainer.model, batch["src"], Search(max_output_len=8), return_logits=True)
                hyps = Translator.from_model(trainer.model, trainer.src_tok, trainer.tgt_tok).translate(sources, beam=1)
        if trainer.dist.is_main:
            outputs = {"src": batch["src"], "tgt_in": batch["tgt_in"], "logits": logits, "sources": sources,
                       "hyps": hyps, "greedy_tokens": greedy.tokens, "greedy_logits": greedy.logits}
            torch.save(outputs, run / "sharded_outputs.pt")
    finally:
        dist_utils.cleanup(trainer.dist)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
