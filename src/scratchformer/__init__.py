"""scratchformer: "Attention Is All You Need" written by hand, layer by layer, proven equal to the references.

    from scratchformer import ModelConfig, build_model
    model = build_model(ModelConfig.preset("paper-base"))
"""

from typing import Any

from scratchformer.errors import ConfigError, InputError, ScratchformerError

__version__ = "0.1.0"
__all__ = ["ConfigError", "InputError", "ModelConfig", "ScratchformerError", "build_model", "__version__"]


def __getattr__(name: str) -> Any:
    # build_model is imported on first use, not here: it pulls in torch, and `import scratchformer.keras` (the
    # Keras port, a TensorFlow user's install) must not import torch through this package's __init__. ModelConfig
    # too: `scratchformer --version` reads __version__ and nothing else.
    if name == "ModelConfig":
        from scratchformer.config import ModelConfig

        return ModelConfig
    if name == "build_model":
        from scratchformer.model import build_model

        return build_model
    raise AttributeError(f"module 'scratchformer' has no attribute {name!r}")
