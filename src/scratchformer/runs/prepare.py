"""One way into an output folder: `prepare_run_dir`, which every command that writes a folder calls (train, export,
lab) with what it writes, and `writing_folder`, the folder written beside and swapped in (export, lab).

    TRAIN = Writes("train", TRAIN_ENTRIES, in_place=True)      what a command writes at the top of its folder
    prepare_run_dir(out, TRAIN, overwrite=..., resume=...)      checked (and, in place, made and cleared) before work
    with writing_folder(out, Writes("lab", names, append=True), overwrite) as tmp:  ...   written beside, moved in

The rules are runs/folders.py's (its docstring), the same for every command: a new or empty folder is written; a
non-empty folder we did not make, or another command's, never; --overwrite deletes only the names the command
writes (`Writes.names`, a fixed list in code) and names the user's files it kept; `train --resume` continues the
run in the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.errors import N_, ConfigError
from scratchformer.runs.folders import (
    check_clearable,
    check_folder,
    clear_folder,
    holds_run,
    never_trained,
    read_marker,
    refuse_protected,
    run_lock,
    say_kept,
    write_marker,
)
from scratchformer.runs.names import CONFIG, LOCK, MARKER, TRAIN_ENTRIES
from scratchformer.runs.partials import clean_partials, partial_folder, swap


@dataclass(frozen=True)
class Writes:
    """What `scratchformer COMMAND` writes at the top of its output folder.

    names: every name it may write there (a fixed list in code): the only ones its --overwrite deletes.
    in_place: it writes into the folder itself, over hours (train: checkpoints, metrics, the lock held); the
    others write beside it and swap their output in (writing_folder), so a failure leaves the folder as it was.
    append: each call adds its files to the folder it made before (lab: one experiment at a time)."""

    command: str
    names: Collection[str]
    in_place: bool = False
    append: bool = False


TRAIN = Writes("train", TRAIN_ENTRIES, in_place=True)
IF_ANY = "if-any"  # resume=IF_ANY: continue the run if there is one, else start it (torchrun --max-restarts)


def prepare_run_dir(out: str | Path, writes: Writes, *, overwrite: bool = False, resume: bool | str = False,
                    main: bool = True) -> Path:
    """Check that `scratchformer COMMAND` may write the folder `out`, before any work, and prepare it; returns `out`.
    A one-line error, with nothing touched, when it may not.

    Every command: a new or empty folder, yes; a folder we did not make that holds files, or another command's
    output, never (--overwrite neither); its own earlier output only with --overwrite (or `writes.append`);
    --overwrite never clears the current directory, its parents, home or the root. A command that writes in place
    (train) also finds `out` made and writable, and, under the folder's lock, cleared of its own earlier output
    (--overwrite: only `writes.names`, the user's files kept and named; without it, only the leftovers of a start
    that failed before it saved anything). resume: continue the run in `out` (nothing is cleared); True refuses a
    folder with no run, IF_ANY starts one there. main=False (another rank of a distributed run): `out` is only
    made; rank 0 checks and clears."""
    out = Path(out)
    if main:
        _check(out, writes, overwrite, resume)
    if not writes.in_place:
        return out
    _make_writable(out)
    if main:
        with run_lock(out):
            if holds_run(out) and not resume:
                if not overwrite and not never_trained(out):
                    raise ConfigError(N_("{out} already holds a run: add --resume to continue it, --overwrite to "
                                         "start over, or choose another --out"), out=out)
                kept = clear_folder(out, writes.command, owned=writes.names)  # a failed start's leftovers go quietly
                if overwrite:
                    say_kept(out, kept, writes.command)
    return out


def _check(out: Path, writes: Writes, overwrite: bool, resume: bool | str) -> None:
    if writes.in_place and holds_run(out):  # a run is its command's business: --resume continues it
        if overwrite and not resume:  # --overwrite replaces it only where that command marked it
            refuse_protected(out)
            check_clearable(out, writes.command)
        return
    if resume is True:
        raise ConfigError(N_("--resume: {out} holds no run to resume (no {CONFIG}, no {MARKER}): check --out, or "
                             "leave out --resume to start a new run"), out=out, CONFIG=CONFIG, MARKER=MARKER)
    check_folder(out, writes.command, overwrite, writes.append)


def _make_writable(out: Path) -> None:
    """`out` exists as a writable directory afterwards, or a one-line ConfigError naming it."""
    if out.exists() and not out.is_dir():
        raise ConfigError(N_("--out {out} is a file, not a directory: choose another --out"), out=out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise ConfigError(N_("--out {out}: cannot write there ({value}): choose another --out"), out=out,
                          value=e.strerror or e) from None


@contextmanager
def writing_folder(out: str | Path, writes: Writes, overwrite: bool = False, **info: Any) -> Iterator[Path]:
    """Yield an empty temporary folder beside `out` to write into; on success its entries become `out`'s.

    writes.names: every name the command may write at the top of `out`: the only names its --overwrite deletes, or
    its append replaces. A new `out` is the temporary folder renamed (atomic). An existing one of ours: under its
    lock, the entries replaced are moved aside, the new ones moved in, and the old ones dropped only then; the
    user's files are kept and named on stderr, and the marker lists what the command wrote (with `info`). A failure
    leaves `out` as it was."""
    prepare_run_dir(out, writes, overwrite=overwrite)
    out = Path(os.path.abspath(out))  # `--out .` too has a parent to write beside
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        clean_partials(out)
        tmp, hold = partial_folder(out)
    except OSError as e:
        raise ConfigError(N_("{flag} {out}: cannot write beside it in {parent} ({value}): choose a folder you can "
                             "write"), flag="--out", out=out, parent=out.parent, value=e.strerror or e) from None
    try:
        yield tmp
        names = sorted(p.name for p in tmp.iterdir() if p.name != LOCK)
        stray = [n for n in names if n not in writes.names]
        if stray:  # a command's list of names is out of date: a bug of ours, before anything is moved
            raise RuntimeError(f"scratchformer {writes.command} wrote {', '.join(stray)}, not in its list of names")
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; a finished folder gets the usual permissions
        write_marker(tmp, writes.command, names, **info)
        if not out.exists() and not out.is_symlink():
            (tmp / LOCK).unlink(missing_ok=True)  # a converter may have remade the folder
            try:
                os.rename(tmp, out)
                return
            except OSError:  # another writer made `out` meanwhile: merge under its lock below
                pass
        _merge(tmp, out, writes, names, overwrite, info)
    finally:
        hold.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _merge(tmp: Path, out: Path, writes: Writes, names: list[str], overwrite: bool, info: dict[str, Any]) -> None:
    command, owned = writes.command, frozenset(writes.names)
    with run_lock(out, leave=False):
        check_folder(out, command, overwrite, writes.append)  # again: another writer may have come first
        marker = read_marker(out) or {"entries": []}
        present = {e.name for e in out.iterdir()} - {LOCK}
        replaceable = owned if overwrite else owned & set(marker["entries"])  # append: what it wrote before
        clash = sorted(n for n in names if n in present and n not in replaceable)
        if clash:
            raise ConfigError(N_("{flag} {value} exists and was not written by scratchformer {command}: move it "
                                 "away or choose another {flag}"), flag="--out", value=out / clash[0], command=command)
        old = sorted(present & ({*replaceable, MARKER} if overwrite else {*names, MARKER}))
        kept = sorted(present - set(old)) if overwrite else []
        if not overwrite:  # the marker names what it wrote before too
            write_marker(tmp, command, [*names, *(replaceable & present)], **info)
        swap(tmp, out, old, [*names, MARKER], "--out")
        say_kept(out, kept, command)


def _umask() -> int:
    from scratchformer.runs.files import current_umask

    return current_umask()
