"""The errors users see: one clear line that says what was wrong and how to fix it.

The CLI catches `ScratchformerError` and prints its message without a traceback.
Every subclass is also a `ValueError`, so library users can catch the usual type.
"""


class ScratchformerError(ValueError):
    """Base class: bad input, bad config or a bad file, explained in one line."""


class ConfigError(ScratchformerError):
    """A ModelConfig / TrainConfig value that cannot work."""


class InputError(ScratchformerError):
    """A tensor given to the model has the wrong shape, length or token ids."""
