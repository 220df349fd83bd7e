"""runs/folders.py, the one owner of what the commands write: every command that writes a folder or a file refuses
--overwrite on a folder it did not make, on `.`, on a parent of `.` and on $HOME (exit 2, one line, nothing
deleted); on its own earlier output it keeps the user's files and names them; a single output file is never one
of a run's own files, nor a user's file without --overwrite; `train init=X --out X` is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from scratchformer import ModelConfig, build_model, runs
from scratchformer.cli import main
from scratchformer.runs import folders
from scratchformer.training import checkpoint as ckpt


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path below `root` with its bytes (None for a folder): what 'deletes nothing' compares."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def assert_nothing_lost(before: dict[str, bytes | None], root: Path) -> None:
    """Every path of `before` is still below `root`, unchanged (a font cache matplotlib adds to HOME is no loss)."""
    after = tree(root)
    assert {k: v for k, v in after.items() if k in before} == before


def one_line_error(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and ": error: " in lines[0], lines
    return lines[0]


@pytest.fixture
def run_dir(tmp_path, tiny_run) -> Path:
    """A marked tiny run (as `train` leaves it) with two checkpoints, for average; a copy per test."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    runs.write_marker(run)
    model = build_model(ModelConfig.load(run / "config.json"))
    for step in (1, 2):
        ckpt.save_checkpoint(run, step, model, {"step": step})
    return run


@pytest.fixture
def places(tmp_path, monkeypatch) -> dict[str, Path]:
    """A temporary HOME and a working directory work/sub inside it, each holding files of the user's, and an
    unmarked project folder: the places --overwrite must never clear."""
    home = tmp_path / "home"
    cwd = home / "work" / "sub"
    user = tmp_path / "project"
    for folder in (home, cwd, user):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "notes.txt").write_text("mine\n")
    (user / "config.json").write_text("{}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    return {"unmarked": user, "cwd": Path("."), "parent": Path(".."), "home": home}


COMMANDS = {  # command -> its arguments before --out (each refuses its --out before doing any work)
    "train": lambda run: ["train", "--recipe", "toy", "--max-steps", "1", "--quiet", "--no-test"],
    "export": lambda run: ["export", str(run), "--format", "hf"],
    "lab": lambda run: ["lab", "complexity", "--quick"],
    "report": lambda run: ["report", str(run)],
    "plot": lambda run: ["plot", "positions", "--d-model", "8", "--max-positions", "4"],
    "average": lambda run: ["average", str(run), "--last", "2"],
    "consolidate": lambda run: ["consolidate", str(run)],
}


@pytest.mark.parametrize("place", ["unmarked", "cwd", "parent", "home"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_overwrite_never_clears_a_folder_we_did_not_make_the_cwd_its_parents_or_home(command, place, run_dir,
                                                                                      places, tmp_path, capsys):
    before = tree(tmp_path)
    code = main([*COMMANDS[command](run_dir), "--out", str(places[place]), "--overwrite"])
    assert code == 2
    one_line_error(capsys)
    assert_nothing_lost(before, tmp_path)


def test_export_overwrite_of_its_own_output_keeps_and_names_the_users_files(run_dir, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(out)]) == 0
    marker = folders.read_marker(out)
    assert marker["command"] == "export" and marker["format"] == "hf" and "model.safetensors" in marker["entries"]
    (out / "NOTES.md").write_text("my notes\n")
    (out / "model.safetensors").write_bytes(b"junk")  # proves the export's own files are written again
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(out), "--overwrite"]) == 0
    assert "kept NOTES.md" in capsys.readouterr().err
    assert (out / "NOTES.md").read_text() == "my notes\n" and (out / "model.safetensors").read_bytes() != b"junk"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]  # no temporary folder left beside


def test_export_into_an_empty_current_directory(run_dir, tmp_path, monkeypatch, capsys):
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["export", str(run_dir), "--format", "hf", "--out", "."]) == 0
    assert (here / "model.safetensors").is_file() and folders.read_marker(here)["command"] == "export"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_export_refuses_another_commands_folder_and_a_train_run(run_dir, tmp_path, capsys):
    lab = tmp_path / "lab"
    lab.mkdir()
    folders.write_marker(lab, "lab", ["x.png"])
    (lab / "x.png").write_bytes(b"png")
    for out, words in ((lab, "scratchformer lab"), (run_dir, "scratchformer train")):
        before = tree(tmp_path)
        assert main(["export", str(run_dir), "--format", "hf", "--out", str(out), "--overwrite"]) == 2
        assert words in one_line_error(capsys)
        assert tree(tmp_path) == before


def test_lab_adds_to_its_folder_and_overwrite_keeps_the_users_files(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["lab", "complexity", "--quick", "--out", str(out)]) == 0
    (out / "mine.txt").write_text("mine\n")
    assert main(["lab", "complexity", "--quick", "--out", str(out)]) == 0  # lab adds to its own folder
    assert main(["lab", "complexity", "--quick", "--out", str(out), "--overwrite"]) == 0
    assert "kept mine.txt" in capsys.readouterr().err
    names = [folders.MARKER, "complexity.json", "complexity.png", "mine.txt"]  # no .lock left behind
    assert sorted(p.name for p in out.iterdir()) == names
    assert folders.read_marker(out)["entries"] == ["complexity.json", "complexity.png"]


