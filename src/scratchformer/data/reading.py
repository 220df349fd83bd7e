"""Reading a corpus file into memory, within a stated bound (issue 42, finding 10).

Training holds a corpus in memory: its pairs, the tokenizers' counts and every line's ids. Measured with
benchmarks/corpus_memory.py (docs/robustness.md, "A corpus's size"), that costs about LINE_COST bytes a line plus
BYTE_COST bytes per byte of text, on top of the program itself. A file is therefore read in chunks of CHUNK bytes
(a gzip file decompressed chunk by chunk), and the read stops with one CorpusError as soon as what has been read
passes

- MAX_CORPUS_BYTES of text (decompressed) or MAX_CORPUS_LINES lines, whatever the machine, or
- what the memory this process may still use can hold at those costs (`corpus_budget`: the least of the
  machine's available memory, an address-space limit and a cgroup's memory.max),

so a gzip bomb (78 KB that expand to 20 million lines) is refused after a bounded read, never expanded whole.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from pathlib import Path

from scratchformer.config import regular_file
from scratchformer.config.model import available_memory, human_bytes
from scratchformer.errors import N_, ScratchformerError, Text

CHUNK = 1 << 20  # bytes decompressed (or read) at a time
MAX_CORPUS_BYTES = 2 << 30  # 2 GiB of text, decompressed: the most any one corpus file may hold
MAX_CORPUS_LINES = 50_000_000  # and the most lines
LINE_COST, BYTE_COST = 1024, 32  # bytes of memory training spends per line and per byte of text (measured, rounded up)


class CorpusError(ScratchformerError):
    """A corpus that cannot be read: missing, unknown, misaligned, malformed or too big for this machine."""


def corpus_budget() -> int | None:
    """Bytes of memory a corpus's lines may take here now: the machine's available memory, less where this process
    is held to less (an address-space limit, `ulimit -v`, less what it maps already; a cgroup's memory.max less its
    use); None if unknown."""
    budgets = [available_memory()]
    try:
        import resource  # POSIX

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            budgets.append(max(0, soft - _proc_kb("/proc/self/status", "VmSize:") * 1024))
    except (ImportError, OSError, ValueError, StopIteration):
        pass
    try:
        most = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if most.isdigit():
            budgets.append(max(0, int(most) - int(Path("/sys/fs/cgroup/memory.current").read_text())))
    except (OSError, ValueError):
        pass
    known = [b for b in budgets if b is not None]
    return min(known) if known else None


def _proc_kb(file: str, key: str) -> int:
    with open(file, encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))


def _too_big(size: int, lines: int, budget: int | None) -> Text | None:
    """Why a file of which `size` bytes and `lines` lines have been read so far cannot be trained on, or None."""
    if size > MAX_CORPUS_BYTES:
        return Text(N_("it expands past {most} of text, the most a corpus file may hold"),
                    most=human_bytes(MAX_CORPUS_BYTES))
    if lines > MAX_CORPUS_LINES:
        return Text(N_("it holds more than {most:,} lines, the most a corpus file may hold"), most=MAX_CORPUS_LINES)
    need = lines * LINE_COST + size * BYTE_COST
    if budget is not None and need > budget:
        most = budget // (LINE_COST + BYTE_COST * max(1, size // max(1, lines)))
        return Text(N_("its first {lines:,} lines ({size} of text) already need about {need} of memory to train on "
                       "(about {line_cost} bytes a line + {byte_cost} per byte of text), more than the {budget} "
                       "available here: this machine can take about {most:,} such lines"), lines=lines,
                    size=human_bytes(size), need=human_bytes(need), line_cost=LINE_COST, byte_cost=BYTE_COST,
                    budget=human_bytes(budget), most=most)
    return None


def read_bytes(path: str | Path) -> bytearray:
    """The bytes of a corpus file (a .gz one decompressed), read CHUNK at a time and refused in one CorpusError
    once they pass the bounds above; a missing, truncated or unreadable file is one CorpusError too."""
    path = regular_file(path, CorpusError)
    budget = corpus_budget()
    data = bytearray()
    lines = 0
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
            while chunk := f.read(CHUNK):
                data += chunk
                lines += chunk.count(b"\n")
                why = _too_big(len(data), lines, budget)
                if why:
                    raise CorpusError(N_("{path} is too big to train on: {why}; train on a part of it (e.g. zcat "
                                         "FILE | head -n N > part.tsv)"), path=path, why=why)
    except FileNotFoundError:
        raise CorpusError(N_("{path}: no such file"), path=path) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusError(N_("{path} is truncated or not gzip: rebuild it ({e})"), path=path, e=e) from None
    except OSError as e:
        raise CorpusError(N_("{path}: cannot read: {value}"), path=path, value=e.strerror or e) from None
    return data


def decode_lines(data: bytes | bytearray, name: str, error: type[Exception] = ScratchformerError) -> list[str]:
    """Lines of UTF-8 `data` (a file's or a stream's bytes), without their line ends; a leading BOM is dropped.
    Invalid UTF-8 is one `error` naming `name` and the line, never a silent replacement."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(N_("{name} line {line} is not valid UTF-8: {reason} at byte 0x{byte:02x}; convert it with iconv "
                       "(e.g. iconv -f latin1 -t utf-8)"), name=name, line=line, reason=e.reason,
                    byte=data[e.start]) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the end of the last line, not an empty line after it
    return [line.rstrip("\r") for line in lines]


def read_lines(path: str | Path) -> list[str]:
    """The lines of a corpus file, read within the bounds above."""
    return decode_lines(read_bytes(path), str(path), CorpusError)
