"""Issue 42, the fourth red team: folders. A file that a user, a cloned repository or another account can write is
input, not proof: a marker (forged or a symlink) never names what --overwrite deletes, `train --out` refuses a
folder it did not make, a failed `export --overwrite` leaves the earlier export as it was, --show-attention keeps
an existing file, and the leftovers (a killed export's partial folder, a merge's .lock) are cleaned up.

Every case builds its hostile layout in tmp_path, with a temporary HOME, XDG_CACHE_HOME and TMPDIR."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from scratchformer import runs
from scratchformer.cli import main
from scratchformer.errors import ScratchformerError
from scratchformer.export.formats import export_run
from scratchformer.runs import folders

OTHER_UID = 65534  # nobody


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def one_line_error(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and ": error: " in lines[0], lines
    assert "Errno" not in lines[0] and "Traceback" not in lines[0], lines
    return lines[0]


@pytest.fixture
def run_dir(sandbox, tiny_run) -> Path:
    run = sandbox / "run"
    shutil.copytree(tiny_run, run)
    runs.write_marker(run)
    return run


def users_project(folder: Path) -> None:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print('mine')\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "notes.txt").write_text("mine\n")


# -- finding 3: --overwrite deletes only the names the command writes, never those a marker lists ---------------
def test_a_forged_marker_never_makes_export_overwrite_delete_the_users_entries(run_dir, sandbox):
    proj = sandbox / "proj"
    users_project(proj)
    (proj / folders.MARKER).write_text(json.dumps({"created_by": "scratchformer", "command": "export",
                                                   "entries": ["src", ".git", "notes.txt"]}))
    before = tree(proj)
    try:
        export_run(run_dir, "hf", proj, overwrite=True)
    except ScratchformerError:
        pass
    after = tree(proj)
    assert {k: v for k, v in after.items() if k in before and k != folders.MARKER} == \
        {k: v for k, v in before.items() if k != folders.MARKER}


def test_a_symlinked_marker_is_not_ours(run_dir, sandbox, capsys):
    real = sandbox / "real"
    export_run(run_dir, "hf", real)
    proj = sandbox / "proj"
    (proj / "README.md").mkdir(parents=True)  # a folder of the user's that has a name the hf export writes
    (proj / "README.md" / "chapter1.txt").write_text("mine\n")
    (proj / folders.MARKER).symlink_to(real / folders.MARKER)
    assert folders.read_marker(proj) is None
    before = tree(proj)
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(proj), "--overwrite"]) == 2
    assert "not made by scratchformer export" in one_line_error(capsys)
    assert tree(proj) == before


def test_overwrite_deletes_only_the_formats_own_names_even_if_the_marker_lists_more(run_dir, sandbox):
    out = sandbox / "hf"
    export_run(run_dir, "hf", out)
    (out / "mine.txt").write_text("mine\n")
    marker = json.loads((out / folders.MARKER).read_text())
    (out / folders.MARKER).write_text(json.dumps({**marker, "entries": [*marker["entries"], "mine.txt"]}))
    export_run(run_dir, "hf", out, overwrite=True)
    assert (out / "mine.txt").read_text() == "mine\n" and (out / "model.safetensors").is_file()


# -- finding 7: a failed export --overwrite leaves `out` as it was ------------------------------------------------
def test_a_failed_export_overwrite_leaves_the_earlier_export_whole(run_dir, sandbox, monkeypatch):
    out = sandbox / "hf"
    export_run(run_dir, "hf", out)
    (out / "mine.txt").write_text("mine\n")
    before = tree(out)
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kwargs):  # as a read-only sub-folder or a full disk would, mid-way
        if Path(dst).name == "model.safetensors":
            raise PermissionError(13, "Permission denied", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises((OSError, ScratchformerError)):
        export_run(run_dir, "hf", out, overwrite=True)
    monkeypatch.setattr(os, "replace", real_replace)
    assert tree(out) == before
    assert not [p.name for p in sandbox.iterdir() if p.name.startswith(".hf.")]
    export_run(run_dir, "hf", out, overwrite=True)  # and a later --overwrite is still allowed
    assert (out / "mine.txt").is_file()


# -- smaller things: leftovers and raw errno text ------------------------------------------------------------------
def test_a_killed_exports_partial_folder_is_cleaned_up_on_the_next_run_and_only_ours(run_dir, sandbox):
    out = sandbox / "hf"
    old = time.time() - 3 * 24 * 3600
    stale = sandbox / ".hf.k1ll3d.partial"  # left by an export killed days ago (no live lock)
    (stale / "config.json").parent.mkdir()
    (stale / "config.json").write_text("{}")
    os.utime(stale, (old, old))
    dead = sandbox / ".hf.d34d.partial"  # killed a minute ago: its lock file is there but nobody holds it
    dead.mkdir()
    (dead / folders.LOCK).write_text("")
    foreign = sandbox / ".hf.f0r3ign.partial"  # someone else's
    foreign.mkdir()
    os.chown(foreign, OTHER_UID, OTHER_UID)
    os.utime(foreign, (old, old))
    victim = sandbox / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    (sandbox / ".hf.l1nk.partial").symlink_to(victim)
    export_run(run_dir, "hf", out)
    assert not stale.exists() and not dead.exists()
    assert foreign.is_dir() and (victim / "keep.txt").read_text() == "mine\n"


def test_no_lock_file_is_left_after_an_overwrite_merge(run_dir, sandbox):
    out = sandbox / "hf"
    export_run(run_dir, "hf", out)
    export_run(run_dir, "hf", out, overwrite=True)
    assert not (out / folders.LOCK).exists()


def test_a_dangling_symlink_out_is_one_plain_line(run_dir, sandbox, capsys):
    link = sandbox / "out"
    link.symlink_to(sandbox / "nowhere")
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(link)]) == 2
    one_line_error(capsys)
    assert not (sandbox / "nowhere").exists()


def test_a_parent_that_cannot_be_written_is_one_plain_line(run_dir, sandbox, monkeypatch, capsys):
    def refused(*args, **kwargs):  # root writes anywhere: what a read-only parent answers
        raise PermissionError(13, "Permission denied", str(sandbox / ".out.xxxx.partial"))

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    assert main(["export", str(run_dir), "--format", "hf", "--out", str(sandbox / "out")]) == 2
    assert "out" in one_line_error(capsys)


# -- finding 5: train --out refuses a non-empty folder it did not make --------------------------------------------
TRAIN = ["train", "--recipe", "toy", "--max-steps", "1", "eval_every=0", "bleu_samples=0", "--quiet",
         "--no-test"]


def users_folder(folder: Path) -> None:
    (folder / "export").mkdir(parents=True)
    (folder / "checkpoints").mkdir()
    for name, text in (("README.json", "{}"), ("export/deploy.sh", "echo mine"), ("checkpoints/epoch1.bin", "w"),
                       ("metrics.jsonl", '{"mine": 1}\n'), ("decoding.json", "{}"), ("notes.txt", "mine")):
        (folder / name).write_text(text)


@pytest.mark.parametrize("extra", [[], ["--overwrite"]])
def test_train_refuses_a_non_empty_folder_it_did_not_make(extra, sandbox, capsys):
    proj = sandbox / "proj2"
    users_folder(proj)
    before = tree(proj)
    assert main([*TRAIN, "--out", str(proj), *extra]) == 2
    one_line_error(capsys)
    assert tree(proj) == before


def test_train_refuses_a_non_empty_current_directory(sandbox, monkeypatch, capsys):
    proj = sandbox / "proj2"
    users_folder(proj)
    monkeypatch.chdir(proj)
    before = tree(proj)
    assert main([*TRAIN, "--out", "."]) == 2
    one_line_error(capsys)
    assert tree(proj) == before


# -- finding 17: --resume on a folder with no run -------------------------------------------------------------------
def test_resume_without_a_run_is_one_line_and_writes_nothing(sandbox, capsys):
    assert main([*TRAIN, "--resume", "--out", str(sandbox / "nope_run")]) == 2
    assert "resume" in one_line_error(capsys)
    assert not (sandbox / "nope_run").exists()


# -- finding 6: --show-attention keeps an existing file -------------------------------------------------------------
def test_show_attention_refuses_an_existing_file_without_overwrite(run_dir, sandbox, capsys):
    mine = sandbox / "mine.png"
    mine.write_bytes(b"my picture")
    assert main(["translate", str(run_dir), "hello", "--show-attention", str(mine)]) == 2
    assert "--overwrite" in one_line_error(capsys)
    assert mine.read_bytes() == b"my picture"


def test_show_attention_never_writes_a_runs_own_file(run_dir, sandbox, capsys):
    curve = run_dir / "curve.png"
    curve.write_bytes(b"the run's curve")
    assert main(["translate", str(run_dir), "hello", "--show-attention", str(curve), "--overwrite"]) == 2
    one_line_error(capsys)
    assert curve.read_bytes() == b"the run's curve"


# -- smaller things: en-zh/ and a local en-zh -------------------------------------------------------------------------
def test_a_shipped_model_named_with_a_trailing_slash_is_the_shipped_model(sandbox):
    from scratchformer.runs.run import SHIPPED_MODELS, resolve_run, shipped_models

    if "en-zh" not in shipped_models():
        pytest.skip("no shipped en-zh model in this installation")
    assert resolve_run("en-zh/") == SHIPPED_MODELS / "en-zh"


def test_a_local_folder_shadowing_a_shipped_model_is_named_once(sandbox, tiny_run, capsys, monkeypatch):
    from scratchformer.runs import run as run_module
    from scratchformer.runs.run import resolve_run, shipped_models

    monkeypatch.setattr(run_module, "_SHADOWS_SAID", set())  # said once per process: this test's process too

    if "en-zh" not in shipped_models():
        pytest.skip("no shipped en-zh model in this installation")
    shutil.copytree(tiny_run, sandbox / "work" / "en-zh")
    capsys.readouterr()
    assert resolve_run("en-zh") == Path("en-zh")
    assert resolve_run("en-zh") == Path("en-zh")
    err = capsys.readouterr().err
    assert err.count("en-zh") >= 1 and len([ln for ln in err.splitlines() if ln.strip()]) == 1
