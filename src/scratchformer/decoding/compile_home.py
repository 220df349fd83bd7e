"""Where torch compiles and loads the captured decoding step (decoding/captured.py) for us: this user's own
cache, never a shared temporary folder; and what is left there afterwards.

AOTInductor compiles, builds its vector-ISA probes and loads through `torch._inductor`'s cache folder, which is
tempfile's /tmp/torchinductor_<user> unless TORCHINDUCTOR_CACHE_DIR says otherwise, and torch checks neither who
owns it nor who may write it: an account that makes that folder first can plant libraries that we would load.
`inductor_home()` points torch at <user cache>/inductor instead, after checking it. Its precompiled headers too:
torch fixes their folder (tempfile's torchinductor_<user>/precompiled_headers) when its codecache is first imported,
which a library user's own torch.compile, or `train --compile`, may do before we run; a header planted there would
be compiled into our code.

    <user cache>/inductor/            torch's build cache (TORCHINDUCTOR_CACHE_DIR)
      precompiled_headers/            its precompiled headers, whenever its codecache was imported
      tmp/                            TMPDIR and tempfile's folder while torch works for us
        unpack-XXXX/                  one package load's unpacked libraries, removed when the load returns
        build-XXXX/                   one compile's build cache (`building`), removed when it ends

A package is unpacked (17-55 MB) for each load, and torch removes that copy only when the loaded step is freed,
which a CLI process that exits, or a server stopped by a signal, never does: each load gets its own folder, removed
as soon as the libraries are mapped (Linux keeps a removed library mapped). What a killed process left there (and
earlier versions' `aotinductor_*` copies and `torchinductor_<user>` headers) is removed by the next load once it
is a day old.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer import autotune
from scratchformer.errors import N_, ConfigError, Message

INDUCTOR = "inductor"  # under this user's cache: where torch compiles and loads for us
HEADERS = "precompiled_headers"  # under it: torch's precompiled headers
UNPACK = "unpack-"  # under its tmp/: one package load's folder
BUILD = "build-"  # under its tmp/: one compile's build cache
LEFTOVERS = (UNPACK, BUILD, "aotinductor_", "torchinductor_")  # in tmp/: what killed loads and compiles left
#                                    (aotinductor_: torch's own name), and earlier versions' precompiled headers
STALE_SECONDS = 24 * 3600  # a load's or compile's folder this old belongs to no running process


_building: list[str] = []  # the build folder of the compile under way (`building`), if any


def private_inductor() -> Path:
    """<user cache>/inductor, checked (and its tmp/), made torch's TORCHINDUCTOR_CACHE_DIR for the rest of the
    process (torch reads it on each use, a lazy torch.compile's too; during `building`, that block's own folder),
    and its precompiled headers' folder: what `train` with compile calls first."""
    root = autotune.user_cache_root()
    folder = root / INDUCTOR
    for level in (root, folder, folder / "tmp", folder / HEADERS):
        try:
            autotune.private_dir(level)
        except OSError as e:
            if e.strerror == autotune.NOT_PRIVATE:
                raise ConfigError(N_("the cache folder {root} is {NOT_PRIVATE}"), root=level,
                                  NOT_PRIVATE=Message(autotune.NOT_PRIVATE)) from None
            raise ConfigError(N_("cannot make the cache folder {root} ({value}): set XDG_CACHE_HOME to a folder of "
                                 "yours"), root=level, value=e.strerror or e) from None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _building[-1] if _building else str(folder)
    _own_headers(folder / HEADERS)
    return folder


@contextmanager
def building() -> Iterator[Path]:
    """For the block (one compile of a model's packages), torch's build cache is a fresh folder of its own,
    tmp/build-XXXX, removed after it: the packages hold all they need, and torch's copies of the generated sources
    and libraries (about as large as the packages, 30 MB for the shipped model's) would otherwise stay for good.
    The precompiled headers stay shared."""
    folder = private_inductor()
    _remove_stale(folder / "tmp")
    work = tempfile.mkdtemp(prefix=BUILD, dir=folder / "tmp")
    _building.append(work)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = work
    try:
        yield Path(work)
    finally:
        _building.remove(work)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _building[-1] if _building else str(folder)
        shutil.rmtree(work, ignore_errors=True)


def _own_headers(headers: Path) -> None:
    """torch's precompiled headers in `headers`: its codecache fixed their folder under tempfile's folder of the
    moment it was imported (module constants, read on each compile). A torch without those constants gets no
    precompiled headers from us: slower compiles, never a header from somewhere else."""
    import torch._inductor.codecache as codecache
    import torch._inductor.config as inductor_config

    if isinstance(getattr(codecache, "_HEADER_DIR", None), str) and hasattr(codecache, "_HEADER_LOCK_DIR"):
        codecache._HEADER_DIR = str(headers)
        codecache._HEADER_LOCK_DIR = str(headers / "locks")
    else:
        inductor_config.cpp_cache_precompile_headers = False
        inductor_config.aot_inductor.precompile_headers = False


@contextmanager
def inductor_home(unpack: bool = False) -> Iterator[Path]:
    """For the block, torch compiles and loads in <user cache>/inductor (TORCHINDUCTOR_CACHE_DIR, for good) and
    takes its temporary files from <user cache>/inductor/tmp (TMPDIR and tempfile's, for its compiler and its
    vector-ISA check subprocesses too): never tempfile's /tmp/torchinductor_<user>, which another account can make
    and plant libraries in. Each level is checked first (autotune.private_dir: a real folder of this user's that
    nobody else may write); anything else is a one-line ConfigError, and nothing is compiled or loaded.
    unpack (a package load): the temporary folder is a fresh tmp/unpack-XXXX, removed after the block."""
    folder = private_inductor()
    work = None
    if unpack:
        _remove_stale(folder / "tmp")
        work = tempfile.mkdtemp(prefix=UNPACK, dir=folder / "tmp")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = work or str(folder / "tmp")
    try:
        yield folder
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _remove_stale(tmp: Path) -> None:
    """The load folders (ours and torch's own) a killed process left in `tmp`, once a day old. Only real folders
    of those names: tmp/ is checked as this user's alone, and rmtree never follows a link inside."""
    now = time.time()
    for entry in tmp.iterdir():
        if not entry.name.startswith(LEFTOVERS):
            continue
        try:
            info = entry.lstat()
            if os.path.isdir(entry) and not entry.is_symlink() and now - info.st_mtime > STALE_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass
