"""The names of the files in a run directory, spelled once (runs/layout.py draws the folder and says what each
holds). Everything else imports these: `training/`, `cli/` and `engines/` never spell a run file's name."""

from __future__ import annotations

CONFIG = "config.json"  # ModelConfig
TRAIN_CONFIG = "train_config.json"  # TrainConfig
TOKENIZER_SRC, TOKENIZER_TGT = "tokenizer_src.json", "tokenizer_tgt.json"
WEIGHTS = "model.safetensors"  # also the weights inside checkpoints/step-N/
METRICS = "metrics.jsonl"
METRICS_BASE = "metrics-base.jsonl"  # a shipped model's first phase, before fine-tuning (its validation losses)
CURVE = "curve.png"
CHECKPOINTS = "checkpoints"
LATEST = "latest"  # checkpoints/latest: the name of the newest complete checkpoint
AVERAGED = "averaged.safetensors"
README_JSON = "README.json"
DECODING_FILE = "decoding.json"
EXPORT = "export"
MARKER, LOCK = ".scratchformer-run", ".lock"
TRAINER_TENSORS, TRAINER_JSON, LEGACY_STATE = "trainer_state.safetensors", "trainer_state.json", "trainer_state.pt"
STEP_PREFIX = "step-"
SHARDS = "dcp"  # sub-folder of checkpoints/step-N/ holding an FSDP run's DCP shards and their .metadata

# What `scratchformer train` writes at the top of a run directory: its --overwrite deletes these and nothing else.
TRAIN_ENTRIES = (CONFIG, TRAIN_CONFIG, TOKENIZER_SRC, TOKENIZER_TGT, WEIGHTS, METRICS, CURVE, CHECKPOINTS, AVERAGED,
                 README_JSON, DECODING_FILE, EXPORT, MARKER)


def step_name(step: int) -> str:
    """checkpoints/step-00001000: zero-padded, so that names sort by step."""
    return f"{STEP_PREFIX}{step:08d}"
