"""The lab's bench: a tiny tagger built from the project's own boxes, the toy tasks it learns, one training loop,
and the files every experiment writes (NAME.png at dpi 80, NAME.json with the numbers).

    Tagger        EncoderOnly (build_model) + a Linear read-out: ids (B, L) -> logits (B, L, V), one label per
                  position. Without positions it is permutation-equivariant, so `reverse` needs positions and
                  `copy` does not: the cleanest place to see what each box does.
    make_batch    copy (y_i = x_i), reverse (y_i = x_{L-1-i}), shift (y_i = x_{i-1}, y_0 = x_0) on random ids,
                  add (y_i = x_i + x_{L-1-i}, modulo the alphabet: a sum of two tokens, the FFN's kind of work)
    train_tagger  Adam + optional linear warm-up + label smoothing, seeded; stops at the first non-finite loss
    Seq2Seq       the project's EncoderDecoder, teacher-forced (one module for train_tagger): seed 000's model at
                  toy size, for what needs a decoder (heads-and-layers, ffn, exposure-bias)
    seq2seq_batch a toy task as (src, tgt_in, tgt_out): tgt_in = <s> y, tgt_out = y </s> (the decoder's shift)
    free_running  greedy decoding (decoding/greedy.py) of a batch, padded to the reference's length
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from scratchformer.config import ModelConfig
from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.model.build import build_model
from scratchformer.training.loss import label_smoothed_loss

PAD = 0
FIRST_ID = 3  # ids 0, 1, 2 are <pad>, <s>, </s> in the project's vocabularies: the toy tokens start after them
TASKS = ("copy", "reverse", "shift", "add")


@dataclass
class Result:
    """What an experiment hands back: its numbers (written to NAME.json) and the conclusion built from them."""

    numbers: dict[str, Any]
    conclusion: str
    figure: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def seed_all(seed: int) -> torch.Generator:
    """Seed torch and random; returns a torch.Generator with the same seed for the data."""
    torch.manual_seed(seed)
    random.seed(seed)
    return torch.Generator().manual_seed(seed)


class Tagger(nn.Module):
    """ids (B, L) -> logits (B, L, V): the project's EncoderOnly and one Linear layer on top."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = build_model(config)  # EncoderOnly: (B, L) -> (B, L, D)
        self.readout = nn.Linear(config.d_model, config.tgt_vocab_size)  # D -> V

    def forward(self, ids: Tensor) -> Tensor:
        return self.readout(self.encoder(ids))  # (B, L, V)


def tagger_config(vocab: int = 16, d_model: int = 64, n_heads: int = 4, layers: int = 2,
                  **overrides: Any) -> ModelConfig:
    """A small encoder for the toy tasks (no dropout: the runs are short and the comparisons exact)."""
    fields = dict(arch="encoder", tgt_vocab_size=vocab, d_model=d_model, n_heads=n_heads, d_ff=2 * d_model,
                  n_encoder_layers=layers, dropout=0.0, max_positions=64, pad_id=PAD)
    return ModelConfig(**{**fields, **overrides})


def placement(name: str) -> dict[str, str]:
    """The config field that places the norm ("post", "pre", ...): `norm_placement`, or `norm` on older configs."""
    field = "norm_placement" if "norm_placement" in ModelConfig.__dataclass_fields__ else "norm"
    return {field: name}


def remove_positions(model: nn.Module) -> nn.Module:
    """Zero every sinusoidal table (a buffer, not trained): the model then sees no order at all. Returns model."""
    for m in model.modules():
        if hasattr(m, "table") and isinstance(m.table, Tensor):
            m.table.zero_()
    return model


