"""Configs, a face only: ModelConfig (config/model.py: the architecture, its typed choices, presets, the memory
check), TrainConfig and RECIPES (config/train.py), DecodingOptions (config/decoding.py: a run's own decoding
defaults, decoding.json), and the checks they share (config/fields.py)."""

from scratchformer.config.decoding import MAX_ALPHA, DecodingOptions
from scratchformer.config.fields import check_field_types, read_json, regular_file, reject_unknown_fields
from scratchformer.config.model import (
    ACTIVATIONS,
    ARCHS,
    FFN_KINDS,
    NORM_KINDS,
    NORMS,
    PAPER_PARAMS_M,
    POSITIONS,
    PRESETS,
    RENAMED_FIELDS,
    ModelConfig,
    available_memory,
    check_fits_in_memory,
    human_bytes,
    parameter_bytes,
    upgrade_fields,
)
from scratchformer.config.train import DEVICE_PATTERN, RECIPES, TASKS, TrainConfig

__all__ = [
    "ACTIVATIONS", "ARCHS", "DEVICE_PATTERN", "FFN_KINDS", "MAX_ALPHA", "NORM_KINDS", "NORMS", "PAPER_PARAMS_M",
    "POSITIONS", "PRESETS", "RECIPES", "RENAMED_FIELDS", "TASKS",
    "DecodingOptions", "ModelConfig", "TrainConfig", "available_memory", "check_field_types", "check_fits_in_memory",
    "human_bytes", "parameter_bytes", "read_json", "regular_file", "reject_unknown_fields", "upgrade_fields",
]
