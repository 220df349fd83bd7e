"""What loading and compiling the captured step leaves in this user's cache (decoding/compile_home.py): a load's
unpacked package is removed when the load returns, what killed loads left is removed once a day old (never through
a link), and torch's precompiled headers are built and read only inside the cache, whenever torch's codecache was
imported. Nothing here compiles: torch's load call is replaced by a stand-in that unpacks as torch does (a folder
of its own under tempfile's folder), in a sandbox (tmp_path as HOME, XDG_CACHE_HOME and TMPDIR)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from scratchformer.decoding import captured, compile_home


class Unpacker:
    """torch's aoti_load_package as far as the disk goes: the package unpacked into TMPDIR/aotinductor_XXXXXX."""

    def __init__(self):
        self.folders: list[Path] = []

    def __call__(self, path):
        folder = Path(tempfile.mkdtemp(prefix="aotinductor_", dir=os.environ["TMPDIR"]))
        (folder / "model.wrapper.so").write_bytes(b"\x7fELF" + b"\0" * 4096)
        self.folders.append(folder)
        return object()  # a package without a loader: load_step returns it as it is


def test_a_load_leaves_nothing_unpacked_behind(sandbox, monkeypatch):
    unpack = Unpacker()
    monkeypatch.setattr(torch._inductor, "aoti_load_package", unpack)
    for _ in range(3):
        captured.load_step(sandbox / "step.pt2")
    tmp = sandbox / "cache" / "scratchformer" / compile_home.INDUCTOR / "tmp"
    assert len(unpack.folders) == 3 and all(f.parent.parent == tmp for f in unpack.folders)  # each its own folder
    assert list(tmp.iterdir()) == []  # the old loader left a 17-55 MB copy here per load, forever
    assert os.environ["TMPDIR"] == str(sandbox / "tmp") and tempfile.gettempdir() == str(sandbox / "tmp")


def test_what_killed_loads_left_goes_once_a_day_old_and_never_through_a_link(sandbox, monkeypatch):
    monkeypatch.setattr(torch._inductor, "aoti_load_package", Unpacker())
    tmp = sandbox / "cache" / "scratchformer" / compile_home.INDUCTOR / "tmp"
    tmp.mkdir(parents=True, mode=0o700)
    (sandbox / "cache" / "scratchformer").chmod(0o700)
    (sandbox / "cache" / "scratchformer" / compile_home.INDUCTOR).chmod(0o700)
    outside = sandbox / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    day_old = time.time() - compile_home.STALE_SECONDS - 60
    names = {"old": "aotinductor_ab12cd", "ours": "unpack-x1y2z3", "headers": "torchinductor_me",
             "fresh": "aotinductor_fresh1", "other": "notes-of-mine"}
    for key, name in names.items():
        (tmp / name).mkdir()
        (tmp / name / "lib.so").write_bytes(b"x")
        if key != "fresh":
            os.utime(tmp / name, (day_old, day_old))
    (tmp / "aotinductor_link").symlink_to(outside)
    os.utime(tmp / "aotinductor_link", (day_old, day_old), follow_symlinks=False)
    captured.load_step(sandbox / "step.pt2")
    left = {p.name for p in tmp.iterdir()}
    assert left == {names["fresh"], names["other"], "aotinductor_link"}  # a running load's, and what is not a load's
    assert (outside / "keep.txt").read_text() == "mine"


def test_precompiled_headers_live_in_the_cache_even_when_torch_fixed_their_folder_elsewhere(sandbox, monkeypatch):
    """torch's codecache fixes the headers' folder when first imported (tempfile's torchinductor_<user>): a library
    user's earlier torch.compile, or `train --compile`, imports it under /tmp, where another account can plant a
    header that our compile would include."""
    import torch._inductor.codecache as codecache

    planted = sandbox / "tmp" / "torchinductor_me" / "precompiled_headers"
    monkeypatch.setattr(codecache, "_HEADER_DIR", str(planted))  # as an import under TMPDIR leaves it
    monkeypatch.setattr(codecache, "_HEADER_LOCK_DIR", str(planted / "locks"))
    folder = compile_home.private_inductor()
    headers = Path(codecache._HEADER_DIR)
    assert headers == folder / compile_home.HEADERS and headers.is_dir() and (headers.stat().st_mode & 0o077) == 0
    assert Path(codecache._HEADER_LOCK_DIR).parent == headers


def test_a_torch_without_the_headers_folder_constant_compiles_without_precompiled_headers(sandbox, monkeypatch):
    import torch._inductor.codecache as codecache
    import torch._inductor.config as inductor_config

    monkeypatch.delattr(codecache, "_HEADER_DIR")
    before = inductor_config.cpp_cache_precompile_headers
    # torch's own patch (its config refuses monkeypatch's delete-and-set), undone after the block
    with inductor_config.patch({"cpp_cache_precompile_headers": True, "aot_inductor.precompile_headers": True}):
        compile_home.private_inductor()
        assert inductor_config.cpp_cache_precompile_headers is False
        assert inductor_config.aot_inductor.precompile_headers is False
    assert inductor_config.cpp_cache_precompile_headers is before  # as it was, for the other tests


def test_a_compile_builds_in_a_folder_of_its_own_that_goes_when_it_ends(sandbox, monkeypatch, tiny_seq2seq):
    """torch's copies of the generated sources and libraries (about as large as the packages) are not kept: the
    packages hold what they need. What a killed compile left goes once a day old, as a killed load's."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    seen = []

    def compile_and_package(exported, package_path, inductor_configs):
        seen.append(Path(cache_dir()))
        (Path(cache_dir()) / "kernel.so").write_bytes(b"\0" * 4096)  # as torch leaves its build behind
        return package_path

    monkeypatch.setattr(torch.export, "export", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_and_package)
    folder = compile_home.private_inductor()
    with compile_home.building() as build:
        captured.compile_step(captured.StaticStep.for_model(tiny_seq2seq(0, 40)), sandbox / "step.pt2")
        captured.compile_encoder(captured.StaticEncoder(tiny_seq2seq(0, 40)), sandbox / "encoder.pt2")
        load = Unpacker()
        monkeypatch.setattr(torch._inductor, "aoti_load_package", load)
        captured.load_step(sandbox / "step.pt2")  # a load during a compile (serve's thread): its own folder too
    assert seen == [build, build] and build.parent == folder / "tmp" and build.name.startswith(compile_home.BUILD)
    assert not build.exists() and not load.folders[0].exists()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)  # later compiles and loads: the shared cache
    assert {p.name for p in folder.iterdir()} == {"tmp", compile_home.HEADERS} and not list((folder / "tmp").iterdir())
