"""Shape trace: run one forward pass with hooks and print every module's input and output shapes,
with each dimension named by its ROLE (B, L_src, L_tgt, D, h, d_k, d_v, d_ff, h*d_k, V, ...), in the order data
flows through Figure 1. Each attention box also shows its score matrix (B, h, L_q, L_k).

The seeds' advice, "print every tensor's shape", turned into a tool.

How a dimension gets its name: never from its size (at paper-base sizes h*d_k = D = 512, and a user's B, L and h
may all be 4). The trace runs three times: once at the user's sizes (the numbers printed) and twice on "probe"
copies of the model in which every role has its own size, distinct from every other role's (B=3, L_src=5,
L_tgt=7, h=2, d_k=11, ...). Module calls line up one to one across the runs (the sizes change, the code path does
not), so the dimension at the same place in the same call is named by the role whose probe size it has in both
probes. A broadcast dimension (the 1 of a padding mask) stays unnamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, InputError
from scratchformer.i18n import _
from scratchformer.model.attention import ScaledDotProductAttention
from scratchformer.model.build import build_model
from scratchformer.model.transformer import TransformerBase

# (shape, dtype tag): the tag is "" for floating tensors (the usual case), else e.g. "int64" or "bool"
TensorInfo = tuple[tuple[int, ...], str]

# Two sets of probe sizes. Within a set every role's size differs from every other role's (and from 1), so a size
# in a probe names exactly one role; two sets make an accidental match (some dimension that is none of the roles
# but happens to equal one of them) need to happen twice. Even d_model: sinusoidal positions need it.
# Llama-like configs use the gqa_* sizes (h_kv must divide h) and rope_d_k (rope: d_v = d_k, even).
_PROBES: tuple[dict[str, int], ...] = (
    dict(batch=3, src_len=5, tgt_len=7, n_heads=2, d_k=11, d_v=13, d_model=34, d_ff=19, src_vocab=41,
         tgt_vocab=43, n_classes=17, gqa_heads=6, gqa_kv_heads=2, rope_d_k=10),
    dict(batch=5, src_len=8, tgt_len=9, n_heads=3, d_k=7, d_v=4, d_model=26, d_ff=29, src_vocab=61,
         tgt_vocab=67, n_classes=23, gqa_heads=6, gqa_kv_heads=3, rope_d_k=12),
)


@dataclass
class Call:
    """One module call: its qualified name and type, call depth, the tensors in and out (flattened)."""

    depth: int
    name: str
    kind: str
    ins: list[TensorInfo] = field(default_factory=list)
    outs: list[TensorInfo] = field(default_factory=list)
    scores: TensorInfo | None = None  # attention boxes only: the (B, h, L_q, L_k) score / weight matrix


@dataclass
class ShapeTrace:
    """The calls at the user's sizes, each dimension's role name (None: unnamed), and the roles' sizes."""

    calls: list[Call]
    labels: list[dict[str, list[list[str | None]]]]  # per call: {"ins"|"outs"|"scores": per tensor, per dim}
    roles: dict[str, int]  # role -> the user's size, for the roles that appear in the trace, in legend order

    def lines(self) -> list[str]:
        return [_format_call(c, lab) for c, lab in zip(self.calls, self.labels)]


def role_sizes(config: ModelConfig, batch: int, src_len: int, tgt_len: int) -> dict[str, int]:
    """role -> size for this config and these input sizes, in legend order (roles may share a size)."""
    c = config
    h, kv, dk, dv = c.n_heads, c.kv_heads, c.head_dim_k, c.head_dim_v
    roles = {"B": batch}
    roles.update({"L_src": src_len, "L_tgt": tgt_len} if c.arch == "encoder-decoder" else {"L": src_len})
    if c.positions == "rope":  # one head width: d_v = d_k
        roles.update({"D": c.d_model, "h": h, "d_k": dk, "d_ff": c.d_ff, "h*d_k": h * dk})
    else:
        roles.update({"D": c.d_model, "h": h, "d_k": dk, "d_v": dv, "d_ff": c.d_ff, "h*d_k": h * dk,
                      "h*d_v": h * dv})
    if kv != h:  # grouped-query attention: h_kv heads of keys and values
        roles.update({"h_kv": kv, "h_kv*d_k": kv * dk})
        if c.positions == "rope":
            roles["(h+2h_kv)*d_k"] = (h + 2 * kv) * dk
        else:
            roles.update({"h_kv*d_v": kv * dv, "h*d_k+h_kv*(d_k+d_v)": h * dk + kv * (dk + dv)})
    else:
        roles.update({"h*(2d_k+d_v)": h * (2 * dk + dv), "h*(d_k+d_v)": h * (dk + dv)})
    if c.ffn_kind == "gated":
        roles["2d_ff"] = 2 * c.d_ff  # w_1 = [W_gate; W_up]
    if c.shared_vocab:
        roles["V"] = c.tgt_vocab_size
    else:
        roles.update({"V_src": c.src_vocab_size, "V_tgt": c.tgt_vocab_size})
    if c.n_classes is not None:
        roles["K"] = c.n_classes
    return roles