def test_lab_never_writes_into_a_folder_it_did_not_make(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "complexity.png").write_bytes(b"my picture")
    assert main(["lab", "complexity", "--quick", "--out", str(out)]) == 2
    assert "not written by scratchformer lab" in one_line_error(capsys)
    assert (out / "complexity.png").read_bytes() == b"my picture"


# -- single files: average, report, plot, consolidate (issue 35) ------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["average", "{run}", "--last", "2", "--out", "{out}"],
    ["report", "{run}", "--out", "{out}"],
    ["plot", "positions", "--d-model", "8", "--max-positions", "4", "--out", "{out}"],
    ["consolidate", "{run}", "--out", "{out}"],
])
@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "checkpoints/step-00000002/model.safetensors",
                                  "train_config.json"])
def test_no_command_writes_over_a_runs_own_files_even_with_overwrite(argv, name, run_dir, tmp_path, capsys):
    before = tree(tmp_path)
    for extra in ([], ["--overwrite"]):
        code = main([a.format(run=run_dir, out=run_dir / name) for a in argv] + extra)
        assert code == 2
        assert "one of the files of" in one_line_error(capsys)
    assert tree(tmp_path) == before


def test_export_never_writes_inside_a_runs_own_folders(run_dir, tmp_path, capsys):
    before = tree(tmp_path)
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(run_dir / "export" / "hf")]) == 2
    assert "one of the files of" in one_line_error(capsys)
    assert tree(tmp_path) == before


def test_a_legacy_run_without_a_marker_is_protected_too(tiny_run, tmp_path, capsys):
    run = tmp_path / "old"
    shutil.copytree(tiny_run, run)  # as models/en-zh: config.json and weights, no marker
    before = tree(tmp_path)
    assert main(["report", str(run), "--out", str(run / "model.safetensors"), "--overwrite"]) == 2
    assert "one of the files of" in one_line_error(capsys)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("argv", [
    ["average", "{run}", "--last", "2", "--out", "{out}"],
    ["report", "{run}", "--out", "{out}"],
    ["plot", "positions", "--d-model", "8", "--max-positions", "4", "--out", "{out}"],
    ["consolidate", "{run}", "--out", "{out}"],
])
def test_a_users_file_is_replaced_only_when_overwrite_names_it(argv, run_dir, tmp_path, capsys):
    notes = tmp_path / "notes.png"
    notes.write_text("my notes\n")
    assert main([a.format(run=run_dir, out=notes) for a in argv]) == 2
    assert "add --overwrite" in one_line_error(capsys)
    assert notes.read_text() == "my notes\n"


def test_average_overwrite_names_the_file_and_its_default_is_its_own(run_dir, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert main(["average", str(run_dir), "--last", "2", "--out", str(notes), "--overwrite"]) == 0
    assert set(load_file(str(notes))) == set(load_file(str(run_dir / "model.safetensors")))
    for _ in range(2):  # RUN_DIR/averaged.safetensors is average's own file: written again without --overwrite
        assert main(["average", str(run_dir), "--last", "2"]) == 0
    assert (run_dir / "averaged.safetensors").is_file()


def test_plot_into_a_folder_writes_its_default_name_once(tmp_path, capsys):
    args = ["plot", "positions", "--d-model", "8", "--max-positions", "4", "--out", str(tmp_path)]
    assert main(args) == 0 and (tmp_path / "positions.png").read_bytes().startswith(b"\x89PNG")
    assert main(args) == 2
    assert "add --overwrite" in one_line_error(capsys)
    assert main(args[:-1] + [str(tmp_path / "positions.png"), "--overwrite"]) == 0


@pytest.mark.parametrize("init", [".", "checkpoints/step-00000002"])
def test_train_init_into_itself_is_refused_and_the_run_kept(init, run_dir, tmp_path, capsys):
    before = tree(tmp_path)
    code = main(["train", "--recipe", "toy", "--max-steps", "1", "--quiet", "--no-test",
                 f"init={run_dir / init}", "--out", str(run_dir), "--overwrite"])
    assert code == 2
    assert "fine-tuned into itself" in one_line_error(capsys)
    assert tree(tmp_path) == before


# -- the marker ---------------------------------------------------------------------------------------------------

def test_old_train_markers_still_read_and_bad_markers_are_not_ours(tmp_path):
    (tmp_path / folders.MARKER).write_text(json.dumps({"created_by": "scratchformer", "version": "0.1"}))
    assert folders.read_marker(tmp_path)["command"] == "train" and folders.is_marked_run(tmp_path)
    for text in ("[" * 100000, '{"created_by": "someone"}', "not json", '{"created_by": "scratchformer", '
                 '"command": 3}'):
        (tmp_path / folders.MARKER).write_text(text)
        assert folders.read_marker(tmp_path) is None and not folders.is_marked_run(tmp_path)
