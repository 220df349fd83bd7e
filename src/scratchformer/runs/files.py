"""Files of a run, written atomically (temporary name + rename): a crash, a full disk or a kill at any moment
leaves the previous file intact."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it over `path` (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        # mkstemp (and safetensors' writer) make 0600; a finished file gets the usual permissions (umask)
        os.chmod(tmp, 0o666 & ~current_umask())
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: Any, allow_nan: bool = True) -> None:
    """`data` as indented JSON, atomically; allow_nan=False: a NaN or infinity is a ValueError (strict JSON)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=allow_nan) + "\n", encoding="utf-8")


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """safetensors' save_file, then the permissions the umask asks for (its writer makes files 0600). The one call
    of save_file: a failed write (a full disk, a file-size limit), which safetensors raises as a SafetensorError,
    is an OSError naming `path` here, so every caller's `except OSError` turns it into its one line."""
    from safetensors import SafetensorError

    try:
        save_file(tensors, str(path), metadata={"format": "pt"})
    except SafetensorError as e:  # "Error while serializing: I/O error: File too large (os error 27)"
        code = re.search(r"os error (\d+)", str(e))
        if code:
            raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from None
        raise OSError(errno.EIO, str(e).splitlines()[0][:200] if str(e) else type(e).__name__, str(path)) from None
    os.chmod(path, 0o666 & ~current_umask())
