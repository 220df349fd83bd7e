"""The export an engine keeps (runs/cache.py through export/formats.cached_export): in the run folder, else in
this user's 0700 cache folder, never in a shared predictable temporary path; its files' sha256 are checked before
each use; a half-written export left by a killed process never breaks the next call."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from scratchformer.errors import ConfigError
from scratchformer.export import formats
from scratchformer.runs import cache

STAMP = {"format": "fake", "weights_sha256": "abc"}


class Writer:
    """A format's write(folder): model.bin and the stamp file; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, folder: Path) -> None:
        self.calls += 1
        (folder / "model.bin").write_bytes(b"good weights")
        (folder / "stamp.json").write_text(json.dumps(STAMP))


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return home


def export(run: Path, write: Writer) -> Path:
    return formats.cached_export(SimpleNamespace(path=run), "ctranslate2", STAMP, write, "stamp.json")


def test_the_cache_lives_in_the_run_and_is_made_once(tmp_path, home):
    write = Writer()
    folder = export(tmp_path / "run", write)
    assert folder == tmp_path / "run" / "export" / "ctranslate2" and (folder / "model.bin").is_file()
    assert export(tmp_path / "run", write) == folder and write.calls == 1


def test_a_swapped_model_file_is_noticed_and_the_export_made_again(tmp_path, home):
    write = Writer()
    folder = export(tmp_path / "run", write)
    (folder / "model.bin").write_bytes(b"garbage someone put there")  # the stamp still matches
    assert export(tmp_path / "run", write) == folder and write.calls == 2
    assert (folder / "model.bin").read_bytes() == b"good weights"


def test_a_planted_shared_tmp_cache_is_never_used(tmp_path, home, monkeypatch):
    """The run folder cannot hold export/ (a file is in the way): the export goes to ~/.cache/scratchformer (0700),
    not to the predictable $TMPDIR/scratchformer-ctranslate2-<hash> where anyone could plant a model.bin."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    import hashlib

    digest = hashlib.sha256(json.dumps(STAMP, sort_keys=True).encode()).hexdigest()[:16]
    planted = shared / f"scratchformer-ctranslate2-{digest}"
    planted.mkdir()
    (planted / "model.bin").write_bytes(b"an attacker's model")
    (planted / "stamp.json").write_text(json.dumps(STAMP))
    run = tmp_path / "run"
    run.mkdir()
    (run / "export").write_text("not a folder")
    write = Writer()
    folder = export(run, write)
    assert write.calls == 1 and (folder / "model.bin").read_bytes() == b"good weights"
    root = home / ".cache" / "scratchformer"
    assert folder.parent == root and stat.S_IMODE(root.stat().st_mode) == 0o700
    assert shared not in folder.parents


def test_a_cache_folder_others_can_write_is_refused(tmp_path, home):
    root = home / ".cache" / "scratchformer"
    root.mkdir(parents=True)
    root.chmod(0o777)
    with pytest.raises(ConfigError, match="only you can write") as e:
        cache.user_cache_dir()
    assert "\n" not in str(e.value)


def test_a_half_written_export_left_by_a_killed_process_is_ignored(tmp_path, home):
    run = tmp_path / "run"
    (run / "export" / ".ctranslate2.k1ll3d").mkdir(parents=True)  # mkdtemp's name, half written
    (run / "export" / ".ctranslate2.k1ll3d" / "model.bin").write_bytes(b"half")
    (run / "export" / "ctranslate2").write_text("half")  # and a file where the folder goes: "Not a directory"
    write = Writer()
    folder = export(run, write)
    assert folder.is_dir() and (folder / "model.bin").read_bytes() == b"good weights"
    old = run / "export" / ".ctranslate2.old"
    old.mkdir()
    os.utime(old, (0, 0))  # a day old or more: no running process writes it
    (folder / "model.bin").write_bytes(b"changed")
    export(run, write)
    assert not old.exists() and (run / "export" / ".ctranslate2.k1ll3d").exists()


# -- the bound: SCRATCHFORMER_CACHE_LIMIT_GB ------------------------------------------------------------------
def _private(name: str, size: int) -> Path:
    def write(folder: Path) -> None:
        (folder / "step.pt2").write_bytes(b"\0" * size)

    return cache.private_cache(name, {"name": name}, write)


def test_the_least_recently_used_folders_go_until_the_cache_is_within_its_limit(home, monkeypatch):
    monkeypatch.setenv(cache.LIMIT_VAR, str(2.5 * 2**20 / 2**30))  # 2.5 MiB
    mib = 2**20
    folders = [_private(f"captured-{i}", mib) for i in range(3)]
    for age, folder in zip((400, 300, 200), folders):  # last used: 0 longest ago, then 1, then 2
        os.utime(folder / cache.CONTENT, (os.path.getmtime(folder) - age,) * 2)
    root = cache.user_cache_dir()
    (root / "autotune.json").write_text("{}")  # not a cached folder: never counted nor removed
    (root / "inductor").mkdir()
    (root / ".captured-9.abcd").mkdir()  # another process's folder, being written
    (root / ".captured-9.abcd" / cache.CONTENT).write_text("{}")
    assert cache.find_private("captured-0", {"name": "captured-0"}) == folders[0]  # a use: now the newest
    newest = _private("captured-3", mib)
    removed = cache.trim(newest)
    assert [p.name for p, _ in removed] == ["captured-1", "captured-2"]  # 0 was used since; 3 was just made
    assert all(mib <= size < mib + 4096 for _, size in removed)  # the package and its content record
    left = {p.name for p in root.iterdir()}
    assert left == {"captured-0", "captured-3", "autotune.json", "inductor", ".captured-9.abcd"}


def test_the_folder_just_made_stays_even_over_the_limit_and_a_link_is_never_followed(tmp_path, home, monkeypatch):
    monkeypatch.setenv(cache.LIMIT_VAR, "0")
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / cache.CONTENT).write_text("{}")
    (outside / "keep.bin").write_bytes(b"mine")
    old = _private("captured-old", 10)
    (cache.user_cache_dir() / "captured-link").symlink_to(outside)
    new = _private("captured-new", 10)
    assert [p for p, _ in cache.trim(new)] == [old]
    assert new.is_dir() and (outside / "keep.bin").read_bytes() == b"mine"


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf"])
def test_a_bad_limit_is_one_line_naming_the_variable(home, monkeypatch, value):
    monkeypatch.setenv(cache.LIMIT_VAR, value)
    with pytest.raises(ConfigError, match=f"{cache.LIMIT_VAR}=.*a number >= 0"):
        cache.limit_bytes()
