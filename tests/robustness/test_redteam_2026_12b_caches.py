"""Issue 42, the fourth red team: caches. Compiled code is built and loaded only inside this user's own checked
cache folder (never /tmp/torchinductor_<user>, which another account can plant); an engine's export cache in a run
folder is tied to the weights by a record in this user's private cache (a stamp and digests beside the content
prove nothing), and a symlinked RUN/export is never followed.

Every case builds its hostile layout in tmp_path, with a temporary HOME, XDG_CACHE_HOME and TMPDIR; nothing here
compiles with AOTInductor (torch's compile and load calls are replaced by probes of where they would work)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from scratchformer.errors import ScratchformerError
from scratchformer.runs import cache as runs_cache
from scratchformer.runs import load_run

OTHER_UID = 65534  # nobody


def plant_tmp_inductor(sandbox: Path) -> Path:
    """TMPDIR/torchinductor_<user>, world-writable and another account's, holding a planted library."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    planted = Path(default_cache_dir())
    assert planted.parent == sandbox / "tmp"
    planted.mkdir(exist_ok=True)  # importing torch's inductor may make it already
    (planted / "evil.so").write_bytes(b"\x7fELF planted")
    os.chown(planted, OTHER_UID, OTHER_UID)
    os.chmod(planted, 0o777)
    return planted


class Probe:
    """Stands in for torch's compile or load call: records the folders torch would work in at that moment."""

    def __init__(self, result=None):
        self.calls: list[dict[str, str]] = []
        self.result = result

    def __call__(self, *args, **kwargs):
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        self.calls.append({"inductor": cache_dir(), "tempdir": tempfile.gettempdir(),
                           "TMPDIR": os.environ.get("TMPDIR", "")})
        return self.result if self.result is not None else kwargs.get("package_path", "pkg.pt2")


