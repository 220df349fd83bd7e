"""`scratchformer lab` alone (the list), and one-line errors for an unknown experiment or a misplaced --run."""

import pytest

from scratchformer.cli import main
from scratchformer.lab import EXPERIMENTS, run_experiment

ISSUE_15 = ["scaling", "positions", "heads", "complexity", "norm-placement", "add-and-norm", "layernorm-vs-batchnorm",
            "residual", "extrapolation", "label-smoothing"]
ISSUE_33 = ["heads-and-layers", "ffn", "exposure-bias"]


def test_list_names_every_experiment_with_its_question(capsys):
    assert main(["lab"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(EXPERIMENTS)
    assert all(line.rstrip().endswith("?") or "?" in line for line in lines)


def test_the_retired_list_flag_names_its_replacement(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["lab", "--list"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "--list is gone: use scratchformer lab (with no experiment name" in err
    assert len(err.strip().splitlines()) == 1


def test_the_registry_holds_the_experiments_of_issues_15_and_33():
    assert sorted(EXPERIMENTS) == sorted(ISSUE_15 + ISSUE_33)


@pytest.mark.parametrize("argv, words", [(["lab", "no-such"], "unknown experiment 'no-such'"),
                                         (["lab", "scaling", "--run", "models/en-zh"], "--run is for")])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run_experiment("complexity", tmp_path / "f", quick=True)


def test_complexity_through_the_cli_prints_its_conclusion_and_files(capsys, tmp_path):
    assert main(["lab", "complexity", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "memory grows as n^" in out and f"wrote {tmp_path / 'complexity.png'}" in out
