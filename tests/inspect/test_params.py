"""inspect/params.py: Table 3's parameter column beside ours (`table3`, what `scratchformer params --table3` prints)."""

import pytest

from scratchformer.config import PAPER_PARAMS_M
from scratchformer.inspect.params import table3


@pytest.mark.slow  # builds every Table 3 model (paper-big has 214M parameters): ~20 s on a 2-core CPU
def test_table3_has_every_paper_row_and_our_differences_track_the_papers():
    rows = table3()
    assert [r["preset"] for r in rows] == list(PAPER_PARAMS_M)
    base = rows[0]
    assert base["preset"] == "paper-base" and base["ours_M"] == 63.12 and base["ours_minus_base_M"] == 0.0
    for r in rows:
        assert r["paper_M"] == PAPER_PARAMS_M[r["preset"]]
        # the paper rounds to millions: our differences from the base row agree to within 4M (d=1024: 100.8 vs 103)
        assert abs(r["ours_minus_base_M"] - r["paper_minus_base_M"]) < 4, r
        assert abs(r["closed_form_M"] - r["ours_M"]) < 0.5, r  # biases and norms are a fraction of a million
