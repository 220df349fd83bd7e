"""The exports an engine keeps (CTranslate2, ONNX): RUN_DIR/export/<name>/, or, when the run folder cannot be
written or its export/ is not a real folder (a symlink is never followed), a folder of this user's cache (never a
shared, predictable temporary path someone else could plant).

    <folder>/             what the format wrote, with its stamp (what it was made from: the weights' digest ...)
      .content.json       the stamp again and the sha256 of every file written: checked before each use, so a
                          file swapped or damaged afterwards is noticed and the export made again
    <user cache>/exports/<hash of folder and stamp>.json
                          the same sha256s, kept where only this user writes: a stamp and digests inside the run
                          folder prove nothing (anyone who can write the folder, or a cloned repository, can forge
                          them), so a cache there is used only if this user made it, from these weights

Written beside its final name and renamed (atomic): never half a cache. A half-written `.NAME.XXXX` folder left by
a killed export is ignored (and removed once it is a day old); another process that got there first is fine.

Bounded: each use marks a folder of this user's cache as used (the mtime of its content record), and each new
compiled step removes the least recently used of them until they hold SCRATCHFORMER_CACHE_LIMIT_GB (default 2)
or less (`trim`). They are remade on demand; the decoding step compiled last always stays.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.autotune import NOT_PRIVATE, private_dir, user_cache_root
from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, ConfigError, Message
from scratchformer.runs.names import EXPORT

# autotune.NOT_PRIVATE (autotune imports nothing of ours), marked here for the catalog; tests/i18n holds the two equal
N_("not a folder of yours that only you can write (a link, another owner, or group/world-writable): remove it, or set "
   "XDG_CACHE_HOME elsewhere")

CONTENT = ".content.json"
STALE_SECONDS = 24 * 3600  # a partial export this old belongs to no running process
LIMIT_VAR = "SCRATCHFORMER_CACHE_LIMIT_GB"  # the most the cache's compiled steps and exports hold together
DEFAULT_LIMIT_GB = 2.0  # ~36 sets of the shipped model's three packages (55 MB)


def user_cache_dir() -> Path:
    """$XDG_CACHE_HOME/scratchformer (or ~/.cache/scratchformer), 0700: made if missing, refused (one line) unless
    it is a real folder owned by this user that nobody else may write."""
    root = user_cache_root()
    try:
        return private_dir(root)
    except OSError as e:
        if e.strerror == NOT_PRIVATE:
            raise ConfigError(N_("the cache folder {root} is {NOT_PRIVATE}"), root=root,
                              NOT_PRIVATE=Message(NOT_PRIVATE)) from None
        raise ConfigError(N_("cannot make the cache folder {root} ({value}): set XDG_CACHE_HOME to a folder of yours"),
                          root=root, value=e.strerror or e) from None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def cache_folder(run_path: Path, name: str, stamp: dict[str, Any]) -> Path:
    """RUN_DIR/export/<name>, or <user cache>/<name>-<hash of the stamp> when the run folder cannot be written or
    its export/ is a symlink (never followed: it could point anywhere) or not a folder."""
    home = Path(run_path) / EXPORT
    if _writable(home) and not home.is_symlink():
        return home / name
    digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:24]
    return user_cache_dir() / f"{name}-{digest}"


def content_digests(folder: Path) -> dict[str, str]:
    """sha256 of every regular file below `folder` (but the content record itself), by relative path."""
    digests = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_symlink() or not path.is_file() or path.name == CONTENT:
            continue
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digests[str(path.relative_to(folder))] = h.hexdigest()
    return digests


def intact(folder: Path, stamp: dict[str, Any]) -> bool:
    """The cached export at `folder` was made from `stamp`, and its files are the ones written then."""
    return _intact_files(folder, stamp) is not None


def _intact_files(folder: Path, stamp: dict[str, Any]) -> dict[str, str] | None:
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return None
    try:
        record = loads_json((folder / CONTENT).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON, nested too deeply: rebuilt
        return None
    files = content_digests(folder)
    return files if isinstance(record, dict) and record.get("stamp") == stamp and record.get("files") == files else None


def _voucher(folder: Path, stamp: dict[str, Any]) -> Path:
    """<user cache>/exports/<hash>.json: this user's own record of what it wrote at `folder` from `stamp`."""
    key = json.dumps({"folder": os.path.abspath(folder), "stamp": stamp}, sort_keys=True).encode()
    return private_dir(user_cache_dir() / "exports") / f"{hashlib.sha256(key).hexdigest()[:32]}.json"


def _vouched(folder: Path, stamp: dict[str, Any], files: dict[str, str]) -> bool:
    try:
        return loads_json(_voucher(folder, stamp).read_text(encoding="utf-8")) == {"files": files}
    except (OSError, ValueError):
        return False


