"""Every picture lands where the caller is told it did."""

import pytest
import torch

from scratchformer.cli import main
from scratchformer.errors import InputError
from scratchformer.inspect.plots import check_position_sizes, plot_attention, plot_curves, plot_positions

PNG = b"\x89PNG"


def test_positions_into_an_existing_directory_write_positions_png(tmp_path):
    path = plot_positions(tmp_path, d_model=16, max_len=20)
    assert path == tmp_path / "positions.png" and path.read_bytes()[:4] == PNG


def test_a_name_without_suffix_is_reported_with_the_suffix_matplotlib_adds(tmp_path):
    path = plot_positions(tmp_path / "pe", d_model=16, max_len=20)
    assert path == tmp_path / "pe.png" and path.read_bytes()[:4] == PNG


@pytest.mark.parametrize("target", ["dir", "file"])
def test_plot_command_reports_a_path_that_exists(capsys, tmp_path, target):
    out = tmp_path if target == "dir" else tmp_path / "pe.png"
    assert main(["plot", "positions", "--d-model", "16", "--max-positions", "20", "--out", str(out)]) == 0
    reported = capsys.readouterr().out.strip().removeprefix("wrote ")
    assert reported == str(tmp_path / "pe.png" if target == "file" else tmp_path / "positions.png")
    assert open(reported, "rb").read(4) == PNG


@pytest.mark.parametrize("d_model,max_len,needle", [(0, 10, "d_model 0"), (7, 10, "even d_model"),
                                                    (-4, 10, "d_model -4"), (8, 0, "max_len 0")])
def test_position_sizes_that_cannot_be_drawn_are_refused(d_model, max_len, needle):
    with pytest.raises(InputError, match=needle):
        check_position_sizes(d_model, max_len)
    with pytest.raises(InputError, match=needle):
        plot_positions("unused.png", d_model, max_len)


def test_a_two_dimensional_encoding_still_gets_curves(tmp_path, recwarn):
    assert plot_positions(tmp_path / "pe.png", d_model=2, max_len=5).read_bytes()[:4] == PNG
    assert not [w for w in recwarn if "No artists" in str(w.message)]


def test_attention_and_curves_return_the_files_they_wrote(tmp_path):
    a = plot_attention(tmp_path, torch.rand(2, 3, 4).softmax(-1), list("abcd"), list("xyz"))
    c = plot_curves(tmp_path / "curve", [{"kind": "train", "step": 1, "loss": 2.0},
                                         {"kind": "valid", "step": 1, "valid_loss": 2.5, "bleu": 1.0}])
    assert a == tmp_path / "attention.png" and c == tmp_path / "curve.png"
    assert a.read_bytes()[:4] == PNG and c.read_bytes()[:4] == PNG


def _drawn_curves(monkeypatch, **kwargs) -> list:
    """The y values of every curve plot_positions draws (the figure caught before it is saved)."""
    import scratchformer.inspect.plots as plots

    curves = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path, name: curves.extend(
        line.get_ydata() for ax in fig.axes for line in ax.lines) or save(fig, path, name))
    plot_positions(kwargs.pop("path"), **kwargs)
    return curves


def test_positions_draws_the_dimensions_asked_for(monkeypatch, tmp_path):
    from scratchformer.model.embedding import sinusoid_table

    curves = _drawn_curves(monkeypatch, path=tmp_path / "pe.png", d_model=32, max_len=50, dims=[0, 1, 20, 21])
    table = sinusoid_table(50, 32).numpy()
    assert len(curves) == 4
    for curve, d in zip(curves, [0, 1, 20, 21]):
        assert (curve == table[:, d]).all()


def test_default_dimensions_go_from_fast_to_slow(monkeypatch, tmp_path):
    """Low dimensions oscillate fast, high ones slowly (seed 000 says the opposite: docs/seed-errata.md). Count
    the sign changes of each curve."""
    from scratchformer.inspect.plots import default_dims

    assert default_dims(128) == [0, 16, 32, 64] and default_dims(2) == [0]
    curves = _drawn_curves(monkeypatch, path=tmp_path / "pe.png", d_model=128, max_len=100)
    crossings = [int(((c[1:] > 0) != (c[:-1] > 0)).sum()) for c in curves]
    assert crossings == sorted(crossings, reverse=True) and crossings[0] > 10 * max(crossings[-1], 1)


def test_dims_outside_the_model_are_refused():
    with pytest.raises(InputError, match="--dims 16: outside the 16 dimensions"):
        plot_positions("unused.png", d_model=16, max_len=5, dims=[0, 16])
