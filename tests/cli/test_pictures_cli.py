"""The learner's commands: `plot positions --dims`, `evaluate --explain`, `report` (one line for bad input)."""

import pytest

from scratchformer.cli import main

PNG = b"\x89PNG"


def test_plot_positions_draws_the_dimensions_asked_for(capsys, tmp_path, monkeypatch):
    import scratchformer.inspect.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "check_dims", lambda dims, d: drawn.append(list(dims)) or list(dims))
    assert main(["plot", "positions", "--d-model", "32", "--max-positions", "20", "--dims", "0,1,20,21",
                 "--out", str(tmp_path / "pe.png")]) == 0
    assert drawn[-1] == [0, 1, 20, 21] and (tmp_path / "pe.png").read_bytes()[:4] == PNG


@pytest.mark.parametrize("dims,needle", [("0,40", "--dims 40: outside the 32 dimensions"),
                                         ("a,b", "--dims a,b: give whole numbers"), (",", "at least one")])
def test_plot_positions_bad_dims_are_one_line(capsys, tmp_path, dims, needle):
    assert main(["plot", "positions", "--d-model", "32", "--dims", dims, "--out", str(tmp_path / "pe.png")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_evaluate_explain_prints_bleu_taken_apart(capsys, tiny_run):
    assert main(["evaluate", str(tiny_run), "--split", "test", "--explain", "--show", "0"]) == 0
    out = capsys.readouterr().out
    bleu = float(next(line.split()[1] for line in out.splitlines() if line.startswith("bleu ")))
    assert "p1 =" in out and "p4 =" in out and "brevity penalty" in out and "simple BLEU" in out
    own = float(out.split("sacreBLEU's own score:")[1].split()[0])
    assert own == pytest.approx(bleu, abs=0.01)  # the explanation explains the score evaluate printed


def test_evaluate_explain_in_json(capsys, tiny_run):
    import json

    assert main(["evaluate", str(tiny_run), "--split", "test", "--explain", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    e = result["bleu_explained"]
    assert [g["n"] for g in e["ngrams"]] == [1, 2, 3, 4]
    assert e["recombined"] == pytest.approx(e["score"]) and round(e["score"], 2) == result["bleu"]


def test_report_of_a_run_without_a_corpus_is_one_line(capsys, tiny_run, tmp_path):
    assert main(["report", str(tiny_run), "--out", str(tmp_path / "r.html"), "--corpus", "nowhere.tsv"]) == 2
    err = capsys.readouterr().err
    assert "nowhere.tsv" in err and err.count("\n") == 1
    assert main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "r.html")]) == 2