def make_batch(task: str, batch: int, length: int | Sequence[int], vocab: int,
               generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(ids (B, L), targets (B, L)) of a toy task; a list of lengths gives right-padded rows (targets PAD there)."""
    lengths = [length] * batch if isinstance(length, int) else list(length)
    width = max(lengths)
    ids = torch.randint(FIRST_ID, vocab, (len(lengths), width), generator=generator)  # (B, L)
    real = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # (B, L)
    ids = ids.masked_fill(~real, PAD)
    targets = torch.full_like(ids, PAD)
    for row, n in enumerate(lengths):
        x = ids[row, :n]
        if task == "copy":
            targets[row, :n] = x
        elif task == "reverse":
            targets[row, :n] = x.flip(0)
        elif task == "shift":
            targets[row, :n] = torch.cat([x[:1], x[:-1]])
        elif task == "add":  # over the alphabet FIRST_ID .. vocab-1: (a + b) mod its size
            targets[row, :n] = FIRST_ID + (x - FIRST_ID + x.flip(0) - FIRST_ID) % (vocab - FIRST_ID)
        else:
            raise ValueError(f"unknown toy task {task!r}; tasks: {', '.join(TASKS)}")
    return ids, targets


def accuracy(logits: Tensor, targets: Tensor) -> float:
    """Share of real (non-PAD) positions whose argmax is the target."""
    real = targets != PAD
    return float((logits.argmax(-1)[real] == targets[real]).float().mean())


@dataclass
class TrainLog:
    losses: list[float]
    diverged: bool

    @property
    def final(self) -> float:
        """Mean of the last tenth of the losses (inf if the run diverged)."""
        if self.diverged or not self.losses:
            return math.inf
        tail = self.losses[-max(1, len(self.losses) // 10):]
        return sum(tail) / len(tail)


def train_tagger(model: nn.Module, batches: Callable[[int], tuple[Tensor, Tensor]], steps: int, lr: float = 1e-3,
                 warmup: int = 0, eps: float = 0.0, clip: float | None = 1.0,
                 loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None) -> TrainLog:
    """Adam on the label-smoothed loss; lr rises linearly over `warmup` steps, then stays. batches(step) -> (ids,
    targets). A non-finite loss stops the run and marks it diverged."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    losses: list[float] = []
    model.train()
    # a bar with an ETA on a terminal (disable=None: none when stderr is not a TTY, as in the tests)
    for step in tqdm(range(steps), desc="lab: training", leave=False, disable=None, dynamic_ncols=True):
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
        ids, targets = batches(step)
        logits = model(ids)  # (B, L, V)
        loss = loss_fn(logits, targets) if loss_fn else label_smoothed_loss(logits, targets, eps, PAD).loss
        if not torch.isfinite(loss):
            return TrainLog(losses, diverged=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return TrainLog(losses, diverged=False)


def evaluate_tagger(model: nn.Module, ids: Tensor, targets: Tensor) -> float:
    """Accuracy of `model` on a held-out batch, in eval mode and without gradients."""
    model.eval()
    with torch.no_grad():
        return accuracy(model(ids), targets)


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Slope of log y against log x (least squares): y ~ x^slope."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-30)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def save_figure(fig: Any, out: Path, name: str) -> Path:
    """out/NAME.png at dpi 80 (small enough to commit); closes the figure."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    path = Path(out) / f"{name}.png"
    try:
        fig.savefig(path, dpi=80)
    finally:
        plt.close(fig)
    return path


def write_numbers(out: Path, name: str, data: dict[str, Any]) -> Path:
    """out/NAME.json, indented, keys in the order given."""
    path = Path(out) / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def pct(x: float) -> str:
    """0.934 -> '93.4%'."""
    return f"{100 * x:.1f}%"


BOS, EOS = BOS_ID, EOS_ID  # the project's <s> and </s> ids, as the toy tasks name them


def seq2seq_config(vocab: int = 16, d_model: int = 64, n_heads: int = 4, layers: int = 2,
                   **overrides: Any) -> ModelConfig:
    """A small encoder-decoder for the toy tasks: `layers` encoder and `layers` decoder layers, no dropout."""
    fields = dict(arch="encoder-decoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model,
                  n_heads=n_heads, d_ff=2 * d_model, n_encoder_layers=layers, n_decoder_layers=layers, dropout=0.0,
                  max_positions=64, pad_id=PAD)
    return ModelConfig(**{**fields, **overrides})


class Seq2Seq(nn.Module):
    """The EncoderDecoder of `config`, called with one (src (B, L_src), tgt_in (B, L_tgt)) pair -> logits
    (B, L_tgt, V): teacher forcing, the decoder reads the reference shifted right (so train_tagger trains it)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = build_model(config)  # EncoderDecoder

    def forward(self, pair: tuple[Tensor, Tensor]) -> Tensor:
        src, tgt_in = pair
        return self.model(src, tgt_in)  # (B, L_tgt, V)


def seq2seq_batch(task: str, batch: int, length: int | Sequence[int], vocab: int,
                  generator: torch.Generator) -> tuple[tuple[Tensor, Tensor], Tensor]:
    """((src (B, L), tgt_in (B, L+1)), tgt_out (B, L+1)) of a toy task: tgt_in = <s> y, tgt_out = y </s>."""
    src, y = make_batch(task, batch, length, vocab, generator)
    lengths = (y != PAD).sum(1)  # (B,)
    tgt_in = torch.cat([torch.full_like(y[:, :1], BOS), y], 1)  # (B, L+1)
    tgt_out = torch.cat([y, torch.full_like(y[:, :1], PAD)], 1)  # (B, L+1)
    tgt_out[torch.arange(len(y)), lengths] = EOS
    return (src, tgt_in), tgt_out


def free_running(model: Seq2Seq, src: Tensor, width: int) -> Tensor:
    """Greedy decoding of src (B, L) (decoding/greedy.py: each step reads the model's own previous output), as
    (B, width) ids, </s> included, PAD after it (a prediction that ends early or runs on differs there)."""
    from scratchformer.decoding.greedy import greedy_decode  # late: the lab's taggers need no decoder
    from scratchformer.decoding.spec import Search

    model.eval()
    with torch.no_grad():
        hyps = greedy_decode(model.model, src, Search(max_output_len=width, bos=BOS, eos=EOS, pad=PAD))
    out = torch.full((len(hyps), width), PAD, dtype=torch.long)
    for row, ids in enumerate(hyps):
        ids = [*ids, EOS][:width]
        out[row, :len(ids)] = torch.tensor(ids)
    return out
