"""The one owner of every folder and file the commands write: `train --out`, `export --out`, `lab --out`,
`report --out`, `plot --out`, `average --out`, `consolidate --out` and the engines' export caches.

The rule, once (a command enters through runs/prepare.py's `prepare_run_dir`, with what it writes):
  - a folder we make holds a marker, FOLDER/.scratchformer-run: {"created_by": "scratchformer", "command": ...,
    "entries": [what that command wrote]} (a train run's older marker has no "command": it is a train run); a
    marker that is a symlink, or not a regular file, is not ours;
  - --overwrite refuses a folder without our marker, the current directory and its parents, the home directory
    and the file system root (one line, nothing deleted);
  - on its own earlier output a command deletes only the names it writes, a fixed list in code (TRAIN_ENTRIES, an
    export format's WRITES, lab's experiments), never names read from the marker, and names the user files it kept;
  - an output folder is written beside it (.OUT.XXXX.partial) and swapped in; the entries it replaces are moved
    aside first and put back if anything fails: a failure leaves the folder as it was. A partial folder left by a
    killed process (its lock no longer held) is removed by the next write beside it;
  - a single output file is never one of a run's own files, and a file that already exists is replaced only when
    --overwrite names it;
  - writes are atomic (a temporary name, then a rename: runs/files.py), and the folder's lock (RUN_DIR/.lock,
    flock) is held where two writers could meet.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, CheckpointError, ConfigError
from scratchformer.runs.files import write_json
from scratchformer.runs.names import CHECKPOINTS, CONFIG, LOCK, MARKER, TRAIN_ENTRIES, WEIGHTS
from scratchformer.runs.partials import remove

MAX_MARKER_BYTES = 1 << 20  # a marker is a few hundred bytes; a bigger file is not one of ours


# -- the marker -------------------------------------------------------------------------------------------------

def read_marker(folder: Path) -> dict[str, Any] | None:
    """FOLDER's marker as {"command": ..., "entries": [...], ...}, or None when FOLDER has no valid one of ours."""
    path = Path(folder) / MARKER
    try:
        info = path.lstat()  # a symlink is not ours, whatever it points at
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MARKER_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as f:
            data = loads_json(f.read(MAX_MARKER_BYTES + 1))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON, nested too deeply: not ours
        return None
    if not isinstance(data, dict) or data.get("created_by") != "scratchformer":
        return None
    command = data.get("command", "train")  # the markers of older train runs name no command
    entries = data.get("entries", [])
    if not isinstance(command, str) or not isinstance(entries, list):
        return None
    return {**data, "command": command, "entries": [e for e in entries if isinstance(e, str)]}


def write_marker(folder: Path, command: str = "train", entries: Iterable[str] = (), **info: Any) -> None:
    """FOLDER/.scratchformer-run: `command` made this folder and wrote `entries` (added to those it names already).
    A train run's marker is written once (its entries are TRAIN_ENTRIES)."""
    from scratchformer import __version__

    old = read_marker(folder)
    if command == "train" and old is not None and old["command"] == "train":
        return
    kept = old["entries"] if old is not None and old["command"] == command else []
    names = sorted({*kept, *entries} - {MARKER, LOCK})
    data: dict[str, Any] = {"created_by": "scratchformer", "command": command, "version": __version__, **info}
    if command != "train":
        data["entries"] = names
    write_json(Path(folder) / MARKER, data)


def is_marked_run(run_dir: Path) -> bool:
    """A folder `scratchformer train` made."""
    marker = read_marker(run_dir)
    return marker is not None and marker["command"] == "train"


def holds_run(run_dir: Path) -> bool:
    return (Path(run_dir) / CONFIG).exists() or (Path(run_dir) / MARKER).exists()


def never_trained(run_dir: Path) -> bool:
    """A folder `scratchformer train` made whose start failed before it saved anything (no weights, no checkpoint):
    a bad corpus line, a value refused late. It is ours and holds nothing to keep, so the same command may start
    again there (its retry with the flag the error suggested) without --overwrite or --resume."""
    run_dir = Path(run_dir)
    return is_marked_run(run_dir) and not (run_dir / WEIGHTS).exists() and not (run_dir / CHECKPOINTS).exists()


def own_entries(marker: dict[str, Any]) -> set[str]:
    """The names at the top of a marked folder that its command wrote (the marker itself included)."""
    names = TRAIN_ENTRIES if marker["command"] == "train" else marker["entries"]
    return {*names, MARKER}