def _vouch(folder: Path, stamp: dict[str, Any], files: dict[str, str]) -> None:
    path = _voucher(folder, stamp)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"files": files}) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def limit_bytes() -> int:
    """SCRATCHFORMER_CACHE_LIMIT_GB in bytes (default 2 GB; 0 keeps only the step compiled last)."""
    raw = os.environ.get(LIMIT_VAR, "").strip()
    try:
        gb = float(raw) if raw else DEFAULT_LIMIT_GB
    except ValueError:
        gb = -1.0
    if not (math.isfinite(gb) and gb >= 0):
        raise ConfigError(N_("{var}={value!r}: give the gigabytes of compiled decoding steps and exports the cache "
                             "folder may keep, a number >= 0 (default {default:g}), or unset it"),
                          var=LIMIT_VAR, value=raw, default=DEFAULT_LIMIT_GB)
    return int(gb * 2**30)


def _mark_used(folder: Path) -> None:
    """The last use of a folder of this user's cache, read by `trim`: its content record's mtime (a run folder's
    export is never touched)."""
    if folder.parent == user_cache_root():
        try:
            os.utime(folder / CONTENT)
        except OSError:
            pass


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):  # never into a link
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def trim(keep: Path) -> list[tuple[Path, int]]:
    """The least recently used cached folders of this user's cache (compiled steps, exports made there: a real
    folder whose name does not start with "." and that holds a content record), removed until those left hold the
    limit (`limit_bytes`) or less; `keep` (the one just made) always stays. Returns what it removed, with sizes."""
    root = user_cache_dir()
    limit = limit_bytes()
    found = []
    for entry in root.iterdir():
        if entry.name.startswith(".") or entry == keep:
            continue
        try:
            info, record = entry.lstat(), (entry / CONTENT).lstat()
        except OSError:
            continue  # not ours to trim: the autotune records, the vouchers, torch's build folder
        if stat.S_ISDIR(info.st_mode) and stat.S_ISREG(record.st_mode):
            found.append((record.st_mtime, entry.name, entry))
    sizes = {entry: _size(entry) for *_, entry in found}
    total = sum(sizes.values()) + _size(keep)
    removed = []
    for *_, entry in sorted(found):  # oldest use first
        if total <= limit:
            break
        _remove(entry)
        total -= sizes[entry]
        removed.append((entry, sizes[entry]))
    return removed


def _clean_stale(parent: Path, name: str) -> None:
    """Partial exports of `name` (.NAME.XXXX) left by killed processes a day ago or more."""
    now = time.time()
    for leftover in parent.glob(f".{name}.*"):
        try:
            if now - leftover.lstat().st_mtime > STALE_SECONDS:
                _remove(leftover)
        except OSError:
            pass


def cached_export(run_path: Path, name: str, stamp: dict[str, Any], write: Callable[[Path], None],
                  complete: Callable[[Path], bool] = lambda folder: True) -> Path:
    """The folder holding the export `name` of the run at `run_path` made from `stamp`: the cached one if it is
    intact (stamp and content hashes match, `complete(folder)`) and this user's own record says it made those
    files from `stamp`, else made now by `write(folder)`."""
    return _cached(cache_folder(Path(run_path), name, stamp), name, stamp, write, complete, vouched=True)


def private_cache(name: str, stamp: dict[str, Any], write: Callable[[Path], None]) -> Path:
    """<user cache>/<name>, made by `write(folder)` unless the one there was made from `stamp` and is intact: what
    this user compiled for themselves (decoding's captured steps), never a folder found beside a run."""
    return _cached(user_cache_dir() / name, name, stamp, write)


def find_private(name: str, stamp: dict[str, Any]) -> Path | None:
    """<user cache>/<name> if it is there, intact and made from `stamp`; None otherwise. Makes nothing (a plain
    translate call looks here without creating folders)."""
    if not (user_cache_root() / name).is_dir():
        return None
    folder = user_cache_dir() / name  # the owner and mode checks
    if not intact(folder, stamp):
        return None
    _mark_used(folder)
    return folder


def _cached(folder: Path, name: str, stamp: dict[str, Any], write: Callable[[Path], None],
            complete: Callable[[Path], bool] = lambda folder: True, vouched: bool = False) -> Path:
    """vouched: the folder may lie where others write (a run folder): used only with this user's own record."""
    files = _intact_files(folder, stamp)
    if files is not None and complete(folder) and (not vouched or _vouched(folder, stamp, files)):
        _mark_used(folder)
        return folder
    _clean_stale(folder.parent, name)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=folder.parent))  # beside it: the rename is atomic
    except OSError as e:
        raise ConfigError(N_("the {name} engine exports into {parent} on first use and cannot write there "
                             "({value}): copy the run directory somewhere writable"), name=name, parent=folder.parent,
                          value=e.strerror or e) from None
    try:
        write(tmp)
        record = {"stamp": stamp, "files": content_digests(tmp)}
        (tmp / CONTENT).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        if vouched:  # before the rename: a folder there is never used without it
            _vouch(folder, stamp, record["files"])
        _remove(folder)  # a stale export, or anything else under that name (a file left where the folder goes)
        os.rename(tmp, folder)
    except PermissionError as e:
        raise ConfigError(N_("the {name} engine exports into {folder} on first use and cannot write there "
                             "({strerror}): copy the run directory somewhere writable"), name=name, folder=folder,
                          strerror=e.strerror) from None
    except OSError:
        if not intact(folder, stamp):  # not another process that got there first
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