def inside(path: str, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


# -- finding 1: compile and load only inside the user's own checked cache --------------------------------------
def test_a_package_is_loaded_with_torch_working_inside_the_users_cache(sandbox, monkeypatch):
    from scratchformer.decoding import captured

    planted = plant_tmp_inductor(sandbox)
    probe = Probe(result=object())  # a package object without a loader: load_step returns it as it is
    monkeypatch.setattr(torch._inductor, "aoti_load_package", probe)
    captured.load_step(sandbox / "cache" / "step.pt2")
    assert probe.calls, "the loader was not called"
    mine = sandbox / "cache" / "scratchformer"
    for where in probe.calls[0].values():
        assert inside(where, mine) and not inside(where, planted), probe.calls
    assert (planted / "evil.so").exists() and os.environ.get("TMPDIR") == str(sandbox / "tmp")  # restored after


def test_a_step_is_compiled_with_torch_working_inside_the_users_cache(sandbox, monkeypatch, tiny_seq2seq):
    from scratchformer.decoding import captured

    planted = plant_tmp_inductor(sandbox)
    probe = Probe()
    monkeypatch.setattr(torch.export, "export", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", probe)
    step = captured.StaticStep.for_model(tiny_seq2seq(0, 40))
    captured.compile_step(step, sandbox / "cache" / "step.pt2")
    captured.compile_encoder(captured.StaticEncoder(tiny_seq2seq(0, 40)), sandbox / "cache" / "encoder.pt2")
    assert len(probe.calls) == 2
    for call in probe.calls:
        for where in call.values():
            assert inside(where, sandbox / "cache" / "scratchformer") and not inside(where, planted), call


@pytest.mark.parametrize("place", ["scratchformer", "scratchformer/inductor"])
def test_a_cache_folder_another_account_can_write_is_refused_before_torch_runs(place, sandbox, monkeypatch):
    from scratchformer.decoding import captured

    folder = sandbox / "cache" / place
    folder.mkdir(parents=True)
    os.chown(folder, OTHER_UID, OTHER_UID)
    os.chmod(folder, 0o777)
    probe = Probe(result=object())
    monkeypatch.setattr(torch._inductor, "aoti_load_package", probe)
    with pytest.raises(ScratchformerError, match="only you can write"):
        captured.load_step(sandbox / "cache" / "step.pt2")
    assert probe.calls == []


# -- findings 2 and 4: an engine's export cache ---------------------------------------------------------------
@pytest.fixture
def run_dir(sandbox, tiny_run) -> Path:
    run = sandbox / "run"
    # without the export caches other tests may have left in the shared tiny run: each test builds its own layout
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("export"))
    return run


def test_a_symlinked_export_folder_is_never_followed(run_dir, sandbox):
    pytest.importorskip("ctranslate2")
    from scratchformer.export import ctranslate2 as ct2

    victim = sandbox / "victim"
    (victim / "ctranslate2").mkdir(parents=True)
    (victim / "ctranslate2" / "keep.txt").write_text("mine\n")
    (run_dir / "export").symlink_to(victim)
    folder = ct2.cached_export(load_run(run_dir))
    assert (victim / "ctranslate2" / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in victim.rglob("*")) == ["ctranslate2", "keep.txt"]
    assert not inside(str(folder), victim) and (folder / "model.bin").is_file()


def test_a_symlinked_export_folder_is_never_followed_by_any_engine_cache(run_dir, sandbox):
    victim = sandbox / "victim"
    (victim / "onnx").mkdir(parents=True)
    (victim / "onnx" / "keep.txt").write_text("mine\n")
    (run_dir / "export").symlink_to(victim)
    folder = runs_cache.cached_export(run_dir, "onnx", {"weights": "w"}, lambda f: (f / "a.onnx").write_bytes(b"g"))
    assert (victim / "onnx" / "keep.txt").read_text() == "mine\n" and not (victim / "onnx" / "a.onnx").exists()
    assert not inside(str(folder), victim) and (folder / "a.onnx").read_bytes() == b"g"


def test_a_planted_export_cache_with_recomputed_digests_is_not_decoded(run_dir, sandbox, tiny_run):
    pytest.importorskip("ctranslate2")
    from scratchformer.export import ctranslate2 as ct2

    folder = ct2.cached_export(load_run(run_dir))
    assert folder == run_dir / "export" / "ctranslate2"
    genuine = (folder / "model.bin").read_bytes()
    planted = bytearray(genuine)
    planted[-64:] = bytes(64)  # other weights, same layout
    (folder / "model.bin").write_bytes(bytes(planted))
    record = json.loads((folder / runs_cache.CONTENT).read_text())
    record["files"] = runs_cache.content_digests(folder)  # the forger recomputes the digests beside the content
    (folder / runs_cache.CONTENT).write_text(json.dumps(record))
    try:
        folder = ct2.cached_export(load_run(run_dir))
    except ScratchformerError:
        return  # refused in one line: fine too
    assert (folder / "model.bin").read_bytes() == genuine


def test_an_intact_export_cache_is_reused(run_dir, sandbox):
    pytest.importorskip("ctranslate2")
    from scratchformer.export import ctranslate2 as ct2

    first = ct2.cached_export(load_run(run_dir))
    inode = (first / "model.bin").stat().st_ino
    again = ct2.cached_export(load_run(run_dir))
    assert again == first and (again / "model.bin").stat().st_ino == inode


def test_train_with_compile_refuses_a_cache_folder_another_account_can_write(sandbox, capsys):
    from scratchformer.cli import main

    folder = sandbox / "cache" / "scratchformer" / "inductor"
    folder.mkdir(parents=True)
    os.chown(folder, OTHER_UID, OTHER_UID)
    os.chmod(folder, 0o777)
    (sandbox / "compile.json").write_text('{"compile": true}')
    code = main(["train", "--recipe", "toy", "--config", str(sandbox / "compile.json"), "--max-steps", "1",
                 "--quiet", "--no-test", "--out", str(sandbox / "run")])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "only you can write" in lines[0], lines
    assert not (sandbox / "run").exists()