def check_sizes(config: ModelConfig, batch: int, src_len: int, tgt_len: int,
                flags: dict[str, str] | None = None) -> None:
    """A one-line InputError unless the sizes are >= 1 and the lengths fit max_len; `flags` names them for a CLI."""
    flags = {"batch": "batch", "src_len": "src_len", "tgt_len": "tgt_len", **(flags or {})}
    sizes = {"batch": batch, "src_len": src_len}
    if config.arch == "encoder-decoder":
        sizes["tgt_len"] = tgt_len
    for key, value in sizes.items():
        if value < 1:
            raise InputError(N_("{flags} {value}: give a size >= 1"), flags=flags[key], value=value)
        if key != "batch" and value > config.max_positions:
            raise InputError(N_("{flags} {value} is longer than the model's max_positions={max_len}: give at most "
                                "{max_len} (or a larger max_positions=N override)"), flags=flags[key], value=value,
                             max_len=config.max_positions)


def _probe_config(config: ModelConfig, p: dict[str, int]) -> ModelConfig:
    """The same architecture with every size replaced by the probe's; the vocabularies stay above pad/start ids."""
    floor = max(config.pad_id, config.decoder_start_id or 0)
    src_vocab, tgt_vocab = floor + p["src_vocab"], floor + p["tgt_vocab"]
    if config.shared_vocab:
        src_vocab = tgt_vocab
    n_classes = p["n_classes"] if config.n_classes is not None else None
    heads = dict(n_heads=p["n_heads"], n_kv_heads=None)
    if config.kv_heads != config.n_heads:
        heads = dict(n_heads=p["gqa_heads"], n_kv_heads=p["gqa_kv_heads"])
    d_k, d_v = (p["rope_d_k"], p["rope_d_k"]) if config.positions == "rope" else (p["d_k"], p["d_v"])
    return config.replace(d_model=p["d_model"], **heads, d_k=d_k, d_v=d_v, d_ff=p["d_ff"],
                          src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab,
                          max_positions=max(p["src_len"], p["tgt_len"]),
                          dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, n_classes=n_classes,
                          labels=None, mask_id=None)


def _info(x: Tensor) -> TensorInfo:
    return tuple(x.shape), "" if x.is_floating_point() else str(x.dtype).replace("torch.", "")


def _tensors(x: object) -> list[Tensor]:
    """The tensors in x, depth first (tuples and lists are opened, anything else is skipped)."""
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    return []


def _hidden(name: str) -> bool:
    """Modules inside layer 1..N-1 of a stack: identical to layer 0's, so the trace shows them collapsed."""
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if p == "layers" and i + 2 < len(parts) + 1 and parts[i + 1].isdigit() and parts[i + 1] != "0":
            return i + 2 < len(parts)
    return False


