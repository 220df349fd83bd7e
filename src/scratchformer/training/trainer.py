"""The training loop: batches -> teacher-forced loss -> updates -> validation -> checkpoints. Nothing else.

What is trained (data, model, loss) is a Task (training/tasks/); how the model is spread over processes is a
Parallel (training/parallel.py); where files go is runs/. One optimiser update ("step") = `accum_steps`
micro-batches on each of `world_size` ranks. The loss of an update is the loss summed over all its real target
tokens divided by their number, so 2 ranks x batch b, 1 process x batch 2b, and 1 process x batch b x 2
accumulation steps give the same gradients. The Noam schedule counts updates. Checkpoints hold everything
needed to continue exactly: weights, optimiser, scheduler, RNG states and the position in the epoch's batch order.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from scratchformer import autotune, runs
from scratchformer.data.batching import token_batches
from scratchformer.errors import CheckpointError, ConfigError, TrainingDiverged, UnsafeCheckpointError
from scratchformer.i18n import N_, _, say
from scratchformer.inspect.flops import forward_flops
from scratchformer.model import build_model
from scratchformer.runs.metrics import append_record, reset_records, trim_records
from scratchformer.runs.names import TRAIN_CONFIG, WEIGHTS
from scratchformer.training import checkpoint as ckpt
from scratchformer.training import distributed as dist_utils
from scratchformer.training.loss import LossOutput
from scratchformer.training.meters import Throughput, plot_run_curve
from scratchformer.training.parallel import make_parallel
from scratchformer.training.schedule import noam_scheduler, paper_optimizer
from scratchformer.training.tasks import TASKS

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class Trainer:
    def __init__(self, cfg: Any, run_dir: str | Path, resume: bool = False, quiet: bool = False) -> None:
        if cfg.task not in TASKS:
            raise ConfigError(N_("unknown task {task!r}; tasks: {TASKS}"), task=cfg.task, TASKS=', '.join(TASKS))
        self.cfg, self.run_dir, self.resume, self.quiet = cfg, Path(run_dir), resume, quiet
        self.dtype = "fp32" if cfg.dtype == "auto" else cfg.dtype  # `auto` is measured in prepare()
        self.dist = dist_utils.setup(cfg.device)
        self.device = self.dist.device
        self.parallel = make_parallel(cfg.fsdp, self.dist)
        self.task = TASKS[cfg.task](cfg, self.run_dir, self.dist, self.log)
        self.stop_requested = False
        self.stop_signal: int | None = None  # the signal that asked training to stop (SIGINT / SIGTERM)
        self.history: list[dict[str, Any]] = []

    # -- set-up ---------------------------------------------------------------------------------------------
    def log(self, msg: str, **fields: Any) -> None:  # rank 0, not with --quiet; `msg` translated, then filled in
        if self.dist.is_main and not self.quiet:
            tqdm.write(say(msg, **fields))

    def warn(self, msg: str, **fields: Any) -> None:
        """A line on stderr (rank 0), even with --quiet: something was damaged and what was done about it."""
        if self.dist.is_main:
            tqdm.write(_("warning: {message}").format(message=say(msg, **fields)), file=sys.stderr)

    def prepare(self) -> None:
        cfg, run = self.cfg, self.run_dir
        if cfg.dtype == "fp16" and self.device.type != "cuda":
            raise ConfigError(N_("--dtype fp16 (autocast + gradient scaler) needs a CUDA GPU, not {device}; on CPUs "
                                 "use --dtype bf16"), device=self.device)
        self.parallel.check(cfg.dtype)
        run.mkdir(parents=True, exist_ok=True)
        if self.dist.is_main:
            runs.write_marker(run)
            for left in runs.clean_partial_saves(run):
                self.warn(N_("removed {path}: left by a save that was interrupted"), path=left)
        if cfg.max_steps < cfg.warmup:  # the learning rate would rise the whole run (Noam: the peak at `warmup`)
            self.warn(N_("the run ends (--max-steps {steps}) before its warm-up (warmup={warmup}) does: the learning "
                         "rate rises the whole run and never reaches its peak; for the full schedule lower warmup= "
                         "(e.g. {lower}) or raise --max-steps"), steps=cfg.max_steps, warmup=cfg.warmup,
                      lower=max(1, cfg.max_steps // 10))
        torch.manual_seed(cfg.seed)
        self.model_config = self.task.setup(self.resume)
        self.train_examples, self.valid_examples = self.task.train_examples, self.task.valid_examples
        self.src_tok, self.tgt_tok = self.task.src_tok, self.task.tgt_tok
        self.model = build_model(self.model_config).to(self.device)
        self.dtype = self._resolve_dtype()
        self.train_model: torch.nn.Module = self.parallel.wrap(self.model)
        if cfg.compile:
            self.train_model = torch.compile(self.train_model)
        self.optimizer = paper_optimizer(self.train_model.parameters())
        self.scheduler = noam_scheduler(self.optimizer, self.model_config.d_model, cfg.warmup, cfg.lr_factor)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.dtype == "fp16")
        self.step, self.epoch, self.cursor, self.best_valid, self.elapsed = 0, 0, 0, math.inf, 0.0
        self.best_step = 0  # the update whose validation loss is best_valid (for --patience)
        if self.dist.is_main:
            runs.save_config(run, self.model_config)
            runs.write_json(run / TRAIN_CONFIG, cfg.to_dict())
        if self.resume:
            self._restore()
        if self.step == 0:
            self.task.after_build(self.model)  # e.g. a classifier's encoder from --init (not when resuming)
            if self.dist.is_main:
                reset_records(run)

    def _resolve_dtype(self) -> str:
        """--dtype, with `auto` measured: bf16 autocast where it runs this model's FFN faster than fp32
        (autotune.py); every rank takes bf16 only if all of them measured it faster."""
        if self.cfg.dtype != "auto":
            return self.cfg.dtype
        c = self.model_config
        mine = autotune.training_dtype(c.d_model, c.d_ff, self.device)
        votes = dist_utils.all_reduce_sum(1 if mine == "bf16" else 0, self.dist)
        chosen = "bf16" if votes == self.dist.world_size else "fp32"
        self.log(N_("--dtype auto: {chosen} (measured on {device})"), chosen=chosen, device=self.device)
        return chosen

    def _restore(self) -> None:
        candidates = runs.checkpoint_candidates(self.run_dir)
        if not candidates:
            self.log(N_("no checkpoint in {run}/checkpoints: starting from step 0"), run=self.run_dir)
            return
        for i, found in enumerate(candidates):
            try:
                self._restore_from(found)
                break
            except CheckpointError as e:
                if isinstance(e, UnsafeCheckpointError) or i + 1 == len(candidates):
                    raise
                self.warn(N_("checkpoint {name} is broken ({e}); falling back to {name2}"), name=found.name, e=e,
                          name2=candidates[i + 1].name)
        trim_records(self.run_dir, self.step, self.warn, write=self.dist.is_main)
        self.log(N_("resumed from {path} (step {step}, epoch {epoch})"), path=found, step=self.step, epoch=self.epoch)

    def _restore_from(self, found: Path) -> None:
        """Weights, optimiser, scheduler, RNG and data position from checkpoints/step-N; a CheckpointError (and
        nothing changed but possibly the optimiser) when a file of it is unreadable."""
        state = ckpt.load_trainer_state(found)
        if state.get("world_size", 1) != self.dist.world_size:
            self.log(N_("note: checkpoint written with world size {saved}, resuming with {world_size}: weights and "
                        "optimiser carry over, the batch order restarts the epoch"), saved=state.get('world_size', 1),
                     world_size=self.dist.world_size)
            state["cursor"] = 0
        try:
            self.parallel.restore(found, state, self.model, self.train_model, self.optimizer)
            self.scheduler.load_state_dict(state["scheduler"])
            if state.get("scaler"):
                self.scaler.load_state_dict(state["scaler"])
            counters = ckpt.counters(state, self.dist.rank)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise ckpt.unfit(found, e) from None
        for name, value in counters.items():  # step, epoch, cursor, best_valid, best_step, elapsed
            setattr(self, name, value)

    # -- batches --------------------------------------------------------------------------------------------
    def _collate(self, examples: list) -> dict[str, torch.Tensor]:
        batch = self.task.collate(examples)
        return {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if getattr(self, "_batches_epoch", None) != epoch:
            self._batches = token_batches(self.task.lengths(self.train_examples), self.cfg.max_tokens, shuffle=True,
                                          seed=self.cfg.seed, epoch=epoch, rank=self.dist.rank,
                                          world_size=self.dist.world_size)
            self._batches_epoch = epoch
        return self._batches

    def _next_update(self) -> list[list[int]]:
        """The micro-batches (index lists) of the next optimiser update; advances epoch/cursor."""
        acc = self.cfg.accum_steps
        batches = self._epoch_batches(self.epoch)
        if self.cursor + acc > len(batches):
            if len(batches) < acc:
                raise ConfigError(N_("an epoch has only {n_batches} batches per rank, fewer than accum_steps={acc}: "
                                     "lower max_tokens= or accum_steps="), n_batches=len(batches), acc=acc)
            self.epoch, self.cursor = self.epoch + 1, 0
            batches = self._epoch_batches(self.epoch)
        chosen = batches[self.cursor : self.cursor + acc]
        self.cursor += acc
        return chosen

    # -- one update -----------------------------------------------------------------------------------------
    def _autocast(self) -> contextlib.AbstractContextManager:
        dtype = DTYPES[self.dtype]
        return torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    def _forward_loss(self, batch: dict[str, torch.Tensor]) -> LossOutput:
        with self._autocast():
            return self.task.loss(self.train_model, batch)

    def train_step(self) -> dict[str, float]:
        micro = [self._collate([self.train_examples[i] for i in idx]) for idx in self._next_update()]
        local_tokens = sum(int(b["n_tokens"]) for b in micro)
        total_tokens = dist_utils.all_reduce_sum(local_tokens, self.dist)
        scale = self.dist.world_size / total_tokens  # DDP averages over ranks: x world makes it a global sum
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = nll_sum = 0.0
        for i, batch in enumerate(micro):
            with self.parallel.no_sync(self.train_model, last=i == len(micro) - 1):
                out = self._forward_loss(batch)
                self.scaler.scale(out.loss_sum * scale).backward()
            loss_sum += float(out.loss_sum.detach())
            nll_sum += float(out.nll_sum)
        loss_sum = dist_utils.all_reduce_sum(loss_sum, self.dist)  # every rank sees the same loss: all stop or none
        nll_sum = dist_utils.all_reduce_sum(nll_sum, self.dist)
        if not math.isfinite(loss_sum):
            raise TrainingDiverged(self.step + 1, loss_sum)  # before the update: the weights stay finite
        self.scaler.unscale_(self.optimizer)
        if self.cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.train_model.parameters(), self.cfg.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        lr = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        self.step += 1
        flops = sum(3 * forward_flops(self.model_config, *self.task.batch_shape(b)) for b in micro)  # fwd + bwd
        return {"loss": loss_sum / total_tokens, "nll": nll_sum / total_tokens, "lr": lr, "tokens": total_tokens,
                "flops": flops}

    # -- evaluation -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        self.model.eval()
        loss_sum = nll_sum = n = 0.0
        sums: dict[str, float] = {}
        lengths = self.task.lengths(self.valid_examples)
        batches = token_batches(lengths, self.cfg.max_tokens, shuffle=False, seed=0) if lengths else []
        # Under DDP each rank scores every world_size-th batch and the sums are added up: the same figures, 1/world
        # of the time. FSDP's forward is a collective (it gathers the shards), so there every rank runs every batch.
        shard = self.parallel.shard_validation and self.task.shard_validation
        try:
            mine = batches[self.dist.rank :: self.dist.world_size] if shard else batches
            with self.task.validating():  # a bar with an ETA: a large valid split takes minutes on a busy CPU
                for idx in tqdm(mine, desc=_("valid"), leave=False, disable=not self.dist.is_main or self.quiet,
                                dynamic_ncols=True):
                    with self._autocast():  # the unwrapped model: no DDP hooks in eval
                        out, extra = self.task.valid_step(self.model, self._collate([self.valid_examples[i]
                                                                                     for i in idx]))
                    loss_sum, nll_sum, n = loss_sum + float(out.loss_sum), nll_sum + float(out.nll_sum), \
                        n + out.n_tokens
                    for k, v in extra.items():
                        sums[k] = sums.get(k, 0.0) + v
            if shard:
                loss_sum, nll_sum, n = (dist_utils.all_reduce_sum(x, self.dist) for x in (loss_sum, nll_sum, n))
                sums = {k: dist_utils.all_reduce_sum(v, self.dist) for k, v in sums.items()}
            nll = nll_sum / max(n, 1)
            result: dict[str, Any] = {"valid_loss": loss_sum / max(n, 1), "valid_nll": nll,
                                      "valid_ppl": math.exp(min(nll, 50))}
            with self.parallel.decoding(self.model):  # a no-op unless the model is sharded
                result.update(self.task.valid_metrics(self.model, sums, n))
        finally:
            self.model.train()
        return result

    # -- the loop -------------------------------------------------------------------------------------------
    def _record(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        if self.dist.is_main:
            append_record(self.run_dir, {k: v for k, v in record.items() if k != "samples"})

    def _state(self) -> dict[str, Any]:
        """What a checkpoint holds besides the weights and the optimiser (the Parallel adds those)."""
        return {"step": self.step, "epoch": self.epoch, "cursor": self.cursor, "best_valid": self.best_valid,
                "best_step": self.best_step, "elapsed": self.elapsed, "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(), "rng_cpu": torch.get_rng_state(),
                "world_size": self.dist.world_size,
                "rng_cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}

    def save(self) -> None:
        self.parallel.save_checkpoint(self.run_dir, self.step, self.model, self.train_model, self.optimizer,
                                      self._state(), self.cfg.keep_last)

    def _evaluate_and_keep_best(self) -> dict[str, Any]:
        result = {"kind": "valid", "step": self.step, **self.validate()}
        self._record(result)
        if result["valid_nll"] < self.best_valid:
            self.best_valid, self.best_step = result["valid_nll"], self.step
            self.parallel.save_weights(self.model, self.run_dir / WEIGHTS)  # FSDP: every rank joins
        bleu = _(", BLEU {bleu}").format(bleu=result["bleu"]) if "bleu" in result else ""
        self.log(N_("step {step}: valid loss {loss:.3f}, ppl {ppl:.1f}{bleu}"), step=self.step, bleu=bleu,
                 loss=result["valid_loss"], ppl=result["valid_ppl"])
        for src, hyp in result.get("samples", []):
            self.log(f"    {src}  ->  {hyp}")
        for line in self.task.describe(result):
            self.log(line)
        return result

    def _out_of_patience(self) -> bool:
        """--patience N: the validation loss has not improved for N evaluations (fairseq's --patience)."""
        patience = self.cfg.patience
        if patience is None or self.step - self.best_step < patience * self.cfg.eval_every:
            return False
        self.log(N_("no better validation loss for {patience} evaluations (best {best:.4f} at step {at}): stopping at "
                    "step {step}"), patience=patience, best=self.best_valid, at=self.best_step, step=self.step)
        return True

    def _on_signal(self, signum, frame) -> None:
        self.stop_requested = True
        self.stop_signal = signum

    def train(self) -> dict[str, Any]:
        """Train to max_steps / max_epochs / time_limit (or a SIGINT / SIGTERM), holding the run's lock."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = runs.run_lock(self.run_dir) if self.dist.is_main else contextlib.nullcontext()
        with lock:
            return self._train()

    def _diverged(self, error: TrainingDiverged) -> CheckpointError:
        error = ckpt.diverged(error, runs.latest_checkpoint(self.run_dir))
        self.log(error.template, **error.fields)
        return error

    def _train(self) -> dict[str, Any]:
        cfg = self.cfg
        self.prepare()
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        self.model.train()
        n_params = self.model.num_parameters()
        self.log(N_("{task}: {examples} training examples, {params:.2f}M parameters, device {device}, world size "
                    "{world} -> {run}"), task=cfg.task, examples=len(self.train_examples), params=n_params / 1e6,
                 device=self.device, world=self.dist.world_size, run=self.run_dir)
        bar = tqdm(total=cfg.max_steps, initial=self.step, disable=not self.dist.is_main or self.quiet,
                   dynamic_ncols=True, desc=_("train"))
        mm_dtype = DTYPES[self.dtype] or torch.float32
        meter = Throughput(self.device, mm_dtype)
        start = time.time() - self.elapsed
        last_valid: dict[str, Any] = {}
        shown: float | None = None
        rates: dict[str, str] = {}
        try:
            while self.step < cfg.max_steps and not self.stop_requested:
                if cfg.max_epochs is not None and self.epoch >= cfg.max_epochs:
                    break
                try:
                    stats = self.train_step()
                except TrainingDiverged as e:
                    raise self._diverged(e) from None
                meter.add(stats["tokens"], stats["flops"])
                self.elapsed = time.time() - start
                bar.update(1)
                # the bar's loss moves every step (a running mean over about the last 10), the log every log_every
                shown = stats["loss"] if shown is None else 0.9 * shown + 0.1 * stats["loss"]
                if self.step % cfg.log_every == 0 or self.step == 1:
                    tok_s, mfu = meter.report()
                    rates = {"tok_s": f"{tok_s:.0f}", "mfu": f"{mfu:.1%}"}
                    self._record({"kind": "train", "step": self.step, "epoch": self.epoch, "loss": stats["loss"],
                                  "nll": stats["nll"], "lr": stats["lr"], "tokens_per_s": round(tok_s, 1),
                                  "mfu": round(mfu, 4), "elapsed_s": round(self.elapsed, 1)})
                bar.set_postfix(loss=f"{shown:.3f}", lr=f"{stats['lr']:.2e}", **rates, refresh=False)
                if cfg.eval_every and self.step % cfg.eval_every == 0:
                    last_valid = self._evaluate_and_keep_best()
                    if self._out_of_patience():
                        break  # saved below
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save()
                if cfg.time_limit is not None and self.elapsed >= cfg.time_limit * 60:
                    self.log(N_("time limit of {min} min reached at step {step}"), min=cfg.time_limit, step=self.step)
                    break
        finally:
            bar.close()
            for s, h in old_handlers.items():
                signal.signal(s, h)
        if self.stop_requested:  # interrupted: save at once, no evaluation (a preemption's grace period is short)
            self.log(N_("interrupted by signal {n} at step {step}: saving a checkpoint"), n=self.stop_signal,
                     step=self.step)
        elif not last_valid or last_valid.get("step") != self.step:
            last_valid = self._evaluate_and_keep_best()
        self.save()
        return {"step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed, 1),
                "interrupted": self.stop_requested, "signal": self.stop_signal, "is_main": self.dist.is_main,
                **{k: v for k, v in last_valid.items() if k != "samples"}, "data": self.task.split_info}

    def final_report(self) -> dict[str, Any] | None:
        """The task's figures on valid and test with the best weights (model.safetensors), recorded in
        metrics.jsonl as kind "final"; None for a task without one (translation: `evaluate` reports BLEU)."""
        if not self.task.reports:
            return None
        runs.load_weights(self.model, self.run_dir / WEIGHTS)
        report = self.task.final_report(self.model)
        if report is not None:
            self._record({"kind": "final", "step": self.step, **report})
        return report

def train(cfg: Any, run_dir: str | Path, resume: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Train `cfg` into `run_dir` (any task); the summary, with the task's final report where it has one."""
    trainer = Trainer(cfg, run_dir, resume, quiet)
    try:
        summary = trainer.train()
        if trainer.dist.is_main:
            plot_run_curve(trainer.run_dir, f"{cfg.task} on {cfg.corpus}")
            summary.update(trainer.final_report() or {})
        return summary
    finally:
        dist_utils.cleanup(trainer.dist)