def enclosing_output(path: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest folder above `path` that one of our commands made, with its marker, or a run without one (as
    models/en-zh: config.json beside weights or checkpoints, counted as a train run); None if there is none."""
    for folder in Path(os.path.abspath(path)).parents:
        marker = read_marker(folder)
        if marker is not None:
            return folder, marker
        if (folder / CONFIG).is_file() and ((folder / WEIGHTS).is_file() or (folder / CHECKPOINTS).is_dir()):
            return folder, {"command": "train", "entries": []}
    return None


def refuse_inside_output(path: Path, flag: str = "--out") -> None:
    """A one-line ConfigError when `path` is, or lies inside, an entry a command of ours wrote in the folder above
    it (a run's config.json, model.safetensors, checkpoints/, export/ ...): those are that command's alone."""
    found = enclosing_output(path)
    if found is not None:
        folder, marker = found
        top = Path(os.path.abspath(path)).relative_to(folder).parts[0]
        if top in own_entries(marker):
            raise ConfigError("{flag} {path} is one of the files of {folder} (written by scratchformer {command}): "
                              "choose a place outside them", flag=flag, path=path, folder=folder,
                              command=marker["command"])


# -- what --overwrite may clear -----------------------------------------------------------------------------------

def refuse_protected(folder: Path, flag: str = "--overwrite") -> None:
    """A one-line CheckpointError for the current directory, one of its parents, the home directory or the root."""
    target, here = Path(folder).resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        raise CheckpointError("{flag} {folder}: that is the current directory or one of its parents; choose a folder "
                              "below it", flag=flag, folder=folder)
    if target == Path.home().resolve() or target in Path.home().resolve().parents or target == Path(target.anchor):
        raise CheckpointError("{flag} {folder}: refusing to clear the home directory, its parents or the file system "
                              "root; choose an output folder", flag=flag, folder=folder)


def clear_folder(folder: Path, command: str, flag: str = "--overwrite", owned: Collection[str] | None = None
                 ) -> list[str]:
    """Delete the names `scratchformer COMMAND` writes (`owned`, a fixed list in code; train's: TRAIN_ENTRIES) in
    `folder`, and nothing else, never the names its marker lists; refuse anything we did not make. Returns the
    names of the entries kept (the user's)."""
    check_clearable(folder, command, flag)
    ours, kept = {*(TRAIN_ENTRIES if owned is None and command == "train" else owned or ()), MARKER}, []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name in ours:
            remove(entry)
        elif entry.name != LOCK:  # held by this process
            kept.append(entry.name)
    return kept


def check_clearable(folder: Path, command: str, flag: str = "--overwrite") -> dict[str, Any]:
    """The marker of `folder` if `scratchformer COMMAND --overwrite` may clear it, else a one-line CheckpointError
    (not ours, another command's, or a protected place); nothing is touched."""
    folder = Path(folder)
    refuse_protected(folder, flag)
    marker = read_marker(folder)
    if marker is None:
        raise CheckpointError("{flag} {folder}: not made by scratchformer {command} (no {marker} file): delete it "
                              "yourself or choose another --out", flag=flag, folder=folder, command=command,
                              marker=MARKER)
    if marker["command"] != command:
        raise CheckpointError("{flag} {folder}: made by scratchformer {other}, not by scratchformer {command}: choose "
                              "another --out", flag=flag, folder=folder, other=marker["command"], command=command)
    return marker


def clear_run(run_dir: Path, flag: str = "--overwrite") -> list[str]:
    """What `train --overwrite` deletes: the entries training wrote (TRAIN_ENTRIES), in a folder train marked."""
    return clear_folder(run_dir, "train", flag)


def say_kept(folder: Path, kept: list[str], command: str, say: Callable[..., str] | None = None) -> None:
    """The line naming what --overwrite kept; `say` (i18n.say, from a caller that may import it) translates it."""
    if kept:
        say = say or (lambda template, **fields: template.format(**fields))
        print(say(N_("--overwrite {folder}: kept {kept} (not written by scratchformer {command})"), folder=folder,
                  kept=", ".join(kept), command=command), file=sys.stderr)


_HELD: dict[str, list] = {}  # resolved run dir -> [open lock file, depth]: the lock is re-entrant in a process


@contextmanager
def run_lock(run_dir: Path, leave: bool = True) -> Iterator[None]:
    """Hold RUN_DIR/.lock (flock, exclusive) for the block; a second holder fails at once, naming the first.

    The file holds "PID HOST" while locked. The kernel drops a flock when its process dies, so a file left by
    a killed run is not a lock. Re-entrant within one process (the CLI takes it, then the trainer). leave=False:
    the file is removed on release (an output folder's merge leaves no .lock behind); a holder checks, once
    locked, that the file it locked is still the one at that name."""
    import fcntl
    import socket

    key = str(Path(run_dir).resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    path = Path(run_dir) / LOCK
    while True:
        f = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().split()
            f.close()
            who = f"pid {holder[0]} ({' '.join(holder[1:]) or 'unknown host'})" if holder else "another process"
            raise CheckpointError(N_("{run_dir} is in use by {who}: wait for it or choose another --out"),
                                  run_dir=run_dir, who=who) from None
        if _same_file(f, path):
            break
        f.close()  # its holder removed it on release meanwhile: lock the file now at that name
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()} {socket.gethostname()}\n")
    f.flush()
    _HELD[key] = [f, 0]
    try:
        yield
    finally:
        del _HELD[key]
        if not leave:
            path.unlink(missing_ok=True)  # while locked: a process that opened it meanwhile sees it gone, retries
        f.truncate(0)  # before unlocking: a new holder writes its own pid after taking the lock
        f.close()  # closing drops the flock


def _same_file(f, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(f.fileno()), os.stat(path))
    except OSError:
        return False


# -- an output folder, written whole ----------------------------------------------------------------------------

def check_folder(out: Path, command: str, overwrite: bool = False, append: bool = False,
                 flag: str = "--out") -> None:
    """May `scratchformer COMMAND` write the folder `out`? A one-line error before any work if not.

    A new or empty folder: yes. Its own earlier output: with --overwrite (or always, for a command such as `lab`
    that adds to its folder: append=True). A folder we did not make, or another command's: never."""
    out = Path(out)
    if out.is_symlink() and not out.exists():
        raise ConfigError(N_("{flag} {out} is a link to {readlink}, which does not exist: give a folder"), flag=flag,
                          out=out, readlink=os.readlink(out))
    if out.exists() and not out.is_dir():
        raise ConfigError("{flag} {out} is a file: give a folder", flag=flag, out=out)
    if overwrite:
        refuse_protected(out)
    refuse_inside_output(out, flag)
    if not out.is_dir() or not any(e.name != LOCK for e in out.iterdir()):
        return
    marker = read_marker(out)
    if marker is None:
        if overwrite:
            check_clearable(out, command)  # raises: not made by scratchformer COMMAND
        raise ConfigError("{flag} {out} already holds files not written by scratchformer {command} (--overwrite "
                          "replaces only a folder it made): choose a new or empty {flag}", flag=flag, out=out,
                          command=command)
    if marker["command"] != command:
        raise ConfigError("{flag} {out} holds the output of scratchformer {other}, not of scratchformer {command}: "
                          "choose another {flag}", flag=flag, out=out, other=marker["command"], command=command)
    if not (overwrite or append):
        raise ConfigError("{flag} {out} already holds an earlier scratchformer {command} output: add --overwrite to "
                          "replace it, or choose another {flag}", flag=flag, out=out, command=command)


# -- one output file ----------------------------------------------------------------------------------------------

def check_file(path: Path, command: str, overwrite: bool = False, default_name: str | None = None,
               own: Path | None = None, flag: str = "--out") -> Path:
    """The file `scratchformer COMMAND` may write for `path`, or a one-line error before any work.

    A folder is refused, unless the command has a default file name for it (`plot --out DIR`: DIR/NAME) and no
    --overwrite is given (--overwrite names a file, never a folder). A run's own files (any entry of a folder one
    of our commands made) are never written, except `own`: the command's own output there (`average`'s
    RUN_DIR/averaged.safetensors). Any other file that exists is replaced only with --overwrite."""
    path = Path(path)
    if path.is_dir():
        if overwrite or default_name is None:
            if overwrite:
                raise ConfigError(N_("{flag} {path} is a folder: give the file to write (--overwrite replaces a file, "
                                     "never a folder)"), flag=flag, path=path)
            raise ConfigError("{flag} {path} is a folder: give the file to write", flag=flag, path=path)
        path = path / default_name
        if path.is_dir():
            raise ConfigError("{flag} {path} is a folder: give the file to write", flag=flag, path=path)
    if own is not None and os.path.abspath(path) == os.path.abspath(own):
        return path
    refuse_inside_output(path, flag)
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise ConfigError("{flag} {path} already exists: add --overwrite to replace it, or choose another {flag}",
                          flag=flag, path=path)
    return path
