"""One checkpoint writer (runs/layout.py): a single-process save and an FSDP save both become checkpoints/step-N
through `publish_checkpoint` (rename, `latest`, pruning of their own kind); run-file names are spelled in runs/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from scratchformer import ModelConfig, build_model, runs
from scratchformer.runs import names
from scratchformer.training import checkpoint as ckpt

SRC = Path(__file__).resolve().parents[2] / "src" / "scratchformer"


def test_saves_prune_to_keep_last_and_point_latest_at_the_newest(tmp_path):
    model = build_model(ModelConfig.preset("tiny", d_model=16, d_ff=32, src_vocab_size=12, tgt_vocab_size=12))
    for step in (1, 2, 3):
        ckpt.save_checkpoint(tmp_path, step, model, {"step": step}, keep_last=2)
    root = tmp_path / names.CHECKPOINTS
    assert sorted(p.name for p in root.iterdir()) == [names.LATEST, names.step_name(2), names.step_name(3)]
    assert (root / names.LATEST).read_text().strip() == names.step_name(3)


def test_a_failed_write_leaves_no_partial_folder_and_the_previous_latest(tmp_path):
    with runs.writing_checkpoint(tmp_path, 1, keep_last=5) as tmp:
        (tmp / names.WEIGHTS).write_bytes(b"w")
    with pytest.raises(OSError), runs.writing_checkpoint(tmp_path, 2, keep_last=5) as tmp:
        (tmp / names.WEIGHTS).write_bytes(b"half")
        raise OSError(28, "No space left on device")
    root = tmp_path / names.CHECKPOINTS
    assert sorted(p.name for p in root.iterdir()) == [names.LATEST, names.step_name(1)]
    assert (root / names.LATEST).read_text().strip() == names.step_name(1)


def test_a_sharded_save_uses_one_shared_folder_and_prunes_only_its_own_kind(tmp_path):
    """FSDP: every rank writes into checkpoints/.step-N.partial (a killed save's leftover is emptied first); the
    publishing step prunes the sharded checkpoints it is given, never a single-file one."""
    with runs.writing_checkpoint(tmp_path, 1, keep_last=5) as tmp:
        (tmp / names.WEIGHTS).write_bytes(b"single")
    left = runs.checkpoint_dir(tmp_path) / f".{names.step_name(2)}.partial"
    left.mkdir()
    (left / "stale").write_text("x")
    def sharded(run: Path) -> list[Path]:
        return sorted(p for p in runs.checkpoint_dir(run).glob(f"{names.STEP_PREFIX}*") if (p / names.SHARDS).is_dir())

    for step in (2, 3, 4):
        tmp = runs.new_checkpoint_folder(tmp_path, step, shared=True)
        assert tmp.name == f".{names.step_name(step)}.partial" and not (tmp / "stale").exists()
        (tmp / names.SHARDS).mkdir()
        runs.publish_checkpoint(tmp_path, tmp, step, keep_last=2, complete=sharded)
    root = runs.checkpoint_dir(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == [names.LATEST] + [names.step_name(s) for s in (1, 3, 4)]


def test_run_file_names_are_spelled_only_in_runs():
    """Every room but runs/ imports the names. Exceptions, each for a reason: export/ and interop/ write and read
    other libraries' folders, whose own files happen to share names (an HF folder's config.json); keras/ must not
    import runs/ (it imports torch), so its two copies are checked equal to runs/names.py below."""
    quoted = {getattr(names, n) for n in ("CONFIG", "TRAIN_CONFIG", "TOKENIZER_SRC", "TOKENIZER_TGT", "WEIGHTS",
                                          "METRICS", "METRICS_BASE", "CURVE", "AVERAGED", "README_JSON",
                                          "DECODING_FILE", "LATEST")}
    pattern = re.compile("|".join(re.escape(f'"{name}"') + "|" + re.escape(f"'{name}'") for name in sorted(quoted))
                         + r'|"step-')
    rooms = [p for p in sorted(SRC.iterdir()) if p.name not in {"runs", "export", "interop", "keras", "models"}]
    files = [f for room in rooms for f in (sorted(room.rglob("*.py")) if room.is_dir() else [room])
             if f.suffix == ".py"]
    found = [f"{path.relative_to(SRC)}:{i}" for path in files
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line.split("#")[0])]
    assert len(files) > 100 and found == []


# Calls that write a file, and the rooms that may make them on a run's files (other libraries' folders: see above)
WRITERS = {"save", "write_text", "write_bytes", "save_file", "copyfile", "copy", "copy2", "savefig", "dump"}
OTHER_FOLDERS = {"runs", "export", "interop", "keras", "models"}


def run_file_writes(tree: ast.AST, run_names: set[str]) -> list[int]:
    """Lines of `tree` that write a file named by a runs/names.py constant (`tok.save(run / TOKENIZER_TGT)`,
    `(run / CONFIG).write_text(...)`, `open(run / names.METRICS, "a")`) with anything but runs/' own writers."""
    def names_a_run_file(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in run_names or isinstance(n, ast.Attribute)
                   and n.attr in run_names for n in ast.walk(node))

    lines = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        args = [*call.args, *(k.value for k in call.keywords)]
        if isinstance(call.func, ast.Attribute) and call.func.attr in WRITERS:
            parts = [call.func.value, *args]
        elif isinstance(call.func, ast.Name) and call.func.id == "open":
            modes = [a for a in args[1:2] if isinstance(a, ast.Constant)]
            parts = args[:1] if modes and set(str(modes[0].value)) & set("wax+") else []
        else:
            continue
        if any(names_a_run_file(p) for p in parts):
            lines.append(call.lineno)
    return lines


def test_run_files_are_written_only_by_runs():
    """A run's files (config.json, the tokenizers, the weights, metrics, ...) are written by runs/ (atomic
    save_config, save_tokenizers, write_json, save_weights, ...), never by a room's own write_text / save / open:
    the same exceptions as above (other libraries' folders)."""
    run_names = {k for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and "." in v}
    assert {"CONFIG", "TOKENIZER_TGT", "WEIGHTS", "METRICS"} <= run_names
    files = [f for f in sorted(SRC.rglob("*.py")) if f.relative_to(SRC).parts[0] not in OTHER_FOLDERS]
    found = [f"{path.relative_to(SRC)}:{line}" for path in files
             for line in run_file_writes(ast.parse(path.read_text(encoding="utf-8")), run_names)]
    assert len(files) > 100 and found == []
    sample = ast.parse("tok.save(run / TOKENIZER_TGT)\n(run / names.CONFIG).write_text('x')\nopen(run / METRICS, 'a')")
    assert run_file_writes(sample, run_names) == [1, 2, 3]  # the check can see each kind


def test_the_keras_ports_copies_of_two_names_are_runs_own():
    """Read from keras/build.py's source (the `keras` extra is not installed by `make test`)."""
    tree = ast.parse((SRC / "keras" / "build.py").read_text(encoding="utf-8"))
    copies = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            for target, value in zip(node.targets[0].elts, node.value.elts):
                copies[target.id] = ast.literal_eval(value)
    assert (copies["CONFIG_FILE"], copies["WEIGHTS_FILE"]) == (names.CONFIG, names.WEIGHTS)
