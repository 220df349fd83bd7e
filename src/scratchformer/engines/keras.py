"""The keras engine (`translate --engine keras`, `evaluate --engine keras`): greedy or beam search with
scratchformer.keras (decode.py) on the Keras model that export/keras.py builds from the run's weights."""

from __future__ import annotations

import os
from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.results import Hyp
from scratchformer.errors import N_, ConfigError
from scratchformer.export.keras import check_expressible, keras_model
from scratchformer.runs import Run

# TensorFlow (Keras' backend) logs a dozen lines on import (oneDNN, CPU instructions, CUDA factories): silenced before
# this engine imports it; a user's own TF_CPP_MIN_LOG_LEVEL is kept
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


class Backend:
    """Our translate semantics on the Keras model (scratchformer/keras/decode.py): beam (1 is greedy), alpha and
    max_output_len, nothing optional (n-best, constraints, prefixes are our own decoder's)."""

    SUPPORTS: frozenset[str] = frozenset()
    models = 1

    def __init__(self, run: Run, options: DecodingOptions | None = None, **settings: Any) -> None:
        if settings:
            raise ConfigError(N_("the keras engine has no setting {name!r}"), name=sorted(settings)[0])
        check_expressible(run)
        self.run = run
        self.model = keras_model(run)

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]:
        """The pipeline's batch: the best hypothesis of each EOS-terminated source."""
        return [[Hyp("", 0.0, tokens)] for tokens in self.search(srcs, options.beam, options.alpha,
                                                                  options.max_output_len)]

    def search(self, src: list[list[int]], beam: int = 4, alpha: float = 0.6,
               max_len: int | None = None) -> list[list[int]]:
        """Token ids of the best hypothesis per source id list (EOS-terminated), greedy for beam 1."""
        from scratchformer.keras.decode import beam_search, greedy_decode  # late: it imports keras (seconds)

        return greedy_decode(self.model, src, max_len) if beam == 1 else beam_search(self.model, src, beam, alpha,
                                                                                       max_len)
