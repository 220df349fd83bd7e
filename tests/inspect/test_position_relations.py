"""Seed 003's PE properties, measured rather than stated: PE(pos+k) is one fixed linear map (a rotation of each
sin/cos pair) of PE(pos) for every pos, and PE(p) . PE(p+k) decays with the distance k."""

from __future__ import annotations

from scratchformer.cli import main
from scratchformer.inspect.plots import position_relations


def test_pe_of_pos_plus_k_is_a_fixed_rotation_of_pe_of_pos():
    r = position_relations(d_model=64, max_len=60)
    assert max(r["linear_error"]) < 1e-6  # exact up to the float32 table's rounding, for every k and p
    assert r["dot"][0] == max(r["dot"])  # a position is most like itself: |PE(p)|^2 = D/2
    assert abs(r["dot"][0] - 32) < 1e-4


def test_the_dot_product_decays_with_distance():
    dot = position_relations(d_model=128, max_len=100)["dot"]
    near, middle, far = (sum(dot[a:b]) / (b - a) for a, b in ((1, 5), (20, 40), (60, 100)))
    assert dot[0] > near > middle > far  # on average it falls with k (with ripples: a sum of cosines)


def test_plot_relations_writes_a_png(tmp_path, capsys):
    assert main(["plot", "relations", "--d-model", "32", "--max-positions", "40", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "r.png" in capsys.readouterr().out
