"""The reference engine: our own search on PyTorch (decoding/search.py), with every decoding option."""

from __future__ import annotations

from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.search import TorchSearch
from scratchformer.runs import Run


class Backend(TorchSearch):
    """The run's model, its ensemble members (decoding.json's or --ensemble's) and, with int8, both quantised."""

    def __init__(self, run: Run, options: DecodingOptions, **settings: Any) -> None:
        super().__init__(run.model, run.members, int8=options.int8)
