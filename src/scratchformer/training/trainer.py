"""The training loop: corpus -> tokenizers -> token-bucketed batches -> teacher forcing -> checkpoints.

One optimiser update ("step") = `accum_steps` micro-batches on each of `world_size` ranks. The loss of an
update is the label-smoothed loss summed over all its real target tokens divided by their number, so
2 ranks x batch b, 1 process x batch 2b, and 1 process x batch b x 2 accumulation steps give the same
gradients. The Noam schedule counts updates. Checkpoints hold everything needed to continue exactly:
weights, optimiser, scheduler, RNG states and the position in the epoch's batch order.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from scratchformer.config import ModelConfig, TrainConfig
from scratchformer.data.batching import collate_lm, collate_pairs, encode_pairs, token_batches
from scratchformer.data.corpus import load_pairs, load_text
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, Tokenizer, load_tokenizer, train_tokenizer
from scratchformer.errors import ConfigError
from scratchformer.model import build_model
from scratchformer.training import checkpoint as ckpt
from scratchformer.training import distributed as dist_utils
from scratchformer.training.loss import label_smoothed_loss
from scratchformer.training.schedule import noam_scheduler, paper_optimizer

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class TrainingDiverged(ckpt.CheckpointError):
    """The loss of an update was nan or inf: training stops before saving anything."""

    def __init__(self, step: int, loss: float, message: str | None = None) -> None:
        super().__init__(message or f"loss became {loss} at step {step}")
        self.step, self.loss = step, loss


def load_tokenizers(run_dir: Path) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of a run; a shared or single-stack tokenizer is returned twice."""
    run_dir = Path(run_dir)
    tgt_path, src_path = run_dir / "tokenizer_tgt.json", run_dir / "tokenizer_src.json"
    if not tgt_path.exists():
        raise ckpt.CheckpointError(f"{tgt_path} is missing: the run directory has no tokenizer")
    tgt = load_tokenizer(tgt_path)
    return (load_tokenizer(src_path) if src_path.exists() else tgt), tgt


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: str | Path, resume: bool = False, quiet: bool = False) -> None:
        self.cfg, self.run_dir, self.resume, self.quiet = cfg, Path(run_dir), resume, quiet
        self.dtype = "fp32" if cfg.dtype == "auto" else cfg.dtype  # `auto` is measured in prepare()
        self.dist = dist_utils.setup(cfg.device)
        self.device = self.dist.device
        self.stop_requested = False
        self.stop_signal: int | None = None  # the signal that asked training to stop (SIGINT / SIGTERM)
        self.history: list[dict[str, Any]] = []

    # -- set-up ---------------------------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        if self.dist.is_main and not self.quiet:
            tqdm.write(msg)

    def warn(self, msg: str) -> None:
        """A line on stderr (rank 0), even with --quiet: something was damaged and what was done about it."""
        if self.dist.is_main:
            tqdm.write(f"warning: {msg}", file=sys.stderr)

    def _tokenizers(self, src_texts: list[str], tgt_texts: list[str]) -> tuple[Tokenizer, Tokenizer]:
        cfg, run = self.cfg, self.run_dir
        reuse = (run / "tokenizer_tgt.json").exists() and self.resume
        dist_utils.barrier(self.dist)  # every rank decides before rank 0 may write: all skip the barrier below or none
        if reuse:
            return load_tokenizers(run)
        if self.dist.is_main:
            if cfg.task != "translate" or cfg.shared_vocab:
                tok = train_tokenizer(cfg.tgt_tokenizer, src_texts + tgt_texts, cfg.tgt_vocab_size, cfg.min_freq)
                tok.save(run / "tokenizer_tgt.json")
            else:
                train_tokenizer(cfg.src_tokenizer, src_texts, cfg.src_vocab_size, cfg.min_freq).save(
                    run / "tokenizer_src.json")
                train_tokenizer(cfg.tgt_tokenizer, tgt_texts, cfg.tgt_vocab_size, cfg.min_freq).save(
                    run / "tokenizer_tgt.json")
        dist_utils.barrier(self.dist)
        return load_tokenizers(run)

    def _examples(self, split: str, loaded: list | None = None) -> list:
        """The encoded examples of `split`; `loaded`: its pairs (translate) or texts (lm) when already read."""
        cfg = self.cfg
        if cfg.task == "translate":
            pairs = loaded if loaded is not None else load_pairs(cfg.corpus, split, on_error=cfg.on_error)
            return encode_pairs(pairs, self.src_tok, self.tgt_tok, cfg.max_len)
        texts = loaded if loaded is not None else load_text(cfg.corpus, split, side=cfg.text_side,
                                                            on_error=cfg.on_error)
        seqs = [[BOS_ID] + ids[: cfg.max_len - 2] + [EOS_ID] for ids in self.tgt_tok.encode_batch(texts)]
        return [s for s in seqs if len(s) > 2]

    def prepare(self) -> None:
        cfg, run = self.cfg, self.run_dir
        if cfg.dtype == "fp16" and self.device.type != "cuda":
            raise ConfigError(f"--dtype fp16 (autocast + gradient scaler) needs a CUDA GPU, not {self.device}; "
                              "on CPUs use --dtype bf16")
        if cfg.dtype == "fp16" and cfg.fsdp and self.dist.enabled:
            raise ConfigError("--fsdp with --dtype fp16 is not supported: the gradient scaler would check only this "
                              "rank's shard for overflow; use --dtype bf16")
        run.mkdir(parents=True, exist_ok=True)
        if self.dist.is_main:
            ckpt.write_marker(run)
            for left in ckpt.clean_partial_saves(run):
                self.warn(f"removed {left}: left by a save that was interrupted")
        torch.manual_seed(cfg.seed)
        self._data_and_config()
        self.model = build_model(self.model_config).to(self.device)
        self.dtype = self._resolve_dtype()
        self.train_model: torch.nn.Module = self.model
        if self.dist.enabled:
            if cfg.fsdp:
                from scratchformer.training.fsdp import shard_model

                self.train_model = shard_model(self.model, self.dist)
            else:
                ids = [self.device.index] if self.device.type == "cuda" else None
                self.train_model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        if cfg.compile:
            self.train_model = torch.compile(self.train_model)
        self.optimizer = paper_optimizer(self.train_model.parameters())
        self.scheduler = noam_scheduler(self.optimizer, self.model_config.d_model, cfg.warmup, cfg.lr_factor)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.dtype == "fp16")
        self.step, self.epoch, self.cursor, self.best_valid, self.elapsed = 0, 0, 0, math.inf, 0.0
        self.best_step = 0  # the update whose validation loss is best_valid (for --patience)
        if self.dist.is_main:
            self.model_config.save(run / "config.json")
            ckpt.write_json(run / "train_config.json", cfg.to_dict())
        if self.resume:
            self._restore()
        if self.step == 0 and self.dist.is_main:  # a fresh run starts a fresh log (never one a symlink points to)
            metrics = run / "metrics.jsonl"
            if metrics.is_symlink() or metrics.exists():
                metrics.unlink()

    def _resolve_dtype(self) -> str:
        """--dtype, with `auto` measured: bf16 autocast where it runs this model's FFN faster than fp32
        (decoding/autotune.py); every rank takes bf16 only if all of them measured it faster."""
        if self.cfg.dtype != "auto":
            return self.cfg.dtype
        from scratchformer.decoding.autotune import training_dtype

        c = self.model_config
        mine = training_dtype(c.d_model, c.d_ff, self.device)
        votes = dist_utils.all_reduce_sum(1 if mine == "bf16" else 0, self.dist)
        chosen = "bf16" if votes == self.dist.world_size else "fp32"
        self.log(f"--dtype auto: {chosen} (measured on {self.device})")
        return chosen

    def _data_and_config(self) -> None:
        """Tokenizers, train/valid examples and the ModelConfig (the task-specific part of `prepare`).

        Sets src_tok, tgt_tok, train_examples, valid_examples, model_config; the encoder tasks override it."""
        cfg, run = self.cfg, self.run_dir
        if cfg.task == "translate":
            train = load_pairs(cfg.corpus, "train", on_error=cfg.on_error)
            src_texts, tgt_texts = [s for s, _ in train], [t for _, t in train]
        elif cfg.task == "lm":
            train = tgt_texts = load_text(cfg.corpus, "train", side=cfg.text_side, on_error=cfg.on_error)
            src_texts = []
        else:
            raise ConfigError(f"task {cfg.task!r} is trained by `scratchformer train --task {cfg.task}` "
                              "through its own trainer (see scratchformer.training.tasks)")
        self.src_tok, self.tgt_tok = self._tokenizers(src_texts, tgt_texts)
        self.train_examples = self._examples("train", train)  # read once: for the tokenizer and the examples
        self.valid_examples = self._examples("valid")
        if not self.train_examples:
            raise ConfigError(f"corpus {cfg.corpus!r} has no training examples shorter than max_len={cfg.max_len}")

        overrides = dict(cfg.model)
        overrides.setdefault("max_len", max(cfg.max_len, ModelConfig.preset(cfg.preset).max_len))
        if cfg.task == "translate":
            overrides.update(src_vocab_size=self.src_tok.vocab_size, tgt_vocab_size=self.tgt_tok.vocab_size)
        else:
            overrides.update(tgt_vocab_size=self.tgt_tok.vocab_size)
        if (run / "config.json").exists() and self.resume:
            self.model_config = ModelConfig.load(run / "config.json")
        else:
            self.model_config = ModelConfig.preset(cfg.preset, **overrides)
        want_arch = "encoder-decoder" if cfg.task == "translate" else "decoder"
        if self.model_config.arch != want_arch:
            raise ConfigError(f"task {cfg.task!r} needs a {want_arch} model but preset {cfg.preset!r} is "
                              f"{self.model_config.arch!r}; pick another --preset (e.g. "
                              f"{'demo' if want_arch == 'encoder-decoder' else 'gpt-tiny'})")

    def _restore(self) -> None:
        candidates = ckpt.checkpoint_candidates(self.run_dir)
        if not candidates:
            self.log(f"no checkpoint in {self.run_dir}/checkpoints: starting from step 0")
            return
        for i, found in enumerate(candidates):
            try:
                self._restore_from(found)
                break
            except ckpt.CheckpointError as e:
                if isinstance(e, ckpt.UnsafeCheckpointError) or i + 1 == len(candidates):
                    raise
                self.warn(f"checkpoint {found.name} is broken ({e}); falling back to {candidates[i + 1].name}")
        self._trim_metrics()
        self.log(f"resumed from {found} (step {self.step}, epoch {self.epoch})")

    def _restore_from(self, found: Path) -> None:
        """Weights, optimiser, scheduler, RNG and data position from checkpoints/step-N; a CheckpointError (and
        nothing changed but possibly the optimiser) when a file of it is unreadable."""
        state = ckpt.load_trainer_state(found)
        if state.get("world_size", 1) != self.dist.world_size:
            self.log(f"note: checkpoint written with world size {state.get('world_size', 1)}, resuming with "
                     f"{self.dist.world_size}: weights and optimiser carry over, the batch order restarts the epoch")
            state["cursor"] = 0
        try:
            if state.get("sharded"):  # an FSDP checkpoint: weights and optimiser are in its shards (any world size)
                from scratchformer.training.fsdp import load_sharded_state

                load_sharded_state(self.train_model, self.optimizer, found)
            else:
                ckpt.load_weights(self.model, found / "model.safetensors")
                self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            if state.get("scaler"):
                self.scaler.load_state_dict(state["scaler"])
            step, epoch, cursor = state["step"], state["epoch"], state["cursor"]
            best_valid, elapsed = state["best_valid"], state["elapsed"]
            best_step = int(state.get("best_step", step))  # older states lack it: count patience from here
            rng = state["rng_cpu"][self.dist.rank] if isinstance(state["rng_cpu"], list) else state["rng_cpu"]
            torch.set_rng_state(rng)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            if isinstance(e, ckpt.CheckpointError):
                raise
            raise ckpt.CheckpointError(f"{found}: the trainer state does not fit this run ({type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''})") from None
        self.step, self.epoch, self.cursor, self.best_valid, self.elapsed = step, epoch, cursor, best_valid, elapsed
        self.best_step = best_step
        if torch.cuda.is_available() and state.get("rng_cuda") is not None:
            torch.cuda.set_rng_state(state["rng_cuda"])

    def _trim_metrics(self) -> None:
        """Forget what the interrupted run logged after the checkpoint. A torn last line (the process died while
        writing it) is dropped with a warning; a damaged line elsewhere is an error naming it."""
        metrics = self.run_dir / "metrics.jsonl"
        if not metrics.exists():
            return
        lines = metrics.read_text(encoding="utf-8", errors="replace").splitlines()
        kept = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                if n == len(lines):
                    self.warn(f"{metrics}: dropped its torn last line {n} (the run died while writing it)")
                    continue
                raise ckpt.CheckpointError(f"{metrics}, line {n}: not a JSON record ({e}): fix or delete that "
                                           "line, then --resume") from None
            if record.get("step", 0) <= self.step:
                kept.append(line)
        if self.dist.is_main:
            with ckpt.atomic_path(metrics) as tmp:
                tmp.write_text("".join(k + "\n" for k in kept), encoding="utf-8")

    # -- batches --------------------------------------------------------------------------------------------
    def _lengths(self, examples: list) -> list:
        if self.cfg.task == "translate":
            return [(len(s), len(t)) for s, t in examples]
        return [len(s) for s in examples]

    def _collate(self, examples: list) -> dict[str, torch.Tensor]:
        batch = collate_pairs(examples, PAD_ID) if self.cfg.task == "translate" else collate_lm(examples, PAD_ID)
        return {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if getattr(self, "_batches_epoch", None) != epoch:
            self._batches = token_batches(self._lengths(self.train_examples), self.cfg.max_tokens, shuffle=True,
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
                raise ConfigError(f"an epoch has only {len(batches)} batches per rank, fewer than accum_steps={acc}:"
                                  " lower --max-tokens or --accum-steps")
            self.epoch, self.cursor = self.epoch + 1, 0
            batches = self._epoch_batches(self.epoch)
        chosen = batches[self.cursor : self.cursor + acc]
        self.cursor += acc
        return chosen

    # -- one update -----------------------------------------------------------------------------------------
    def _forward_loss(self, batch: dict[str, torch.Tensor]):
        dtype = DTYPES[self.dtype]
        autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        with autocast:
            if self.cfg.task == "translate":
                logits = self.train_model(batch["src"], batch["tgt_in"])  # (B, L_tgt, V), teacher forcing
                target = batch["tgt_out"]
            else:
                logits = self.train_model(batch["input_ids"])  # (B, L, V)
                target = batch["labels"]
        return label_smoothed_loss(logits, target, self.cfg.label_smoothing, PAD_ID)

    def train_step(self) -> dict[str, float]:
        micro = [self._collate([self.train_examples[i] for i in idx]) for idx in self._next_update()]
        local_tokens = sum(int(b["n_tokens"]) for b in micro)
        total_tokens = dist_utils.all_reduce_sum(local_tokens, self.dist)
        scale = self.dist.world_size / total_tokens  # DDP averages over ranks: x world makes it a global sum
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = nll_sum = 0.0
        for i, batch in enumerate(micro):
            last = i == len(micro) - 1
            sync = contextlib.nullcontext() if last or not hasattr(self.train_model, "no_sync") \
                else self.train_model.no_sync()
            with sync:
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
        return {"loss": loss_sum / total_tokens, "nll": nll_sum / total_tokens, "lr": lr, "tokens": total_tokens}

    # -- evaluation -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        self.model.eval()
        loss_sum = nll_sum = n = 0.0
        lengths = self._lengths(self.valid_examples)
        batches = token_batches(lengths, self.cfg.max_tokens, shuffle=False, seed=0) if lengths else []
        # Under DDP each rank scores every world_size-th batch and the sums are added up: the same figures, 1/world
        # of the time. FSDP's forward is a collective (it gathers the shards), so there every rank runs every batch.
        shard = self.dist.enabled and not self.cfg.fsdp
        for idx in batches[self.dist.rank :: self.dist.world_size] if shard else batches:
            out = self._forward_loss_eval(self._collate([self.valid_examples[i] for i in idx]))
            loss_sum, nll_sum, n = loss_sum + float(out.loss_sum), nll_sum + float(out.nll_sum), n + out.n_tokens
        if shard:
            loss_sum, nll_sum, n = (dist_utils.all_reduce_sum(x, self.dist) for x in (loss_sum, nll_sum, n))
        result: dict[str, Any] = {"valid_loss": loss_sum / max(n, 1), "valid_nll": nll_sum / max(n, 1),
                                  "valid_ppl": math.exp(min(nll_sum / max(n, 1), 50))}
        if self.cfg.task == "translate" and self.cfg.bleu_samples > 0:
            result.update(self._valid_bleu())
        self.model.train()
        return result

    def _forward_loss_eval(self, batch):
        model, self.train_model = self.train_model, self.model  # the unwrapped model: no DDP hooks in eval
        try:
            return self._forward_loss(batch)
        finally:
            self.train_model = model

    def _valid_bleu(self) -> dict[str, Any]:
        try:
            from scratchformer.decoding import translate_texts
            from scratchformer.evaluation.metrics import bleu
        except ImportError:
            return {}
        pairs = load_pairs(self.cfg.corpus, "valid", on_error="skip")[: self.cfg.bleu_samples]
        from scratchformer.training.fsdp import root_unsharded  # decoding bypasses forward: FSDP gathers the root

        with root_unsharded(self.model):  # a no-op unless the model is sharded
            hyps = translate_texts(self.model, self.src_tok, self.tgt_tok, [s for s, _ in pairs], beam=1)
        score = bleu(hyps, [t for _, t in pairs])
        return {"bleu": round(score["score"], 2), "samples": list(zip([s for s, _ in pairs[:3]], hyps[:3]))}

    # -- the loop -------------------------------------------------------------------------------------------
    def _record(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        if self.dist.is_main:
            # O_NOFOLLOW: never append through a symlink planted in the run directory
            fd = os.open(self.run_dir / "metrics.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            with open(fd, "a", encoding="utf-8") as f:
                f.write(json.dumps({k: v for k, v in record.items() if k != "samples"}, ensure_ascii=False) + "\n")

    def _state(self) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "cursor": self.cursor, "best_valid": self.best_valid,
                "best_step": self.best_step, "elapsed": self.elapsed, "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
                "rng_cpu": torch.get_rng_state(), "world_size": self.dist.world_size,
                "rng_cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}

    def save(self) -> None:
        if self.cfg.fsdp and self.dist.enabled:
            from scratchformer.training.fsdp import save_fsdp_checkpoint

            save_fsdp_checkpoint(self)
            return
        if self.dist.is_main:
            ckpt.save_checkpoint(self.run_dir, self.step, self.model, self._state(), self.cfg.keep_last)
        dist_utils.barrier(self.dist)

    def _evaluate_and_keep_best(self) -> dict[str, Any]:
        result = {"kind": "valid", "step": self.step, **self.validate()}
        self._record(result)
        if result["valid_nll"] < self.best_valid:
            self.best_valid, self.best_step = result["valid_nll"], self.step
            if self.cfg.fsdp and self.dist.enabled:  # gathering the shards is a collective: every rank joins
                from scratchformer.training.fsdp import save_full_weights

                save_full_weights(self.model, self.run_dir / "model.safetensors", self.dist)
            elif self.dist.is_main:
                ckpt.save_weights(self.model, self.run_dir / "model.safetensors")
        bleu = f", BLEU {result['bleu']}" if "bleu" in result else ""
        self.log(f"step {self.step}: valid loss {result['valid_loss']:.3f}, ppl {result['valid_ppl']:.1f}{bleu}")
        for src, hyp in result.get("samples", []):
            self.log(f"    {src}  ->  {hyp}")
        return result

    def _out_of_patience(self) -> bool:
        """--patience N: the validation loss has not improved for N evaluations (fairseq's --patience)."""
        patience = self.cfg.patience
        if patience is None or self.step - self.best_step < patience * self.cfg.eval_every:
            return False
        self.log(f"no better validation loss for {patience} evaluations (best {self.best_valid:.4f} at step "
                 f"{self.best_step}): stopping at step {self.step}")
        return True

    def _on_signal(self, signum, frame) -> None:
        self.stop_requested = True
        self.stop_signal = signum

    def train(self) -> dict[str, Any]:
        """Train to max_steps / max_epochs / time_limit (or a SIGINT / SIGTERM), holding the run's lock."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = ckpt.run_lock(self.run_dir) if self.dist.is_main else contextlib.nullcontext()
        with lock:
            return self._train()

    def _diverged(self, error: TrainingDiverged) -> ckpt.CheckpointError:
        last = ckpt.latest_checkpoint(self.run_dir)
        kept = f"the last finite checkpoint is step {int(last.name.split('-')[1])}" if last else \
            "no checkpoint was saved"
        msg = (f"loss became {error.loss} at step {error.step}: {kept} (nothing was saved after it); lower "
               "--lr-factor or enable --clip-norm, then --resume (or --overwrite)")
        self.log(msg)
        return TrainingDiverged(error.step, error.loss, msg)

    def _train(self) -> dict[str, Any]:
        cfg = self.cfg
        self.prepare()
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        self.model.train()
        n_params = self.model.num_parameters()
        self.log(f"{cfg.task}: {len(self.train_examples)} training examples, {n_params / 1e6:.2f}M parameters, "
                 f"device {self.device}, world size {self.dist.world_size} -> {self.run_dir}")
        bar = tqdm(total=cfg.max_steps, initial=self.step, disable=not self.dist.is_main or self.quiet,
                   dynamic_ncols=True, desc="train")
        start, window_tokens, window_start = time.time() - self.elapsed, 0.0, time.time()
        last_valid: dict[str, Any] = {}
        try:
            while self.step < cfg.max_steps and not self.stop_requested:
                if cfg.max_epochs is not None and self.epoch >= cfg.max_epochs:
                    break
                try:
                    stats = self.train_step()
                except TrainingDiverged as e:
                    raise self._diverged(e) from None
                window_tokens += stats["tokens"]
                self.elapsed = time.time() - start
                bar.update(1)
                if self.step % cfg.log_every == 0 or self.step == 1:
                    tok_s = window_tokens / max(time.time() - window_start, 1e-9)
                    window_tokens, window_start = 0.0, time.time()
                    bar.set_postfix(loss=f"{stats['loss']:.3f}", lr=f"{stats['lr']:.2e}", tok_s=f"{tok_s:.0f}")
                    self._record({"kind": "train", "step": self.step, "epoch": self.epoch, "loss": stats["loss"],
                                  "nll": stats["nll"], "lr": stats["lr"], "tokens_per_s": round(tok_s, 1),
                                  "elapsed_s": round(self.elapsed, 1)})
                if cfg.eval_every and self.step % cfg.eval_every == 0:
                    last_valid = self._evaluate_and_keep_best()
                    if self._out_of_patience():
                        break  # saved below
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save()
                if cfg.time_limit is not None and self.elapsed >= cfg.time_limit * 60:
                    self.log(f"time limit of {cfg.time_limit} min reached at step {self.step}")
                    break
        finally:
            bar.close()
            for s, h in old_handlers.items():
                signal.signal(s, h)
        if self.stop_requested:  # interrupted: save at once, no evaluation (a preemption's grace period is short)
            self.log(f"interrupted by signal {self.stop_signal} at step {self.step}: saving a checkpoint")
        elif not last_valid or last_valid.get("step") != self.step:
            last_valid = self._evaluate_and_keep_best()
        self.save()
        if self.dist.is_main:
            self._plot()
        return {"step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed, 1),
                "interrupted": self.stop_requested, "signal": self.stop_signal, "is_main": self.dist.is_main,
                **{k: v for k, v in last_valid.items() if k != "samples"}}

    def _plot(self) -> None:
        from scratchformer.inspect.plots import plot_curves

        records = [json.loads(x) for x in (self.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        plot_curves(self.run_dir / "curve.png", records, title=f"{self.cfg.task} on {self.cfg.corpus}")


def train(cfg: TrainConfig, run_dir: str | Path, resume: bool = False, quiet: bool = False) -> dict[str, Any]:
    trainer = Trainer(cfg, run_dir, resume, quiet)
    try:
        return trainer.train()
    finally:
        dist_utils.cleanup(trainer.dist)
