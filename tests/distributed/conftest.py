"""Launching real training runs: one process (`python -m scratchformer train`) or 2 gloo ranks on CPU (torchrun).

The corpus is built so that three set-ups see the same examples in every optimiser update:

    1 process, max_tokens=2M                     one batch per epoch: the whole corpus
    1 process, max_tokens=M accum_steps=2       two batches per epoch, accumulated into one update
    2 ranks,   max_tokens=M                      two batches per epoch, one per rank

Every pair costs the same padded length L (target: 4 characters + <s> </s> = 6 tokens; source: 1 to 5 words +
</s> <= 6), so `token_batches` cuts after exactly M / L pairs, and N_PAIRS = 2M / L makes one epoch exactly one
update in all three set-ups, whatever order the seeded shuffle picks. The 2M batch is thus always the union of
the two M batches (of the two ranks), and one update is one epoch. Dropout is 0 (tiny preset) and the linear
maps have no bias: a key bias has an exactly zero gradient (softmax ignores a shift shared by all keys), and
Adam (eps 1e-9) would turn the float noise in that zero into lr-sized steps that differ from run to run.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from scratchformer.cli import main

N_PAIRS = 16
MAX_TOKENS = 48  # per rank / per micro-batch: 8 pairs of 6 tokens
STEPS = 4
WORDS = "red blue green cat dog bird runs sees big small".split()

MODEL = ["d_model=32", "d_ff=64", "bias=false"]


def write_corpus(path: Path) -> Path:
    rng = random.Random(0)
    lines = []
    for i in range(N_PAIRS):
        src = " ".join(rng.choice(WORDS) for _ in range(1 + i % 5))
        tgt = "".join(rng.choice("abcdefghij") for _ in range(4))
        lines.append(f"{src}\t{tgt}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                            "MASTER_ADDR", "MASTER_PORT")}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def torchrun_cmd(nproc: int = 2) -> list[str]:
    """torchrun on this machine, `--standalone`: its c10d store binds port 0 itself. A port found free here and
    passed as --rdzv-endpoint stays unbound for the seconds torchrun takes to import torch, while the other jobs'
    gloo ranks bind ephemeral ports; one of them can take it first (a torchrun job then fails to start)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]


class Launcher:
    """Starts training runs on the toy corpus; `train_args` are the settings every run shares."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.corpus = write_corpus(root / "corpus.tsv")

    def train_args(self, out: Path, *extra: str) -> list[str]:
        return ["train", "--out", str(out), "--corpus", str(self.corpus), "--preset", "tiny",
                "src_tokenizer=word", "tgt_tokenizer=char", "warmup=10", "lr_factor=1",
                "--max-steps", str(STEPS),
                f"max_tokens={MAX_TOKENS}", "save_every=2", "eval_every=0", "bleu_samples=0",
                "log_every=1", "--no-test", "--json", "device=cpu", *extra, *MODEL]

    def single(self, out: Path, *extra: str) -> subprocess.CompletedProcess:
        """One process, in this one (a fresh interpreter would spend ~3 s importing torch): `scratchformer train`
        on one thread, its stdout and stderr captured."""
        stdout, stderr, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                status = main(self.train_args(out, *extra))
        finally:
            torch.set_num_threads(threads)
        return _check(subprocess.CompletedProcess(["scratchformer"], status, stdout.getvalue(), stderr.getvalue()))

    def torchrun(self, out: Path, *extra: str, nproc: int = 2, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.torchrun_script("-m", "scratchformer", *self.train_args(out, *extra), nproc=nproc, timeout=timeout)

    def start_torchrun(self, out: Path, *extra: str, nproc: int = 2, torchrun_args: tuple[str, ...] = (),
                       **env: str) -> subprocess.Popen:
        """A torchrun training job in the background, its output dropped (an unread pipe could fill and block)."""
        cmd = [*torchrun_cmd(nproc), *torchrun_args, "-m", "scratchformer", *self.train_args(out, *extra)]
        return subprocess.Popen(cmd, env=child_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def torchrun_script(self, *args: str, nproc: int = 2, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [*torchrun_cmd(nproc), *args]
        return _check(subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout))


def _check(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


class Runs:
    """Runs shared by several tests, each trained once per session, on first use. The two torchrun jobs start
    together, in the background, when either is first needed: on a busy 2-core machine that halves their wait."""

    TORCHRUN_JOBS = {"ddp": ("eval_every=2",), "fsdp_half": ("fsdp=true", "--max-steps", str(STEPS // 2))}

    def __init__(self, launcher: Launcher) -> None:
        self.launch, self.root = launcher, launcher.root
        self._done: dict[str, tuple[Path, subprocess.CompletedProcess]] = {}
        self._started: dict[str, subprocess.Popen] = {}

    def _get(self, name: str, make) -> Path:
        if name not in self._done:
            out = self.root / name
            self._done[name] = (out, make(out))
        return self._done[name][0]

    def start_torchrun_jobs(self) -> None:
        """Start the torchrun jobs now (no wait), so that the caller's in-process runs overlap with them."""
        if self._started:
            return
        for job, extra in self.TORCHRUN_JOBS.items():
            cmd = [*torchrun_cmd(2), "-m", "scratchformer", *self.launch.train_args(self.root / job, *extra)]
            with open(self.root / f"{job}.out", "w") as out, open(self.root / f"{job}.err", "w") as err:
                self._started[job] = subprocess.Popen(cmd, env=child_env(), stdout=out, stderr=err)

    def _torchrun_job(self, name: str) -> Path:
        self.start_torchrun_jobs()

        def wait(out: Path) -> subprocess.CompletedProcess:
            proc = self._started[name]
            proc.wait(timeout=180)
            text = [(self.root / f"{name}.{kind}").read_text() for kind in ("out", "err")]
            return _check(subprocess.CompletedProcess(proc.args, proc.returncode, *text))

        return self._get(name, wait)

    def output(self, name: str) -> subprocess.CompletedProcess:
        return self._done[name][1]

    @property
    def one_process_2b(self) -> Path:
        return self._get("one_2b", lambda out: self.launch.single(out, f"max_tokens={2 * MAX_TOKENS}",
                                                                 "eval_every=2"))

    @property
    def one_process_accum(self) -> Path:
        return self._get("one_accum", lambda out: self.launch.single(out, "accum_steps=2"))

    @property
    def ddp(self) -> Path:
        return self._torchrun_job("ddp")

    @property
    def fsdp_half(self) -> Path:
        """2 FSDP ranks, stopped after half the steps (a sharded checkpoint at STEPS // 2)."""
        return self._torchrun_job("fsdp_half")

    def copy(self, run: Path, name: str) -> Path:
        dest = self.root / name
        shutil.copytree(run, dest)
        return dest

    def close(self) -> None:
        for proc in self._started.values():  # jobs a partial test selection never waited for
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session")
def launcher(tmp_path_factory) -> Launcher:
    return Launcher(tmp_path_factory.mktemp("distributed"))


@pytest.fixture(scope="session")
def runs(launcher) -> Iterator[Runs]:
    shared = Runs(launcher)
    yield shared
    shared.close()
