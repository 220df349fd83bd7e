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


class CheckpointError(ScratchformerError):
    """A run directory or checkpoint that is missing files or does not match the config."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file that would run code when loaded (a pickle with foreign globals): refused, and never a
    reason to fall back quietly to an older checkpoint."""


class CheckpointWriteError(CheckpointError, OSError):
    """A save that failed (full disk, no permission): one line naming the file; the previous one is intact.
    Also an OSError, so callers that catch write failures keep working."""
