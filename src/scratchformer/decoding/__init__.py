"""Decoding on the KV cache: greedy, beam search (GNMT length penalty), sampling; text in, text out."""

from scratchformer.decoding.search import *  # noqa: F401,F403
from scratchformer.decoding.search import __all__  # noqa: F401
