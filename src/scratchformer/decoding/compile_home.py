"""Where torch compiles and loads the captured decoding step (decoding/captured.py) for us: this user's own
cache, never a shared temporary folder.

AOTInductor compiles, builds its vector-ISA probes and loads through `torch._inductor`'s cache folder, which is
tempfile's /tmp/torchinductor_<user> unless TORCHINDUCTOR_CACHE_DIR says otherwise, and torch checks neither who
owns it nor who may write it: an account that makes that folder first can plant libraries that we would load.
`inductor_home()` points torch at <user cache>/inductor instead, after checking it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer import autotune
from scratchformer.errors import ConfigError

INDUCTOR = "inductor"  # under this user's cache: where torch compiles and loads for us


def private_inductor() -> Path:
    """<user cache>/inductor, checked (and its tmp/), made torch's TORCHINDUCTOR_CACHE_DIR for the rest of the
    process (torch reads it on each use, a lazy torch.compile's too): what `train` with compile calls first."""
    root = autotune.user_cache_root()
    folder = root / INDUCTOR
    for level in (root, folder, folder / "tmp"):
        try:
            autotune.private_dir(level)
        except OSError as e:
            raise ConfigError(f"the cache folder {level} is {e.strerror or e}" if e.strerror == autotune.NOT_PRIVATE
                              else f"cannot make the cache folder {level} ({e.strerror or e})") from None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return folder


@contextmanager
def inductor_home() -> Iterator[Path]:
    """For the block, torch compiles and loads in <user cache>/inductor (TORCHINDUCTOR_CACHE_DIR, for good) and
    takes its temporary files from <user cache>/inductor/tmp (TMPDIR and tempfile's, for its compiler and its
    vector-ISA check subprocesses too): never tempfile's /tmp/torchinductor_<user>, which another account can make
    and plant libraries in. Each level is checked first (autotune.private_dir: a real folder of this user's that
    nobody else may write); anything else is a one-line ConfigError, and nothing is compiled or loaded."""
    folder = private_inductor()
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder / "tmp")
    try:
        yield folder
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
