"""scratchformer: "Attention Is All You Need" written by hand, layer by layer, proven equal to the references.

    from scratchformer import ModelConfig, build_model
    model = build_model(ModelConfig.preset("paper-base"))
"""

from scratchformer.config import ModelConfig
from scratchformer.errors import ConfigError, InputError, ScratchformerError
from scratchformer.model import build_model

__version__ = "0.1.0"
__all__ = ["ConfigError", "InputError", "ModelConfig", "ScratchformerError", "build_model", "__version__"]