def record_calls(model: nn.Module, inputs: tuple, all_layers: bool = False) -> list[Call]:
    """Every module call of model(*inputs) in call order (then the model output), shapes only.

    Unless `all_layers`, layers 1..N-1 of each stack show one call each (their insides repeat layer 0).
    """
    calls: list[Call] = []
    stack: list[Call] = []
    handles = []

    def pre_hook(name: str):
        def hook(module: nn.Module, args: tuple, kw: dict) -> None:
            tensors = _tensors(list(args) + list(kw.values()))
            call = Call(len(stack), name, type(module).__name__, [_info(t) for t in tensors])
            if isinstance(module, ScaledDotProductAttention) and len(tensors) >= 2:
                q, k = tensors[0], tensors[1]  # (B, h, L_q, d_k), (B, h, L_k, d_k)
                call.scores = (*q.shape[:-1], k.shape[-2]), ""  # (B, h, L_q, L_k)
            stack.append(call)
            calls.append(call)
        return hook

    def post_hook(module: nn.Module, args: tuple, kw: dict, out: object) -> None:
        stack.pop().outs = [_info(t) for t in _tensors(out)]

    for name, module in model.named_modules():
        if not name or isinstance(module, (nn.Dropout, nn.ModuleList)) or (not all_layers and _hidden(name)):
            continue
        handles.append(module.register_forward_pre_hook(pre_hook(name), with_kwargs=True))
        handles.append(module.register_forward_hook(post_hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = model(*inputs)
    finally:
        for h in handles:
            h.remove()
    calls.append(Call(0, "model output", "", outs=[_info(t) for t in _tensors(out)]))
    return calls


def _random_inputs(config: ModelConfig, batch: int, src_len: int, tgt_len: int) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(0)

    def ids(vocab: int, length: int) -> Tensor:
        return torch.randint(min(4, vocab - 1), vocab, (batch, length), generator=g)

    if config.arch == "encoder-decoder":
        return ids(config.src_vocab_size, src_len), ids(config.tgt_vocab_size, tgt_len)
    return (ids(config.tgt_vocab_size, src_len),)


def _ranks(call: Call) -> list[int]:
    return [len(s) for s, _ in call.ins + call.outs + ([call.scores] if call.scores else [])]


def _label_calls(calls: list[Call], probes: list[tuple[list[Call], dict[int, str]]]) -> list[dict]:
    """Per call and tensor, each dimension's role: the one its size names in every probe (else None)."""
    out = []
    for i, call in enumerate(calls):
        twins = [(pc[i], by_size) for pc, by_size in probes if i < len(pc)]
        aligned = len(twins) == len(probes) and all(t.name == call.name and _ranks(t) == _ranks(call)
                                                   for t, _ in twins)
        labels: dict[str, list[list[str | None]]] = {}
        for part in ("ins", "outs", "scores"):
            mine = getattr(call, part)
            mine = [mine] if part == "scores" and mine else (mine or [])
            per_tensor = []
            for j, (shape, _dtype) in enumerate(mine):
                dims: list[str | None] = []
                for d in range(len(shape)):
                    names = set()
                    for twin, by_size in twins if aligned else []:
                        theirs = getattr(twin, part)
                        theirs = [theirs] if part == "scores" else theirs
                        names.add(by_size.get(theirs[j][0][d]))
                    dims.append(names.pop() if aligned and len(names) == 1 else None)
                per_tensor.append(dims)
            labels[part] = per_tensor
        out.append(labels)
    return out


def trace(model: TransformerBase, batch: int = 2, src_len: int = 10, tgt_len: int = 9,
          all_layers: bool = False) -> ShapeTrace:
    """The shape trace of `model` on random ids of these sizes, every dimension named by its role."""
    config = model.config
    check_sizes(config, batch, src_len, tgt_len)
    model.eval()
    calls = record_calls(model, _random_inputs(config, batch, src_len, tgt_len), all_layers)
    probes = []
    for p in _PROBES:
        probe_config = _probe_config(config, p)
        roles = role_sizes(probe_config, p["batch"], p["src_len"], p["tgt_len"])
        by_size = {size: role for role, size in roles.items()}
        assert len(by_size) == len(roles), f"probe sizes collide: {roles}"  # _PROBES is built so they never do
        with torch.random.fork_rng(devices=[]):  # the probe's random init must not move the caller's RNG
            probe_model = build_model(probe_config).eval()
        inputs = _random_inputs(probe_config, p["batch"], p["src_len"], p["tgt_len"])
        probes.append((record_calls(probe_model, inputs, all_layers), by_size))
    labels = _label_calls(calls, probes)
    used = {name for lab in labels for part in lab.values() for dims in part for name in dims if name}
    roles = {r: s for r, s in role_sizes(config, batch, src_len, tgt_len).items() if r in used}
    return ShapeTrace(calls, labels, roles)


def _format_tensor(info: TensorInfo, names: list[str | None]) -> str:
    shape, kind = info
    dims = ", ".join(f"{n}={s}" if n else str(s) for s, n in zip(shape, names))
    return f"({dims})" + (f" {kind}" if kind else "")


def _format_call(call: Call, labels: dict) -> str:
    def part(key: str) -> str:
        infos = getattr(call, key)
        infos = [infos] if key == "scores" else infos
        return ", ".join(_format_tensor(i, n) for i, n in zip(infos, labels[key]))

    line = f"{'  ' * call.depth}{call.name}" + (f" [{call.kind}]" if call.kind else "")
    if call.ins:
        line += "  " + _("in: {shapes}").format(shapes=part("ins"))
    line += f"  -> {part('outs')}"
    if call.scores:
        line += "  " + _("scores: {shapes}").format(shapes=part("scores"))
    return line


def shape_report(model: TransformerBase, batch: int = 2, src_len: int = 10, tgt_len: int = 9,
                 all_layers: bool = False) -> str:
    """Random ids of the given sizes through `model`; the trace with a legend of the roles on top."""
    t = trace(model, batch, src_len, tgt_len, all_layers)
    legend = _("dimensions: {roles}").format(roles=", ".join(f"{r}={s}" for r, s in t.roles.items()))
    return "\n".join([legend, ""] + t.lines())
