"""The run directory's one owner: what `train` writes and what translate / evaluate / generate / export read.

    runs/files.py    atomic writes (temporary name + rename), JSON, safetensors with the umask's permissions
    runs/weights.py  model weights <-> one safetensors file, every mismatch explained in one line
    runs/names.py    the names of a run's files, spelled once
    runs/layout.py   the run folder drawn: checkpoints/step-N, `latest`, the one checkpoint writer, partial saves
    runs/folders.py  every folder and file a command writes: the marker, --overwrite, the lock, atomic writes
    runs/prepare.py  prepare_run_dir: the one check (and preparation) of a command's output folder; writing_folder
    runs/run.py      a finished run as one object: load_run -> Run(model, tokenizers, configs, decoding.json);
                     its writers: save_config, save_tokenizers, copy_tokenizers, save_decoding (atomic)

Nothing here imports scratchformer.training: loading a run never climbs into the trainer.
"""

from scratchformer.errors import CheckpointError, CheckpointWriteError, UnsafeCheckpointError
from scratchformer.runs.files import atomic_path, save_tensors, write_json
from scratchformer.runs.folders import check_file, check_folder, clear_folder, read_marker
from scratchformer.runs.layout import (
                                       LOCK,
                                       MARKER,
                                       RUN_ENTRIES,
                                       checkpoint_candidates,
                                       checkpoint_dir,
                                       clean_partial_saves,
                                       clear_run,
                                       has_trainer_state,
                                       holds_run,
                                       is_marked_run,
                                       latest_checkpoint,
                                       list_checkpoints,
                                       new_checkpoint_folder,
                                       publish_checkpoint,
                                       run_lock,
                                       weights_path,
                                       write_marker,
                                       writing_checkpoint,
)
from scratchformer.runs.prepare import TRAIN, Writes, prepare_run_dir, writing_folder
from scratchformer.runs.run import (
                                       Run,
                                       copy_tokenizers,
                                       load_config,
                                       load_decoding,
                                       load_run,
                                       load_tokenizers,
                                       save_config,
                                       save_decoding,
                                       save_tokenizers,
)
from scratchformer.runs.weights import check_tensor, load_weights, save_weights, state_dict_for_saving

__all__ = ["LOCK", "MARKER", "RUN_ENTRIES", "TRAIN", "Writes", "CheckpointError", "CheckpointWriteError", "Run",
           "UnsafeCheckpointError", "atomic_path", "check_file", "copy_tokenizers", "check_folder", "check_tensor",
           "checkpoint_candidates", "checkpoint_dir", "clean_partial_saves", "clear_folder", "clear_run",
           "has_trainer_state", "holds_run", "is_marked_run", "latest_checkpoint", "list_checkpoints", "load_config",
           "load_decoding", "load_run", "load_tokenizers", "load_weights", "new_checkpoint_folder",
           "prepare_run_dir", "publish_checkpoint", "read_marker", "run_lock", "save_config", "save_decoding",
           "save_tensors", "save_tokenizers", "save_weights", "state_dict_for_saving", "weights_path", "write_json",
           "write_marker", "writing_checkpoint", "writing_folder"]
