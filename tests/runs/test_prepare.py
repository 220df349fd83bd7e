"""runs/prepare.py: one `prepare_run_dir` that every command writing a folder (train, export, lab) calls with what it
writes, the same rules for each: a non-empty folder we did not make is refused, --overwrite deletes only what that
command writes (the user's files kept and named), `train --resume` continues a run and refuses nothing to resume."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scratchformer import runs
from scratchformer.errors import ScratchformerError
from scratchformer.runs import TRAIN, Writes, prepare_run_dir
from scratchformer.runs.names import CONFIG, MARKER, WEIGHTS

SRC = Path(__file__).resolve().parents[2] / "src" / "scratchformer"
LAB = Writes("lab", {"a.png", "a.json"}, append=True)
EXPORT = Writes("export", {"model.bin"})


def marked_run(folder: Path, weights: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    runs.write_marker(folder, "train")
    (folder / CONFIG).write_text("{}", encoding="utf-8")
    if weights:
        (folder / WEIGHTS).write_bytes(b"w")
    return folder


def test_no_command_checks_or_clears_its_folder_outside_runs():
    """The folder checks are runs/'s alone: no room outside runs/ calls them one by one, or keeps its own
    prepare_out (train had six runs/ calls plus its own; export and lab their own sequences)."""
    pieces = re.compile(r"\b(check_folder|check_run_out|clear_run|clear_folder|refuse_protected|check_clearable|"
                        r"never_trained)\(|def prepare_out\b")
    found = [f"{p.relative_to(SRC)}: {m.group(0)}" for p in SRC.rglob("*.py") if p.parent.name != "runs"
             for m in pieces.finditer(p.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize("writes", [TRAIN, EXPORT, LAB], ids=lambda w: w.command)
def test_a_folder_we_did_not_make_is_refused_with_or_without_overwrite(writes, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    for overwrite in (False, True):
        with pytest.raises(ScratchformerError, match="not (made|written) by scratchformer"):
            prepare_run_dir(out, writes, overwrite=overwrite)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("writes", [TRAIN, EXPORT, LAB], ids=lambda w: w.command)
def test_a_new_or_empty_folder_is_fine_and_only_train_makes_it_now(writes, tmp_path):
    assert prepare_run_dir(tmp_path / "new", writes) == tmp_path / "new"
    assert (tmp_path / "new").is_dir() is writes.in_place  # the others write beside it and swap it in later


def test_another_commands_folder_is_refused(tmp_path):
    run = marked_run(tmp_path / "run")
    for writes in (EXPORT, LAB):
        with pytest.raises(ScratchformerError, match="scratchformer train"):
            prepare_run_dir(run, writes, overwrite=True)
    assert (run / WEIGHTS).exists()


def test_train_overwrite_deletes_only_what_train_writes_and_names_the_rest(tmp_path, capsys):
    run = marked_run(tmp_path / "run")
    (run / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ScratchformerError, match="already holds a run"):
        prepare_run_dir(run, TRAIN)
    assert (run / WEIGHTS).exists()
    prepare_run_dir(run, TRAIN, overwrite=True)
    assert sorted(p.name for p in run.iterdir() if p.name != ".lock") == ["notes.txt"]
    assert "kept notes.txt" in capsys.readouterr().err


def test_resume_continues_a_run_and_refuses_nothing_to_resume(tmp_path):
    run = marked_run(tmp_path / "run")
    before = sorted(p.name for p in run.iterdir())
    prepare_run_dir(run, TRAIN, resume=True, overwrite=True)  # --resume wins: nothing is cleared
    assert sorted(p.name for p in run.iterdir() if p.name != ".lock") == before
    with pytest.raises(ScratchformerError, match="holds no run to resume"):
        prepare_run_dir(tmp_path / "empty", TRAIN, resume=True)
    assert not (tmp_path / "empty").exists()
    prepare_run_dir(tmp_path / "restartable", TRAIN, resume=runs.prepare.IF_ANY)  # torchrun --max-restarts
    assert (tmp_path / "restartable").is_dir()


def test_a_start_that_failed_before_saving_is_cleared_without_flags(tmp_path):
    run = marked_run(tmp_path / "run", weights=False)  # a marked folder with no weights and no checkpoints
    prepare_run_dir(run, TRAIN)
    assert not (run / MARKER).exists() and not (run / CONFIG).exists()


def test_lab_adds_to_its_own_folder_without_overwrite(tmp_path):
    out = tmp_path / "lab"
    out.mkdir()
    runs.write_marker(out, "lab", ["a.png"])
    (out / "a.png").write_bytes(b"png")
    assert prepare_run_dir(out, LAB) == out
    with pytest.raises(ScratchformerError, match="add --overwrite"):
        prepare_run_dir(out, Writes("lab", LAB.names))  # a command that does not append needs --overwrite
    assert (out / "a.png").read_bytes() == b"png"
