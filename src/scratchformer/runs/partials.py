"""Output folders written beside their final place and swapped in (runs/prepare.py's writing_folder): the
partial folder .OUT.XXXX.partial, held by a lock file inside it while its process lives; the swap that moves the
replaced entries aside first (.OUT.XXXX.replaced) and puts them back on any failure; and the clean-up of the
partial folders a killed process left (a real folder of this user's whose lock nobody holds; never a link, never
another user's)."""

from __future__ import annotations

import glob
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from scratchformer.errors import N_, ConfigError
from scratchformer.runs.names import LOCK

PARTIAL = ".partial"  # .OUT.XXXX.partial: an output folder being written, or the entries it replaces
ASIDE = ".replaced"  # .OUT.XXXX.replaced: the entries a swap replaces, until the new ones are in (never cleaned up
#                     on its own: if a process is killed mid-swap, the user's earlier files are there)
STALE_SECONDS = 24 * 3600  # a partial folder without a lock file this old belongs to no running process


def remove(entry: Path) -> None:
    """One entry of an output folder: a folder (not followed if a symlink) or a file."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)


def swap(tmp: Path, out: Path, old: list[str], new: list[str], flag: str) -> None:
    """`old` entries of `out` moved aside, `new` ones of `tmp` moved in; on any failure, put back as they were."""
    aside, hold = partial_folder(out, ASIDE)
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        for name in old:
            os.rename(out / name, aside / name)
            moved_old.append(name)
        for name in new:
            os.replace(tmp / name, out / name)
            moved_new.append(name)
    except BaseException as e:
        for name in moved_new:
            remove(out / name)
        for name in moved_old:
            os.rename(aside / name, out / name)
        shutil.rmtree(aside, ignore_errors=True)  # empty again (but its lock file)
        if isinstance(e, OSError):
            raise ConfigError(N_("{flag} {out}: could not move the new files in ({value}); it is as it was"), flag=flag,
                              out=out, value=e.strerror or e) from None
        raise
    finally:
        hold.close()
    shutil.rmtree(aside, ignore_errors=True)


def partial_folder(out: Path, suffix: str = PARTIAL) -> tuple[Path, Any]:
    """A new folder .OUT.XXXX.partial beside `out` and its lock file, held while the returned file is open."""
    import fcntl

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=suffix, dir=out.parent))
    hold = open(tmp / LOCK, "w")
    fcntl.flock(hold.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    return tmp, hold


def clean_partials(out: Path) -> None:
    """Remove the .OUT.XXXX.partial folders beside `out` that a killed process of this user left: a real folder
    (not a link), ours, whose lock nobody holds (or, without a lock file, a day old). Anything else stays."""
    import fcntl

    for leftover in Path(out).parent.glob(f".{glob.escape(Path(out).name)}.*{PARTIAL}"):
        try:
            info = leftover.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            try:
                fd = os.open(leftover / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                if time.time() - info.st_mtime > STALE_SECONDS:
                    shutil.rmtree(leftover, ignore_errors=True)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live writer: BlockingIOError
                shutil.rmtree(leftover, ignore_errors=True)
            finally:
                os.close(fd)
        except OSError:
            continue
