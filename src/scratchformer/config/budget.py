"""The output length budget, one rule for every search, engine and estimate (the paper, section 6.1: "maximum output
length to input length + 50"):

    output_budget(src_len, max_output_len, max_positions) -> most tokens a sentence may emit, EOS not counted

src_len counts the source ids the model reads, </s> included. The torch search (decoding/common.py), the
CTranslate2 and ONNX engines, serve's request cost and DecodingOptions' memory check all call it.
"""

from __future__ import annotations

PAPER_EXTRA_LEN = 50  # section 6.1: "maximum output length to input length + 50"


def output_budget(src_len: int, max_output_len: int | None, max_positions: int) -> int:
    """max_output_len when given, else src_len + 50; never above the model's positions (max_positions)."""
    budget = src_len + PAPER_EXTRA_LEN if max_output_len is None else max_output_len
    return min(budget, max_positions)
