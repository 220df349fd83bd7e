"""The errors users see: one clear line that says what was wrong and how to fix it.

The CLI catches `ScratchformerError` and prints its message without a traceback.
Every subclass is also a `ValueError`, so library users can catch the usual type.

A message is translated where it is shown, not where it is raised: a raise site may pass an English template and
its fields, `ConfigError(N_("unknown preset {name!r}; presets: {presets}"), name=name, presets=...)`. `str(e)` is
the English text filled in (what library users and the tests see); the CLI prints `localized(e, _)`, the template
looked up in the catalog and then filled in. A plain message (no fields) is looked up whole.

`N_` (defined here, the lowest room, so that every room may mark its messages; i18n re-exports it) marks a
template for the catalog: tests/i18n finds every `N_("...")` and every error or warning raised in the rooms, and
fails on one the catalog lacks.
"""

from collections.abc import Callable
from typing import Any


def N_(message: str) -> str:  # noqa: N802 (gettext's own name for it)
    """Mark `message` for the catalog without translating it now (it is translated where it is shown)."""
    return message


class Message(str):
    """A field that is itself English text for the user (marked with N_ where it is written): translated with the
    template, where other fields (paths, names, numbers) are shown as they are."""


class Localizable:
    """A message kept as a template and its fields until it is shown (errors and warnings share it)."""

    template: str
    fields: dict[str, Any]

    def _keep(self, message: Any, fields: dict[str, Any]) -> str:
        self.template, self.fields = (message if isinstance(message, str) else str(message)), fields
        return self.template.format(**fields) if fields else self.template


class Text(Localizable):
    """English text kept as a template and its fields, given as a field of a message (a corpus line's reason):
    `localized` translates it with the message. `str()` and `format()` give the English."""

    def __init__(self, message: str, **fields: Any) -> None:
        self.text = self._keep(message, fields)

    def __str__(self) -> str:
        return self.text

    def __format__(self, spec: str) -> str:
        return format(self.text, spec)


def localized(error: BaseException, translate: Callable[[str], str]) -> str:
    """`error`'s one line through `translate` (i18n's `_`): the template translated, then filled in (a field that
    is itself an error with a template, `ConfigError(N_("{path}: {e}"), path=p, e=e)`, translated the same way).
    English (`str(error)`) for anything else, or when the translation cannot be filled in."""
    template, fields = getattr(error, "template", None), getattr(error, "fields", None)
    if not isinstance(template, str) or not isinstance(fields, dict):
        return translate(str(error))
    fields = {k: translate(v) if isinstance(v, Message) else localized(v, translate) if isinstance(v, Localizable)
              else v for k, v in fields.items()}
    try:
        return translate(template).format(**fields) if fields else translate(template)
    except (KeyError, IndexError, ValueError):
        return str(error)


class ScratchformerError(Localizable, ValueError):
    """Base class: bad input, bad config or a bad file, explained in one line."""

    def __init__(self, message: Any = "", *args: Any, **fields: Any) -> None:
        super().__init__(self._keep(message, fields), *args)


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


class TrainingDiverged(CheckpointError):
    """The loss of an update was nan or inf: training stops before saving anything (raised by training/trainer.py)."""

    def __init__(self, step: int, loss: float, message: str | None = None, **fields: Any) -> None:
        """`message`: a template that may use {loss}, {step} and `fields` (training/checkpoint.py's `diverged`)."""
        super().__init__(message or N_("loss became {loss} at step {step}"), loss=loss, step=step, **fields)
        self.step, self.loss = step, loss


class ScratchformerWarning(Localizable, UserWarning):
    """A warning with a translatable template: `warnings.warn(ScratchformerWarning(N_("..."), x=1))`."""

    def __init__(self, message: Any = "", **fields: Any) -> None:
        super().__init__(self._keep(message, fields))
