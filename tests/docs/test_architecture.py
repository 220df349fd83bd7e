"""docs/architecture.md stays true: every room in its table exists, every room of src/scratchformer is in it, and
no room imports (at the top of a file or late, inside a function; parsed with ast) a room on its own or a higher
floor, a room outside its "may import" column, or a room its "never" column names."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "scratchformer"
DOORS = {"__init__", "__main__"}  # the package's own entry points, not rooms
ROOM = re.compile(r"`([a-z0-9_]+)(?:/|\.py)?`")  # i18n has digits


@dataclass
class Room:
    floor: int
    may: set[str] | None  # None: everything below
    never: set[str]


def table(text: str) -> dict[str, Room]:
    """The rooms of the first markdown table whose header starts with `| floor | room |`."""
    rooms, rows = {}, text[text.index("| floor | room |"):].splitlines()[2:]
    for row in rows:
        if not row.startswith("|"):
            break
        floor, room, _owns, may, never = (c.strip() for c in row.strip("|").split("|"))
        name = ROOM.fullmatch(room).group(1)
        allowed = None if "everything below" in may else set(ROOM.findall(may))
        rooms[name] = Room(int(floor), allowed, set(ROOM.findall(never)))
    return rooms


def rooms_on_disk() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py") if p.stem not in DOORS} | {
        p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def imports(room: str) -> dict[str, str]:
    """Each room of ours that `room` imports -> one 'file:line' where it does."""
    where = PACKAGE / room
    files = sorted(where.rglob("*.py")) if where.is_dir() else [PACKAGE / f"{room}.py"]
    found: dict[str, str] = {}
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "scratchformer" else [
                    f"scratchformer.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "scratchformer" and len(parts) > 1 and parts[1] != room:
                    found.setdefault(parts[1], f"{file.relative_to(ROOT)}:{node.lineno}")
    return found


def problems(rooms: dict[str, Room], uses: dict[str, dict[str, str]]) -> list[str]:
    """One line per import that breaks the table."""
    out = []
    for name, used in uses.items():
        room = rooms[name]
        for other, at in sorted(used.items()):
            if other not in rooms:
                continue  # `from scratchformer import __version__`: the package's door, not a room
            if rooms[other].floor >= room.floor:
                out.append(f"{at}: {name} (floor {room.floor}) imports {other} (floor {rooms[other].floor})")
            elif other in room.never or (room.may is not None and other not in room.may):
                out.append(f"{at}: {name} imports {other}, which its row does not allow")
    return out


def test_every_room_of_the_table_exists_and_every_room_is_in_the_table():
    rooms = table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert len(rooms) >= 15
    assert set(rooms) == rooms_on_disk(), "docs/architecture.md and src/scratchformer/ name different rooms"


def test_no_room_imports_what_the_table_forbids():
    rooms = table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert not problems(rooms, {name: imports(name) for name in rooms})


def test_the_check_catches_an_arrow_up_a_same_floor_import_and_a_room_left_out():
    rooms = {"errors": Room(1, set(), set()), "config": Room(2, {"errors"}, set()),
             "model": Room(3, {"config"}, {"data"}), "data": Room(3, {"config"}, set()),
             "training": Room(4, None, set())}
    assert problems(rooms, {"config": {"errors": "a:1"}, "training": {"model": "b:2"}}) == []
    assert problems(rooms, {"errors": {"config": "c:3"}}) == ["c:3: errors (floor 1) imports config (floor 2)"]
    assert problems(rooms, {"model": {"data": "d:4"}}) == ["d:4: model (floor 3) imports data (floor 3)"]
    assert problems(rooms, {"model": {"errors": "e:5"}}) == ["e:5: model imports errors, which its row does not allow"]
    # the real code: evaluation/report.py imports inspect (which the old table forbade), lab imports training
    assert "inspect" in imports("evaluation") and "training" in imports("lab")


def test_the_house_maps_of_both_readmes_give_each_room_its_floor():
    rooms = table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    for readme in ("README.md", "README.zh-CN.md"):
        text = (ROOT / readme).read_text(encoding="utf-8")
        mapped = {name: int(floor) for floor, cell in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.M)
                  for name in ROOM.findall(cell)}
        assert mapped == {name: room.floor for name, room in rooms.items()}, readme
